import pytest
from django.core.cache import cache
from rest_framework.test import APIClient


@pytest.fixture(autouse=True)
def _fresh_throttles(db):
    """Throttle counters live in the cache, which outlives a test's transaction."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api():
    """An API client signed in as ``user`` (or anonymous): ``api(user)``."""

    def make(user=None):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make
