"""The researcher's webhooks page: register endpoints, send a test event, rotate a secret, enable,
delete, and read each endpoint's delivery log. Views parse, call one service, redirect."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotation.selectors import campaigns_visible_to
from annotation.webhooks import selectors, services
from annotation.webhooks.models import Endpoint


def _thresholds(text: str) -> dict:
    """``metric=value`` per line (or comma), as the form takes them."""
    out = {}
    for part in text.replace(",", "\n").splitlines():
        if part.strip():
            metric, _, value = part.partition("=")
            try:
                out[metric.strip()] = float(value)
            except ValueError:
                raise services.WebhookRefused(f"Write each threshold as metric=value; got {part.strip()!r}.") from None
    return out


@login_required
def webhooks_page(request):
    if request.method == "POST":
        slug = request.POST.get("campaign") or None
        campaign = campaigns_visible_to(user=request.user).filter(slug=slug).first() if slug else None
        try:
            endpoint = services.endpoint_create(
                user=request.user,
                url=request.POST.get("url", ""),
                events=request.POST.getlist("events"),
                campaign=campaign,
                thresholds=_thresholds(request.POST.get("thresholds", "")),
            )
        except services.WebhookRefused as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Endpoint registered. Its secret, shown only now: {endpoint.secret}")
        return redirect("webhooks:page")
    endpoints = list(selectors.endpoints_of(user=request.user))
    for endpoint in endpoints:
        endpoint.recent = list(selectors.deliveries_of(endpoint=endpoint)[:20])
    context = {
        "endpoints": endpoints,
        "events": Endpoint.Event.choices,
        "metrics": list(services.METRICS),
        "campaigns": campaigns_visible_to(user=request.user).order_by("title"),
    }
    return render(request, "webhooks/webhooks.html", context)


@login_required
@require_POST
def endpoint_act(request, pk, action):
    endpoint = selectors.endpoint_for_owner(user=request.user, pk=pk)
    try:
        if action == "test":
            services.endpoint_test(endpoint=endpoint)
            messages.success(request, "Test event sent; its delivery is in the log below.")
        elif action == "rotate":
            endpoint = services.endpoint_rotate_secret(endpoint=endpoint)
            messages.success(request, f"New secret, shown only now: {endpoint.secret}")
        elif action == "enable":
            services.endpoint_update(endpoint=endpoint, enabled=True)
        elif action == "disable":
            services.endpoint_update(endpoint=endpoint, enabled=False)
        elif action == "delete":
            services.endpoint_delete(endpoint=endpoint)
            messages.info(request, "Endpoint deleted.")
    except services.WebhookRefused as exc:
        messages.error(request, exc.message)
    return redirect("webhooks:page")
