"""Worker pages, reached through a campaign's link ``/w/<slug>/``.

The loop: ``next`` asks lease_acquire for a prompt and redirects to its ``task`` page; the page posts
the label back to itself, then goes to ``next`` again. While the page is open, static/js/label.js
sends a heartbeat every third of the lease length.
"""
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import get_random_string
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from annotation import selectors, services
from annotation.forms import SignUpForm, label_from_post, new_client_token
from annotation.models import Lease
from annotation.views.invitations import invitation_is_valid


def _safe_next(request, default: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return default


def signup(request):
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(_safe_next(request, reverse("home")))
    return render(request, "registration/signup.html", {"form": form, "next": _safe_next(request, "")})


def worker_campaign(request, slug):
    """The campaign's front page for workers: its instructions and a button to start."""
    campaign = selectors.campaign_for_workers(slug=slug)
    done = 0
    if request.user.is_authenticated:
        done = selectors.worker_label_count(campaign=campaign, worker=services.worker_for_user(user=request.user))
    return render(request, "annotation/worker_campaign.html", {"campaign": campaign, "done": done})


def worker_join(request, slug, token):
    """An invitation link: one click makes a guest account (random username, no password) and signs
    it in. A GET only shows the button, so link previews and prefetchers create no accounts."""
    campaign = selectors.campaign_for_workers(slug=slug)
    if not invitation_is_valid(token, campaign):
        return render(request, "annotation/invitation_invalid.html", {"campaign": campaign}, status=403)
    if request.user.is_authenticated:
        return redirect("worker_campaign", slug=slug)
    if request.method == "POST":
        user = get_user_model().objects.create_user(username=f"guest-{get_random_string(10).lower()}", password=None)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.info(
            request,
            f"You are signed in as {user.get_username()}. This browser keeps you signed in; "
            "the account has no password, so finish here.",
        )
        return redirect("worker_campaign", slug=slug)
    return render(request, "annotation/join.html", {"campaign": campaign})


@login_required
def worker_next(request, slug):
    campaign = selectors.campaign_for_workers(slug=slug)
    worker = services.worker_for_user(user=request.user)
    result = services.lease_acquire(campaign=campaign, worker=worker)
    if isinstance(result, services.NothingLeft):
        context = {
            "campaign": campaign,
            "reason": result.reason,
            "code": result.code,
            "done": selectors.worker_label_count(campaign=campaign, worker=worker),
        }
        return render(request, "annotation/nothing_left.html", context)
    return redirect("worker_task", slug=slug, lease_id=result.pk)


def _lease_is_live(lease: Lease) -> bool:
    return lease.status == Lease.Status.ACTIVE and lease.expires_at > timezone.now()


@login_required
def worker_task(request, slug, lease_id):
    """One prompt to label (GET), and its label (POST)."""
    campaign = selectors.campaign_for_workers(slug=slug)
    worker = services.worker_for_user(user=request.user)
    lease = selectors.lease_for_worker(lease_id=lease_id, worker=worker, campaign=campaign)
    error = None
    if request.method == "POST":
        value = label_from_post(request.POST, prompt=lease.prompt, schema_kind=campaign.schema)
        try:
            ack = services.label_submit(
                lease_id=lease.pk, worker=worker, value=value, client_token=request.POST.get("client_token", "")
            )
        except services.LabelRefused as exc:
            if exc.code != "bad_value":
                messages.warning(request, exc.message)
                return redirect("worker_next", slug=slug)
            error = exc.message
        else:
            messages.success(request, f"Saved. You have labeled {ack.worker_labels} so far.")
            return redirect("worker_next", slug=slug)
    elif not _lease_is_live(lease):
        if lease.status == Lease.Status.ACTIVE:
            messages.warning(request, "Your time on that prompt ran out; here is another one.")
        return redirect("worker_next", slug=slug)
    context = {
        "campaign": campaign,
        "lease": lease,
        "prompt": lease.prompt,
        "schema": campaign.label_schema,
        "client_token": new_client_token(),
        "done": selectors.worker_label_count(campaign=campaign, worker=worker),
        "form_action": request.path,
        "heartbeat_url": reverse("worker_heartbeat", args=[slug, lease.pk]),
        "heartbeat_ms": campaign.lease_seconds * 1000 // 3,
        "stop_url": reverse("worker_stop", args=[slug, lease.pk]),
        "error": error,
    }
    return render(request, "annotation/worker_task.html", context, status=400 if error else 200)


@login_required
@require_POST
def worker_heartbeat(request, slug, lease_id):
    worker = services.worker_for_user(user=request.user)
    # Another worker's lease is a 404, like every resource that is not yours (annotation.permissions).
    selectors.lease_for_worker(lease_id=lease_id, worker=worker, campaign=selectors.campaign_for_workers(slug=slug))
    return heartbeat_json(lease_id=lease_id, worker=worker)


def heartbeat_json(*, lease_id: int, worker) -> JsonResponse:
    """The labeling page's heartbeat answer, for every channel's page (static/js/label.js reads it)."""
    try:
        lease = services.lease_heartbeat(lease_id=lease_id, worker=worker)
    except services.ServiceError as exc:
        return JsonResponse({"code": exc.code, "message": exc.message}, status=exc.status)
    return JsonResponse({"expires_at": lease.expires_at.isoformat()})


@login_required
@require_POST
def worker_stop(request, slug, lease_id):
    """The worker stops for now: their prompt goes back to the pool at once."""
    worker = services.worker_for_user(user=request.user)
    # Another worker's lease is a 404, like every resource that is not yours (annotation.permissions).
    selectors.lease_for_worker(lease_id=lease_id, worker=worker, campaign=selectors.campaign_for_workers(slug=slug))
    try:
        services.lease_release(lease_id=lease_id, worker=worker)
    except services.ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.info(request, "You stopped; the prompt you had went back to the pool. Come back whenever you like.")
    return redirect("worker_campaign", slug=slug)
