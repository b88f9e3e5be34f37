"""Researcher pages: campaigns, prompt upload, life cycle, progress, export, sharing (invitation links:
invitations.py).

A researcher (``annotation.add_campaign``: annotation.permissions) creates campaigns and becomes their
owner; every page about one campaign goes through ``campaign_for_request``, which answers 404 to users
who neither own nor share it, and 403 to a viewer's POST. Changing who it is shared with goes through
``campaign_for_owner`` instead (owner or staff; 403 for collaborators), the same rule as the API's.
"""

import base64

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.crypto import get_random_string
from django.views.decorators.http import require_POST

from annotation import selectors, services
from annotation.activity_export import activity_csv_response
from annotation.channels.forms import duration_text
from annotation.exporting import FORMATS, ExportOptionError, export_response, parse_pseudonymize
from annotation.forms import (
    CampaignCopyForm,
    CampaignForm,
    CollaboratorAddForm,
    CollaboratorForm,
    PromptUploadForm,
    StudyForm,
)
from annotation.importing import MAX_ERRORS_SHOWN, PromptFileError, prompts_preview
from annotation.models import Collaboration
from annotation.permissions import (
    CREATE_REFUSAL,
    campaign_for_owner,
    campaign_for_request,
    is_campaign_owner,
    may_create_campaigns,
)
from annotation.services.campaigns import TRANSITIONS
from annotation.services.studies import study_import_uploaded
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
    form = CampaignForm(
        request.POST or None, owner=request.user, initial={"binarization": {"1": 0, "2": 0, "3": 1, "4": 1}}
    )
    if request.method == "POST" and form.is_valid():
        campaign = services.campaign_create(owner=request.user, **form.cleaned_data)
        messages.success(request, "Campaign created. Upload its prompts next.")
        return redirect("campaign_detail", slug=campaign.slug)
    return render(request, "annotation/campaign_form.html", {"form": form})


@login_required
@permission_required("annotation.add_campaign", raise_exception=True)
def study_import_page(request):
    form = StudyForm(request.POST or None, request.FILES or None, owner=request.user)
    if request.method == "POST" and form.is_valid():
        fields = dict(form.cleaned_data)
        labels, prompts = fields.pop("labels"), fields.pop("prompts")
        try:
            imported = study_import_uploaded(owner=request.user, labels=labels, prompts=prompts, **fields)
        except PromptFileError as exc:
            for line, message in exc.errors[:MAX_ERRORS_SHOWN]:
                form.add_error("labels", f"line {line}: {message}" if line else message)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(
                request,
                f"Imported {imported.n_labels} labels of {imported.n_workers} workers on {imported.n_prompts} "
                "prompts. The study is closed and read-only; its audit is on the dashboard.",
            )
            return redirect("campaign_detail", slug=imported.campaign.slug)
    return render(request, "annotation/study_form.html", {"form": form})


