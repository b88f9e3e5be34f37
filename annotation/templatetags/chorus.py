"""Template filters of the browser UI: ``{% load chorus %}``."""

import markdown as markdown_lib
import nh3
from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import mark_safe

register = template.Library()

_MARKDOWN_EXTENSIONS = ["extra", "sane_lists"]


@register.filter
def markdown(text: str) -> str:
    """Markdown to HTML, sanitised: campaign instructions are written by researchers but read by
    everybody, so scripts, event handlers and styles are removed (nh3's allow-list)."""
    html = markdown_lib.markdown(text or "", extensions=_MARKDOWN_EXTENSIONS, output_format="html")
    return mark_safe(nh3.clean(html, link_rel="noopener noreferrer nofollow"))


@register.simple_tag
def campaign_worker_url(slug: str, worker_id: int) -> str:
    """The worker's page in the campaign, or "" while that page does not exist: it is built in parallel
    with the prompts page (issue 21), whose tests must not depend on it. The lead removes the fallback
    when both are merged."""
    try:
        return reverse("campaign_worker", args=[slug, worker_id])
    except NoReverseMatch:
        return ""
