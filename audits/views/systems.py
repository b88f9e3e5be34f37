"""The systems page (``/audits/<slug>/systems/``): upload a system's predictions, replace or delete
one, and the leaderboard (``audits.selectors.systems.leaderboard``) with its intervals, noise
partitions, groups, per-rater summary and pair verdicts. For whoever manages the campaign
(``campaign_for_user``: 404 for anyone else). Views parse, call one service or selector, render."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotation.permissions import campaign_for_request
from audits.selectors import systems as selectors
from audits.services import systems as services


def _interval(cell: dict | None) -> dict | None:
    """One score with its 95 % interval (Wilson for accuracy, Fisher z for Spearman), for the template."""
    if not cell:
        return None
    ci = cell.get("ci_wilson", cell.get("ci"))
    return {"n": cell["n"], "score": cell["score"], "lo": ci[0] if ci else None, "hi": ci[1] if ci else None}


def _tables(board: dict) -> dict:
    """The leaderboard's dict as rows the template can walk (templates cannot index by a variable key)."""
    systems, ranking = board["systems"], board["ranking"]
    refs = [board["reference"], "gold"]
    refs = [r for r in refs if any(r in systems[n]["overall"] for n in ranking)]
    truths = sorted({m for n in ranking for m in systems[n]["truths"]})
    overall = [
        {
            "rank": systems[n]["rank"],
            "name": n,
            "n_predictions": systems[n]["n_predictions"],
            "scores": [_interval(systems[n]["overall"].get(r)) for r in refs],
            "truths": [_interval(systems[n]["truths"].get(m)) for m in truths],
            "per_rater": systems[n]["per_rater"],
        }
        for n in ranking
    ]
    partitions = [
        {
            "name": n,
            "rows": [
                {"d": d, "n_prompts": row["n_prompts"], "scores": [_interval(row.get(r)) for r in refs]}
                for d, row in systems[n]["partitions"].items()
            ],
            "tests": systems[n]["tests"],
        }
        for n in ranking
    ]
    groups = [
        {"name": n, "rows": [{"group": g, "scores": [_interval(c.get(r)) for r in refs]} for g, c in gs.items()]}
        for n in ranking
        if (gs := systems[n]["groups"])
    ]
    return {"refs": refs, "truths": truths, "overall": overall, "partitions": partitions, "groups": groups}


def _answer_rows(board: dict) -> list[dict]:
    """A free-text leaderboard's systems as rows (the metric names hold "@", which templates cannot look up)."""
    rows = []
    for name in board["ranking"]:
        s = board["systems"][name]
        m = s["metrics"]
        rows.append(
            {
                "name": name,
                "rank": s["rank"],
                "n_answered": s["n_answered"],
                "answers": [m[f"max_answers@{k}"] for k in (1, 3, 5)],
                "score": s["score"],
                "ci": s["ci"],
                "incorrect": [m[f"max_incorrect@{k}"] for k in (1, 3, 5)],
                # Max Answers@None = Max Incorrect@None (no cut-off: the whole list): one column for both
                "uncut": m["max_answers@None"],
                "set_intersection": m["set_intersection"],
                "kl": m.get("probeval_kl"),
                "has_samples": s["has_samples"],
            }
        )
    return rows


def _page(request, campaign, *, errors=None, status=200):
    board = selectors.leaderboard(campaign=campaign)
    context = {
        "campaign": campaign,
        "board": board,
        "tables": _tables(board) if board["ranking"] and board.get("kind") != "answers" else None,
        "free_text": campaign.schema == campaign.Schema.FREE_TEXT,
        "answer_rows": _answer_rows(board) if board.get("kind") == "answers" else None,
        "errors": errors or [],
    }
    return render(request, "audits/systems.html", context, status=status)


@login_required
def systems(request, slug):
    """GET: the page. POST: upload (or, with ``replace``, replace) a system's predictions."""
    campaign = campaign_for_request(request, slug)
    if request.method != "POST":
        return _page(request, campaign)
    upload = request.FILES.get("file")
    name = request.POST.get("name", "")
    if upload is None:
        return _page(request, campaign, errors=["Choose a CSV or JSONL file of predictions."], status=400)
    samples = request.FILES.get("samples")  # free text: sampled answers, optional
    try:
        system = services.system_upload(
            campaign=campaign,
            name=name,
            data=upload.read(),
            filename=upload.name,
            by=request.user,
            replace=request.POST.get("replace") == "1",
            samples=samples.read() if samples is not None else None,
            samples_filename=samples.name if samples is not None else "",
        )
    except ValidationError as exc:
        return _page(request, campaign, errors=[m for ms in exc.message_dict.values() for m in ms], status=400)
    messages.success(request, f"System “{system.name}”: {system.n_predictions} predictions stored.")
    return redirect("audit_systems", slug=campaign.slug)


@login_required
@require_POST
def system_delete(request, slug, name):
    campaign = campaign_for_request(request, slug)
    if services.system_delete(campaign=campaign, name=name):
        messages.success(request, f"System “{name}” deleted.")
    else:
        messages.info(request, f"There is no system “{name}”.")
    return redirect("audit_systems", slug=campaign.slug)
