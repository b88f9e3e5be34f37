import itertools
import os

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from annotation import services
from annotation.services.accounts import researcher_set
from tests.helpers import BINARIZATION, jsonl, prompts_jsonl

_seq = itertools.count(1)


@pytest.fixture(autouse=True, scope="session")
def _private_broker():
    """Labels acknowledged in tests schedule audits. Without this they would land in the embedded
    default's broker folder (var/broker), where the next demo's worker would run them. Tests that need
    a real broker start their processes with their own environment (tests/audits/live/live.py)."""
    from config.celery import app

    app.conf.broker_url = "memory://"
    app.conf.broker_transport_options = {}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Real password hashing costs a few hundred ms an account; the suite creates hundreds of accounts."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def make_user(db):
    def make(username: str | None = None, **extra):
        username = username or f"user{next(_seq)}"
        return get_user_model().objects.create_user(username=username, password="pw-for-tests-123", **extra)

    return make


@pytest.fixture
def researcher(make_user):
    user = make_user("researcher")
    researcher_set(user=user)
    return user


@pytest.fixture
def make_campaign(researcher):
    """A campaign with ``n_prompts`` binary prompts imported through the real service, launched by default."""

    def make(n_prompts: int = 10, *, launch: bool = True, **fields):
        fields.setdefault("k", 3)
        campaign = services.campaign_create(owner=researcher, title=fields.pop("title", "Test campaign"), **fields)
        if n_prompts:
            services.prompts_import(campaign=campaign, data=prompts_jsonl(n_prompts), filename="prompts.jsonl")
        if launch:
            campaign = services.campaign_transition(campaign=campaign, action="launch")
        return campaign

    return make


@pytest.fixture
def make_worker(make_user):
    def make():
        return services.worker_for_user(user=make_user())

    return make


@pytest.fixture
def binary_draft(make_campaign):
    """A draft binary campaign (k = 3) that already holds two prompts (p0, p1), so "unchanged" means something."""
    return make_campaign(2, k=3, launch=False)


@pytest.fixture
def rating(researcher):
    """A live 1–4 rating campaign (k = 2, 1 and 2 → 0, 3 and 4 → 1) with two prompts, r0 "one" and r1 "two"."""
    campaign = services.campaign_create(
        owner=researcher, title="Rating", schema="rating", scale_min=1, scale_max=4, k=2, binarization=BINARIZATION
    )
    services.prompts_import(
        campaign=campaign, data=jsonl({"id": "r0", "text": "one"}, {"id": "r1", "text": "two"}), filename="seed.jsonl"
    )
    return services.campaign_transition(campaign=campaign, action="launch")


@pytest.fixture
def per_option(researcher):
    """A live campaign rating each answer option 0–10 (k = 2, 0 → 0, 10 → 1) with one prompt, o0, options a and b."""
    campaign = services.campaign_create(
        owner=researcher,
        title="Options",
        schema="option_rating",
        scale_min=0,
        scale_max=10,
        k=2,
        binarization={"0": 0, "10": 1},
    )
    services.prompts_import(
        campaign=campaign, data=jsonl({"id": "o0", "text": "seed", "options": ["a", "b"]}), filename="seed.jsonl"
    )
    return services.campaign_transition(campaign=campaign, action="launch")


@pytest.fixture
def researcher_client(client, researcher):
    """Django's test client, signed in as the researcher."""
    client.force_login(researcher)
    return client


# --- headless Chromium, for tests marked ``browser`` ------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium: Debian's, since Playwright's own download does not work everywhere."""
    # Playwright's sync API keeps an event loop running in this thread, and Django refuses ORM calls
    # from a thread with a running loop; the tests (and their database teardown) are plain sync code.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE")
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def new_page(chromium):
    """Pages in fresh browser contexts (own cookies), e.g. ``new_page(viewport={...})``."""
    contexts = []

    def make(**context_options):
        context = chromium.new_context(**context_options)
        context.set_default_timeout(30_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page):
    return new_page()


@pytest.fixture
def eager_celery():
    """Tasks enqueued with delay/delay_on_commit run inline (still only after commit)."""
    from config.celery import app

    previous = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield app
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


@pytest.fixture
def prolific_stand_in():
    """The Prolific stand-in (tests/channels/fake_prolific.py) on a real port, accepting http targets
    for its hooks (the live server's)."""
    from tests.channels.fake_prolific import FakeProlific

    fake = FakeProlific(allow_insecure_targets=True).start()
    yield fake
    fake.stop()


@pytest.fixture
def prolific_settings(prolific_stand_in, live_server, eager_celery):
    """Chorus pointed at the stand-in, with its public URL the live server's (hooks reach it): the stand-in."""
    fake = prolific_stand_in
    with override_settings(
        CHORUS_PROLIFIC_API_URL=fake.url,
        CHORUS_PROLIFIC_TOKEN="test-token",
        CHORUS_PUBLIC_URL=live_server.url,
        CHORUS_PROLIFIC_COMPLETION_URL=fake.root + "submissions/complete",
    ):
        yield fake
