"""``get_channel(alias)``: the configured backend of a channel alias (``settings.CHORUS_CHANNELS``).

Loaded once per process with ``import_string`` and cached; ``override_settings(CHORUS_CHANNELS=...)``
clears the cache through ``setting_changed``, so tests can swap backends.
"""

import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from annotation.channels.base import BaseChannel

_ALLOWED_KEYS = {"BACKEND", "OPTIONS"}
_channels: dict[str, BaseChannel] = {}
_lock = threading.Lock()


def load_channel(alias: str) -> BaseChannel:
    """A new instance of the backend configured for ``alias``; ImproperlyConfigured names what is wrong."""
    configured = getattr(settings, "CHORUS_CHANNELS", {}) or {}
    if alias not in configured:
        raise ImproperlyConfigured(
            f"No channel {alias!r} in CHORUS_CHANNELS (configured: {', '.join(sorted(configured)) or 'none'})."
        )
    config = configured[alias]
    unknown = set(config) - _ALLOWED_KEYS
    if unknown:
        raise ImproperlyConfigured(f"CHORUS_CHANNELS[{alias!r}]: unknown keys {', '.join(sorted(unknown))}.")
    if "BACKEND" not in config:
        raise ImproperlyConfigured(f"CHORUS_CHANNELS[{alias!r}] has no BACKEND.")
    try:
        backend = import_string(config["BACKEND"])
    except ImportError as exc:
        raise ImproperlyConfigured(f"CHORUS_CHANNELS[{alias!r}]: cannot import {config['BACKEND']!r}: {exc}") from exc
    if not (isinstance(backend, type) and issubclass(backend, BaseChannel)):
        raise ImproperlyConfigured(f"CHORUS_CHANNELS[{alias!r}]: {config['BACKEND']!r} is not a BaseChannel subclass.")
    return backend(alias=alias, **(config.get("OPTIONS") or {}))


def get_channel(alias: str) -> BaseChannel:
    """The cached backend instance for ``alias`` (backends are thread-safe once opened)."""
    channel = _channels.get(alias)
    if channel is None:
        with _lock:
            channel = _channels.get(alias)
            if channel is None:
                channel = _channels[alias] = load_channel(alias)
    return channel


def reset_channels() -> None:
    with _lock:
        for channel in _channels.values():
            channel.close()
        _channels.clear()


@receiver(setting_changed)
def _reset_on_setting_changed(*, setting, **kwargs):
    if setting == "CHORUS_CHANNELS":
        reset_channels()
