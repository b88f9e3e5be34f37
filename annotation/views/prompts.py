"""The campaign's prompts page (search, filters, sorting, pages; retiring several at once) and one prompt's
page (its labels and who gave them).

Like every page about a campaign they go through ``campaign_for_request`` (404 for anyone who neither owns
nor shares it, 403 to a viewer's POST). The list reads the API's filters (``PromptFilters``), so the page
and ``GET /api/v1/campaigns/<slug>/prompts/`` filter alike. Retiring is ``prompts_retired_set``'s; a refusal
is said on the page it came from and changes nothing.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from annotation import selectors, services
from annotation.api.prompts import PromptFilters
from annotation.exporting import csv_response
from annotation.models import Campaign
from annotation.permissions import campaign_for_request

PROMPTS_PER_PAGE = 50


def _may_retire(campaign: Campaign) -> bool:
    """Whether the retire buttons are shown: as ``prompts_retired_set`` allows (launched, not closed)."""
    return campaign.launched_at is not None and campaign.status != Campaign.Status.CLOSED


@login_required
@require_GET
def prompts_list(request, slug):
    campaign = campaign_for_request(request, slug)
    filters = PromptFilters(data=request.GET)
    errors = {} if filters.is_valid() else filters.errors
    if errors:  # the page says what was wrong, above the whole list
        filters = PromptFilters(data={})
        filters.is_valid()
    query = filters.validated_data
    prompts = Paginator(selectors.campaign_prompts(campaign=campaign, **query), PROMPTS_PER_PAGE)
    page = prompts.get_page(request.GET.get("page"))
    page.object_list = selectors.prompts_entropy(campaign=campaign, prompts=list(page.object_list))
    for prompt in page:
        prompt.status = selectors.prompt_status(prompt)
    params = request.GET.copy()
    params.pop("page", None)
    sorting = params.copy()
    sorting.pop("order", None)
    context = {
        "campaign": campaign,
        "page": page,
        "query": query,
        "filter_errors": errors,
        "groups": selectors.prompt_groups(campaign=campaign),
        "params": params.urlencode(),
        "sorting": sorting.urlencode(),
        "may_retire": _may_retire(campaign),
    }
    return render(request, "annotation/prompts.html", context, status=400 if errors else 200)


#: The prompts CSV's columns: every prompt, retired ones included (they are in no label export: they have
#: no counted label), with where each stands.
PROMPT_EXPORT_FIELDS = (
    "id",
    "text",
    "group",
    "gold",
    "control",
    "status",
    "labels",
    "labels_wanted",
    "agreement",
    "retired",
    "retired_at",
)


def _export_rows(prompts):
    for prompt in prompts.iterator(chunk_size=2000):
        yield {
            "id": prompt.external_id,
            "text": prompt.text,
            "group": prompt.group,
            "gold": prompt.gold,
            "control": prompt.is_control,
            "status": selectors.prompt_status(prompt),
            "labels": prompt.n_labels,
            "labels_wanted": prompt.labels_wanted,
            "agreement": prompt.agreement,
            "retired": prompt.retired_at is not None,
            "retired_at": prompt.retired_at.isoformat() if prompt.retired_at else "",
        }


@login_required
@require_GET
def prompts_export(request, slug):
    """The prompts list as CSV, with the page's filters and order."""
    campaign = campaign_for_request(request, slug)
    filters = PromptFilters(data=request.GET)
    filters.is_valid(raise_exception=False)
    if filters.errors:
        return HttpResponseBadRequest("; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in filters.errors.items()))
    prompts = selectors.campaign_prompts(campaign=campaign, **filters.validated_data)
    return csv_response(_export_rows(prompts), fields=PROMPT_EXPORT_FIELDS, filename=f"{campaign.slug}-prompts.csv")


@login_required
@require_GET
def prompt_detail(request, slug, prompt_id):
    campaign = campaign_for_request(request, slug)
    prompt = selectors.campaign_prompt(campaign=campaign, prompt_id=prompt_id)
    context = {
        "campaign": campaign,
        "prompt": selectors.prompts_entropy(campaign=campaign, prompts=[prompt])[0],
        "status": selectors.prompt_status(prompt),
        "labels": selectors.prompt_labels(prompt=prompt),
        "may_retire": _may_retire(campaign),
    }
    return render(request, "annotation/prompt.html", context)


@login_required
@require_POST
def prompts_retire(request, slug):
    """Retire the ticked prompts (``action=retire``) or bring them back (``unretire``), then go back to the
    page the form was on (``next``, one of this site's)."""
    campaign = campaign_for_request(request, slug)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("campaign_prompts", args=[slug])
    retired = {"retire": True, "unretire": False}.get(request.POST.get("action", ""))
    try:
        ids = [int(value) for value in request.POST.getlist("prompts")]
    except ValueError:
        ids = []
    if not ids or retired is None:
        messages.warning(request, "Tick the prompts, then retire them or bring them back: nothing was changed.")
        return redirect(back)
    try:
        result = services.prompts_retired_set(campaign=campaign, prompt_ids=ids, retired=retired)
    except ValidationError as exc:
        messages.warning(request, "Nothing was changed. " + " ".join(exc.message_dict.get("prompts", exc.messages)))
    except services.CampaignStateError as exc:
        messages.warning(request, exc.message)
    else:
        done = "retired" if retired else "brought back"
        n = len(result.changed)
        text = f"{n} prompt{'s' if n != 1 else ''} {done}."
        if result.unchanged:
            text += f" {len(result.unchanged)} already were."
        messages.success(request, text)
    return redirect(back)
