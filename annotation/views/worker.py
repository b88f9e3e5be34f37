"""Worker pages, reached through a campaign's link ``/w/<slug>/``.

The loop: ``next`` asks lease_acquire for a prompt and redirects to its ``task`` page; the page posts
the label back to itself, which claims the next prompt and redirects to its page (to ``next`` when
nothing is left, whose page says why). While the page is open, static/js/label.js sends a heartbeat
every third of the lease length.
"""

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from annotation import selectors, services
from annotation.forms import SignUpForm
from annotation.models import Lease
from annotation.views.task import SKIPPED, heartbeat_json, label_post, lease_give_back, lease_is_live, render_task


def _safe_next(request, default: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return default


def signup(request):
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = services.account_create(username=form.cleaned_data["username"], password=form.cleaned_data["password1"])
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(_safe_next(request, reverse("home")))
    return render(request, "registration/signup.html", {"form": form, "next": _safe_next(request, "")})


def worker_campaign(request, slug):
    """The campaign's front page for workers: its instructions, and a button to start, or why there is
    nothing to start (before anybody signs up for nothing)."""
    campaign = selectors.campaign_for_workers(slug=slug, user=request.user)
    worker = services.worker_for_user(user=request.user) if request.user.is_authenticated else None
    context = {
        "campaign": campaign,
        "outlook": selectors.worker_outlook(campaign=campaign, worker=worker),
        "next": request.path,  # the header's and the page's sign-up and sign-in links come back here
    }
    return render(request, "annotation/worker_campaign.html", context)


@login_required
def worker_next(request, slug):
    result = services.lease_acquire_by_slug(slug=slug, user=request.user)
    if isinstance(result, services.NothingLeft):
        context = {
            "campaign": result.campaign,
            "reason": result.reason,
            "code": result.code,
            "done": result.worker_labels,
        }
        return render(request, "annotation/nothing_left.html", context)
    return redirect("worker_task", slug=slug, lease_id=result.pk)


def _to_next_task(slug: str, worker):
    """After a label: a redirect to the worker's next prompt's page, claimed here, as ``next`` would give
    without the trip through it (a request fewer per label); to ``next`` itself when nothing is left for
    them, whose page says why, or when the claim could not answer (``lease_acquire_after_label``)."""
    result = services.lease_acquire_after_label(campaign_slug=slug, worker=worker)
    if result is None or isinstance(result, services.NothingLeft):
        return redirect("worker_next", slug=slug)
    return redirect("worker_task", slug=slug, lease_id=result.pk)


@login_required
def worker_task(request, slug, lease_id):
    """One prompt to label (GET), and its label (POST)."""
    worker = services.worker_for_user(user=request.user)
    error = None
    if request.method == "POST":
        post = label_post(request, lease_id=lease_id, worker=worker, campaign_slug=slug)
        if post.ack is not None:
            messages.success(request, f"Saved. You have labeled {post.ack.worker_labels} so far.")
            return _to_next_task(slug, worker)
        if post.error is None:
            messages.warning(request, post.refusal.message)
            return redirect("worker_next", slug=slug)
        error = post.error
    # The campaign comes with the lease, by the URL's slug: a campaign that holds a lease was launched, so
    # every worker may see it (campaign_for_workers), and any other slug is a 404, as a lease that is not yours.
    lease = selectors.lease_for_worker(lease_id=lease_id, worker=worker, campaign_slug=slug)
    campaign = lease.campaign
    if error is None and not lease_is_live(lease):
        if lease.status == Lease.Status.ACTIVE:
            messages.warning(request, "Your time on that prompt ran out; here is another one.")
        return redirect("worker_next", slug=slug)
    return render_task(
        request,
        "annotation/worker_task.html",
        campaign=campaign,
        lease=lease,
        error=error,
        form_action=request.path,
        heartbeat_url=reverse("worker_heartbeat", args=[slug, lease.pk]),
        skip_url=reverse("worker_skip", args=[slug, lease.pk]),
        stop_url=reverse("worker_stop", args=[slug, lease.pk]),
    )


@login_required
@require_POST
def worker_heartbeat(request, slug, lease_id):
    worker = services.worker_for_user(user=request.user)
    return heartbeat_json(lease_id=lease_id, worker=worker, not_leased_is_404=True, campaign_slug=slug)


@login_required
@require_POST
def worker_stop(request, slug, lease_id):
    """The worker stops for now: their prompt goes back to the pool at once."""
    worker = services.worker_for_user(user=request.user)
    lease_give_back(
        request,
        lease_id=lease_id,
        worker=worker,
        campaign_slug=slug,
        message="You stopped; the prompt you had went back to the pool. Come back whenever you like.",
    )
    return redirect("worker_campaign", slug=slug)


@login_required
@require_POST
def worker_skip(request, slug, lease_id):
    """The worker skips their prompt: it goes to other workers, never back to them; here is the next."""
    worker = services.worker_for_user(user=request.user)
    lease_give_back(request, lease_id=lease_id, worker=worker, campaign_slug=slug, message=SKIPPED)
    return redirect("worker_next", slug=slug)
