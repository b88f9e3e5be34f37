"""Signals the core sends for the apps built on it (the channels), so the core calls none of them by
name: sent after the write committed, never inside it."""

from django.dispatch import Signal

#: A campaign was launched, paused, resumed or closed. Arguments: ``campaign_id``, ``status``.
campaign_status_changed = Signal()
