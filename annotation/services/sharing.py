"""Sharing a campaign: its owner lets other users manage it as collaborators."""

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.models import Campaign
from annotation.services.errors import ServiceError


def _user(username: str):
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise ServiceError(f"There is no user {username!r}.", code="unknown_user")
    return user


def campaign_share(*, campaign: Campaign, username: str):
    """Add the user as a collaborator (idempotent); returns the user."""
    user = _user(username)
    if user.pk == campaign.owner_id:
        raise ServiceError("The owner already manages this campaign.", code="is_owner")
    with transaction.atomic(durable=True):
        campaign.collaborators.add(user)
    return user


def campaign_unshare(*, campaign: Campaign, username: str) -> None:
    """Remove the user from the collaborators (idempotent)."""
    user = _user(username)
    with transaction.atomic(durable=True):
        campaign.collaborators.remove(user)
