"""Template filters of the browser UI: ``{% load chorus %}``."""

from functools import lru_cache

import markdown as markdown_lib
import nh3
from django import template
from django.utils.safestring import mark_safe

register = template.Library()

_MARKDOWN_EXTENSIONS = ["extra", "sane_lists"]


@register.filter
def markdown(text: str) -> str:
    """Markdown to HTML, sanitised: campaign instructions are written by researchers but read by
    everybody, so scripts, event handlers and styles are removed (nh3's allow-list)."""
    return mark_safe(_markdown_html(text or ""))


# Remembered by the text itself (a pure function of it, so never stale): every task page shows its
# campaign's instructions, and building a Markdown converter with its extensions was a sixteenth of a
# labeling cycle's CPU on the pages (benchmarks/cycle_cost.py --profile).
@lru_cache(maxsize=256)
def _markdown_html(text: str) -> str:
    html = markdown_lib.markdown(text, extensions=_MARKDOWN_EXTENSIONS, output_format="html")
    return nh3.clean(html, link_rel="noopener noreferrer nofollow")
