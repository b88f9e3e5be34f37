"""Moving Django's clock in tests: the services read ``timezone.now()``, and only compare timestamps."""

from datetime import timedelta
from unittest import mock

from django.utils import timezone


def later(seconds: float):
    """A context manager under which ``timezone.now()`` is ``seconds`` from now (fixed)."""
    return mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(seconds=seconds))
