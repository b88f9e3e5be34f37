"""Pages of the channels app: the MTurk task page (inside MTurk's iframe), the panel link's worker
flow, and the researchers' publishing pages. Views parse, call one service or selector, render.

The MTurk task page works without any cookie (browsers block third-party cookies in MTurk's iframe):
who the worker is travels in a signed, per-assignment token in the form's URL (``django.core.signing``).
It may be framed by MTurk's worker sites only, and is exempt from X-Frame-Options.
"""
import re
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
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
from annotation.channels.forms import MTurkBonusForm, MTurkPublicationForm, PanelPublicationForm
from annotation.channels.mturk import FRAME_ANCESTORS
from annotation.channels.models import MTurkAssignment, PanelConfig, PanelSession, Publication
from annotation.channels.registry import get_channel
from annotation.models import Campaign, Label
from annotation.schemas import parse_int
from annotation.views.task import SKIPPED, heartbeat_json, label_post, lease_give_back, lease_is_live, render_task

TASK_TOKEN_SALT = "chorus.channels.mturk-task"
_MTURK_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
NOTICES = {
    "lease_expired": "Your time on the previous prompt ran out; here is another one.",
    "already_labeled": "That prompt was already labeled in another of your assignments; here is another one.",
    "lease_released": "That prompt was given back; here is another one.",
    "not_leased": "That prompt is no longer yours; here is another one.",
}


# --- MTurk: the task page ----------------------------------------------------------------------------


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
    return reverse("channels:mturk_task") + "?" + urlencode({
        "publication": data["p"], "assignmentId": data["a"], "hitId": data["h"], "workerId": data["w"],
        "turkSubmitTo": data["s"],
    })


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
        if result.code in ("nothing_left", "cap_reached"):
            services.mturk_nothing_left(assignment=assignment)
        context = {"campaign": campaign, "reason": result.reason, "code": result.code}
        return _frame(render(request, "channels/mturk_nothing_left.html", context), channel)
    return _task_page(request, publication=publication, channel=channel, assignment=assignment, data=data,
                      lease=result, notice=notice)


