"""Moving Django's clock in tests: the services read ``timezone.now()``, and only compare timestamps."""

import contextlib
from datetime import timedelta
from unittest import mock

from django.utils import timezone


def later(seconds: float):
    """A context manager under which ``timezone.now()`` is ``seconds`` from now (fixed)."""
    return mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(seconds=seconds))


class Clock:
    """``timezone.now()`` for the services, moved on by hand: a worker's seconds on a prompt are what the
    test says they are, not this machine's timing (labels made in-process take a millisecond or less, and
    the speed flag compares each worker's median with the campaign's: at that scale, noise)."""

    def __init__(self, pace: float = 5.0):
        self.now = timezone.now()
        self.pace = pace  # seconds per label, for tests.helpers.label_all

    def __call__(self):
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@contextlib.contextmanager
def paced(pace: float = 5.0):
    """A ``Clock`` patched in as ``django.utils.timezone.now`` for the block."""
    clock = Clock(pace)
    with mock.patch("django.utils.timezone.now", clock):
        yield clock
