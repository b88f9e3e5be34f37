"""The audit dashboard: a page, its JSON feed (polled every 2 s while the page is seen), report
downloads, "recompute now", and the "How to read this" guide.

Researchers see their own and shared campaigns, staff see all (``campaign_for_user``: 404 for
anyone else). Views parse, call one selector or service, render.
"""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import get_conditional_response, quote_etag
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from annotation import parquet
from annotation.models import Campaign
from annotation.permissions import campaign_for_request
from audits import selectors, services
from audits.conf import audit_setting
from audits.engine import accuracy, flags, glossary, workers
from audits.engine.agreement import KAPPA_MIN_SHARED
from audits.engine.markdown import render_markdown
from audits.engine.truths import METHODS
from audits.models import AuditSnapshot
from audits.selectors import agreement, truths
from audits.selectors.card import audit_scale_text
from audits.selectors.feed import delta_token_parse
from audits.selectors.full import full_audit_skip_reason

POLL_MS = 2000


@login_required
def dashboard(request, slug):
    campaign = campaign_for_request(request, slug)
    context = {
        "campaign": campaign,
        "data_url": reverse("audit_dashboard_data", args=[campaign.slug]),
        "poll_ms": POLL_MS,
        "stale_after": audit_setting("STALE_AFTER"),
        "full": AuditSnapshot.objects.filter(campaign=campaign, kind=AuditSnapshot.Kind.FULL).exists(),
        "numbers": glossary.NUMBERS,
        "accuracy_metrics": {m.key: m for m in glossary.ACCURACY},
        "reference": glossary.REFERENCE,
        "speed": {
            "min_labels": accuracy.MIN_SCORED_FLOOR,
            "share": round(workers.SPEED_SHARE * 100),
            "min_campaign_seconds": workers.SPEED_MIN_CAMPAIGN_SECONDS,
        },
        "truth_methods": [(m, truths.NAMES[m], m != "glad") for m in METHODS],
        "skip_reason": full_audit_skip_reason(campaign),
        "free_text": campaign.schema == Campaign.Schema.FREE_TEXT,
        "kappa_min_shared": KAPPA_MIN_SHARED,
        "audit_scale": audit_scale_text(campaign),
    }
    return render(request, "audits/dashboard.html", context)


def feed_response(request, *, campaign, have_full: int, respond, since: str | None = None):
    """The feed with an ETag (``selectors.dashboard_version``): 304 without a body when the client's
    If-None-Match still matches, so a dashboard left open re-sends nothing while nothing changes;
    else ``respond(selectors.dashboard_data(...))`` (a JsonResponse or a DRF Response), tagged. The
    audit status is read once, for the tag and the feed.

    With ``since`` (a token of the delta feed, "" for a client that has nothing yet) the body is
    ``selectors.dashboard_delta``: only the pieces that changed since that token; its tag differs from
    the whole feed's, and a malformed token answers 400 naming it."""
    if since is not None:
        try:
            delta_token_parse(since)
        except ValueError as error:
            return respond({"error": str(error)}, status=400)
    status = selectors.audit_status(campaign=campaign)
    version = selectors.dashboard_version(campaign=campaign, status=status, have_full=have_full)
    etag = quote_etag(version if since is None else version + "-delta")
    response = get_conditional_response(request, etag=etag)
    if response is None and since is None:
        response = respond(selectors.dashboard_data(campaign=campaign, have_full=have_full, status=status))
    elif response is None:
        response = respond(
            selectors.dashboard_delta(campaign=campaign, since=since, have_full=have_full, status=status)
        )
    response["ETag"] = etag
    return response


@never_cache
def dashboard_data(request, slug):
    """The dashboard's feed: whole (the researchers' scripts read it so), or with ``?since=`` only
    what changed (the dashboard's own polls)."""
    if not request.user.is_authenticated:
        raise Http404
    campaign = campaign_for_request(request, slug)
    try:
        have_full = int(request.GET.get("have_full", "-1"))
    except ValueError:
        have_full = -1
    return feed_response(
        request, campaign=campaign, have_full=have_full, respond=JsonResponse, since=request.GET.get("since")
    )