def _task_page(request, *, publication, channel, assignment, data, lease, error=None, notice=None):
    """The labeling page in MTurk's frame. Its form and heartbeat carry the signed token (no cookie gets
    there), and its client token is the assignment's: one label per assignment, however many tabs."""
    query = urlencode({"t": _task_token(publication, data["a"], data["h"], data["w"], data["s"]), "lease": lease.pk})
    response = render_task(
        request, "channels/mturk_task.html", campaign=publication.campaign, lease=lease, error=error,
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
    except services.PublicationRefused as exc:
        return _frame_error(request, channel, exc.message)
    data = {"p": publication.pk, "a": assignment_id, "h": hit_id, "w": worker_id, "s": submit_to}
    return _work(request, publication=publication, channel=channel, assignment=assignment, data=data,
                 notice=params.get("notice"))


def _assignment_from_token(request):
    data = _read_token(request)
    if data is None:
        return None, None, None
    assignment = selectors.mturk_assignment_for_task(
        publication_id=data["p"], hit_id=data["h"], assignment_id=data["a"], worker_id=data["w"]
    )
    return data, assignment, (assignment.hit.publication if assignment else None)


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
    lease_id = request.GET.get("lease", "")
    try:
        # Read for the form's fields (label_from_post); the lease id travels beside the token, unsigned.
        lease = core_selectors.lease_for_worker(lease_id=int(lease_id), worker=worker, campaign=campaign)
    except (ValueError, Http404):
        return _frame(redirect(_task_get_url(data) + "&notice=not_leased"), channel)
    post = label_post(request, campaign=campaign, lease=lease, worker=worker,
                      client_token=services.mturk_client_token(assignment.assignment_id))
    if post.error is not None:
        return _task_page(request, publication=publication, channel=channel, assignment=assignment, data=data,
                          lease=lease, error=post.error)
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


# --- Link-based panels ----------------------------------------------------------------------------------


def _session_key(panel: PanelConfig) -> str:
    return f"chorus_panel:{panel.pk}"


def _panel_session(request, panel: PanelConfig) -> PanelSession | None:
    pk = request.session.get(_session_key(panel))
    if pk is None:
        return None
    return selectors.panel_session_of(panel=panel, pk=pk)


def _panel_error(request, panel, message, status=400):
    return render(request, "channels/panel_error.html", {"panel": panel, "message": message}, status=status)


def _quota_reached(panel: PanelConfig, session: PanelSession) -> bool:
    return panel.quota_per_session is not None and session.n_labels >= panel.quota_per_session


@require_GET
def panel_entry(request, slug):
    """The campaign link given to the panel: ``?PROLIFIC_PID=…&STUDY_ID=…&SESSION_ID=…`` (names per panel)."""
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    participant = request.GET.get(panel.participant_param, "").strip()
    if not participant and _panel_session(request, panel) is not None:
        return redirect("channels:panel_next", slug=slug)
    try:
        session = services.panel_session_start(
            panel=panel, participant_id=participant,
            study_id=request.GET.get(panel.study_param, "").strip() if panel.study_param else "",
            session_id=request.GET.get(panel.session_param, "").strip() if panel.session_param else "",
        )
    except services.PanelRefused as exc:
        return _panel_error(request, panel, exc.message)
    previous = request.session.get(_session_key(panel))
    if previous is not None and previous != session.pk:
        request.session.cycle_key()  # another participant on this browser: a fresh session
    request.session[_session_key(panel)] = session.pk
    return redirect("channels:panel_next", slug=slug)


def _require_session(request, panel):
    session = _panel_session(request, panel)
    if session is None:
        return None, _panel_error(
            request, panel, f"Open this study from {panel.publication.channel}: your participant link starts it.", status=403
        )
    return session, None


@require_GET
def panel_next(request, slug):
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session, error = _require_session(request, panel)
    if error:
        return error
    if session.completed_at or _quota_reached(panel, session):
        return redirect("channels:panel_done", slug=slug)
    result = core.lease_acquire(campaign=panel.publication.campaign, worker=session.worker)
    if isinstance(result, core.NothingLeft):
        return redirect("channels:panel_done", slug=slug)
    return redirect("channels:panel_task", slug=slug, lease_id=result.pk)


def panel_task(request, slug, lease_id):
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session, error = _require_session(request, panel)
    if error:
        return error
    campaign = panel.publication.campaign
    lease = core_selectors.lease_for_worker(lease_id=lease_id, worker=session.worker, campaign=campaign)
    error = None
    if request.method == "POST":
        if _quota_reached(panel, session):
            return redirect("channels:panel_done", slug=slug)
        post = label_post(request, campaign=campaign, lease=lease, worker=session.worker)
        if post.error is None:
            if post.ack is None:
                messages.warning(request, post.refusal.message)
            elif not post.ack.duplicate:
                services.panel_label_counted(session=session)
            return redirect("channels:panel_next", slug=slug)
        error = post.error
    elif not lease_is_live(lease):
        return redirect("channels:panel_next", slug=slug)
    return render_task(
        request, "channels/panel_task.html", campaign=campaign, lease=lease, error=error,
        form_action=request.path, heartbeat_url=reverse("channels:panel_heartbeat", args=[slug, lease.pk]),
        skip_url=reverse("channels:panel_skip", args=[slug, lease.pk]),
        quota_left=None if panel.quota_per_session is None else panel.quota_per_session - session.n_labels,
        panel=panel, session=session,
    )


@require_POST
def panel_skip(request, slug, lease_id):
    """The participant skips their prompt: it goes to other workers, never back to them; here is the next."""
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session, error = _require_session(request, panel)
    if error:
        return error
    lease_give_back(
        request, lease_id=lease_id, worker=session.worker, campaign_slug=panel.publication.campaign.slug, message=SKIPPED
    )
    return redirect("channels:panel_next", slug=slug)


@require_POST
def panel_heartbeat(request, slug, lease_id):
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session = _panel_session(request, panel)
    if session is None:
        return JsonResponse({"code": "no_session", "message": "Your session has ended."}, status=403)
    return heartbeat_json(lease_id=lease_id, worker=session.worker)


@require_GET
def panel_done(request, slug):
    """The end: the quota is reached, or there is no more work for this participant (nothing left, their
    cap, the campaign paused or closed); with work left, back to work. The completion code (or URL) pays
    for work done, so only a participant who labeled something in this session gets it; one who found no
    work at all is asked to return the study, the panels' convention (with the panel's no-work code or URL
    if the researcher gave one), and their session stays open in case work comes back."""
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session, error = _require_session(request, panel)
    if error:
        return error
    reason = None
    if not (session.completed_at or _quota_reached(panel, session)):
        result = core.lease_acquire(campaign=panel.publication.campaign, worker=session.worker)
        if not isinstance(result, core.NothingLeft):
            return redirect("channels:panel_task", slug=slug, lease_id=result.pk)
        if session.n_labels == 0:
            if panel.no_work_url:
                return redirect(panel.no_work_url)
            context = {"panel": panel, "campaign": panel.publication.campaign, "reason": result.reason}
            return render(request, "channels/panel_no_work.html", context)
        reason = result.reason
    session = services.panel_session_complete(session=session)
    if panel.redirect_on_completion and panel.completion_url:
        return redirect(panel.completion_url)
    context = {"panel": panel, "campaign": panel.publication.campaign, "session": session, "reason": reason}
    return render(request, "channels/panel_done.html", context)


# --- Researchers ---------------------------------------------------------------------------------------


@login_required
def campaign_channels(request, slug):
    campaign = core_selectors.campaign_for_user(user=request.user, slug=slug)
    context = {
        "campaign": campaign,
        "publications": selectors.publications_of(campaign=campaign),
        "labels_needed": services.labels_still_needed(campaign=campaign),
    }
    return render(request, "channels/campaign_channels.html", context)


@login_required
def mturk_publish(request, slug):
    """The MTurk form: "Preview cost" shows rewards plus commission; "Publish" needs the total the
    researcher saw (a changed form shows the new preview instead of publishing)."""
    campaign = core_selectors.campaign_for_user(user=request.user, slug=slug)
    if campaign.status == Campaign.Status.CLOSED:  # nothing to publish: the channels page says why
        return redirect("channels:campaign_channels", slug=slug)
    form = MTurkPublicationForm(request.POST or None)
    preview = None
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                clean = services.mturk_options_clean(campaign=campaign, options=form.options())
            except services.PublicationRefused as exc:
                form.add_error(None, exc.message)
            else:
                status = 200
                preview = services.mturk_cost_preview(
                    reward=clean["reward"], n_assignments=clean["n_assignments"],
                    assignments_per_hit=clean["assignments_per_hit"],
                )
                if "publish" in request.POST and request.POST.get("confirm_total") == str(preview.total):
                    try:
                        publication = services.publication_create_mturk(campaign=campaign, user=request.user, options=clean)
                    except services.PublicationRefused as exc:
                        form.add_error(None, exc.message)
                        status = 400
                    except ImproperlyConfigured as exc:
                        form.add_error(None, f"MTurk is not configured: {exc}")
                        status = 400
                    else:
                        messages.success(request, "Publishing on MTurk: the HITs are being created.")
                        return redirect("channels:publication_detail", pk=publication.pk)
    context = {
        "campaign": campaign, "form": form, "preview": preview,
        "labels_needed": services.labels_still_needed(campaign=campaign),
    }
    return render(request, "channels/mturk_publish.html", context, status=status)


@login_required
def panel_publish(request, slug):
    campaign = core_selectors.campaign_for_user(user=request.user, slug=slug)
    if campaign.status == Campaign.Status.CLOSED:  # nothing to publish: the channels page says why
        return redirect("channels:campaign_channels", slug=slug)
    form = PanelPublicationForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                publication = services.publication_create_panel(campaign=campaign, user=request.user, **form.cleaned_data)
            except services.PanelRefused as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, "The panel link is ready.")
                return redirect("channels:publication_detail", pk=publication.pk)
    return render(request, "channels/panel_publish.html", {"campaign": campaign, "form": form}, status=status)


