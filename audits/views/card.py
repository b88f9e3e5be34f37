"""The instrument card: a page, its Markdown / JSON / self-contained HTML exports, the bootstrap
button and the small JSON the page polls for the bootstrap's progress.

Researchers see their own and shared campaigns, staff see all (``campaign_for_user``: 404 for
anyone else). The page and every export render the one dict of ``audits.selectors.card``.
"""

import json

from csp.decorators import csp
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.staticfiles import finders
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import floatformat
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from annotation.permissions import campaign_for_request
from audits import services
from audits.charts import box_plot_svg, scatter_svg
from audits.selectors.card import bootstrap_summary, comparable_campaigns, instrument_card

POLL_MS = 1000
EXPORT_CSS = "css/card.css"
# The export is a document on its own: inline styles and data: images, no scripts, no requests.
EXPORT_POLICY = {
    "default-src": ["'none'"],
    "style-src": ["'unsafe-inline'"],
    "img-src": ["data:"],
    "base-uri": ["'none'"],
    "form-action": ["'none'"],
    "frame-ancestors": ["'none'"],
}
MAX_BOXES = 12  # a box per labels-per-prompt count, when there are at most this many counts


def _interval(bounds, digits: int = 3) -> str:
    if not bounds:
        return "—"
    return f"{floatformat(bounds[0], digits)} – {floatformat(bounds[1], digits)}"


def intervals_display(summary: dict) -> dict:
    """The newest finished bootstrap's intervals as the card prints them: ``alpha`` and ``noise[key]``
    ("lo – hi", or "—"), and a sentence on how they were computed. The page and its poll both use
    it, so the numbers a poll fills in are the ones a reload prints."""
    shown = summary.get("shown")
    if not shown:
        return {"alpha": "—", "noise": {}, "about": "No bootstrap intervals yet (“Compute intervals” runs one)."}
    noise, alpha = shown["data"]["noise"], shown["data"]["alpha"]
    keys = [k for k in noise if isinstance(noise[k], list)]
    return {
        "alpha": _interval(alpha.get("interval")),
        "noise": {k: _interval(noise[k], 4) for k in keys},
        "about": (
            f"{round(noise['level'] * 100)} % percentile intervals from {shown['resamples']:,} resamples "
            f"(seed {shown['seed']}) on the first {shown['watermark']:,} label rows, computed {shown['computed_at']}; "
            f"{noise['method']}."
        ),
    }


def card_charts(card: dict) -> dict:
    """The card's inline SVG charts: dispersion against mean (the precision "crescent") and the
    dispersion per labels-per-prompt count."""
    if card.get("unavailable"):
        return {}
    precision = card["precision"]
    points = precision["points"]
    label = "SD of the prompt's labels" if precision["kind"] == "sd" else "1 − modal share"
    mean_label = "prompt's mean rating" if precision["kind"] == "sd" else "prompt's mean label (share of 1s)"
    charts = {
        "scatter": scatter_svg(
            list(zip(points["mean"], points["dispersion"])),
            x_label=mean_label,
            y_label=label,
            title="Dispersion against mean, per prompt",
        )
    }
    counts = sorted(set(points["n"]))
    if 1 < len(counts) <= MAX_BOXES:
        groups = [
            (f"{n} labels", [d for d, c in zip(points["dispersion"], points["n"]) if c == n and d is not None])
            for n in counts
        ]
        charts["boxes"] = box_plot_svg(groups, y_label=label, title="Dispersion by labels per prompt")
    return charts


def _card(request, slug):
    """The campaign, its card (with reproducibility against ``?compare=<slug>``) and the picker's choices."""
    campaign = campaign_for_request(request, slug)
    choices = comparable_campaigns(campaign=campaign, user=request.user)
    wanted = request.GET.get("compare", "")
    compare = None
    if wanted:
        compare = next((c for c in choices if c.slug == wanted), None)
        if compare is None:
            raise Http404("No campaign of yours with that name shares prompts with this one.")
    return campaign, instrument_card(campaign=campaign, compare=compare), choices


