"""The session engine (``annotation.sessions``): Django's database sessions read with one hand-written
statement, and in production (Redis) Django's cached sessions in front of them, against the test Redis."""

import os
import uuid

import pytest
from django.contrib.sessions.models import Session
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from annotation.sessions import CachedSessionStore, DatabaseSessionStore

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


@pytest.fixture
def redis_cache():
    url = os.environ.get("CHORUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    caches = {"default": {"BACKEND": "config.redis_cache.RedisCache", "LOCATION": url, "KEY_PREFIX": uuid.uuid4().hex}}
    with override_settings(CACHES=caches):
        yield


def test_the_database_store_reads_back_what_it_saved_and_forgets_an_expired_session():
    store = DatabaseSessionStore()
    store["worker"] = 7
    store.save()
    assert DatabaseSessionStore(store.session_key)["worker"] == 7
    Session.objects.filter(pk=store.session_key).update(expire_date="2000-01-01T00:00:00Z")
    expired = DatabaseSessionStore(store.session_key)
    assert "worker" not in expired and expired.session_key is None


def test_the_cached_store_reads_redis_not_the_database(redis_cache):
    store = CachedSessionStore()
    store["worker"] = 7
    store.save()
    with CaptureQueriesContext(connection) as queries:
        assert CachedSessionStore(store.session_key)["worker"] == 7
    assert len(queries) == 0
    # Redis forgot it (evicted, restarted): the database still has it, and Redis has it again after.
    store._cache.delete(store.cache_key)
    with CaptureQueriesContext(connection) as queries:
        assert CachedSessionStore(store.session_key)["worker"] == 7
    assert len(queries) == 1
    assert store._cache.get(store.cache_key) == {"worker": 7}


def test_a_deleted_cached_session_is_gone_from_both(redis_cache):
    store = CachedSessionStore()
    store["worker"] = 7
    store.save()
    key = store.session_key
    CachedSessionStore(key).delete()  # sign-out, from another process's store
    assert not Session.objects.filter(pk=key).exists()
    assert "worker" not in CachedSessionStore(key)