def _publication_page(request, publication: Publication, *, bonus_form: MTurkBonusForm | None = None, status: int = 200):
    context = {"publication": publication, "campaign": publication.campaign}
    if publication.kind == Publication.Kind.MTURK:
        context["progress"] = selectors.mturk_progress(publication=publication)
        context["hits"] = selectors.mturk_hits_of(publication=publication)[:200]
        context["preview"] = services.mturk_cost_preview(
            reward=publication.options["reward"], n_assignments=publication.planned_assignments,
            assignments_per_hit=publication.options["assignments_per_hit"],
        )
        context["bonuses"] = selectors.mturk_bonuses_of(publication=publication)[:200]
        if selectors.may_spend(user=request.user, publication=publication):
            context["bonus_form"] = bonus_form or MTurkBonusForm()
            context["bonus_workers"] = selectors.mturk_bonus_workers(publication=publication)
    else:
        panel = publication.panel
        # Prolific fills {{%PROLIFIC_PID%}}-style placeholders in a study URL; other panels have their own.
        placeholder = "{{%%%s%%}}" if publication.channel == "prolific" else "<%s>"
        params = {panel.participant_param: placeholder % panel.participant_param}
        if panel.study_param:
            params[panel.study_param] = placeholder % panel.study_param
        if panel.session_param:
            params[panel.session_param] = placeholder % panel.session_param
        base = request.build_absolute_uri(reverse("channels:panel_entry", args=[panel.slug]))
        context["panel"] = panel
        context["panel_url"] = base + "?" + "&".join(f"{k}={v}" for k, v in params.items())
        context["progress"] = selectors.panel_progress(publication=publication)
    return render(request, "channels/publication_detail.html", context, status=status)


