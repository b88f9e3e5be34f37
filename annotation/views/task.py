"""The labeling page, shared by every channel: native workers (worker.py), MTurk's frame and panel links
(annotation/channels/views/mturk.py, panel.py). Each channel's view finds the lease its own way, then uses these
for what is the same everywhere: the form's POST, the page's context, the heartbeat and giving a prompt back; it
adds only what is its own (MTurk's signed token, the panel's quota, the native "Stop for now" button, ...).

MTurk's page has no "Skip": on MTurk a worker declines an assignment by returning the HIT, which MTurk's
own page always offers; the slot is free again when the lease runs out, and the worker is never shown
that prompt again. A Skip would be a second way to do that, through one more cookieless POST endpoint.
"""

from dataclasses import dataclass
from functools import partial

from django.contrib import messages
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from annotation import selectors, services
from annotation.forms import label_from_post, new_client_token
from annotation.models import Campaign, Lease, Worker

# What a task page's "Skip" says, on every channel that has one.
SKIPPED = "Skipped: that prompt goes to other workers, and you will not be shown it again."
# label_submit's refusal of a value the schema rejects: the only one after which the same prompt is shown
# again (the worker corrects the value); after any other the lease is over and the page moves on.
BAD_VALUE = "bad_value"


@dataclass(frozen=True)
class LabelPost:
    """A labeling form's POST, submitted: ``ack`` when the label was taken, else ``refusal``."""

    ack: services.LabelAck | None = None
    refusal: services.LabelRefused | None = None

    @property
    def error(self) -> str | None:
        """The message to show above the same prompt, or None when the page moves on."""
        if self.refusal is not None and self.refusal.code == BAD_VALUE:
            return self.refusal.message
        return None


def label_post(
    request, *, lease_id: int, worker: Worker, campaign_slug: str, client_token: str | None = None
) -> LabelPost:
    """Submit the label a task page POSTed for the worker's lease ``lease_id`` in the campaign of
    ``campaign_slug``; a 404 when that is not theirs. The form is read under label_submit's lock on the
    lease, which brings its prompt: the fields depend on it (``label_from_post``), and a read of the
    lease beforehand would be one statement more per label.

    ``client_token`` defaults to the one rendered into the form; MTurk passes its per-assignment token
    instead, so a second tab on the same assignment cannot label a second prompt.
    """
    if client_token is None:
        client_token = request.POST.get("client_token", "")
    try:
        ack = services.label_submit(
            lease_id=lease_id,
            worker=worker,
            value=partial(label_from_post, request.POST),
            client_token=client_token,
            campaign_slug=campaign_slug,
        )
    except services.NotLeased as exc:
        raise Http404("No such lease.") from exc
    except services.LabelRefused as exc:
        return LabelPost(refusal=exc)
    return LabelPost(ack=ack)


def lease_is_live(lease: Lease) -> bool:
    """Whether a GET of the task page may show this lease's prompt (else the page moves on)."""
    return lease.status == Lease.Status.ACTIVE and lease.expires_at > timezone.now()


def render_task(
    request,
    template_name: str,
    *,
    campaign: Campaign,
    lease: Lease,
    form_action: str,
    heartbeat_url: str,
    client_token: str | None = None,
    error: str | None = None,
    quota_left: int | None = None,
    **extra,
):
    """The labeling page for ``lease``; a 400 when it shows ``error`` (label_post's). ``quota_left`` is a
    channel's own limit on the labels still wanted from this worker, if any (a panel's quota per session).
    ``extra`` is the channel's own context. Templates include annotation/_task_body.html, which
    documents the names."""
    context = {
        "campaign": campaign,
        "lease": lease,
        "prompt": lease.prompt,
        "schema": campaign.label_schema,
        "progress": selectors.worker_progress(
            campaign=campaign, worker=lease.worker, quota_left=quota_left, labeled=getattr(lease, "worker_labels", None)
        ),
        "client_token": client_token or new_client_token(),
        "form_action": form_action,
        "heartbeat_url": heartbeat_url,
        # Three beats per lease length: a lease outlives two missed beats (static/js/label.js).
        "heartbeat_ms": campaign.lease_seconds * 1000 // 3,
        "error": error,
        # Free text: the refused answer stays in the box to be corrected, not typed again.
        "answer": request.POST.get("value", "") if error and request.method == "POST" else "",
        **extra,
    }
    return render(request, template_name, context, status=400 if error else 200)


def lease_give_back(request, *, lease_id: int, worker: Worker, campaign_slug: str, message: str) -> None:
    """A task page's "Skip" or "Stop for now": the prompt goes back to the pool at once, for other workers,
    and is never offered to this one again (lease_release); ``message`` tells them so. Another worker's
    lease, or another campaign's, is a 404, like everything that is not yours. The caller redirects."""
    try:
        services.lease_release(lease_id=lease_id, worker=worker, campaign_slug=campaign_slug)
    except services.NotLeased as exc:
        raise Http404("No such lease.") from exc
    messages.info(request, message)


def heartbeat_json(
    *, lease_id: int, worker: Worker, not_leased_is_404: bool = False, campaign_slug: str | None = None
) -> JsonResponse:
    """The labeling page's heartbeat answer, for every channel's page (static/js/label.js reads it).

    Nothing reads the lease first: lease_heartbeat refuses a lease that is not the worker's itself.
    ``not_leased_is_404`` turns that refusal into a 404, the answer of signed-in pages to everything
    that is not yours (annotation.permissions). The cookieless channels keep the 409, which label.js
    shows to the worker (a panel participant replaced on a shared browser, for one).
    """
    try:
        lease = services.lease_heartbeat(lease_id=lease_id, worker=worker, campaign_slug=campaign_slug)
    except services.NotLeased as exc:
        if not_leased_is_404:
            raise Http404("No such lease.") from exc
        return JsonResponse({"code": exc.code, "message": exc.message}, status=exc.status)
    except services.ServiceError as exc:
        return JsonResponse({"code": exc.code, "message": exc.message}, status=exc.status)
    return JsonResponse({"expires_at": lease.expires_at.isoformat()})
