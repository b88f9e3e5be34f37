"""Personal invitation links: the researchers' page that makes and lists them, and the link itself.

An invitation is one person (annotation.models.Invitation). The first browser to accept it gets a new
guest account and a re-entry code, shown once; from then on the link opens that account only, in a
browser signed in to it or after the code is typed (through the sign-in throttle).
"""

from django.contrib import messages
from django.contrib.auth import authenticate, login
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from annotation import selectors, services
from annotation.forms import InvitationCodeForm, InvitationCreateForm
from annotation.permissions import INVITATIONS_NOT_FOR_VIEWERS, campaign_for_editor


@login_required
def campaign_invitation(request, slug):
    """The campaign's invitation links and who used them (GET); new links, one per line (POST)."""
    campaign = campaign_for_editor(user=request.user, slug=slug, why=INVITATIONS_NOT_FOR_VIEWERS)
    form = InvitationCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            made = services.invitations_create(
                campaign=campaign, created_by=request.user, notes=form.cleaned_data["notes"]
            )
        except services.ServiceError as exc:
            form.add_error("notes", exc.message)
        else:
            messages.success(
                request, f"Made {len(made)} invitation link{'s' if len(made) > 1 else ''}, listed first below."
            )
            return redirect("campaign_invitation", slug=slug)
    context = {
        "campaign": campaign,
        "form": form,
        "invitations": selectors.invitations_of(campaign=campaign),
        "origin": request.build_absolute_uri("/").rstrip("/"),
    }
    return render(request, "annotation/invitation.html", context, status=400 if request.method == "POST" else 200)


def worker_join(request, slug, token):
    """An invitation link. Unused: one click makes a guest account, signs it in and shows its re-entry
    code. Used: only its guest gets in, signed in already or by typing the code."""
    campaign = selectors.campaign_for_workers(slug=slug, user=request.user)
    invitation = selectors.invitation_for_join(campaign=campaign, token=token)
    if invitation is None:
        return render(request, "annotation/invitation_invalid.html", {"campaign": campaign}, status=403)
    if request.user.is_authenticated and invitation.user_id in (None, request.user.pk):
        if invitation.user_id is None:  # somebody with an account already labels with it
            messages.info(
                request,
                f"You are signed in as {request.user.get_username()}, so you label with this account; "
                "the invitation stays unused.",
            )
        return redirect("worker_campaign", slug=slug)
    if invitation.user_id is None:
        return _accept(request, campaign, invitation)
    return _reenter(request, campaign, invitation)


def _accept(request, campaign, invitation):
    # A GET only shows the button, so link previews and prefetchers take no invitation.
    if request.method != "POST":
        return render(request, "annotation/join.html", {"campaign": campaign, "step": "accept"})
    try:
        acceptance = services.invitation_accept(invitation=invitation)
    except services.InvitationTaken:  # another browser took it a moment earlier
        context = {"campaign": campaign, "step": "reenter", "form": InvitationCodeForm()}
        return render(request, "annotation/join.html", context, status=409)
    login(request, acceptance.user, backend="django.contrib.auth.backends.ModelBackend")
    return render(request, "annotation/join.html", {"campaign": campaign, "step": "welcome", "code": acceptance.code})


def _reenter(request, campaign, invitation):
    form = InvitationCodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        # authenticate(): the sign-in throttle counts wrong codes like wrong passwords.
        user = authenticate(request, username=invitation.user.get_username(), password=form.cleaned_data["code"])
        if user is not None:
            login(request, user)
            messages.success(request, f"Welcome back: you are signed in as {user.get_username()}.")
            return redirect("worker_campaign", slug=campaign.slug)
        form.add_error("code", "That is not this invitation's code (after many wrong tries, wait a few minutes).")
    context = {"campaign": campaign, "step": "reenter", "form": form}
    return render(request, "annotation/join.html", context, status=400 if request.method == "POST" else 200)
