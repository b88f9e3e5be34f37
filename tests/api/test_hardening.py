"""Hardening: sign-in throttling, security headers, production settings, self-hosted API docs."""

import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.test import Client, override_settings

from tests.helpers import assert_error

ROOT = Path(settings.BASE_DIR)


def token_attempt(api, password, address="10.0.0.1"):
    return api().post(
        "/api/v1/auth/token/", {"username": "alice", "password": password}, format="json", REMOTE_ADDR=address
    )


def web_attempt(password, address="10.0.0.1"):
    client = Client(REMOTE_ADDR=address)
    client.post("/accounts/login/", {"username": "alice", "password": password})
    return "_auth_user_id" in client.session


@override_settings(CHORUS_LOGIN_FAILURES_PER_ACCOUNT=3, CHORUS_LOGIN_FAILURES_PER_ADDRESS=5)
def test_repeated_wrong_passwords_lock_the_account_for_that_address(make_user, api):
    make_user("alice")
    assert web_attempt("pw-for-tests-123") is True
    for _ in range(2):
        assert_error(token_attempt(api, "guess"), 400, "bad_credentials")
    assert web_attempt("guess") is False
    # Three failures from 10.0.0.1: now even the right password is refused there, on both ways in...
    assert_error(token_attempt(api, "pw-for-tests-123"), 400, "bad_credentials")
    assert web_attempt("pw-for-tests-123") is False
    # ...but not from elsewhere, so a stranger cannot lock the owner out.
    assert token_attempt(api, "pw-for-tests-123", address="10.0.0.2").status_code == 200
    assert web_attempt("pw-for-tests-123", address="10.0.0.2") is True


@override_settings(CHORUS_LOGIN_FAILURES_PER_ACCOUNT=3, CHORUS_LOGIN_FAILURES_PER_ADDRESS=5)
def test_guessing_many_usernames_from_one_address_is_cut_off(make_user):
    make_user("alice")
    for n in range(5):
        Client(REMOTE_ADDR="10.0.0.9").post("/accounts/login/", {"username": f"user{n}", "password": "guess"})
    assert web_attempt("pw-for-tests-123", address="10.0.0.9") is False
    assert web_attempt("pw-for-tests-123", address="10.0.0.8") is True


@override_settings(CHORUS_LOGIN_FAILURES_PER_ACCOUNT=3, CHORUS_LOGIN_FAILURES_PER_ADDRESS=5)
def test_the_sign_in_page_says_why_a_throttled_sign_in_is_refused(make_user):
    make_user("alice")
    wrong = Client(REMOTE_ADDR="10.0.0.7").post("/accounts/login/", {"username": "alice", "password": "guess"})
    assert b"Please enter a correct username and password" in wrong.content
    for _ in range(2):
        Client(REMOTE_ADDR="10.0.0.7").post("/accounts/login/", {"username": "alice", "password": "guess"})
    right = Client(REMOTE_ADDR="10.0.0.7").post(
        "/accounts/login/", {"username": "alice", "password": "pw-for-tests-123"}
    )
    assert right.status_code == 200 and b"Too many failed sign-in attempts from here" in right.content
    assert b"Please enter a correct username and password" not in right.content


@pytest.mark.django_db
def test_the_token_endpoint_is_rate_limited(api):
    client = api()
    statuses = [client.post("/api/v1/auth/token/", {}, format="json").status_code for _ in range(31)]
    assert statuses[:30] == [400] * 30
    assert statuses[30] == 429
    response = client.post("/api/v1/auth/token/", {}, format="json")
    assert_error(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0


@pytest.mark.django_db
def test_pages_and_api_send_a_content_security_policy(client):
    for path in ("/", "/accounts/login/", "/api/v1/campaigns/", "/api/schema/"):
        policy = client.get(path)["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
        assert directives["script-src"] == "'self'" and directives["default-src"] == "'self'", path
        assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'", path
        assert "unsafe-inline" not in policy, path


@pytest.mark.django_db
def test_api_docs_load_nothing_from_other_sites(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets and all(url.startswith("/") for url in assets), assets
    assert not re.search(r"<script>(?!\s*</script>)", html), "inline script in the docs page"
    for url in assets:  # ours: the sidecar's static files and the split view's script
        if url.startswith(settings.STATIC_URL) or url.startswith("/" + settings.STATIC_URL):
            assert finders.find(url.split(settings.STATIC_URL, 1)[1]), url
        else:
            assert client.get(url).status_code == 200, url
    assert "'unsafe-inline'" not in response["Content-Security-Policy"].split("script-src")[1].split(";")[0]


def run_deploy_check(**extra_env) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_URL", "REDIS_URL", "CELERY_"))
    }
    env.update(
        DJANGO_SECRET_KEY="k" + "x9Q#pL2v&Rt7zW!mN4bY" * 3,
        DJANGO_ALLOWED_HOSTS="chorus.example.org",
        CHORUS_VAR_DIR=str(ROOT / "var" / "deploy-check"),
        **extra_env,
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_the_deploy_check():
    result = run_deploy_check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_deploy_check_catches_a_weakened_setting():
    result = run_deploy_check(DJANGO_SECURE_SSL_REDIRECT="0")
    assert result.returncode != 0
    assert "security.W008" in result.stdout + result.stderr


@pytest.mark.django_db
def test_api_paths_without_a_route_or_with_a_crash_answer_in_the_error_shape(researcher):
    client = Client(raise_request_exception=False)
    client.force_login(researcher)
    missing = client.get("/api/v1/no-such-thing/")
    assert missing.status_code == 404 and missing["Content-Type"] == "application/json"
    assert_error(missing, 404, "not_found")
    assert "text/html" in client.get("/no-such-page/")["Content-Type"]  # pages keep the HTML 404

    from annotation.api.campaigns import CampaignListCreateApi

    with mock.patch.object(CampaignListCreateApi, "get", side_effect=RuntimeError("a bug")):
        crash = client.get("/api/v1/campaigns/")
    assert_error(crash, 500, "server_error")
