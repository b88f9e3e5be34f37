from django.conf import settings
from django.db import models
from django.utils import timezone


class Collaboration(models.Model):
    """A user the owner shared the campaign with, and what they may do with it (annotation.permissions).

    It is the ``Campaign.collaborators`` many-to-many's own table (``annotation_campaign_collaborators``,
    which predates roles), so every row shared before roles existed is an editor's.
    """

    class Role(models.TextChoices):
        EDITOR = "editor", "Editor: manages the campaign like its owner, but cannot share it or spend its money"
        VIEWER = "viewer", "Viewer: sees the dashboard, card, figures and exports; changes nothing"

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.EDITOR)

    class Meta:
        db_table = "annotation_campaign_collaborators"
        unique_together = [("campaign", "user")]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) on {self.campaign}"


class Activity(models.Model):
    """One change somebody made to a campaign (or that Chorus made for them): the activity log.

    ``actor`` is null when nobody signed in did it (a rule acting, a Celery task, a management
    command); ``verb`` is a dotted name a script can filter on (``campaign.launched``,
    ``prompts.imported``), ``summary`` the sentence the page shows, ``detail`` the values involved.
    """

    campaign = models.ForeignKey(
        "annotation.Campaign", null=True, blank=True, on_delete=models.CASCADE, related_name="activities"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verb = models.CharField(max_length=50)
    summary = models.CharField(max_length=300)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "activities"
        indexes = [models.Index(fields=["campaign", "-created_at"], name="activity_campaign_recent")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor or 'Chorus'}: {self.summary}"
