"""Fixtures of the channel tests: the fake MTurk endpoint, settings pointing the MTurk backend at it,
the locmem backend, and Celery running tasks inline."""

import pytest
from django.test import override_settings

from annotation.channels import locmem
from annotation.channels.registry import get_channel
from tests.channels.fake_mturk import FakeMTurk

PUBLIC_URL = "https://chorus.test"


@pytest.fixture(autouse=True)
def fast_botocore_backoff(monkeypatch):
    """botocore's standard retry mode sleeps up to 2**attempt seconds between retries; the retries
    themselves still happen, only the waiting is skipped."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)


@pytest.fixture
def fake_mturk():
    fake = FakeMTurk(page_cap=2).start()
    yield fake
    fake.stop()


def mturk_channels(fake, **options):
    return {
        "mturk": {
            "BACKEND": "annotation.channels.mturk.MTurkChannel",
            "OPTIONS": {
                "sandbox": True,
                "endpoint_url": fake.url,
                "submit_origins": [fake.url],
                "max_attempts": 5,
                "page_size": 100,
                **options,
            },
        }
    }


@pytest.fixture
def mturk(fake_mturk, monkeypatch):
    """Chorus's "mturk" channel pointed at the fake, with dummy credentials from the environment."""
    monkeypatch.setenv("CHORUS_MTURK_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.setenv("CHORUS_MTURK_SECRET_ACCESS_KEY", "test-secret")
    with override_settings(CHORUS_CHANNELS=mturk_channels(fake_mturk), CHORUS_PUBLIC_URL=PUBLIC_URL):
        yield fake_mturk


@pytest.fixture
def locmem_channel():
    """The "mturk" alias served by the locmem backend (no network, calls recorded in locmem.outbox)."""
    locmem.reset()
    config = {
        "mturk": {
            "BACKEND": "annotation.channels.locmem.LocMemChannel",
            "OPTIONS": {"worker_channel": "mturk_sandbox", "submit_origins": ["https://locmem.invalid"]},
        }
    }
    with override_settings(CHORUS_CHANNELS=config, CHORUS_PUBLIC_URL=PUBLIC_URL):
        yield get_channel("mturk")
    locmem.reset()


@pytest.fixture
def no_remote_call_in_transaction(mturk):
    """Fails the test if the MTurk client is called while one of our transactions is open (beyond the
    test's own wrapping transaction)."""
    from django.db import connection

    baseline = len(connection.atomic_blocks)
    offending = []

    def check(model, **kwargs):
        if len(connection.atomic_blocks) > baseline:
            offending.append(model.name)

    get_channel("mturk").client.meta.events.register("before-call.mturk", check)
    yield offending
    assert offending == [], f"MTurk called inside a transaction: {offending}"
