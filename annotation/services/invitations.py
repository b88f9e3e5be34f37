"""Writes on personal invitations: making the links, and the first acceptance, which binds a link to
one person (annotation.models.Invitation)."""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import get_random_string

from annotation.models import Campaign, Invitation
from annotation.services.activity import activity_record
from annotation.services.errors import ServiceError

MAX_INVITATIONS_AT_ONCE = 200
# No 0/O or 1/I: the code is read off a screen and typed on another device.
CODE_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8  # 32**8 ≈ 10**12 codes, behind a secret link and the sign-in throttle


class InvitationTaken(ServiceError):
    """Somebody accepted the invitation first (another browser, at the same moment)."""

    code = "invitation_taken"
    status = 409


@dataclass(frozen=True)
class Acceptance:
    user: AbstractBaseUser
    code: str  # the re-entry code as shown, ABCD-EFGH; stored only as the guest account's password hash


def invitations_create(*, campaign: Campaign, created_by, notes: list[str]) -> list[Invitation]:
    """One invitation per note (a name, an e-mail address: whatever tells the researcher who the link is
    for; only the campaign's managers see it)."""
    if not 1 <= len(notes) <= MAX_INVITATIONS_AT_ONCE:
        message = f"Make 1 to {MAX_INVITATIONS_AT_ONCE} invitations at a time."
        raise ServiceError(message, code="bad_count", fields={"notes": message})
    longest = Invitation._meta.get_field("note").max_length
    if any(len(note) > longest for note in notes):
        message = f"A note has at most {longest} characters."
        raise ServiceError(message, code="bad_note", fields={"notes": message})
    invitations = [
        Invitation(campaign=campaign, token=get_random_string(24), note=note, created_by=created_by) for note in notes
    ]
    with transaction.atomic(durable=True):
        created = Invitation.objects.bulk_create(invitations)
        activity_record(
            campaign=campaign,
            verb="invitations.created",
            summary=f"Made {len(created)} invitation links",
            detail={"count": len(created)},  # not the notes: who they are for is the managers' to see
            actor=created_by,
        )
    return created


def invitation_revoke(*, invitation: Invitation) -> None:
    """Withdraw an unused invitation: its link stops working. An accepted one is refused (409
    ``invitation_used``): it is its guest's only way back in, and the guest's labels stay theirs.

    The conditional DELETE decides against an acceptance at the same moment, as in
    :func:`invitation_accept`."""
    with transaction.atomic(durable=True):
        deleted, _ = Invitation.objects.filter(pk=invitation.pk, user__isnull=True).delete()
        if deleted:
            activity_record(
                campaign_id=invitation.campaign_id,
                verb="invitation.revoked",
                summary="Revoked an invitation link",
                detail={"invitation_id": invitation.pk},
            )
    if not deleted:
        raise ServiceError(
            "This invitation has been accepted: its guest signs in with it, so it stays.",
            code="invitation_used",
            status=409,
        )


def invitation_accept(*, invitation: Invitation) -> Acceptance:
    """Bind an unused invitation to a new guest account (a random ``guest-…`` username) whose password
    is a fresh re-entry code, returned here once and never stored in clear.

    The conditional UPDATE decides between two browsers accepting at once: the one that finds the
    invitation already taken rolls back, its guest account with it, and gets InvitationTaken.
    """
    raw = get_random_string(CODE_LENGTH, allowed_chars=CODE_CHARS)
    with transaction.atomic(durable=True):
        user = get_user_model().objects.create_user(username=f"guest-{get_random_string(10).lower()}", password=raw)
        taken = Invitation.objects.filter(pk=invitation.pk, user__isnull=True).update(
            user=user, accepted_at=timezone.now()
        )
        if taken != 1:
            raise InvitationTaken("Somebody has already used this invitation.")
    return Acceptance(user=user, code=f"{raw[:4]}-{raw[4:]}")
