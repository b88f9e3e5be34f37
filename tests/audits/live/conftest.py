"""Fixtures of the live-audit tests.

Tests that are not marked ``services`` never reach a broker: ``enqueued`` replaces the tasks'
``apply_async`` (the edge of the process) with a recorder. Tests marked ``services`` use the real
thing: a Celery worker process against Redis (see ``live.py``).
"""

import os
from unittest import mock

import pytest

from audits import services as audit_services
from audits.tasks import audit_full_task, audit_refresh_task, ground_truths_task


class Enqueued(list):
    """(task name, campaign id, countdown) of each enqueue."""

    def names(self):
        return [name for name, _, _ in self]


@pytest.fixture(autouse=True)
def enqueued(request):
    if request.node.get_closest_marker("services"):
        yield None
        return
    calls = Enqueued()

    def recorder(task):
        def apply_async(args=(), kwargs=None, countdown=None, **options):
            calls.append((task.name, args[0], countdown))

        return apply_async

    with (
        mock.patch.object(audit_refresh_task, "apply_async", recorder(audit_refresh_task)),
        mock.patch.object(audit_full_task, "apply_async", recorder(audit_full_task)),
        mock.patch.object(ground_truths_task, "apply_async", recorder(ground_truths_task)),
    ):
        yield calls


@pytest.fixture(autouse=True)
def _reset_breaker():
    audit_services.scheduling._breaker["until"] = 0.0
    yield
    audit_services.scheduling._breaker["until"] = 0.0


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("live-audit")


@pytest.fixture(scope="module")
def services_redis(django_db_setup):
    """The test Redis (bin/test exports CHORUS_TEST_REDIS_URL), its database emptied: ours alone."""
    import redis

    url = os.environ.get("CHORUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def demo(researcher):
    """The demo campaign labeled by a replay of the demo's crowd (tests/audits/live/labeling.py), with
    both audits computed: ``(campaign, personalities by worker)``."""
    from tests.audits.live.labeling import replay_demo_crowd

    campaign, personalities = replay_demo_crowd(researcher)
    audit_services.audit_refresh(campaign_id=campaign.pk)
    audit_services.audit_full(campaign_id=campaign.pk)
    return campaign, personalities
