"""MTurk's iframe: the task page a HIT opens, its label form and its heartbeat. Views parse, call one
service or selector, render.

The page works without any cookie (browsers block third-party cookies in MTurk's iframe): who the
worker is travels in a signed, per-assignment token in the form's URL (``django.core.signing``). It may
be framed by MTurk's worker sites only, and is exempt from X-Frame-Options.
"""

import re
from urllib.parse import urlencode

from django.core import signing
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from annotation import selectors as core_selectors
from annotation import services as core
from annotation.channels import selectors, services
from annotation.channels.errors import PublicationRefused
from annotation.channels.models import MTurkAssignment, Publication
from annotation.channels.mturk import FRAME_ANCESTORS
from annotation.channels.registry import get_channel
from annotation.models import Label
from annotation.schemas import parse_int
from annotation.views.task import heartbeat_json, label_post, render_task

TASK_TOKEN_SALT = "chorus.channels.mturk-task"
_MTURK_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
NOTICES = {
    "lease_expired": "Your time on the previous prompt ran out; here is another one.",
    "already_labeled": "That prompt was already labeled in another of your assignments; here is another one.",
    "lease_released": "That prompt was given back; here is another one.",
    "not_leased": "That prompt is no longer yours; here is another one.",
}


def _frame(response, channel):
    """Let MTurk's worker sites frame this response and let the page post the assignment to MTurk."""
    replace = {"form-action": ["'self'", *channel.submit_origins()]}
    if channel.frame_ancestors():
        replace["frame-ancestors"] = list(channel.frame_ancestors())
    response._csp_replace = replace
    return response


def _frame_error(request, channel, message: str, status: int = 400):
    response = render(request, "channels/mturk_error.html", {"message": message}, status=status)
    if channel is None:  # still shown inside MTurk's frame
        response._csp_replace = {"frame-ancestors": list(FRAME_ANCESTORS)}
        return response
    return _frame(response, channel)


def _publication(raw) -> Publication:
    pk = parse_int(raw or "")
    if pk is None or pk < 1:
        raise Http404("No such publication.")
    return selectors.publication_for_mturk_task(pk=pk)


def _task_token(publication, assignment_id, hit_id, worker_id, submit_to) -> str:
    return signing.dumps(
        {"p": publication.pk, "a": assignment_id, "h": hit_id, "w": worker_id, "s": submit_to}, salt=TASK_TOKEN_SALT
    )


def _task_get_url(data: dict) -> str:
    return (
        reverse("channels:mturk_task")
        + "?"
        + urlencode(
            {
                "publication": data["p"],
                "assignmentId": data["a"],
                "hitId": data["h"],
                "workerId": data["w"],
                "turkSubmitTo": data["s"],
            }
        )
    )


def _read_token(request, publication=None):
    """The signed token of a task-page form, or None (tampered, expired or absent)."""
    try:
        data = signing.loads(request.GET.get("t", ""), salt=TASK_TOKEN_SALT, max_age=8 * 24 * 3600)
    except signing.BadSignature:
        return None
    return data if isinstance(data, dict) and {"p", "a", "h", "w", "s"} <= set(data) else None


def _submit_page(request, channel, assignment: MTurkAssignment, label: Label, submit_to: str):
    """The label is in Chorus: post the assignment to MTurk (auto-submitted by a static script)."""
    context = {
        "action": submit_to.rstrip("/") + "/mturk/externalSubmit",
        "fields": {
            "assignmentId": assignment.assignment_id,
            "chorus_label": str(label.pk),
            "chorus_prompt": label.prompt.external_id,
        },
        "campaign": label.campaign,
    }
    return _frame(render(request, "channels/mturk_submit.html", context), channel)


def _work(request, *, publication, channel, assignment, data, notice=None):
    """What an opened assignment shows: its label's submit form, a prompt, or nothing left."""
    campaign = publication.campaign
    label = selectors.mturk_assignment_label(assignment=assignment)
    if label is not None:
        return _submit_page(request, channel, assignment, label, data["s"])
    result = core.lease_acquire(campaign=campaign, worker=assignment.worker)
    if isinstance(result, core.NothingLeft):
        if result.code in ("nothing_left", "cap_reached", "blocked"):
            services.mturk_nothing_left(assignment=assignment)
        context = {"campaign": campaign, "reason": result.reason, "code": result.code}
        return _frame(render(request, "channels/mturk_nothing_left.html", context), channel)
    return _task_page(
        request, publication=publication, channel=channel, assignment=assignment, data=data, lease=result, notice=notice
    )


def _task_page(request, *, publication, channel, assignment, data, lease, error=None, notice=None):
    """The labeling page in MTurk's frame. Its form and heartbeat carry the signed token (no cookie gets
    there), and its client token is the assignment's: one label per assignment, however many tabs."""
    query = urlencode({"t": _task_token(publication, data["a"], data["h"], data["w"], data["s"]), "lease": lease.pk})
    response = render_task(
        request,
        "channels/mturk_task.html",
        campaign=publication.campaign,
        lease=lease,
        error=error,
        client_token=services.mturk_client_token(assignment.assignment_id),
        form_action=f"{reverse('channels:mturk_task_submit')}?{query}",
        heartbeat_url=f"{reverse('channels:mturk_task_heartbeat')}?{query}",
        notice=NOTICES.get(notice or ""),
    )
    return _frame(response, channel)