def _system_rows(board: dict | None) -> list[dict]:
    """The leaderboard's systems, best first: rank, name, the score that ranks and its interval."""
    if not board or board.get("reason"):
        return []
    rows = []
    for name in board["ranking"]:
        entry = board["systems"][name]["overall"][board["reference"]]
        bounds = entry.get("ci_wilson") or entry.get("ci")
        rows.append(
            {
                "rank": board["systems"][name]["rank"],
                "name": name,
                "score": entry["score"],
                "interval": _interval(bounds),
            }
        )
    return rows


def _context(campaign, card) -> dict:
    """What the page and both rendered exports show: the card, its charts and its printed intervals."""
    intervals = intervals_display(card["bootstrap"])
    noise = card.get("noise") or {"numbers": []}
    unit = card.get("noise_unit_scale")  # the second view of a rating scale with a binarization map
    return {
        "campaign": campaign,
        "card": card,
        "charts": card_charts(card),
        "intervals": intervals,
        "noise_rows": [{**n, "interval": intervals["noise"].get(n["key"], "—")} for n in noise["numbers"]],
        "system_rows": _system_rows(card.get("systems")),
        "unit_rows": [{**n, "value": unit.get(n["key"])} for n in noise["numbers"]] if unit else [],
    }


@login_required
def card(request, slug):
    campaign, data, choices = _card(request, slug)
    context = {
        **_context(campaign, data),
        "choices": choices,
        "poll_url": reverse("audit_card_bootstrap_data", args=[campaign.slug]),
        "poll_ms": POLL_MS,
    }
    return render(request, "audits/card.html", context)


EXPORT_FORMATS = {"md": "text/markdown; charset=utf-8", "json": "application/json", "html": "text/html; charset=utf-8"}


def card_document(campaign, data: dict, fmt: str) -> HttpResponse:
    """The card as a download in ``fmt`` (one of ``EXPORT_FORMATS``), for the page's export links and
    the API's (``audits.api.card``), so both hand out the same file."""
    if fmt == "json":
        body = json.dumps(data, indent=2, allow_nan=False)
    elif fmt == "md":
        body = render_to_string("audits/card.md", _context(campaign, data))
    elif fmt == "html":
        with open(finders.find(EXPORT_CSS), encoding="utf-8") as fh:
            css = fh.read()
        body = render_to_string("audits/card_export.html", {**_context(campaign, data), "css": css, "export": True})
    else:
        raise Http404("Unknown format: the card exports as .md, .json or .html.")
    response = HttpResponse(body, content_type=EXPORT_FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{campaign.slug}-instrument-card.{fmt}"'
    return response


@login_required
@csp(EXPORT_POLICY)
def card_export(request, slug, fmt):
    """The card as Markdown, JSON or one self-contained HTML file (inline CSS and SVG, no scripts, no
    links out: printable, and fit for a paper's appendix)."""
    campaign, data, _ = _card(request, slug)
    return card_document(campaign, data, fmt)


@login_required
@require_POST
def card_bootstrap(request, slug):
    """Ask a Celery worker for the card's bootstrap intervals."""
    campaign = campaign_for_request(request, slug)
    run, created = services.bootstrap_request(campaign=campaign, by=request.user)
    if created:
        messages.success(
            request, f"Bootstrap of {run.resamples:,} resamples requested; the intervals appear here when it is done."
        )
    else:
        messages.info(request, "A bootstrap is already waiting for a worker or resampling: its progress is below.")
    return redirect(reverse("audit_card", args=[campaign.slug]) + "#bootstrap")


@never_cache
def card_bootstrap_data(request, slug):
    """The bootstrap's progress and, once done, its intervals as the card prints them (polled)."""
    if not request.user.is_authenticated:
        raise Http404
    campaign = campaign_for_request(request, slug)
    summary = bootstrap_summary(campaign=campaign)
    shown = summary["shown"] and {k: v for k, v in summary["shown"].items() if k != "data"}
    return JsonResponse({"latest": summary["latest"], "shown": shown, "display": intervals_display(summary)})
