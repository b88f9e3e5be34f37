"""Researcher pages: campaigns, prompt upload, life cycle, progress, export, sharing (invitation links:
invitations.py).

A researcher (``annotation.add_campaign``: annotation.permissions) creates campaigns and becomes their
owner; every page about one campaign goes through ``campaign_for_request``, which answers 404 to users
who neither own nor share it, and 403 to a viewer's POST. Changing who it is shared with goes through
``campaign_for_owner`` instead (owner or staff; 403 for collaborators), the same rule as the API's.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import ValidationError
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation import selectors, services
from annotation.activity_export import activity_csv_response
from annotation.exporting import FORMATS, ExportOptionError, export_response, parse_pseudonymize
from annotation.forms import CampaignForm, CollaboratorAddForm, CollaboratorForm, PromptUploadForm
from annotation.importing import PromptFileError
from annotation.models import Collaboration
from annotation.permissions import campaign_for_owner, campaign_for_request, is_campaign_owner
from annotation.services.campaigns import TRANSITIONS
from annotation.views.adaptive import adaptive_k_context
from annotation.views.controls import controls_context
from annotation.views.rules import rules_context


def home(request):
    if not request.user.is_authenticated:
        return render(request, "annotation/home.html")
    campaigns = [
        (campaign, selectors.campaign_progress(campaign=campaign))
        for campaign in selectors.campaigns_visible_to(user=request.user)
    ]
    return render(request, "annotation/home.html", {"campaigns": campaigns})


@login_required
@permission_required("annotation.add_campaign", raise_exception=True)
def campaign_create(request):
    form = CampaignForm(request.POST or None, initial={"binarization": {"1": 0, "2": 0, "3": 1, "4": 1}})
    if request.method == "POST" and form.is_valid():
        campaign = services.campaign_create(owner=request.user, **form.cleaned_data)
        messages.success(request, "Campaign created. Upload its prompts next.")
        return redirect("campaign_detail", slug=campaign.slug)
    return render(request, "annotation/campaign_form.html", {"form": form})


@login_required
def campaign_edit(request, slug):
    campaign = campaign_for_request(request, slug)
    form = CampaignForm(request.POST or None, instance=campaign)
    if request.method == "POST" and form.is_valid():
        try:
            services.campaign_update(campaign=campaign, **form.cleaned_data)
        except services.ServiceError as exc:
            form.add_error(None, exc.message)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, "Campaign saved.")
            return redirect("campaign_detail", slug=slug)
    return render(request, "annotation/campaign_form.html", {"form": form, "campaign": campaign})


def _detail(request, campaign, *, upload_form=None, import_errors=None, share_form=None, status=200):
    may_share = is_campaign_owner(user=request.user, campaign=campaign)  # else the buttons would answer 403
    context = {
        "campaign": campaign,
        "progress": selectors.campaign_progress(campaign=campaign),
        "imports": campaign.imports.order_by("-created_at"),
        "upload_form": upload_form or PromptUploadForm(),
        "import_errors": import_errors,
        "actions": [action for action, (sources, _) in TRANSITIONS.items() if campaign.status in sources],
        "worker_url": request.build_absolute_uri(reverse("worker_campaign", args=[campaign.slug])),
        "formats": list(FORMATS),
        "collaborations": campaign.collaboration_set.select_related("user").order_by("user__username"),
        "activities": selectors.campaign_activity(campaign=campaign)[:ACTIVITY_ON_PAGE],
        "may_share": may_share,
        "share_form": (share_form or CollaboratorAddForm(campaign=campaign)) if may_share else None,
        **rules_context(campaign=campaign),
        **controls_context(campaign=campaign),
        **adaptive_k_context(request=request, campaign=campaign),
    }
    return render(request, "annotation/campaign_detail.html", context, status=status)


# The page shows the latest changes; the whole log is in the API and the activity download.
ACTIVITY_ON_PAGE = 20


@login_required
def campaign_detail(request, slug):
    return _detail(request, campaign_for_request(request, slug))


@login_required
@require_POST
def campaign_import(request, slug):
    campaign = campaign_for_request(request, slug)
    form = PromptUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _detail(request, campaign, upload_form=form, status=400)
    upload = form.cleaned_data["file"]
    try:
        batch = services.prompts_import(campaign=campaign, data=upload.read(), filename=upload.name, user=request.user)
    except PromptFileError as exc:
        return _detail(request, campaign, upload_form=form, import_errors=exc.errors, status=400)
    messages.success(request, f"Imported {batch.n_prompts} prompts from {batch.filename}.")
    return redirect("campaign_detail", slug=slug)


def _transition(request, campaign, action: str):
    try:
        campaign = services.campaign_transition(campaign=campaign, action=action)
    except services.ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"The campaign is {campaign.get_status_display().lower()}.")
    return redirect("campaign_detail", slug=campaign.slug)


@login_required
@require_POST
def campaign_transition(request, slug, action):
    """launch, pause and resume: one click each, since each can be undone (close: campaign_close)."""
    return _transition(request, campaign_for_request(request, slug), action)


@login_required
def campaign_close(request, slug):
    """Closing cannot be undone, so it has a page of its own: a GET says what closing does, and only its
    form's POST, which carries ``confirm=close``, closes. Any other POST (an old page's one-click form, a
    script) shows the page again and changes nothing."""
    campaign = campaign_for_request(request, slug)
    if campaign.status not in TRANSITIONS["close"][0]:
        messages.info(request, "This campaign is already closed.")
        return redirect("campaign_detail", slug=slug)
    if request.method == "POST" and request.POST.get("confirm") == "close":
        return _transition(request, campaign, "close")
    context = {
        "campaign": campaign,
        "progress": selectors.campaign_progress(campaign=campaign),
        "live_leases": selectors.campaign_live_leases(campaign=campaign),
    }
    return render(request, "annotation/campaign_close.html", context, status=400 if request.method == "POST" else 200)


@login_required
def campaign_export(request, slug, fmt):
    campaign = campaign_for_request(request, slug)
    if fmt not in FORMATS:
        return HttpResponseBadRequest(f"Unknown format; use one of {', '.join(FORMATS)}.")
    try:
        pseudonymize = parse_pseudonymize(request.GET.get("pseudonymize"))
    except ExportOptionError as exc:
        return HttpResponseBadRequest(str(exc))
    return export_response(campaign=campaign, fmt=fmt, pseudonymize=pseudonymize)


@login_required
def campaign_activity_export(request, slug):
    return activity_csv_response(campaign=campaign_for_request(request, slug))


@login_required
@require_POST
def collaborator_add(request, slug):
    campaign = campaign_for_owner(user=request.user, slug=slug)
    form = CollaboratorAddForm(request.POST, campaign=campaign)
    if form.is_valid():
        try:
            user = services.campaign_share(campaign=campaign, **form.cleaned_data)
        except services.ServiceError as exc:  # an unknown user, or the owner
            form.add_error("username", exc.message)
        else:
            role = form.cleaned_data["role"]
            can = "manage this campaign" if role == Collaboration.Role.EDITOR else "see this campaign, not change it"
            messages.success(request, f"Shared with {user.get_username()} as {role}: they can now {can}.")
            return redirect("campaign_detail", slug=slug)
    return _detail(request, campaign, share_form=form, status=400)


@login_required
@require_POST
def collaborator_remove(request, slug, username):
    campaign = campaign_for_owner(user=request.user, slug=slug)
    form = CollaboratorForm({"username": username})  # the URL's part is input like any other
    if not form.is_valid():
        messages.error(request, "That is not a username.")
        return redirect("campaign_detail", slug=slug)
    try:
        services.campaign_unshare(campaign=campaign, **form.cleaned_data)
    except services.ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{form.cleaned_data['username']} no longer has access to this campaign.")
    return redirect("campaign_detail", slug=slug)
