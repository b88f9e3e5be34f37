import pytest
from django.apps import apps
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


def row_counts() -> dict[str, int]:
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models()
        if model._meta.app_label not in {"sessions"}
    }


@pytest.fixture
def unchanged():
    """Call ``unchanged()`` once the world is set up; the database must then stay as it is (the row
    count of every table)."""
    before = {}

    def start():
        before.update(row_counts())

    yield start
    assert before, "the test never took its snapshot"
    assert row_counts() == before