@xframe_options_exempt
@require_GET
def mturk_task(request):
    """MTurk's iframe opens this with assignmentId, hitId, workerId and turkSubmitTo. The preview
    (ASSIGNMENT_ID_NOT_AVAILABLE) shows the instructions only, never a prompt."""
    publication = _publication(request.GET.get("publication"))
    try:
        channel = get_channel(publication.channel)
    except ImproperlyConfigured:
        return _frame_error(request, None, "This task is not available right now.", status=503)
    params = request.GET
    if channel.is_preview(params):
        context = {"campaign": publication.campaign, "reward": publication.options.get("reward")}
        return _frame(render(request, "channels/mturk_preview.html", context), channel)
    assignment_id, hit_id = params.get("assignmentId", ""), params.get("hitId", "")
    worker_id, submit_to = params.get("workerId", ""), params.get("turkSubmitTo", "").rstrip("/")
    if not all(_MTURK_ID.fullmatch(v) for v in (assignment_id, hit_id, worker_id)):
        return _frame_error(request, channel, "This page must be opened from an MTurk assignment.")
    if submit_to not in channel.submit_origins():
        return _frame_error(request, channel, "This assignment comes from an unexpected MTurk site.")
    hit = selectors.mturk_hit_of(publication=publication, hit_id=hit_id)
    if hit is None:
        return _frame_error(request, channel, "This HIT is not part of this campaign.")
    worker = core.worker_get_or_create(channel=publication.worker_channel, external_id=worker_id)
    try:
        assignment = services.mturk_assignment_open(hit=hit, assignment_id=assignment_id, worker=worker)
    except PublicationRefused as exc:
        return _frame_error(request, channel, exc.message)
    data = {"p": publication.pk, "a": assignment_id, "h": hit_id, "w": worker_id, "s": submit_to}
    return _work(
        request, publication=publication, channel=channel, assignment=assignment, data=data, notice=params.get("notice")
    )


def _assignment_from_token(request):
    data = _read_token(request)
    if data is None:
        return None, None, None
    assignment = selectors.mturk_assignment_for_task(
        publication_id=data["p"], hit_id=data["h"], assignment_id=data["a"], worker_id=data["w"]
    )
    return data, assignment, (assignment.hit.publication if assignment else None)


def _not_leased(data, channel):
    """Back to the HIT's task page, which says the prompt is no longer this worker's."""
    return _frame(redirect(_task_get_url(data) + "&notice=not_leased"), channel)


@csrf_exempt  # no cookie reaches this page inside MTurk's iframe; the signed token authenticates it
@xframe_options_exempt
@require_POST
def mturk_task_submit(request):
    data, assignment, publication = _assignment_from_token(request)
    if assignment is None:
        return _frame_error(request, None, "This form has expired or was altered. Reload the HIT.")
    channel = get_channel(publication.channel)
    worker, campaign = assignment.worker, publication.campaign
    label = selectors.mturk_assignment_label(assignment=assignment)
    if label is not None:
        return _submit_page(request, channel, assignment, label, data["s"])
    lease_id = parse_int(request.GET.get("lease", ""))  # beside the token, unsigned: label_submit checks it
    if lease_id is None:
        return _not_leased(data, channel)
    try:
        post = label_post(
            request,
            lease_id=lease_id,
            worker=worker,
            campaign_slug=campaign.slug,
            client_token=services.mturk_client_token(assignment.assignment_id),
        )
    except Http404:  # label_post's answer to a lease that is not this worker's
        return _not_leased(data, channel)
    if post.error is not None:
        lease = core_selectors.lease_for_worker(lease_id=lease_id, worker=worker, campaign=campaign)
        return _task_page(
            request,
            publication=publication,
            channel=channel,
            assignment=assignment,
            data=data,
            lease=lease,
            error=post.error,
        )
    if post.ack is None:
        return _frame(redirect(_task_get_url(data) + "&" + urlencode({"notice": post.refusal.code})), channel)
    services.mturk_assignment_labeled(assignment=assignment, label_id=post.ack.label_id)
    label = selectors.mturk_assignment_label(assignment=assignment)
    return _submit_page(request, channel, assignment, label, data["s"])


@csrf_exempt
@require_POST
def mturk_task_heartbeat(request):
    data, assignment, publication = _assignment_from_token(request)
    lease_id = parse_int(request.GET.get("lease", ""))
    if assignment is None or lease_id is None:
        return JsonResponse({"code": "bad_token", "message": "This page has expired; reload the HIT."}, status=400)
    return heartbeat_json(lease_id=lease_id, worker=assignment.worker)
