"""A researcher's MTurk publishing options: the accepted fields, their defaults, and the check that
turns what the form or the API sent into the options a publication stores (``Publication.options``)."""

import re
from decimal import Decimal, InvalidOperation

from annotation.channels.errors import PublicationRefused
from annotation.channels.selectors import labels_still_needed
from annotation.models import Campaign
from annotation.schemas import parse_int, shown

MTURK_DEFAULTS = {
    "keywords": "labeling, annotation, research",
    "assignments_per_hit": 9,
    "lifetime": 7 * 24 * 3600,
    "auto_approval_delay": 3 * 24 * 3600,
    "locales": [],
    "min_approval_rate": None,
    "min_approved": None,
    "frame_height": 0,
}
MTURK_FIELDS = {
    "title",
    "description",
    "keywords",
    "reward",
    "assignment_duration",
    "lifetime",
    "auto_approval_delay",
    "assignments_per_hit",
    "n_assignments",
    "locales",
    "min_approval_rate",
    "min_approved",
    "frame_height",
}


def _int_option(options: dict, name: str, low: int, high: int) -> int:
    value = options.get(name)
    if isinstance(value, str):
        value = parse_int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PublicationRefused(
            f"{name} must be a whole number from {low} to {high}; got {shown(options.get(name))}.", code="bad_options"
        )
    if not low <= value <= high:
        raise PublicationRefused(f"{name} must be from {low} to {high}; got {value}.", code="bad_options")
    return value


def mturk_options_clean(*, campaign: Campaign, options: dict) -> dict:
    """Check the researcher's MTurk options and fill defaults; raise PublicationRefused naming the field.

    ``reward`` is US dollars per assignment (one label); durations are seconds (MTurk's bounds);
    ``n_assignments`` defaults to the labels the campaign still needs.
    """
    unknown = set(options) - MTURK_FIELDS
    if unknown:
        raise PublicationRefused(f"Unknown MTurk options: {', '.join(sorted(unknown))}.", code="bad_options")
    merged = {**MTURK_DEFAULTS, **{k: v for k, v in options.items() if v is not None and v != ""}}
    clean = {}
    for name, limit in (("title", 128), ("description", 2000), ("keywords", 1000)):
        text = str(merged.get(name, "")).strip()
        if name != "keywords" and not text:
            raise PublicationRefused(f"{name} is required.", code="bad_options")
        if len(text) > limit:
            raise PublicationRefused(f"{name} must be at most {limit} characters.", code="bad_options")
        clean[name] = text
    try:
        reward = Decimal(str(merged.get("reward", ""))).quantize(Decimal("0.01"))
    except InvalidOperation:
        raise PublicationRefused(
            f"reward must be an amount in US dollars; got {merged.get('reward')!r}.", code="bad_options"
        ) from None
    if not Decimal("0.01") <= reward <= Decimal("100"):
        raise PublicationRefused(f"reward must be from 0.01 to 100.00 US dollars; got {reward}.", code="bad_options")
    clean["reward"] = str(reward)
    merged.setdefault("assignment_duration", max(campaign.lease_seconds, 300))
    clean["assignment_duration"] = _int_option(merged, "assignment_duration", 30, 365 * 24 * 3600)
    if clean["assignment_duration"] < campaign.lease_seconds:
        raise PublicationRefused(
            f"assignment_duration must be at least the campaign's lease length ({campaign.lease_seconds} s).",
            code="bad_options",
        )
    clean["lifetime"] = _int_option(merged, "lifetime", 30, 365 * 24 * 3600)
    clean["auto_approval_delay"] = _int_option(merged, "auto_approval_delay", 0, 30 * 24 * 3600)
    clean["assignments_per_hit"] = _int_option(merged, "assignments_per_hit", 1, 1000)
    clean["frame_height"] = _int_option(merged, "frame_height", 0, 10000)
    needed = labels_still_needed(campaign=campaign)
    if needed == 0:
        raise PublicationRefused("The campaign needs no more labels.", code="nothing_needed")
    merged.setdefault("n_assignments", needed)
    clean["n_assignments"] = _int_option(merged, "n_assignments", 1, 1_000_000)
    if clean["n_assignments"] > needed:
        raise PublicationRefused(
            f"n_assignments ({clean['n_assignments']}) is more than the {needed} labels the campaign still needs.",
            code="bad_options",
        )
    locales = merged.get("locales") or []
    if isinstance(locales, str):
        locales = [part for part in re.split(r"[\s,]+", locales) if part]
    for code in locales:
        if not re.fullmatch(r"[A-Za-z]{2}(-[A-Za-z0-9]{1,3})?", code):
            raise PublicationRefused(
                f"locales: {code!r} is not a country code such as US or US-NY.", code="bad_options"
            )
    clean["locales"] = [code.upper() for code in locales]
    for name, high in (("min_approval_rate", 100), ("min_approved", 1_000_000)):
        clean[name] = None if merged.get(name) is None else _int_option(merged, name, 0, high)
    return clean
