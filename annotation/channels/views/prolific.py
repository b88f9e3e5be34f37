"""The researcher's Prolific pages: save a token, create a study (draft, with its cost and hourly pay),
publish it, review submissions and pay bonuses. Views parse, call one service, render or redirect."""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.channels import selectors
from annotation.channels.errors import PublicationRefused
from annotation.channels.forms import ProlificBonusForm, ProlificPublicationForm, ProlificReviewForm, ProlificTokenForm
from annotation.channels.models import Publication
from annotation.channels.services import prolific
from annotation.models import Campaign
from annotation.permissions import campaign_for_request


@login_required
@require_POST
def prolific_token(request, slug):
    campaign = campaign_for_request(request, slug)
    form = ProlificTokenForm(request.POST)
    if form.is_valid():
        try:
            prolific.prolific_token_save(user=request.user, token=form.cleaned_data["token"])
        except PublicationRefused as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, "Your Prolific token is saved; Chorus uses it for your studies.")
    else:
        messages.error(request, "Paste the API token from Prolific's settings page.")
    return redirect("channels:campaign_channels", slug=campaign.slug)


@login_required
def prolific_publish(request, slug):
    """The study's options. "Preview" shows the places, the cost with Prolific's fees and the hourly pay
    at the campaign's measured pace; "Create the draft" makes the draft study, which the publication
    page then publishes on confirmation."""
    campaign = campaign_for_request(request, slug)
    if campaign.status == Campaign.Status.CLOSED or prolific.prolific_account_for(user=request.user) is None:
        return redirect("channels:campaign_channels", slug=slug)  # the page says why
    initial = {"title": campaign.title, "estimated_minutes": 10, "labels_per_participant": 20}
    form = ProlificPublicationForm(request.POST or None, initial=initial)
    plan, status = None, 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                clean = prolific.prolific_options_clean(campaign=campaign, options=form.options())
            except PublicationRefused as exc:
                for field, message in exc.fields.items():
                    form.add_error(field if field in form.fields else None, message)
            else:
                status, plan = 200, prolific.prolific_plan(campaign=campaign, clean=clean)
                # Create only what the researcher saw: a changed form shows the new preview instead.
                if "create" in request.POST and request.POST.get("confirm_total") == str(plan.total):
                    try:
                        publication = prolific.prolific_publication_create(
                            campaign=campaign, user=request.user, options=clean
                        )
                    except PublicationRefused as exc:
                        form.add_error(None, exc.message)
                        status = 400
                    else:
                        messages.success(request, "The draft study is ready: check it, then publish it.")
                        return redirect("channels:publication_detail", pk=publication.pk)
    context = {
        "campaign": campaign,
        "form": form,
        "plan": plan,
        "labels_needed": selectors.labels_still_needed(campaign=campaign),
    }
    return render(request, "channels/prolific_publish.html", context, status=status)


def _back(publication: Publication, anchor: str = "") -> str:
    return reverse("channels:publication_detail", args=[publication.pk]) + anchor


@login_required
@require_POST
def prolific_publication_publish(request, pk):
    publication = selectors.publication_for_request(request, pk)
    try:
        prolific.prolific_publish(publication=publication)
    except PublicationRefused as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Publishing the study on Prolific.")
    return redirect(_back(publication))


@login_required
@require_POST
def prolific_submission_review(request, pk, submission_id):
    publication = selectors.publication_for_request(request, pk)
    form = ProlificReviewForm(request.POST)
    if form.is_valid():
        try:
            submission = prolific.prolific_review(
                publication=publication, submission_id=submission_id, user=request.user, **form.cleaned_data
            )
        except PublicationRefused as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request, f"Submission {submission.submission_id}: {submission.get_verdict_display().lower()}."
            )
    return redirect(_back(publication, "#submissions"))


@login_required
@require_POST
def prolific_bonus(request, pk):
    publication = selectors.publication_for_request(request, pk)
    form = ProlificBonusForm(request.POST)
    if form.is_valid():
        try:
            bonus, created = prolific.prolific_bonus_grant(
                publication=publication,
                worker_ref=form.cleaned_data["worker"],
                amount=form.cleaned_data["amount"],
                reason=form.cleaned_data["reason"],
                key=f"form:{form.cleaned_data['key']}",
                user=request.user,
            )
        except PublicationRefused as exc:
            messages.error(request, exc.message)
        else:
            if created:
                messages.success(request, f"Bonus of {bonus.amount} to {bonus.worker.external_id}: paying it now.")
            else:  # the second request of a double click
                messages.info(request, "This bonus was already granted; it is paid once.")
    else:
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return redirect(_back(publication, "#bonuses"))


@login_required
@require_POST
def prolific_bonus_many(request, pk):
    """Many bonuses at once: every participant a rule picks (control accuracy at least X), or a CSV file."""
    publication = selectors.publication_for_request(request, pk)
    try:
        if request.FILES.get("file"):
            bonuses = prolific.prolific_bonus_csv(
                publication=publication, data=request.FILES["file"].read(), user=request.user
            )
        else:
            try:
                threshold = float(request.POST.get("min_control_accuracy", ""))
            except ValueError:
                raise PublicationRefused("Give a control accuracy between 0 and 1.", code="invalid") from None
            if not 0 <= threshold <= 1:
                raise PublicationRefused("Give a control accuracy between 0 and 1.", code="invalid")
            bonuses = prolific.prolific_bonus_rule(
                publication=publication,
                min_control_accuracy=threshold,
                amount=request.POST.get("amount", ""),
                reason=request.POST.get("reason", ""),
                user=request.user,
            )
    except PublicationRefused as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, f"{len(bonuses)} bonus{'es' if len(bonuses) != 1 else ''} recorded; each is paid once."
        )
    return redirect(_back(publication, "#bonuses"))


def prolific_page_context(request, publication: Publication) -> dict:
    """What the publication page shows of a Prolific study (``researcher._publication_page``)."""
    study = publication.prolific
    submissions = list(publication.prolific_submissions.select_related("worker", "reviewed_by").order_by("pk"))
    for submission in submissions:
        if submission.verdict == submission.Verdict.HELD:
            submission.evidence = prolific.prolific_evidence(publication=publication, worker=submission.worker)
            submission.draft_category, submission.draft_message = prolific.prolific_rejection_draft(
                publication=publication, worker=submission.worker, evidence=submission.evidence
            )
    return {
        "study": study,
        "plan": prolific.prolific_plan(
            campaign=publication.campaign, clean=publication.options, places=study.total_places or None
        ),
        "submissions": submissions,
        "bonuses": publication.prolific_bonuses.select_related("worker").order_by("-pk")[:200],
        "bonus_form": ProlificBonusForm(initial={"key": uuid.uuid4().hex}),
        "categories": prolific.REJECTION_CATEGORIES,
        "account": study.account,
    }
