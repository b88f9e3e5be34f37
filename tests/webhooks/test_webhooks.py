"""Outbound webhooks: endpoints registered through the API (bad input named, nothing changed; the
secret shown once), events found by the scan after the fact and batched (prompt.completed), or sent by
the core's signal (campaign.status_changed), signed deliveries a receiver can verify, retries with the
same event id, an endpoint disabled when deliveries keep failing, and the SSRF guard."""

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client, override_settings

from annotation.services import campaign_transition, worker_get_or_create
from annotation.services.quality import worker_act
from annotation.webhooks import services
from annotation.webhooks.models import Delivery, Endpoint
from audits.models import AuditSnapshot
from tests.helpers import label_one

pytestmark = [pytest.mark.django_db]


class Receiver:
    """A local endpoint that records each delivery and answers the status codes it is given (then 200)."""

    def __init__(self):
        self.received, self.codes = [], []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                self.send_response(receiver.codes.pop(0) if receiver.codes else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def events(self):
        return [json.loads(body) for _, body in self.received]


@pytest.fixture
def receiver(eager_celery):
    eager_celery.conf.task_eager_propagates = False  # a failed attempt is retried (eagerly), not raised
    receiver = Receiver()
    with override_settings(CHORUS_WEBHOOKS_ALLOW_PRIVATE=True):
        yield receiver
    receiver.server.shutdown()


def api(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def register(client, **body):
    return client.post("/api/v1/webhooks/", body, content_type="application/json")


def verified(secret: str, headers: dict, body: bytes) -> bool:
    """The README's check, as a receiver writes it."""
    expected = hmac.new(
        secret.encode(), headers["X-Chorus-Timestamp"].encode() + b"." + body, hashlib.sha256
    ).hexdigest()
    return hmac.compare_digest(headers["X-Chorus-Signature"], f"sha256={expected}")


@pytest.mark.parametrize(
    "body, field",
    [
        ({"url": "ftp://example.org/x", "events": ["prompt.completed"]}, "url"),
        ({"url": "http://127.0.0.1:9/x", "events": ["prompt.completed"]}, "url"),  # loopback: the SSRF guard
        ({"url": "http://10.1.2.3/x", "events": ["prompt.completed"]}, "url"),
        ({"url": "https://example.org/x", "events": ["prompt.finished"]}, "events"),
        ({"url": "https://example.org/x", "events": []}, "events"),
        (
            {"url": "https://example.org/x", "events": ["audit.threshold_crossed"], "thresholds": {"level_noise": 1.5}},
            "thresholds",
        ),
        (
            {"url": "https://example.org/x", "events": ["audit.threshold_crossed"], "thresholds": {"noise": 0.1}},
            "thresholds",
        ),
        ({"url": "https://example.org/x", "events": ["audit.threshold_crossed"]}, "thresholds"),
    ],
)
def test_bad_endpoints_are_refused_naming_the_field(researcher, body, field, monkeypatch):
    monkeypatch.setattr(
        services.socket,
        "getaddrinfo",
        lambda host, port: [(None, None, None, None, (host if host[0].isdigit() else "93.184.215.14", port))],
    )
    response = register(api(researcher), **body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Endpoint.objects.exists()


def test_the_secret_is_shown_once_and_others_see_nothing(researcher, make_user, receiver):
    response = register(api(researcher), url=receiver.url, events=["campaign.status_changed"])
    assert response.status_code == 201 and response.json()["secret"].startswith("whsec_")
    pk = response.json()["id"]
    assert "secret" not in api(researcher).get(f"/api/v1/webhooks/{pk}/").json()
    other = api(make_user("other"))
    assert other.get(f"/api/v1/webhooks/{pk}/").status_code == 404
    assert other.get("/api/v1/webhooks/").json() == []
    rotated = api(researcher).post(f"/api/v1/webhooks/{pk}/rotate-secret/").json()["secret"]
    assert rotated != response.json()["secret"] and Endpoint.objects.get().secret == rotated


def test_events_reach_the_endpoint_signed_and_batched(
    make_campaign, researcher, receiver, django_capture_on_commit_callbacks
):
    campaign = make_campaign(5, k=2)
    body = register(
        api(researcher),
        url=receiver.url,
        campaign=campaign.slug,
        events=["prompt.completed", "campaign.completed", "campaign.status_changed", "worker.blocked"],
    ).json()
    secret = body["secret"]
    workers = [worker_get_or_create(channel="native", external_id=f"w{i}") for i in range(2)]
    for worker in workers:
        for _ in range(5):
            label_one(campaign, worker, value=1)
    with django_capture_on_commit_callbacks(execute=True):
        services.webhooks_scan()
    events = receiver.events()
    completed = [e for e in events if e["type"] == "prompt.completed"]
    assert len(completed) == 1 and len(completed[0]["data"]["prompts"]) == 5  # one delivery for five prompts
    assert [e["type"] for e in events].count("campaign.completed") == 1
    assert all(verified(secret, headers, raw) for headers, raw in receiver.received)
    with django_capture_on_commit_callbacks(execute=True):
        services.webhooks_scan()  # nothing new: nothing sent again
    assert len(receiver.received) == len(events)

    with django_capture_on_commit_callbacks(execute=True):
        campaign_transition(campaign=campaign, action="close")
    assert receiver.events()[-1]["type"] == "campaign.status_changed"
    assert receiver.events()[-1]["data"] == {"status": "closed"}

    with django_capture_on_commit_callbacks(execute=True):
        worker_act(kind="block", campaign=campaign, worker=workers[0], reason="spam")
        services.webhooks_scan()
    blocked = receiver.events()[-1]
    assert blocked["type"] == "worker.blocked" and blocked["data"]["worker"] == "native:w0"
    assert blocked["data"]["reason"] == "spam"


def test_a_failed_delivery_is_retried_with_the_same_event_id(
    researcher, make_campaign, receiver, django_capture_on_commit_callbacks
):
    make_campaign(2, k=1)
    pk = register(api(researcher), url=receiver.url, events=["campaign.status_changed"]).json()["id"]
    receiver.codes = [500, 503]
    with django_capture_on_commit_callbacks(execute=True):
        response = api(researcher).post(f"/api/v1/webhooks/{pk}/test/")
    assert response.status_code == 202
    ids = [headers["X-Chorus-Event-ID"] for headers, _ in receiver.received]
    assert len(ids) == 3 and len(set(ids)) == 1  # two failures, then delivered: one event
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 3, 200)
    log = api(researcher).get(f"/api/v1/webhooks/{pk}/deliveries/").json()["results"]
    assert log[0]["status"] == "delivered" and log[0]["attempts"] == 3


def test_an_endpoint_that_keeps_failing_is_disabled_with_a_reason(
    researcher, make_campaign, receiver, django_capture_on_commit_callbacks
):
    make_campaign(2, k=1)
    pk = register(api(researcher), url=receiver.url, events=["campaign.status_changed"]).json()["id"]
    receiver.codes = [500] * 100
    endpoint = Endpoint.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):
            services.endpoint_test(endpoint=endpoint)
    endpoint.refresh_from_db()
    assert not endpoint.enabled and "in a row failed" in endpoint.disabled_reason
    assert Delivery.objects.filter(status="failed").count() >= 2
    again = api(researcher).patch(f"/api/v1/webhooks/{pk}/", {"enabled": True}, content_type="application/json")
    assert again.json()["enabled"] is True and again.json()["disabled_reason"] == ""


def test_a_threshold_crossed_in_either_direction(
    researcher, make_campaign, receiver, django_capture_on_commit_callbacks
):
    campaign = make_campaign(2, k=1)
    register(
        api(researcher),
        url=receiver.url,
        campaign=campaign.slug,
        events=["audit.threshold_crossed"],
        thresholds={"level_noise": 0.1},
    )

    def snapshot(watermark, value):
        AuditSnapshot.objects.create(
            campaign=campaign,
            kind="quick",
            watermark=watermark,
            data={"level_noise": value},
            computed_at="2026-11-27T00:00Z",
        )
        with django_capture_on_commit_callbacks(execute=True):
            services.webhooks_scan()

    snapshot(1, 0.05)  # the first reading sets the side
    snapshot(2, 0.07)
    snapshot(3, 0.2)  # crossed upwards
    snapshot(4, 0.08)  # and back
    crossings = [e["data"] for e in receiver.events() if e["type"] == "audit.threshold_crossed"]
    assert [c["direction"] for c in crossings] == ["below to above", "above to below"]
    assert crossings[0]["value"] == 0.2 and crossings[0]["threshold"] == 0.1