@login_required
def campaign_edit(request, slug):
    campaign = campaign_for_request(request, slug)
    form = CampaignForm(request.POST or None, instance=campaign, owner=campaign.owner)
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
    progress = selectors.campaign_progress(campaign=campaign)
    pace = selectors.campaign_pace(campaign=campaign, progress=progress)
    context = {
        "campaign": campaign,
        "progress": progress,
        "pace": pace,
        # To the minute: a finer estimate would claim a precision the pace does not have.
        "eta_text": duration_text(max(60, round(pace.eta_seconds / 60) * 60)) if pace.eta_seconds else "",
        "imports": campaign.imports.order_by("-created_at"),
        "upload_form": upload_form or PromptUploadForm(),
        "import_errors": import_errors,
        "actions": [action for action, (sources, _) in TRANSITIONS.items() if campaign.status in sources],
        "worker_url": request.build_absolute_uri(reverse("worker_campaign", args=[campaign.slug])),
        "formats": list(FORMATS),
        "collaborations": campaign.collaboration_set.select_related("user").order_by("user__username"),
        "activities": selectors.campaign_activity(campaign=campaign)[:ACTIVITY_ON_PAGE],
        "may_share": may_share,
        "may_copy": may_create_campaigns(request.user),
        "copy_form": CampaignCopyForm(
            initial={"title": selectors.campaign_copy_title(owner=request.user, title=campaign.title)}
        ),
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


# The file between the preview and the import travels in the confirming form, signed (so it is the
# file previewed, not one made up) and compressed; a preview older than this is uploaded again.
PREVIEW_SALT = "annotation.import-preview"
PREVIEW_MAX_AGE = 3600


@login_required
@require_POST
def campaign_import(request, slug):
    """Two steps: a file's upload shows what it would import (``prompts_preview`` of ``prompts_check``'s
    rows: the import's parser and refusals), changing nothing; the preview's "Import" button posts the
    file back (``upload``, signed) and imports it, all or nothing as ever, checked again since the
    campaign may have changed meanwhile. A file whose signed copy would not fit a form's body is chosen
    again on the preview page and imported as posted (``confirm=import``). The preview is a page of its
    own (``import_preview``, POST/redirect/GET), so reloading it does not post the file again."""
    campaign = campaign_for_request(request, slug)
    if "upload" in request.POST:
        try:
            carried = signing.loads(
                request.POST["upload"], salt=f"{PREVIEW_SALT}:{campaign.pk}", max_age=PREVIEW_MAX_AGE
            )
        except signing.BadSignature:
            messages.error(request, "That preview is too old, or was changed: upload the file again.")
            return redirect("campaign_detail", slug=slug)
        return _import(request, campaign, data=base64.b64decode(carried["data"]), filename=carried["name"])
    form = PromptUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _detail(request, campaign, upload_form=form, status=400)
    upload = form.cleaned_data["file"]
    data = upload.read()
    if request.POST.get("confirm") == "import":
        return _import(request, campaign, data=data, filename=upload.name, form=form)
    try:
        services.prompts_check(campaign=campaign, data=data, filename=upload.name)
    except PromptFileError as exc:
        return _detail(request, campaign, upload_form=form, import_errors=exc.errors, status=400)
    token = signing.dumps(
        {"name": upload.name, "data": base64.b64encode(data).decode()},
        salt=f"{PREVIEW_SALT}:{campaign.pk}",
        compress=True,
    )
    preview_id = get_random_string(20)
    cache.set(_preview_key(request, campaign, preview_id), token, PREVIEW_MAX_AGE)
    return redirect("import_preview", slug=slug, preview_id=preview_id)


def _preview_key(request, campaign, preview_id: str) -> str:
    """Where an uploaded file waits for its preview page: the cache (shared by the web processes), under
    a random id of the uploader's, as its signed copy (``PREVIEW_SALT``)."""
    return f"chorus:import-preview:{campaign.pk}:{request.user.pk}:{preview_id}"


@login_required
def import_preview(request, slug, preview_id):
    """The page after an upload: what the file would import, checked again (the campaign may have changed
    since), and the button that imports it (``campaign_import``)."""
    campaign = campaign_for_request(request, slug)
    token = cache.get(_preview_key(request, campaign, preview_id))
    try:
        carried = signing.loads(token or "", salt=f"{PREVIEW_SALT}:{campaign.pk}", max_age=PREVIEW_MAX_AGE)
    except signing.BadSignature:
        messages.error(request, "That preview is too old: upload the file again.")
        return redirect("campaign_detail", slug=slug)
    filename = carried["name"]
    try:
        rows = services.prompts_check(campaign=campaign, data=base64.b64decode(carried["data"]), filename=filename)
    except PromptFileError as exc:
        return _detail(request, campaign, import_errors=exc.errors, status=400)
    context = {
        "campaign": campaign,
        "filename": filename,
        "preview": prompts_preview(rows),
        # Room for the rest of the form (its token and field names) within the body Django accepts.
        "upload": token if len(token) < settings.DATA_UPLOAD_MAX_MEMORY_SIZE - 4096 else None,
        "upload_form": PromptUploadForm(),
    }
    return render(request, "annotation/import_preview.html", context)


def _import(request, campaign, *, data: bytes, filename: str, form=None):
    try:
        batch = services.prompts_import(campaign=campaign, data=data, filename=filename, user=request.user)
    except PromptFileError as exc:
        return _detail(request, campaign, upload_form=form, import_errors=exc.errors, status=400)
    messages.success(request, f"Imported {batch.n_prompts} prompts from {batch.filename}.")
    return redirect("campaign_detail", slug=campaign.slug)


@login_required
def import_remove(request, slug, import_id):
    """Removing an import deletes its prompts, so it asks first, on a page of its own (as closing does):
    only a POST carrying ``confirm=remove`` removes."""
    campaign = campaign_for_request(request, slug)
    batch = get_object_or_404(campaign.imports, pk=import_id)
    if request.method == "POST" and request.POST.get("confirm") == "remove":
        try:
            services.import_remove(campaign=campaign, batch=batch)
        except services.ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Removed the import of {batch.filename} ({batch.n_prompts} prompts).")
        return redirect("campaign_detail", slug=slug)
    context = {"campaign": campaign, "batch": batch}
    return render(request, "annotation/import_remove.html", context, status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def campaign_copy(request, slug):
    """A new draft of the requester's with this campaign's settings and prompts. Reading the campaign is
    enough (a viewer may copy it: nothing in it changes), with the right to create campaigns."""
    source = selectors.campaign_for_user(user=request.user, slug=slug)
    if not may_create_campaigns(request.user):
        raise PermissionDenied(CREATE_REFUSAL)
    form = CampaignCopyForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors.get("title", ["That title is not valid."])))
        return redirect("campaign_detail", slug=slug)
    title = form.cleaned_data["title"]
    clash = title and selectors.campaign_title_clash(owner=request.user, title=title)
    if clash:
        messages.error(request, selectors.title_clash_message(clash=clash))
        return redirect("campaign_detail", slug=slug)
    copy = services.campaign_copy(campaign=source, owner=request.user, title=title or None)
    messages.success(request, f"A new draft, copied from “{source.title}” with its {copy.prompts.count()} prompts.")
    return redirect("campaign_detail", slug=copy.slug)


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
