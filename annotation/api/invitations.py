"""A campaign's personal invitation links (``/api/v1/campaigns/<slug>/invitations/…``): list, make,
revoke. What the invitation page (``annotation.views.invitations``) offers, for a token client.

For the people who manage the campaign (``campaign_for_editor``: owner, editors, staff; 403 for a
viewer, whatever the method: a link is a worker's own key; 404 for anybody else).
``annotation.services.invitations`` checks and writes; a bad field answers 400 naming it.
"""

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors, services
from annotation.models import Invitation
from annotation.permissions import INVITATIONS_NOT_FOR_VIEWERS, campaign_for_editor


class InvitationOutput(serializers.ModelSerializer):
    url = serializers.SerializerMethodField(help_text="The link to send to the person it is for.")
    guest = serializers.CharField(source="user.username", default=None, help_text="The guest account, once accepted.")
    worker_labels = serializers.IntegerField(default=0, help_text="Labels the guest gave in this campaign.")
    expires_at = serializers.DateTimeField(read_only=True)
    is_expired = serializers.BooleanField(read_only=True)

    class Meta:
        model = Invitation
        fields = [
            "id",
            "note",
            "url",
            "created_at",
            "expires_at",
            "is_expired",
            "accepted_at",
            "guest",
            "worker_labels",
        ]
        read_only_fields = fields

    def get_url(self, invitation) -> str:
        path = reverse("worker_join", args=[invitation.campaign.slug, invitation.token])
        return self.context["request"].build_absolute_uri(path)


class InvitationInput(serializers.Serializer):
    notes = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=True),
        help_text="One invitation per note: who the link is for (only the campaign's managers see it).",
    )


class InvitationListApi(APIView):
    """The campaign's invitations, newest first (as the page lists them), and making new ones."""

    @extend_schema(responses={200: InvitationOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_editor(user=request.user, slug=slug, why=INVITATIONS_NOT_FOR_VIEWERS)
        invitations = selectors.invitations_of(campaign=campaign).select_related("campaign")
        return Response(InvitationOutput(invitations, many=True, context={"request": request}).data)

    @extend_schema(request=InvitationInput, responses={201: InvitationOutput(many=True)})
    def post(self, request, slug: str):
        campaign = campaign_for_editor(user=request.user, slug=slug, why=INVITATIONS_NOT_FOR_VIEWERS)
        data = InvitationInput(data=request.data)
        data.is_valid(raise_exception=True)
        made = services.invitations_create(campaign=campaign, created_by=request.user, **data.validated_data)
        return Response(
            InvitationOutput(made, many=True, context={"request": request}).data, status=status.HTTP_201_CREATED
        )


class InvitationDetailApi(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request, slug: str, pk: int):
        """Revoke an unused invitation (its link stops working); an accepted one answers 409
        ``invitation_used``."""
        campaign = campaign_for_editor(user=request.user, slug=slug, why=INVITATIONS_NOT_FOR_VIEWERS)
        services.invitation_revoke(invitation=get_object_or_404(Invitation, campaign=campaign, pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)