def guide(request):
    """How to read the audit: every number's definition, direction and reference values. Public:
    it shows no campaign's data."""
    context = {
        "numbers": glossary.NUMBERS,
        "accuracy_metrics": glossary.ACCURACY,
        "reference": glossary.REFERENCE,
        "agreement": glossary.AGREEMENT,
        "power": {"cap": accuracy.UNDERPOWERED_N, "floor": accuracy.MIN_SCORED_FLOOR},
        "straight": {"min_labels": flags.MIN_LABELS, "min_share": round(flags.MIN_SHARE * 100), "alpha": flags.ALPHA},
        "speed_share": round(workers.SPEED_SHARE * 100),
        "speed_min_campaign_seconds": workers.SPEED_MIN_CAMPAIGN_SECONDS,
        "kappa_min_shared": KAPPA_MIN_SHARED,
    }
    return render(request, "audits/guide.html", context)


@login_required
def report_download(request, slug, fmt):
    """The current full audit report, as the engine's JSON dict, its Markdown rendering or its Parquet
    form (one row per value, ``report_parquet``)."""
    campaign = campaign_for_request(request, slug)
    found = selectors.report_download(campaign=campaign)
    if found is None:
        raise Http404("No full audit yet: press “Recompute now” on the dashboard.")
    snapshot, report = found
    name = f"{campaign.slug}-audit-{snapshot.watermark}"
    if fmt == "json":
        response = HttpResponse(json.dumps(report, indent=2, allow_nan=False), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    elif fmt == "md":
        response = HttpResponse(render_markdown(report), content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.md"'
    elif fmt == "parquet":
        response = HttpResponse(selectors.report_parquet(report), content_type=parquet.CONTENT_TYPE)
        response["Content-Disposition"] = f'attachment; filename="{name}.parquet"'
    else:
        raise Http404("Unknown format.")
    return response


def agreement_csv_response(campaign) -> StreamingHttpResponse:
    """The agreement CSV (``selectors.agreement``: per prompt and per pair of workers, on the current
    labels), for the page and the API alike; 404 naming the reason for a free-text campaign."""
    if (reason := full_audit_skip_reason(campaign)) is not None:
        raise Http404(f"No agreement table: {reason}.")
    tables = agreement.agreement_tables(campaign=campaign)
    response = StreamingHttpResponse(agreement.agreement_csv_lines(tables), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{campaign.slug}-agreement-{tables["n_labels"]}.csv"'
    return response


@login_required
def agreement_csv(request, slug):
    return agreement_csv_response(campaign_for_request(request, slug))


@login_required
@require_POST
def ground_truths_request(request, slug):
    """Ask a Celery worker for the alternative ground truths by the methods ticked on the dashboard."""
    campaign = campaign_for_request(request, slug)
    try:
        run, created = services.ground_truths_request(
            campaign=campaign, methods=request.POST.getlist("methods"), by=request.user
        )
    except ValidationError:
        messages.error(request, "Tick one or more methods: " + ", ".join(truths.NAMES.values()) + ".")
    else:
        names = ", ".join(truths.NAMES[m] for m in run.methods)
        if created:
            messages.success(
                request, f"Ground truths by {names} requested; they appear here once a worker has computed them."
            )
        else:
            messages.info(request, f"Ground truths by {names} are already waiting for a Celery worker.")
    return redirect(reverse("audit_dashboard", args=[campaign.slug]) + "#ground-truths")


@login_required
@require_POST
def recompute(request, slug):
    campaign = campaign_for_request(request, slug)
    if services.audit_request_full(campaign=campaign):
        messages.success(request, "A full recomputation is queued; the dashboard shows it when it is done.")
    else:
        messages.info(
            request, "A recomputation is already queued (or the task queue is unreachable; it retries by itself)."
        )
    return redirect("audit_dashboard", slug=campaign.slug)
