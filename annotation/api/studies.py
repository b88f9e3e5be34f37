"""Imported studies for researchers: a labels file collected elsewhere becomes a closed, read-only
campaign (``annotation.services.studies``), audited like a collected one."""

import json

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.campaigns import CampaignInput, CampaignOutput
from annotation.api.exceptions import PayloadTooLarge
from annotation.api.parsers import BoundedMultiPartParser
from annotation.importing import upload_too_large_message
from annotation.permissions import CREATE_REFUSAL, may_create_campaigns
from annotation.services.studies import study_import_uploaded


class StudyInput(CampaignInput):
    labels = serializers.FileField(
        help_text="The labels file: CSV, TSV or JSONL with worker, prompt, value; optional gold, group, "
        "created_at and text (the prompt's text). Chorus's own label export is such a file."
    )
    prompts = serializers.FileField(
        required=False,
        help_text="Optional prompts file (prompt, text; optional gold, group): every labeled prompt must be in it.",
    )

    class Meta(CampaignInput.Meta):
        fields = [*CampaignInput.Meta.fields, "labels", "prompts"]


class StudyImportApi(APIView):
    """Create an imported study: a campaign holding a labels file collected elsewhere, closed for
    labeling and read-only; its dashboard, card, figures, systems, ground truths and exports work as on
    a collected campaign. All or nothing: a bad row is a 400 naming its line, and nothing is stored.
    k is the most labels any prompt has. Send a multipart form with the files and the campaign's
    settings (``title``, ``schema`` and the schema's fields; ``binarization`` as a JSON object)."""

    parser_classes = (BoundedMultiPartParser,)

    @extend_schema(request={"multipart/form-data": StudyInput}, responses={201: CampaignOutput})
    def post(self, request):
        if not may_create_campaigns(request.user):
            raise PermissionDenied(CREATE_REFUSAL)
        data = {name: request.data.get(name) for name in request.data}  # not copy(): it would deep-copy the files
        if isinstance(data.get("binarization"), str):
            try:
                data["binarization"] = json.loads(data["binarization"])
            except ValueError:
                raise ValidationError(
                    {"binarization": ['Give the map as a JSON object, e.g. {"1": 0, "4": 1}.']}
                ) from None
        given = StudyInput(data=data, context={"owner": request.user})
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        labels, prompts = fields.pop("labels"), fields.pop("prompts", None)
        limit = settings.CHORUS_MAX_IMPORT_BYTES
        for upload in (labels, prompts):
            if upload is not None and upload.size > limit:
                raise PayloadTooLarge(upload_too_large_message(size=upload.size, limit=limit))
        imported = study_import_uploaded(owner=request.user, labels=labels, prompts=prompts, **fields)
        return Response(CampaignOutput(imported.campaign).data, status=status.HTTP_201_CREATED)
