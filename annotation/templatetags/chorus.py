"""Template filters of the browser UI: ``{% load chorus %}``."""

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
    html = markdown_lib.markdown(text or "", extensions=_MARKDOWN_EXTENSIONS, output_format="html")
    return mark_safe(nh3.clean(html, link_rel="noopener noreferrer nofollow"))
