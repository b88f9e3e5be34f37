"""The writes of outbound webhooks: endpoints (register, change, rotate the secret, delete), the scan
that finds a campaign's events, and each delivery's attempts.

Events are never written on the label-submission path. ``webhooks_scan`` (Celery beat, every
``CHORUS_WEBHOOK_SCAN_SECONDS``) reads, per campaign with an endpoint, what the core stored since its
cursor: the labels since the last one read (the prompts they completed: no open slot left), the worker
actions since the last one, and the newest snapshots (thresholds); campaign transitions come by the core's
signal, panel events from the channels. So ``prompt.completed`` on a campaign of 100k prompts is a few
deliveries a scan (up to ``PROMPTS_PER_DELIVERY`` prompts each), not 100k.

A delivery is a JSON body ``{"id", "type", "created_at", "campaign", "data"}`` POSTed with the headers
``X-Chorus-Event-ID`` (the same on every attempt), ``X-Chorus-Timestamp`` (UNIX seconds) and
``X-Chorus-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed by the endpoint's secret>``.
Non-2xx answers and timeouts are retried with exponential back-off and full jitter (the first retry
within a minute), up to ``MAX_ATTEMPTS``; an endpoint whose deliveries keep failing
(``DISABLE_AFTER`` in a row) is disabled with the reason shown.
"""

import hashlib
import hmac
import ipaddress
import json
import secrets
import socket
import uuid
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import Campaign, Label, Slot, WorkerAction
from annotation.selectors import campaigns_visible_to
from annotation.services.activity import activity_record
from annotation.services.errors import ServiceError
from annotation.webhooks.models import Delivery, Endpoint, WebhookCursor
from audits.hook import latest_numbers

PROMPTS_PER_DELIVERY = 1000
MAX_ATTEMPTS = 8
DISABLE_AFTER = 20  # failed deliveries in a row
NOISE_METRICS = (
    "level_noise",
    "pattern_noise_orig",
    "pattern_noise_mod",
    "system_noise_orig",
    "system_noise_mod",
    "residual",
)
METRICS = {**{m: (0.0, 1.0) for m in NOISE_METRICS}, "alpha": (-1.0, 1.0)}
ACTION_EVENTS = {
    WorkerAction.Kind.FLAG: Endpoint.Event.WORKER_FLAGGED,
    WorkerAction.Kind.EXCLUDE: Endpoint.Event.WORKER_EXCLUDED,
    WorkerAction.Kind.BLOCK: Endpoint.Event.WORKER_BLOCKED,
    WorkerAction.Kind.RECOLLECT: Endpoint.Event.WORKER_BLOCKED,
}


class WebhookRefused(ServiceError):
    code = "webhook_refused"
    status = 400


# ------------------------------------------------------------------------------------ endpoints


def url_check(url: str) -> str:
    """An http(s) URL whose host does not resolve to a loopback, private or link-local address (a
    server-side request forgery guard), unless ``CHORUS_WEBHOOKS_ALLOW_PRIVATE``."""
    url = (url or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 500:
        raise WebhookRefused(
            "url must be an http:// or https:// address.", code="invalid", fields={"url": "not http(s)"}
        )
    if settings.CHORUS_WEBHOOKS_ALLOW_PRIVATE:
        return url
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parts.hostname, parts.port or 443)}
    except (socket.gaierror, UnicodeError):
        raise WebhookRefused(
            f"{parts.hostname} does not resolve.", code="invalid", fields={"url": "the host does not resolve"}
        ) from None
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_reserved or ip.is_multicast:
            raise WebhookRefused(
                f"url resolves to {ip}, a loopback, private or link-local address: refused "
                "(CHORUS_WEBHOOKS_ALLOW_PRIVATE=1 allows it, for development).",
                code="invalid",
                fields={"url": "private address"},
            )
    return url


def _fields_check(*, events, thresholds) -> tuple[list, dict]:
    errors = {}
    if not isinstance(events, list) or not events:
        errors["events"] = f"events: a non-empty list of {', '.join(Endpoint.Event.values)}."
    else:
        unknown = [e for e in events if e not in Endpoint.Event.values]
        if unknown:
            errors["events"] = f"Unknown events {unknown}; use {', '.join(Endpoint.Event.values)}."
    thresholds = thresholds or {}
    if not isinstance(thresholds, dict):
        errors["thresholds"] = "thresholds: an object {metric: value}."
    else:
        for metric, value in thresholds.items():
            if metric not in METRICS:
                errors["thresholds"] = f"Unknown metric {metric!r}; use {', '.join(METRICS)}."
                break
            lo, hi = METRICS[metric]
            if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
                errors["thresholds"] = f"{metric}'s threshold must be a number from {lo} to {hi}."
                break
    if not errors and Endpoint.Event.AUDIT_THRESHOLD in events and not thresholds:
        errors["thresholds"] = "audit.threshold_crossed needs at least one threshold."
    if errors:
        raise WebhookRefused(" ".join(errors.values()), code="invalid", fields=errors)
    return sorted(set(events)), {m: float(v) for m, v in thresholds.items()}


