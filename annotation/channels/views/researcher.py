"""The researchers' channel pages: a campaign's channels, the MTurk and panel publishing forms, and a
publication's page with its bonus and withdraw forms. Views parse, call one service or selector, render."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.channels import selectors, services
from annotation.channels.errors import BonusAlreadyGranted, PanelRefused, PublicationRefused
from annotation.channels.forms import MTurkBonusForm, MTurkPublicationForm, PanelPublicationForm, ProlificTokenForm
from annotation.channels.models import Publication
from annotation.channels.options import mturk_options_clean
from annotation.channels.pricing import mturk_cost_preview
from annotation.channels.services.prolific import prolific_account_for
from annotation.channels.views.prolific import prolific_page_context
from annotation.models import Campaign
from annotation.permissions import campaign_for_request
from annotation.schemas import parse_int
from annotation.selectors import WorkerProgress


@login_required
def campaign_channels(request, slug):
    campaign = campaign_for_request(request, slug)
    context = {
        "campaign": campaign,
        "publications": selectors.publications_of(campaign=campaign),
        "labels_needed": selectors.labels_still_needed(campaign=campaign),
        "prolific_account": prolific_account_for(user=request.user),
        "token_form": ProlificTokenForm(),
        "mturk_problems": selectors.mturk_setup_problems(),
    }
    return render(request, "channels/campaign_channels.html", context)


@login_required
def mturk_publish(request, slug):
    """The MTurk form: "Preview cost" shows rewards plus commission; "Publish" needs the total the
    researcher saw. When the total moved since (labels arrived, so fewer are bought; or the form was
    changed) the new preview is shown instead of publishing, with what moved it (``moved``)."""
    campaign = campaign_for_request(request, slug)
    if campaign.status == Campaign.Status.CLOSED:  # nothing to publish: the channels page says why
        return redirect("channels:campaign_channels", slug=slug)
    form = MTurkPublicationForm(request.POST or None)
    preview = None
    moved = ""
    labels_needed = selectors.labels_still_needed(campaign=campaign)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                clean = mturk_options_clean(campaign=campaign, options=form.options())
            except PublicationRefused as exc:
                form.add_error(None, exc.message)
            else:
                status = 200
                preview = mturk_cost_preview(
                    reward=clean["reward"],
                    n_assignments=clean["n_assignments"],
                    assignments_per_hit=clean["assignments_per_hit"],
                )
                confirmed = request.POST.get("confirm_total")
                if "publish" in request.POST and confirmed is not None and confirmed != str(preview.total):
                    moved = _cost_moved(request.POST.get("confirm_needed", ""), labels_needed, preview.total)
                if "publish" in request.POST and confirmed == str(preview.total):
                    try:
                        publication = services.publication_create_mturk(
                            campaign=campaign, user=request.user, options=clean
                        )
                    except PublicationRefused as exc:
                        form.add_error(None, exc.message)
                        status = 400
                    except ImproperlyConfigured as exc:
                        form.add_error(None, f"MTurk is not configured: {exc}")
                        status = 400
                    else:
                        messages.success(request, "Publishing on MTurk: the HITs are being created.")
                        return redirect("channels:publication_detail", pk=publication.pk)
    context = {
        "campaign": campaign,
        "form": form,
        "preview": preview,
        "moved": moved,
        "labels_needed": labels_needed,
        "mturk_problems": selectors.mturk_setup_problems(),
    }
    return render(request, "channels/mturk_publish.html", context, status=status)


def _cost_moved(needed_then: str, needed_now: int, total) -> str:
    """Why the total to confirm is not the one the researcher saw: ``needed_then`` is the labels the
    campaign still needed at the preview (the form carries it back)."""
    then = parse_int(needed_then)
    if then is not None and then > needed_now:
        arrived = then - needed_now
        return (
            f"{arrived} label{'s' if arrived != 1 else ''} arrived since the preview; the total is now ${total}. "
            "Check it and publish again."
        )
    return f"The settings changed since the preview; the total is now ${total}. Check it and publish again."


@login_required
def panel_publish(request, slug):
    campaign = campaign_for_request(request, slug)
    if campaign.status == Campaign.Status.CLOSED:  # nothing to publish: the channels page says why
        return redirect("channels:campaign_channels", slug=slug)
    form = PanelPublicationForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                publication = services.publication_create_panel(
                    campaign=campaign, user=request.user, **form.cleaned_data
                )
            except PanelRefused as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, "The panel link is ready.")
                return redirect("channels:publication_detail", pk=publication.pk)
    return render(request, "channels/panel_publish.html", {"campaign": campaign, "form": form}, status=status)


def _publication_page(
    request, publication: Publication, *, bonus_form: MTurkBonusForm | None = None, status: int = 200
):
    context = {"publication": publication, "campaign": publication.campaign}
    if publication.kind == Publication.Kind.MTURK:
        context["progress"] = selectors.mturk_progress(publication=publication)
        context["hits"] = selectors.mturk_hits_of(publication=publication)[:200]
        context["preview"] = mturk_cost_preview(
            reward=publication.options["reward"],
            n_assignments=publication.planned_assignments,
            assignments_per_hit=publication.options["assignments_per_hit"],
        )
        context["bonuses"] = selectors.mturk_bonuses_of(publication=publication)[:200]
        if selectors.may_spend(user=request.user, publication=publication):
            context["bonus_form"] = bonus_form or MTurkBonusForm()
            context["bonus_workers"] = selectors.mturk_bonus_workers(publication=publication)
    else:
        if publication.kind == Publication.Kind.PROLIFIC:
            context.update(prolific_page_context(request, publication))
        panel = publication.panel
        base = request.build_absolute_uri(reverse("channels:panel_entry", args=[panel.slug]))
        context["panel"] = panel
        context["panel_url"] = selectors.panel_study_url(publication=publication, base=base)
        context["progress"] = selectors.panel_progress(publication=publication)
    return render(request, "channels/publication_detail.html", context, status=status)


@login_required
def panel_try(request, pk):
    """The task page as a panel participant sees it, for the researcher to try: a prompt of the campaign
    (``?n=`` the how-manyth, so "another" walks through them), the same labeling form, and nothing stored.
    No lease is taken and no label written, so no place is used: an answer posted here is only
    acknowledged, and the next prompt shown. Whoever sees the publication may try it (it changes nothing)."""
    publication = selectors.publication_for_user(user=request.user, pk=pk)
    if publication.kind == Publication.Kind.MTURK:
        raise Http404("MTurk has its own preview.")
    n = parse_int(request.GET.get("n", "")) or 0
    another = f"{reverse('channels:panel_try', args=[pk])}?n={n + 1}"
    if request.method == "POST":
        messages.info(request, "Preview: that answer was not stored, and no place was used.")
        return redirect(another)
    campaign = publication.campaign
    prompt, count = selectors.panel_preview_prompt(campaign=campaign, seed=n)
    context = {
        "publication": publication,
        "campaign": campaign,
        "prompt": prompt,
        "schema": campaign.label_schema,
        "progress": WorkerProgress(labeled=0, left=count, more=False),
        "client_token": "preview",
        "form_action": f"{request.path}?n={n}",
        "another_url": another,
    }
    return render(request, "channels/panel_try.html", context)


@login_required
def publication_detail(request, pk):
    publication = selectors.publication_for_request(request, pk)
    return _publication_page(request, publication)


@login_required
@require_POST
def publication_bonus_grant(request, pk):
    """The publication page's "Bonus a worker" form. Only writes the bonus: reconciliation pays it. The
    owner and staff only (it spends the owner's money). A repeated grant (a double click) is refused by
    the service, which keeps one row and so one payment token."""
    publication = selectors.publication_for_owner(user=request.user, pk=pk)
    if publication.kind != Publication.Kind.MTURK:
        raise Http404("Only MTurk publications pay bonuses.")
    form = MTurkBonusForm(request.POST)
    if form.is_valid():
        worker_ref = form.cleaned_data["worker"]
        assignment = selectors.mturk_bonus_assignment(publication=publication, worker_ref=worker_ref)
        if assignment is None:
            form.add_error("worker", f"{worker_ref} has no submitted or approved assignment in this publication.")
        else:
            try:
                bonus = services.mturk_bonus_grant(
                    assignment=assignment,
                    amount=form.cleaned_data["amount"],
                    reason=form.cleaned_data["reason"],
                    user=request.user,
                )
            except BonusAlreadyGranted as exc:
                # Most often the second request of a double click: the first one's bonus is on the page.
                messages.info(request, exc.message)
                return redirect(reverse("channels:publication_detail", args=[publication.pk]) + "#bonuses")
            except PublicationRefused as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(
                    request,
                    f"Bonus of ${bonus.amount} granted to {assignment.worker.external_id}: "
                    "it is paid on MTurk at the next reconciliation.",
                )
                return redirect(reverse("channels:publication_detail", args=[publication.pk]) + "#bonuses")
    return _publication_page(request, publication, bonus_form=form, status=400)


@login_required
@require_POST
def publication_withdraw(request, pk):
    publication = selectors.publication_for_request(request, pk)
    services.publication_withdraw(publication=publication)
    messages.info(request, "Withdrawn: no new workers will arrive through this publication.")
    return redirect("channels:publication_detail", pk=pk)
