"""The production cache backend (``config.redis_cache``): Django's Redis cache, one client handle per
connection pool. Against the test Redis, as production runs it."""

import os
import threading
import uuid

import pytest

from config.redis_cache import RedisCache


@pytest.fixture
def cache():
    url = os.environ.get("CHORUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    backend = RedisCache(url, {"KEY_PREFIX": f"test-{uuid.uuid4().hex}"})
    yield backend
    backend.delete_many(["debounce", "shared"])


def test_add_is_atomic_and_values_round_trip(cache):
    assert cache.add("debounce", "first", 30) is True
    assert cache.add("debounce", "second", 30) is False  # the audit's debounce: only the first schedules
    assert cache.get("debounce") == "first"


def test_calls_share_one_handle_on_the_pool(cache):
    client = cache._cache
    first = client.get_client(write=True)
    assert client.get_client(write=True) is first and client.get_client() is first
    assert first.connection_pool is client._get_connection_pool(True)


def test_threads_share_the_handle_safely(cache):
    cache.set("shared", 0, 30)
    errors = []

    def bump():
        try:
            for _ in range(200):
                cache.incr("shared")
        except Exception as exc:  # reported below: the assertion must see it
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and cache.get("shared") == 800
