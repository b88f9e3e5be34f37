"""Campaigns for researchers: list, create, read, change, life cycle, progress, prompts, controls, sharing.

Every view about one campaign goes through ``campaign_for_request`` (404 unless you own or share it, or
are staff); sharing goes through ``campaign_for_owner``.
"""

import json

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors, services
from annotation.api.exceptions import PayloadTooLarge
from annotation.api.parsers import BoundedJSONParser, BoundedMultiPartParser
from annotation.api.prompts import PromptListMixin
from annotation.importing import upload_too_large_message
from annotation.models import Campaign, Collaboration, ImportBatch
from annotation.models.campaigns import MAX_ANCHOR_LENGTH, MAX_SCALE_POINTS
from annotation.permissions import CREATE_REFUSAL, campaign_for_owner, campaign_for_request, may_create_campaigns
from annotation.services.campaigns import EDITABLE_FIELDS
from annotation.services.controls import MAX_IDS_AT_ONCE, control_settings_check, prompts_control_set


class CampaignOutput(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username")
    scale_anchors = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Campaign
        fields = [
            "slug",
            "owner",
            "status",
            "created_at",
            "launched_at",
            "closed_at",
            *sorted(EDITABLE_FIELDS),
            "imported_at",
        ]
        read_only_fields = fields


class CampaignInput(serializers.ModelSerializer):
    """The campaign's editable settings, validated as the model validates them; the service saves."""

    binarization = serializers.DictField(
        child=serializers.ChoiceField(choices=[0, 1]),
        required=False,
        help_text="Rating schemas, optional: raw value → 0/1 for a binarized view of the audit, e.g. "
        '{"1": 0, "2": 0, "3": 1, "4": 1}; without it the audit is on the unit scale (value − min) / (max − min).',
    )
    scale_anchors = serializers.ListField(
        child=serializers.CharField(max_length=MAX_ANCHOR_LENGTH),
        required=False,
        max_length=MAX_SCALE_POINTS,
        help_text="Rating schemas: words for the scale's points, lowest first, shown to workers with the buttons: "
        'one per point (["bad fit", "poor fit", "good fit", "very good fit"]) or two, for the ends; [] for none.',
    )

    class Meta:
        model = Campaign
        fields = sorted(EDITABLE_FIELDS)

    def validate_title(self, title: str) -> str:
        """An owner's campaigns have different names (``campaign_title_clash``); a campaign keeps its own."""
        campaign = self.instance if self.instance is not None and self.instance.pk else None
        clash = selectors.campaign_title_clash(owner=self.context["owner"], title=title, renamed=campaign)
        if clash is not None:
            raise ValidationError(selectors.title_clash_message(clash=clash), code="duplicate_title")
        return title

    def validate(self, attrs):
        # The control settings given, as the web form checks them.
        control_settings_check(control_rate=attrs.get("control_rate"), control_first=attrs.get("control_first", 0))
        return attrs


class ProgressOutput(serializers.Serializer):
    n_prompts = serializers.IntegerField()
    k = serializers.IntegerField()
    k_max = serializers.IntegerField(allow_null=True, help_text="Adaptive k: the most labels a prompt may get.")
    labels = serializers.IntegerField()
    labels_wanted = serializers.IntegerField()
    prompts_complete = serializers.IntegerField()
    percent = serializers.FloatField()


class PaceOutput(serializers.Serializer):
    labels_per_minute = serializers.FloatField(
        allow_null=True,
        help_text="Counted labels a minute over the last 30 minutes (or since launch); null unless live.",
    )
    window_minutes = serializers.FloatField(help_text="The minutes that rate is taken over.")
    eta_seconds = serializers.FloatField(
        allow_null=True, help_text="Seconds until every prompt has its labels at that rate; null without a rate."
    )


class ProgressWithPaceOutput(ProgressOutput, PaceOutput):
    pass


class CampaignListCreateApi(APIView):
    @extend_schema(responses={200: CampaignOutput(many=True)})
    def get(self, request):
        campaigns = selectors.campaigns_visible_to(user=request.user).select_related("owner")
        return Response(CampaignOutput(campaigns, many=True).data)

    @extend_schema(request=CampaignInput, responses={201: CampaignOutput})
    def post(self, request):
        if not may_create_campaigns(request.user):
            raise PermissionDenied(CREATE_REFUSAL)
        data = CampaignInput(instance=Campaign(), data=request.data, context={"owner": request.user})
        data.is_valid(raise_exception=True)
        campaign = services.campaign_create(owner=request.user, **data.validated_data)
        return Response(CampaignOutput(campaign).data, status=status.HTTP_201_CREATED)


class CampaignDetailApi(APIView):
    @extend_schema(responses={200: CampaignOutput})
    def get(self, request, slug: str):
        return Response(CampaignOutput(campaign_for_request(request, slug)).data)

    @extend_schema(request=CampaignInput(partial=True), responses={200: CampaignOutput})
    def patch(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        data = CampaignInput(instance=campaign, data=request.data, partial=True, context={"owner": campaign.owner})
        data.is_valid(raise_exception=True)
        campaign = services.campaign_update(campaign=campaign, **data.validated_data)
        return Response(CampaignOutput(campaign).data)


class CampaignTransitionApi(APIView):
    """launch, pause, resume or close; ``action`` is bound in urls.py, one URL per action."""

    action: str = ""

    @extend_schema(request=None, responses={200: CampaignOutput})
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        campaign = services.campaign_transition(campaign=campaign, action=self.action)
        return Response(CampaignOutput(campaign).data)


class CampaignProgressApi(APIView):
    @extend_schema(responses={200: ProgressWithPaceOutput})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        progress = selectors.campaign_progress(campaign=campaign)
        pace = selectors.campaign_pace(campaign=campaign, progress=progress)
        return Response({**ProgressOutput(progress).data, **PaceOutput(pace).data})


class PromptImportApi(PromptListMixin, APIView):
    """Import prompts, all or nothing, exactly as the web upload does (``prompts_import``); ``GET`` lists
    them (``PromptListMixin``).

    Send either a multipart form with a CSV or JSONL ``file``, or a JSON list of rows
    (``[{"id": ..., "text": ..., "gold": ..., "group": ..., "options": [...], "control": false}, ...]``);
    a row with ``"control": true`` is a control prompt and needs a gold.
    """

    parser_classes = (BoundedJSONParser, BoundedMultiPartParser)

    class FileInput(serializers.Serializer):
        file = serializers.FileField()

    class OutputSerializer(serializers.Serializer):
        filename = serializers.CharField()
        n_prompts = serializers.IntegerField()
        sha256 = serializers.CharField()
        created_at = serializers.DateTimeField()

    @extend_schema(
        request={"multipart/form-data": FileInput, "application/json": {"type": "array", "items": {"type": "object"}}},
        responses={201: OutputSerializer},
    )
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        if request.content_type.startswith("multipart/"):
            data = self.FileInput(data=request.data)
            data.is_valid(raise_exception=True)
            upload = data.validated_data["file"]
            limit = settings.CHORUS_MAX_IMPORT_BYTES
            if upload.size > limit:
                raise PayloadTooLarge(upload_too_large_message(size=upload.size, limit=limit))
            content, filename = upload.read(), upload.name
        else:
            content, filename = _jsonl(request.data), "request.jsonl"
        batch = services.prompts_import(campaign=campaign, data=content, filename=filename, user=request.user)
        return Response(self.OutputSerializer(batch).data, status=status.HTTP_201_CREATED)


class ImportOutput(serializers.ModelSerializer):
    class Meta:
        model = ImportBatch
        fields = ["id", "filename", "n_prompts", "created_at", "sha256"]
        read_only_fields = fields


class ImportListApi(APIView):
    """The campaign's imports, newest first."""

    @extend_schema(responses={200: ImportOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return Response(ImportOutput(campaign.imports.order_by("-created_at", "-pk"), many=True).data)


class ImportDetailApi(APIView):
    """Remove an import whole (``import_remove``): only in a campaign never launched, else 409."""

    @extend_schema(responses={204: None})
    def delete(self, request, slug: str, import_id: int):
        campaign = campaign_for_request(request, slug)
        services.import_remove(campaign=campaign, batch=get_object_or_404(campaign.imports, pk=import_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class CampaignCopyApi(APIView):
    """A new draft of yours with this campaign's settings and prompts (``campaign_copy``). Whoever sees
    the campaign (a viewer too: copying changes nothing in it) and may create campaigns can copy it."""

    class InputSerializer(serializers.Serializer):
        title = serializers.CharField(
            max_length=200,
            required=False,
            help_text="Default: “<title> (copy)”, or “(copy 2)”, … if you have a campaign of that name. "
            "A title you give must not be one of your campaigns' (any case).",
        )

        def validate_title(self, title: str) -> str:
            clash = selectors.campaign_title_clash(owner=self.context["owner"], title=title)
            if clash is not None:
                raise ValidationError(selectors.title_clash_message(clash=clash), code="duplicate_title")
            return title

    @extend_schema(request=InputSerializer, responses={201: CampaignOutput})
    def post(self, request, slug: str):
        source = selectors.campaign_for_user(user=request.user, slug=slug)
        if not may_create_campaigns(request.user):
            raise PermissionDenied(CREATE_REFUSAL)
        data = self.InputSerializer(data=request.data, context={"owner": request.user})
        data.is_valid(raise_exception=True)
        campaign = services.campaign_copy(campaign=source, owner=request.user, **data.validated_data)
        return Response(CampaignOutput(campaign).data, status=status.HTTP_201_CREATED)


def _jsonl(rows) -> bytes:
    """The rows as the JSONL file an upload would hold, so both ways share one parser and its rules.
    Only the envelope is checked here, and it fails fast: a body of a million numbers is refused at
    its first number, not after a million error messages."""
    if not isinstance(rows, list) or not rows:
        raise ValidationError({"rows": ["Send a multipart 'file', or a non-empty JSON list of row objects."]})
    first_bad = next((n for n, row in enumerate(rows, start=1) if not isinstance(row, dict)), None)
    if first_bad is not None:
        raise ValidationError({"rows": [f"Row {first_bad} is not a JSON object."]})
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


class PromptControlsApi(APIView):
    """The campaign's control prompts: list their ids, or make prompts controls (``"control": true``)
    or normal prompts again (``false``), all or none (``prompts_control_set``: a control needs a gold;
    only a prompt no worker was shown can change)."""

    class InputSerializer(serializers.Serializer):
        external_ids = serializers.ListField(
            child=serializers.CharField(max_length=200),
            min_length=1,
            max_length=MAX_IDS_AT_ONCE,
            help_text="The prompts' ids in the imported file.",
        )
        control = serializers.BooleanField(default=True)

    class OutputSerializer(serializers.Serializer):
        changed = serializers.ListField(child=serializers.CharField())
        unchanged = serializers.ListField(child=serializers.CharField(), help_text="Already as asked.")

    class ListOutputSerializer(serializers.Serializer):
        controls = serializers.ListField(child=serializers.CharField(), help_text="The control prompts' ids.")

    @extend_schema(responses={200: ListOutputSerializer})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        ids = campaign.prompts.filter(is_control=True).order_by("pk").values_list("external_id", flat=True)
        return Response(self.ListOutputSerializer({"controls": list(ids)}).data)

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer})
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        marking = prompts_control_set(campaign=campaign, **data.validated_data)
        return Response(self.OutputSerializer(marking).data)


class UsernameInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)


class CollaboratorInput(UsernameInput):
    role = serializers.ChoiceField(
        choices=Collaboration.Role.choices,
        default=Collaboration.Role.EDITOR,
        help_text="editor: manages the campaign like its owner (but cannot share it or spend its money); "
        "viewer: sees the dashboard, card, figures and exports, and changes nothing (403). Sharing again "
        "with another role changes the role.",
    )


class CollaboratorListApi(APIView):
    class OutputSerializer(serializers.Serializer):
        owner = serializers.CharField(source="owner.username")
        collaborators = serializers.SerializerMethodField(help_text="Every collaborator's username, of either role.")
        roles = serializers.SerializerMethodField(help_text="Each collaborator's role: editor or viewer.")

        def get_collaborators(self, campaign) -> list[str]:
            return sorted(campaign.collaborators.values_list("username", flat=True))

        def get_roles(self, campaign) -> dict[str, str]:
            return dict(Collaboration.objects.filter(campaign=campaign).values_list("user__username", "role"))

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return Response(self.OutputSerializer(campaign).data)

    @extend_schema(request=CollaboratorInput, responses={201: OutputSerializer})
    def post(self, request, slug: str):
        campaign = campaign_for_owner(user=request.user, slug=slug)
        data = CollaboratorInput(data=request.data)
        data.is_valid(raise_exception=True)
        services.campaign_share(campaign=campaign, **data.validated_data)
        return Response(self.OutputSerializer(campaign).data, status=status.HTTP_201_CREATED)


class CollaboratorDetailApi(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request, slug: str, username: str):
        campaign = campaign_for_owner(user=request.user, slug=slug)
        data = UsernameInput(data={"username": username})  # the URL's part is input like any other
        data.is_valid(raise_exception=True)
        services.campaign_unshare(campaign=campaign, **data.validated_data)
        return Response(status=status.HTTP_204_NO_CONTENT)
