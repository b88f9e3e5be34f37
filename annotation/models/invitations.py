from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Invitation(models.Model):
    """A personal invitation to a campaign: one link for one person.

    The first browser to accept the link binds it to a new guest account (``user``), whose password is
    the short re-entry code shown once, on acceptance. From then on the link opens only that account: in
    a browser still signed in to it, or anywhere after typing the code. One invitation is therefore at
    most one account, hence one worker, and never-twice holds for that worker across their devices.
    """

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="invitations")
    token = models.CharField(max_length=32, unique=True, help_text="The secret part of the link.")
    note = models.CharField(max_length=200, blank=True, help_text="Who it is for; only the campaign's managers see it.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # PROTECT: deleting the guest must not free the invitation for a second person.
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="invitation"
    )
    accepted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=True, accepted_at__isnull=True)
                | Q(user__isnull=False, accepted_at__isnull=False),
                name="invitation_accepted_by_a_user",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.campaign}: {self.note or self.token[:6]}"

    @property
    def expires_at(self):
        """When the link stops working if nobody has accepted it (CHORUS_INVITATION_MAX_AGE after it was
        made). An accepted invitation does not expire: it keeps opening its person's account."""
        return self.created_at + timedelta(seconds=settings.CHORUS_INVITATION_MAX_AGE)

    @property
    def is_expired(self) -> bool:
        return self.user_id is None and self.expires_at <= timezone.now()