def endpoint_create(*, user, url: str, events, campaign: Campaign | None = None, thresholds=None) -> Endpoint:
    """Register an endpoint; its secret is on the returned row (shown once)."""
    url = url_check(url)
    events, thresholds = _fields_check(events=events, thresholds=thresholds)
    with transaction.atomic(durable=True):
        endpoint = Endpoint.objects.create(
            owner=user,
            campaign=campaign,
            url=url,
            events=events,
            thresholds=thresholds,
            secret="whsec_" + secrets.token_urlsafe(32),
        )
        _activity(endpoint, "webhook.created", f"Added the webhook endpoint {_host(endpoint)}", actor=user)
    return endpoint


def _host(endpoint: Endpoint) -> str:
    return urlsplit(endpoint.url).hostname or "?"


def _activity(endpoint: Endpoint, verb: str, summary: str, **actor) -> None:
    """An endpoint of one campaign is in that campaign's activity log; one for all of its owner's
    campaigns is logged without a campaign (the admin's activity list shows it). By its host only:
    the campaign's collaborators read the log, and a hook's URL often carries its secret."""
    detail = {"endpoint_id": endpoint.pk, "host": _host(endpoint), "events": endpoint.events}
    activity_record(campaign_id=endpoint.campaign_id, verb=verb, summary=summary, detail=detail, **actor)


def endpoint_update(*, endpoint: Endpoint, **fields) -> Endpoint:
    """Change url, events, thresholds or enabled (enabling again clears the reason and the count)."""
    if "url" in fields:
        endpoint.url = url_check(fields["url"])
    if "events" in fields or "thresholds" in fields:
        endpoint.events, endpoint.thresholds = _fields_check(
            events=fields.get("events", endpoint.events),
            thresholds=fields.get("thresholds", endpoint.thresholds),
        )
    if "enabled" in fields:
        endpoint.enabled = bool(fields["enabled"])
        if endpoint.enabled:
            endpoint.disabled_reason, endpoint.consecutive_failures = "", 0
    with transaction.atomic(durable=True):
        endpoint.save()
        _activity(endpoint, "webhook.changed", f"Changed the webhook endpoint {_host(endpoint)}")
    return endpoint


def endpoint_rotate_secret(*, endpoint: Endpoint) -> Endpoint:
    endpoint.secret = "whsec_" + secrets.token_urlsafe(32)
    with transaction.atomic(durable=True):
        Endpoint.objects.filter(pk=endpoint.pk).update(secret=endpoint.secret)
        _activity(endpoint, "webhook.secret_rotated", f"Rotated the secret of {_host(endpoint)}")
    return endpoint


def endpoint_delete(*, endpoint: Endpoint) -> None:
    with transaction.atomic(durable=True):
        _activity(endpoint, "webhook.deleted", f"Removed the webhook endpoint {_host(endpoint)}")
        endpoint.delete()


# ------------------------------------------------------------------------------------ events


def _endpoints_for(campaign: Campaign, event_type: str) -> list[Endpoint]:
    """The enabled endpoints of this campaign, or of all the campaigns of an owner who manages it."""
    candidates = Endpoint.objects.filter(enabled=True).filter(Q(campaign=campaign) | Q(campaign__isnull=True))
    chosen = []
    for endpoint in candidates.select_related("owner"):
        if event_type not in endpoint.events and event_type != "ping":
            continue
        if (
            endpoint.campaign_id is None
            and not campaigns_visible_to(user=endpoint.owner).filter(pk=campaign.pk).exists()
        ):
            continue
        chosen.append(endpoint)
    return chosen


