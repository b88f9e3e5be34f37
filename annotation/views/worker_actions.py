"""The campaign's workers page: every worker with their standing (labels, excluded, blocked, flagged) and
a form to act on each, and the log of every action, manual or by a quality rule, with who, when, why
and the numbers, and an Undo button where an action can be undone.

Like every page about a campaign it goes through ``campaign_for_request`` (404 for anyone who neither owns
nor shares it). The writes are ``annotation.services.quality``'s; a refused action shows the page again
with the field named (status 400) and changes nothing. Re-collecting voids labels for good, so it asks
first, on a page of its own.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import selectors
from annotation.forms import WorkerActionForm
from annotation.models import Campaign, WorkerAction
from annotation.permissions import campaign_for_request
from annotation.services import quality

WORKERS_PER_PAGE = 100
ACTIONS_PER_PAGE = 50


def numbers_shown(numbers: dict) -> list[str]:
    """An action's numbers as short "name: value" texts: floats to 3 significant digits, intervals as
    [low, high], flags by their words; empty values and the worker's id (the entry names them) left out."""

    def text(value) -> str:
        if isinstance(value, float):
            return f"{value:.3g}"
        if isinstance(value, dict):  # a flag, as audits.selectors.worker_numbers words it
            return str(value.get("text", value))
        if isinstance(value, list):
            if all(isinstance(v, dict) for v in value):
                return "; ".join(text(v) for v in value)
            return "[" + ", ".join(text(v) for v in value) + "]"
        return str(value)

    return [
        f"{name.replace('_', ' ')}: {text(value)}"
        for name, value in (numbers or {}).items()
        if value not in (None, "", [], {}) and name != "worker"
    ]


def _page(request, campaign: Campaign, *, form: WorkerActionForm | None = None, status: int = 200):
    workers = Paginator(selectors.campaign_workers(campaign=campaign), WORKERS_PER_PAGE)
    log = Paginator(selectors.worker_actions_of(campaign=campaign), ACTIONS_PER_PAGE).get_page(request.GET.get("log"))
    for action in log:
        action.numbers_shown = numbers_shown(action.numbers)
        action.undoable = selectors.action_undoable(action)
    context = {
        "campaign": campaign,
        "workers": workers.get_page(request.GET.get("page")),
        "log": log,
        "form": form,
        "recollect_undo_note": quality.RECOLLECT_UNDO_NOTE,
    }
    return render(request, "annotation/worker_actions.html", context, status=status)


@login_required
@require_GET
def worker_actions(request, slug):
    return _page(request, campaign_for_request(request, slug))


@login_required
@require_POST
def worker_act(request, slug):
    campaign = campaign_for_request(request, slug)
    form = WorkerActionForm(request.POST)
    if not form.is_valid():
        return _page(request, campaign, form=form, status=400)
    data = form.cleaned_data
    worker = selectors.campaign_worker(campaign=campaign, public_id=data["worker"])
    if worker is None:
        form.add_error("worker", f"{data['worker']} is not a worker of this campaign.")
        return _page(request, campaign, form=form, status=400)
    if data["action"] == WorkerAction.Kind.RECOLLECT and not data["confirm"]:
        context = {
            "campaign": campaign,
            "worker": worker,
            "reason": data["reason"],
            "labels": selectors.worker_label_count(campaign=campaign, worker=worker),
        }
        return render(request, "annotation/worker_recollect_confirm.html", context)
    try:
        action = quality.worker_act(
            kind=data["action"], campaign=campaign, worker=worker, by=request.user, reason=data["reason"]
        )
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
        return _page(request, campaign, form=form, status=400)
    except quality.WorkerActionRefused as exc:
        messages.warning(request, exc.message)
    else:
        if action.logged:
            messages.success(request, f"{worker.public_id}: {action.get_kind_display().lower()}.")
        else:
            messages.info(
                request,
                f"{worker.public_id} was already so: {action.get_kind_display().lower()} "
                f"on {action.created_at:%Y-%m-%d %H:%M}. Nothing changed.",
            )
    return redirect(reverse("worker_actions", args=[slug]) + "#log")


@login_required
@require_POST
def worker_action_undo(request, slug, action_id):
    campaign = campaign_for_request(request, slug)
    action = get_object_or_404(WorkerAction, campaign=campaign, pk=action_id)
    try:
        action = quality.action_undo(action=action, by=request.user)
    except quality.WorkerActionRefused as exc:
        messages.warning(request, exc.message)
    else:
        done = f"{action.worker.public_id}: “{action.get_kind_display()}” undone."
        if action.kind == WorkerAction.Kind.RECOLLECT:
            done += " " + quality.RECOLLECT_UNDO_NOTE
        messages.success(request, done if action.logged else "That action was undone already. Nothing changed.")
    return redirect(reverse("worker_actions", args=[slug]) + "#log")
