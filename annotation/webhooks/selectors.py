"""Reads of outbound webhooks."""

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from annotation.webhooks.models import Delivery, Endpoint


def endpoints_of(*, user) -> QuerySet[Endpoint]:
    return Endpoint.objects.filter(owner=user).select_related("campaign").order_by("-created_at")


def endpoint_for_owner(*, user, pk: int) -> Endpoint:
    """The user's own endpoint; 404 for anybody else's."""
    return get_object_or_404(Endpoint.objects.select_related("campaign"), pk=pk, owner=user)


def deliveries_of(*, endpoint: Endpoint) -> QuerySet[Delivery]:
    return endpoint.deliveries.order_by("-created_at", "-pk")
