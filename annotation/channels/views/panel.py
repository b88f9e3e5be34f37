"""The pages of a link-based panel's participants (Prolific and similar): the study link, the next
prompt, the task page with its skip and heartbeat, and the end (completion or no-work code). Views
parse, call one service or selector, render; the participant's panel session is kept in the Django
session."""

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import selectors as core_selectors
from annotation import services as core
from annotation.channels import selectors, services
from annotation.channels.errors import PanelRefused
from annotation.channels.models import PanelConfig, PanelSession
from annotation.views.task import SKIPPED, heartbeat_json, label_post, lease_give_back, lease_is_live, render_task


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
            panel=panel,
            participant_id=participant,
            study_id=request.GET.get(panel.study_param, "").strip() if panel.study_param else "",
            session_id=request.GET.get(panel.session_param, "").strip() if panel.session_param else "",
        )
    except PanelRefused as exc:
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
            request,
            panel,
            f"Open this study from {panel.publication.channel}: your participant link starts it.",
            status=403,
        )
    return session, None


@require_GET
def panel_next(request, slug):
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session, error = _require_session(request, panel)
    if error:
        return error
    return _to_next_task(panel, session)


def _to_next_task(panel: PanelConfig, session: PanelSession, *, after_label: bool = False):
    """The participant's next prompt, claimed, and a redirect to its page; the end (panel_done, which says
    why) when their quota is reached or nothing is left. ``next`` and the label's POST (``after_label``)
    both go on here, so a label leads straight to the next prompt's page (a request fewer per label); to
    ``next`` when that claim could not answer (``lease_acquire_after_label``)."""
    if session.completed_at or _quota_reached(panel, session):
        return redirect("channels:panel_done", slug=panel.slug)
    campaign = panel.publication.campaign
    if after_label:
        result = core.lease_acquire_after_label(campaign_slug=campaign.slug, worker=session.worker)
        if result is None:
            return redirect("channels:panel_next", slug=panel.slug)
    else:
        result = core.lease_acquire(campaign=campaign, worker=session.worker)
    if isinstance(result, core.NothingLeft):
        return redirect("channels:panel_done", slug=panel.slug)
    return redirect("channels:panel_task", slug=panel.slug, lease_id=result.pk)


def panel_task(request, slug, lease_id):
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session, error = _require_session(request, panel)
    if error:
        return error
    campaign = panel.publication.campaign
    error = None
    if request.method == "POST":
        if _quota_reached(panel, session):
            return redirect("channels:panel_done", slug=slug)
        post = label_post(request, lease_id=lease_id, worker=session.worker, campaign_slug=campaign.slug)
        if post.error is None:
            if post.ack is None:
                messages.warning(request, post.refusal.message)
                return redirect("channels:panel_next", slug=slug)
            if not post.ack.duplicate:
                services.panel_label_counted(session=session)
            return _to_next_task(panel, session, after_label=True)
        error = post.error
    lease = core_selectors.lease_for_worker(lease_id=lease_id, worker=session.worker, campaign=campaign)
    if error is None and not lease_is_live(lease):
        return redirect("channels:panel_next", slug=slug)
    return render_task(
        request,
        "channels/panel_task.html",
        campaign=campaign,
        lease=lease,
        error=error,
        form_action=request.path,
        heartbeat_url=reverse("channels:panel_heartbeat", args=[slug, lease.pk]),
        skip_url=reverse("channels:panel_skip", args=[slug, lease.pk]),
        quota_left=None if panel.quota_per_session is None else panel.quota_per_session - session.n_labels,
        panel=panel,
        session=session,
    )


@require_POST
def panel_skip(request, slug, lease_id):
    """The participant skips their prompt: it goes to other workers, never back to them; here is the next."""
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session, error = _require_session(request, panel)
    if error:
        return error
    lease_give_back(
        request,
        lease_id=lease_id,
        worker=session.worker,
        campaign_slug=panel.publication.campaign.slug,
        message=SKIPPED,
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
    cap, the campaign paused or closed, or they are blocked from it); with work left, back to work. The
    completion code (or URL) pays for work done, so only a participant who labeled something in this
    session gets it; one who found no work at all, or whom the researcher blocked, is asked to return
    the study, the panels' convention (with the panel's no-work code or URL if the researcher gave
    one), and their session stays open in case work comes back."""
    panel = selectors.panel_for_workers(slug=slug, user=request.user)
    session, error = _require_session(request, panel)
    if error:
        return error
    reason = None
    if not (session.completed_at or _quota_reached(panel, session)):
        result = core.lease_acquire(campaign=panel.publication.campaign, worker=session.worker)
        if not isinstance(result, core.NothingLeft):
            return redirect("channels:panel_task", slug=slug, lease_id=result.pk)
        if session.n_labels == 0 or result.code == core_selectors.BLOCKED:
            if panel.no_work_url:
                return redirect(panel.no_work_url)
            context = {
                "panel": panel,
                "campaign": panel.publication.campaign,
                "reason": result.reason,
                "session": session,
            }
            return render(request, "channels/panel_no_work.html", context)
        reason = result.reason
    session = services.panel_session_complete(session=session)
    if panel.redirect_on_completion and panel.completion_url:
        return redirect(panel.completion_url)
    context = {"panel": panel, "campaign": panel.publication.campaign, "session": session, "reason": reason}
    return render(request, "channels/panel_done.html", context)