def event_emit(
    *, campaign: Campaign, event_type: str, data: dict, endpoints: list[Endpoint] | None = None
) -> list[Delivery]:
    """One delivery of the event per endpoint that wants it, sent by Celery after commit."""
    from annotation.webhooks.tasks import delivery_send_task  # noqa: PLC0415 (tasks import services: a cycle)

    targets = _endpoints_for(campaign, event_type) if endpoints is None else endpoints
    if not targets:
        return []
    now = timezone.now()
    deliveries = []
    with transaction.atomic():
        for endpoint in targets:
            event_id = uuid.uuid4()
            payload = {
                "id": str(event_id),
                "type": event_type,
                "created_at": now.isoformat(),
                "campaign": campaign.slug,
                "data": data,
            }
            delivery = Delivery.objects.create(
                endpoint=endpoint, event_id=event_id, event_type=event_type, payload=payload
            )
            delivery_send_task.delay_on_commit(delivery.pk)
            deliveries.append(delivery)
    return deliveries


def endpoint_test(*, endpoint: Endpoint) -> Delivery:
    """Send a ``ping`` event to the endpoint now (with the same signature and retries as any event)."""
    campaign = endpoint.campaign or campaigns_visible_to(user=endpoint.owner).order_by("pk").first()
    if campaign is None:
        raise WebhookRefused("You have no campaign to send a test event about yet.", code="no_campaign")
    return event_emit(
        campaign=campaign, event_type="ping", data={"message": "A test event from Chorus."}, endpoints=[endpoint]
    )[0]


def webhooks_scan() -> dict:
    """Find every campaign's new events since its cursor and emit them (see the module docstring)."""
    campaign_ids = set(
        Endpoint.objects.filter(enabled=True, campaign__isnull=False).values_list("campaign_id", flat=True)
    )
    owners = set(Endpoint.objects.filter(enabled=True, campaign__isnull=True).values_list("owner_id", flat=True))
    if owners:
        campaign_ids |= set(
            Campaign.objects.filter(Q(owner_id__in=owners) | Q(collaborators__in=owners)).values_list("pk", flat=True)
        )
    counts = {}
    for campaign in Campaign.objects.filter(pk__in=campaign_ids, launched_at__isnull=False):
        counts[campaign.slug] = campaign_scan(campaign=campaign)
    return counts


def campaign_scan(*, campaign: Campaign) -> int:
    """Emit the campaign's new events since its cursor; returns how many deliveries were made."""
    with transaction.atomic():
        cursor, _ = WebhookCursor.objects.select_for_update().get_or_create(campaign=campaign)
        sent = _prompts_completed(campaign, cursor) + _worker_actions(campaign, cursor) + _thresholds(campaign, cursor)
        sent += _campaign_completed(campaign, cursor)
        cursor.scanned_at = timezone.now()
        cursor.save()
    return sent


def _prompts_completed(campaign: Campaign, cursor: WebhookCursor) -> int:
    """The prompts that the labels since the cursor completed (no open slot left), in batches."""
    new = Label.objects.filter(campaign=campaign, pk__gt=cursor.label_id, voided_at__isnull=True, is_control=False)
    last = new.order_by("-pk").values_list("pk", flat=True).first()
    if last is None:
        return 0
    touched = set(new.filter(pk__lte=last).values_list("prompt_id", flat=True))
    open_prompts = set(Slot.objects.filter(prompt_id__in=touched, filled=False).values_list("prompt_id", flat=True))
    done = sorted(touched - open_prompts)
    cursor.label_id = last
    sent = 0
    if done:
        rows = list(campaign.prompts.filter(pk__in=done).order_by("pk").values_list("external_id", "n_labels"))
        for i in range(0, len(rows), PROMPTS_PER_DELIVERY):
            batch = [{"prompt": external_id, "labels": n} for external_id, n in rows[i : i + PROMPTS_PER_DELIVERY]]
            sent += len(
                event_emit(campaign=campaign, event_type=Endpoint.Event.PROMPT_COMPLETED, data={"prompts": batch})
            )
    return sent


def _campaign_completed(campaign: Campaign, cursor: WebhookCursor) -> int:
    complete = campaign.prompts.exists() and not Slot.objects.filter(campaign=campaign, filled=False).exists()
    if complete == cursor.completed_sent:
        return 0
    cursor.completed_sent = complete  # a re-collection reopens it: it completes (and says so) again
    if not complete:
        return 0
    data = {
        "prompts": campaign.prompts.filter(is_control=False, retired_at__isnull=True).count(),
        "status": campaign.status,
    }
    return len(event_emit(campaign=campaign, event_type=Endpoint.Event.CAMPAIGN_COMPLETED, data=data))


