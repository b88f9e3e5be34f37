"""The campaign's workers page: every worker with their standing (labels, excluded, blocked, flagged) beside
the live audit's numbers and flags for them, filtered by flag and status and sorted by a column, a form
to act on each and one to act on several at once; and the log of every action, manual or by a quality
rule, with who, when, why and the numbers, and an Undo button where an action can be undone. A worker's
own page: their numbers and flags, standing, actions and labels in the campaign.

Like every page about a campaign it goes through ``campaign_for_request`` (404 for anyone who neither owns
nor shares it; viewers read, the pages offer them no form). The writes are ``annotation.services.quality``'s;
a refused action shows the page again with the field named (status 400) and changes nothing (an action
on several workers: none of them). Re-collecting voids labels for good, so it asks first, on a page of
its own.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import selectors
from annotation.forms import WorkerActionForm, WorkerFilterForm, WorkersActionForm
from annotation.models import Campaign, WorkerAction
from annotation.permissions import campaign_for_request
from annotation.selectors import worker_audit
from annotation.services import quality

WORKERS_PER_PAGE = 100
ACTIONS_PER_PAGE = 50
LABELS_PER_PAGE = 50
#: The workers table's sortable columns, in the table's order: (sort key, heading).
COLUMNS = [
    ("worker", "Worker"),
    ("labels", "Labels"),
    ("top_share", "Same answer"),
    ("control_accuracy", "Controls"),
    ("speed_ratio", "Speed"),
    ("bias", "Bias"),
    ("accuracy", "Agrees"),
    ("flags", "Flags"),
]


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


def _columns(request, sort: str) -> list[dict]:
    """The table's headings, each a link that sorts by it (descending first; again: ascending), keeping
    the filters."""
    query = request.GET.copy()
    query.pop("page", None)
    columns = []
    for key, heading in COLUMNS:
        current = sort.removeprefix("-") == key
        query["sort"] = key if sort == f"-{key}" else f"-{key}"
        order = ("descending" if sort.startswith("-") else "ascending") if current else None
        columns.append({"key": key, "heading": heading, "query": query.urlencode(), "order": order})
    return columns


def _page(
    request,
    campaign: Campaign,
    *,
    form: WorkerActionForm | None = None,
    bulk: WorkersActionForm | None = None,
    status: int = 200,
):
    given = request.GET.copy()
    given.setdefault("sort", worker_audit.DEFAULT_SORT)  # so that the sort menu shows the order the rows are in
    filters = WorkerFilterForm(given, flags=worker_audit.FLAG_KINDS, statuses=worker_audit.STATUSES, columns=COLUMNS)
    chosen = filters.cleaned_data if filters.is_valid() else {}
    sort = chosen.get("sort") or worker_audit.DEFAULT_SORT
    audited = worker_audit.workers_audited(
        campaign=campaign, flag=chosen.get("flag", ""), status=chosen.get("status", ""), sort=sort
    )
    workers = Paginator(audited.rows, WORKERS_PER_PAGE).get_page(request.GET.get("page"))
    for participation in workers:
        participation.shown = audit_shown(participation.audit)
    log = Paginator(selectors.worker_actions_of(campaign=campaign), ACTIONS_PER_PAGE).get_page(request.GET.get("log"))
    for action in log:
        action.numbers_shown = numbers_shown(action.numbers)
        action.undoable = selectors.action_undoable(action)
    pages = request.GET.copy()
    pages.pop("page", None)
    pages.pop("log", None)
    context = {
        "campaign": campaign,
        "workers": workers,
        "computed_at": audited.computed_at,
        "filters": filters,
        "filtered": bool(chosen.get("flag") or chosen.get("status")),
        "columns": _columns(request, sort),
        "query": request.GET.urlencode(),
        "pages_query": pages.urlencode(),
        "log": log,
        "form": form,
        "bulk": bulk,
        "bulk_actions": WorkersActionForm.ACTIONS,
        "recollect_undo_note": quality.RECOLLECT_UNDO_NOTE,
    }
    return render(request, "annotation/worker_actions.html", context, status=status)


def _worker_page(request, campaign: Campaign, worker_id: int, *, form: WorkerActionForm | None = None, status=200):
    found = worker_audit.worker_audited(campaign=campaign, worker_id=worker_id)
    if found is None:
        raise Http404("No such worker in this campaign.")
    participation, computed_at = found
    participation.shown = audit_shown(participation.audit)
    labels = Paginator(
        selectors.worker_labels(campaign=campaign, worker=participation.worker), LABELS_PER_PAGE
    ).get_page(request.GET.get("page"))
    for label in labels:
        label.correct = selectors.label_correct(campaign, label)
        label.value_shown = value_shown(campaign, label.value)
    actions = list(selectors.worker_actions_of(campaign=campaign).filter(worker_id=worker_id))
    for action in actions:
        action.numbers_shown = numbers_shown(action.numbers)
        action.undoable = selectors.action_undoable(action)
    context = {
        "campaign": campaign,
        "participation": participation,
        "worker": participation.worker,
        "computed_at": computed_at,
        "labels": labels,
        "actions": actions,
        "form": form,
        "recollect_undo_note": quality.RECOLLECT_UNDO_NOTE,
    }
    return render(request, "annotation/campaign_worker.html", context, status=status)


def _percent(share: float) -> str:
    return f"{share * 100:.0f} %"


def _interval(pair) -> str:
    return f"[{pair[0]:.2f}, {pair[1]:.2f}]" if pair else "no interval"


def audit_shown(audit: dict) -> dict:
    """A worker's audit row (``audits.selectors.tables.worker_table``) as the workers pages show it:
    ``cells``, one short text per column of the table ("–" where the audit has no number), and
    ``details``, the same numbers in full with their intervals and counts."""
    get = audit.get
    cells, details = {}, []
    if get("top_share") is not None:
        cells["top_share"] = f"{_percent(get('top_share'))} ({get('top_value'):g})"
        details.append(f"Most frequent answer (scaled): {get('top_value'):g}, {_percent(get('top_share'))} of theirs.")
    if get("control_accuracy") is not None:
        cells["control_accuracy"] = f"{get('n_correct')}/{get('n_controls')}"
        details.append(
            f"Control prompts: {get('n_correct')} right of {get('n_controls')}, {_percent(get('control_accuracy'))}; "
            f"95 % interval {_interval(get('control_ci'))}."
        )
    if get("speed_ratio") is not None:
        cells["speed_ratio"] = f"{get('speed_ratio'):.2g}×"
        details.append(
            f"Median {get('median_seconds'):.3g} s a label, {get('speed_ratio'):.2g} times the campaign's median."
        )
    if get("bias") is not None:
        cells["bias"] = f"{get('bias'):+.2f}"
        details.append(
            f"Bias {get('bias'):+.3f} against the others' mean on {get('n_compared')} prompts; "
            f"95 % interval {_interval(get('bias_ci'))}."
        )
    if get("accuracy") is not None:
        cells["accuracy"] = _percent(get("accuracy"))
        details.append(
            f"Agrees with the others on {_percent(get('accuracy'))} of {get('n_scored')} prompts; "
            f"95 % interval {_interval(get('ci_wilson'))}."
        )
    if get("accuracy_gold") is not None:
        details.append(f"Agrees with gold on {_percent(get('accuracy_gold'))} of {get('n_scored_gold')} prompts.")
    if get("ds_skill") is not None:
        details.append(f"Dawid–Skene skill: {get('ds_skill'):.2f}.")
    return {"cells": {key: cells.get(key, "–") for key, _ in COLUMNS}, "details": details}


def value_shown(campaign: Campaign, value) -> str:
    """A label's value as the worker chose it: a binary answer by its button's words, options' ratings
    joined, a rating or an answer as given."""
    if isinstance(value, list):
        return ", ".join(value_shown(campaign, one) for one in value)
    if campaign.schema == Campaign.Schema.BINARY:
        words = {choice.value: choice.text for choice in campaign.label_schema.choices}
        return f"{words.get(value, value)} ({value})"
    return "" if value is None else str(value)


@login_required
@require_GET
def worker_actions(request, slug):
    return _page(request, campaign_for_request(request, slug))


@login_required
@require_GET
def campaign_worker(request, slug, worker_id):
    return _worker_page(request, campaign_for_request(request, slug), worker_id)


def _back(slug: str, form_data: dict, worker) -> str:
    if form_data.get("back") == "worker":
        return reverse("campaign_worker", args=[slug, worker.pk]) + "#history"
    return reverse("worker_actions", args=[slug]) + "#log"


@login_required
@require_POST
def worker_act(request, slug):
    campaign = campaign_for_request(request, slug)
    form = WorkerActionForm(request.POST)
    valid = form.is_valid()
    data = form.cleaned_data
    worker = selectors.campaign_worker(campaign=campaign, public_id=data["worker"]) if "worker" in data else None

    def refused():  # the page the form was on, again, with the fields named
        if worker is not None and data.get("back") == "worker":
            return _worker_page(request, campaign, worker.pk, form=form, status=400)
        return _page(request, campaign, form=form, status=400)

    if not valid:
        return refused()
    if worker is None:
        form.add_error("worker", f"{data['worker']} is not a worker of this campaign.")
        return refused()

    if data["action"] == WorkerAction.Kind.RECOLLECT and not data["confirm"]:
        context = {
            "campaign": campaign,
            "worker": worker,
            "reason": data["reason"],
            "back": data["back"],
            "labels": selectors.worker_label_count(campaign_id=campaign.pk, worker_id=worker.pk),
        }
        return render(request, "annotation/worker_recollect_confirm.html", context)
    try:
        action = quality.worker_act(
            kind=data["action"], campaign=campaign, worker=worker, by=request.user, reason=data["reason"]
        )
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
        return refused()
    except quality.WorkerActionRefused as exc:
        messages.warning(request, exc.message)
    else:
        messages.add_message(request, *_done(data["action"], worker, action))
    return redirect(_back(slug, data, worker))


def _done(kind: str, worker, action: WorkerAction) -> tuple[int, str]:
    """The message for an action done on a worker: what it did, or that they already were so."""
    what = "unflagged" if kind == quality.UNFLAG else action.get_kind_display().lower()
    if action.logged:
        return messages.SUCCESS, f"{worker.public_id}: {what}."
    when = f"{action.undone_at if kind == quality.UNFLAG else action.created_at:%Y-%m-%d %H:%M}"
    return messages.INFO, f"{worker.public_id} was already so: {what} on {when}. Nothing changed."


@login_required
@require_POST
def workers_act(request, slug):
    """One action on the workers whose boxes were ticked, all or none (``quality.workers_act``)."""
    campaign = campaign_for_request(request, slug)
    bulk = WorkersActionForm(request.POST)
    if not bulk.is_valid():
        return _page(request, campaign, bulk=bulk, status=400)
    data = bulk.cleaned_data
    workers = {
        public_id: selectors.campaign_worker(campaign=campaign, public_id=public_id) for public_id in data["workers"]
    }
    if unknown := [public_id for public_id, worker in workers.items() if worker is None]:
        bulk.add_error("workers", f"{', '.join(unknown)}: not a worker of this campaign. Nobody was acted on.")
        return _page(request, campaign, bulk=bulk, status=400)
    try:
        actions = quality.workers_act(
            kind=data["action"],
            campaign=campaign,
            workers=list(workers.values()),
            by=request.user,
            reason=data["reason"],
        )
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            bulk.add_error(field if field in bulk.fields else None, errors)
        return _page(request, campaign, bulk=bulk, status=400)
    except quality.WorkerActionRefused as exc:
        bulk.add_error(None, f"{exc.message} Nobody was acted on.")
        return _page(request, campaign, bulk=bulk, status=400)
    label = dict(WorkersActionForm.ACTIONS)[data["action"]].lower()
    done = [action.worker.public_id for action in actions if action.logged]
    already = [action.worker.public_id for action in actions if not action.logged]
    if done:
        messages.success(request, f"{label}: {', '.join(done)}.")
    if already:
        messages.info(request, f"Already so, nothing changed: {', '.join(already)}.")
    return redirect(
        reverse("worker_actions", args=[slug]) + (f"?{data['query']}" if data["query"] else "") + "#workers"
    )


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