@login_required
def publication_detail(request, pk):
    publication = selectors.publication_for_user(user=request.user, pk=pk)
    return _publication_page(request, publication)


@login_required
@require_POST
def publication_bonus_grant(request, pk):
    """The publication page's "Bonus a worker" form. Only writes the bonus: reconciliation pays it. The
    owner and staff only (it spends the owner's money). A repeated grant (a double click) is refused by
    the service, which keeps one row and so one payment token."""
    publication = selectors.publication_for_owner(user=request.user, pk=pk)
    if publication.kind != Publication.Kind.MTURK:
        raise Http404("Only MTurk publications pay bonuses.")
    form = MTurkBonusForm(request.POST)
    if form.is_valid():
        worker_ref = form.cleaned_data["worker"]
        assignment = selectors.mturk_bonus_assignment(publication=publication, worker_ref=worker_ref)
        if assignment is None:
            form.add_error("worker", f"{worker_ref} has no submitted or approved assignment in this publication.")
        else:
            try:
                bonus = services.mturk_bonus_grant(
                    assignment=assignment, amount=form.cleaned_data["amount"], reason=form.cleaned_data["reason"],
                    user=request.user,
                )
            except services.BonusAlreadyGranted as exc:
                # Most often the second request of a double click: the first one's bonus is on the page.
                messages.info(request, exc.message)
                return redirect(reverse("channels:publication_detail", args=[publication.pk]) + "#bonuses")
            except services.PublicationRefused as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(
                    request,
                    f"Bonus of ${bonus.amount} granted to {assignment.worker.external_id}: "
                    "it is paid on MTurk at the next reconciliation.",
                )
                return redirect(reverse("channels:publication_detail", args=[publication.pk]) + "#bonuses")
    return _publication_page(request, publication, bonus_form=form, status=400)


@login_required
@require_POST
def publication_withdraw(request, pk):
    publication = selectors.publication_for_user(user=request.user, pk=pk)
    services.publication_withdraw(publication=publication)
    messages.info(request, "Withdrawn: no new workers will arrive through this publication.")
    return redirect("channels:publication_detail", pk=pk)
