"""The live audit's settings: ``settings.CHORUS_AUDIT``, a dict of the knobs below, each with its
default (``config/settings.py`` fills it from the ``CHORUS_AUDIT_<NAME>`` environment variables).

Read them with :func:`audit_setting`, which looks them up on every call, so ``override_settings``
and the ``settings`` fixture work in tests.
"""

from django.conf import settings

DEFAULTS = {
    # seconds between the trigger that enqueues a run and the run (labels meanwhile are folded in); a
    # run that ends behind schedules the next this long after its own start (at once if it took longer)
    "COUNTDOWN": 0.25,
    # life of the pending key, which is held from the trigger to the end of the run: heals an enqueue
    # lost after the key was set, a run killed midway, or a countdown message lost with a killed worker
    # (a quick run takes milliseconds, and one that starts twice is harmless: snapshots are keyed by
    # watermark), so it bounds how long such a loss leaves the dashboard behind
    "PENDING_TTL": 15,
    # the same for a full run, whose key stays set while it runs (it must outlive the longest run)
    "FULL_TTL": 900,
    # after a failed enqueue: how long before the next label tries again (per key, and per process)
    "RETRY_AFTER": 5,
    # a full run is due after this many new labels, or this share of the labels the last one saw ...
    "FULL_EVERY_LABELS": 1000,
    "FULL_GROWTH": 0.1,
    # ... or when any label is newer than the last full run and that run is this many seconds old;
    "FULL_MAX_AGE": 60,
    # but never sooner than this many seconds, nor than FULL_DUTY × the last run's duration, after it
    "FULL_MIN_INTERVAL": 10,
    "FULL_DUTY": 5,
    # history thinning: keep the latest quick snapshot per window of this many seconds (0 = keep all)
    "HISTORY_RESOLUTION": 10,
    # the dashboard calls an audit stale when its oldest unaudited label is older than this
    "STALE_AFTER": 10,
    # the SD convention of every number: 1 = sample SD (the study's), 0 = population SD
    "DDOF": 1,
}


def audit_setting(name: str):
    """``settings.CHORUS_AUDIT[name]`` or its default (read on each call, so override_settings works)."""
    if name not in DEFAULTS:
        raise KeyError(f"unknown audit setting {name!r}; known: {', '.join(sorted(DEFAULTS))}")
    return getattr(settings, "CHORUS_AUDIT", {}).get(name, DEFAULTS[name])
