"""Sharing a campaign: its owner lets other users manage it (editors) or watch it (viewers) as
collaborators (``Collaboration``; what each role may do: annotation.permissions)."""

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.models import Campaign, Collaboration
from annotation.services.activity import activity_record
from annotation.services.errors import ServiceError


def _user(username: str):
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise ServiceError(f"There is no user {username!r}.", code="unknown_user")
    return user


def campaign_share(*, campaign: Campaign, username: str, role: str = Collaboration.Role.EDITOR):
    """Add the user as a collaborator with this role, or give a collaborator this role (idempotent);
    returns the user."""
    if role not in Collaboration.Role.values:
        raise ServiceError(
            f"A collaborator's role is one of {', '.join(Collaboration.Role.values)}, not {role!r}.",
            code="invalid_role",
            fields={"role": ["Not a role."]},
        )
    user = _user(username)
    if user.pk == campaign.owner_id:
        raise ServiceError("The owner already manages this campaign.", code="is_owner")
    with transaction.atomic(durable=True):
        collaboration, created = Collaboration.objects.select_for_update().get_or_create(
            campaign=campaign, user=user, defaults={"role": role}
        )
        if created or collaboration.role != role:
            collaboration.role = role
            collaboration.save(update_fields=["role"])
            activity_record(
                campaign=campaign,
                verb="collaborator.shared",
                summary=f"Shared with {username} as {role}",
                detail={"username": username, "role": role},
            )
    return user


def campaign_unshare(*, campaign: Campaign, username: str) -> None:
    """Remove the user from the collaborators (idempotent)."""
    user = _user(username)
    with transaction.atomic(durable=True):
        removed, _ = Collaboration.objects.filter(campaign=campaign, user=user).delete()
        if removed:
            activity_record(
                campaign=campaign,
                verb="collaborator.removed",
                summary=f"No longer shared with {username}",
                detail={"username": username},
            )