def _worker_actions(campaign: Campaign, cursor: WebhookCursor) -> int:
    actions = list(
        WorkerAction.objects.filter(campaign=campaign, pk__gt=cursor.action_id).select_related("worker").order_by("pk")
    )
    sent = 0
    for action in actions:
        event_type = ACTION_EVENTS.get(action.kind)
        if event_type is not None:
            data = {
                "worker": action.worker.public_id,
                "action": action.kind,
                "reason": action.reason,
                "by_rule": action.rule_id is not None,
                "numbers": action.numbers,
            }
            sent += len(event_emit(campaign=campaign, event_type=event_type, data=data))
        cursor.action_id = action.pk
    return sent


def _thresholds(campaign: Campaign, cursor: WebhookCursor) -> int:
    endpoints = [e for e in _endpoints_for(campaign, Endpoint.Event.AUDIT_THRESHOLD) if e.thresholds]
    if not endpoints:
        return 0
    values = latest_numbers(campaign_id=campaign.pk)
    sent = 0
    for endpoint in endpoints:
        sides = cursor.sides.setdefault(str(endpoint.pk), {})
        for metric, threshold in endpoint.thresholds.items():
            value = values.get(metric)
            if value is None:
                continue
            side = "above" if value > threshold else "below"
            before = sides.get(metric)
            sides[metric] = side
            if before is not None and before != side:  # crossed since the last scan (the first sets the side)
                data = {"metric": metric, "threshold": threshold, "value": value, "direction": f"{before} to {side}"}
                sent += len(
                    event_emit(
                        campaign=campaign, event_type=Endpoint.Event.AUDIT_THRESHOLD, data=data, endpoints=[endpoint]
                    )
                )
    return sent


# ------------------------------------------------------------------------------------ delivering


def _signature(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def delivery_send(*, delivery_id: int) -> Delivery:
    """One attempt, recorded on the row; a failure counts towards disabling the endpoint. The row's
    status says what next: pending (try again later), delivered, or failed (no more attempts)."""
    delivery = Delivery.objects.select_related("endpoint").get(pk=delivery_id)
    endpoint = delivery.endpoint
    if delivery.status != Delivery.Status.PENDING:
        return delivery
    if not endpoint.enabled:
        _attempt(delivery, ok=False, code=None, error=f"endpoint disabled: {endpoint.disabled_reason}", final=True)
        return delivery
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    timestamp = str(int(timezone.now().timestamp()))
    code, error = None, ""
    try:
        url_check(endpoint.url)  # again at send time: a name may resolve elsewhere now
        response = requests.post(
            endpoint.url,
            data=body,
            headers={
                "Content-Type": "application/json",
                "User-Agent": "Chorus-Webhooks/1",
                "X-Chorus-Event-ID": str(delivery.event_id),
                "X-Chorus-Event-Type": delivery.event_type,
                "X-Chorus-Timestamp": timestamp,
                "X-Chorus-Signature": _signature(endpoint.secret, timestamp, body),
            },
            timeout=(5, 10),
            allow_redirects=False,
        )
        code = response.status_code
        if not 200 <= code < 300:
            error = f"answered {code}"
    except WebhookRefused as exc:
        error = exc.message
    except requests.RequestException as exc:
        error = f"no answer ({type(exc).__name__})"
    ok = not error
    final = not ok and delivery.attempts + 1 >= MAX_ATTEMPTS
    _attempt(delivery, ok=ok, code=code, error=error, final=final)
    return delivery


def _attempt(delivery: Delivery, *, ok: bool, code, error: str, final: bool) -> None:
    now = timezone.now()
    delivery.attempts += 1
    status = Delivery.Status.DELIVERED if ok else (Delivery.Status.FAILED if final else Delivery.Status.PENDING)
    with transaction.atomic(durable=True):
        Delivery.objects.filter(pk=delivery.pk).update(
            attempts=delivery.attempts,
            status=status,
            last_status_code=code,
            last_error=error,
            delivered_at=now if ok else None,
        )
        endpoint = Endpoint.objects.select_for_update().get(pk=delivery.endpoint_id)
        if ok:
            endpoint.consecutive_failures = 0
        else:
            endpoint.consecutive_failures += 1
            if endpoint.enabled and endpoint.consecutive_failures >= DISABLE_AFTER:
                endpoint.enabled = False
                endpoint.disabled_reason = (
                    f"{endpoint.consecutive_failures} deliveries in a row failed (last: {error}) on "
                    f"{now:%Y-%m-%d %H:%M} UTC; enable it again once it answers."
                )
        endpoint.save(update_fields=["consecutive_failures", "enabled", "disabled_reason"])
    delivery.status = status
