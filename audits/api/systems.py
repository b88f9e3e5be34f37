"""The REST API of a campaign's systems (``/api/v1/campaigns/<slug>/systems/…``, routed by
``audits.api.urls``), for the people who manage the campaign: upload, list, read, replace and
delete systems, and their leaderboard.

A system is sent as a multipart form (``name`` and a CSV or JSONL ``file``, read by
``system_upload``) or as JSON (``{"name": ..., "predictions": {prompt id: prediction}}``, checked by
``system_save``); a free-text system's predictions are ranked answer lists, with optional
``samples``. Refusals take the API's error shape (``annotation.api.exceptions``): a 400 whose
``fields`` name ``name``, ``file`` or ``predictions`` with every bad row.
"""

from django.conf import settings
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.exceptions import PayloadTooLarge
from annotation.api.parsers import BoundedJSONParser, BoundedMultiPartParser
from annotation.importing import upload_too_large_message
from annotation.permissions import campaign_for_request
from audits.selectors import systems as selectors
from audits.services import systems as services


class SystemOutput(serializers.Serializer):
    name = serializers.CharField()
    n_predictions = serializers.IntegerField()
    filename = serializers.CharField()
    uploaded_at = serializers.DateTimeField()
    uploaded_by = serializers.CharField(allow_null=True)


class SystemDetailOutput(SystemOutput):
    predictions = serializers.DictField(help_text="{prompt id: prediction}")


class FileInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    file = serializers.FileField()
    samples = serializers.FileField(required=False, help_text="Free text: sampled answers (ProtoQA's shapes).")
    replace = serializers.BooleanField(default=False)


class JsonInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    predictions = serializers.DictField(help_text="{prompt id: prediction}; free text: {prompt id: [ranked answers]}")
    samples = serializers.DictField(
        required=False, help_text="Free text only: {prompt id: [sampled answers]} for ProbEval's KL."
    )
    replace = serializers.BooleanField(default=False)


def _summary(system) -> dict:
    return {
        "name": system.name,
        "n_predictions": system.n_predictions,
        "filename": system.filename,
        "uploaded_at": system.uploaded_at,
        "uploaded_by": system.uploaded_by.get_username() if system.uploaded_by else None,
    }


def _store(request, campaign, *, name: str | None, replace: bool | None):
    """Upload (multipart) or save (JSON) a system; ``name`` and ``replace`` from the URL when given."""
    multipart = request.content_type.startswith("multipart/")
    data = (FileInput if multipart else JsonInput)(data=request.data)
    data.is_valid(raise_exception=True)
    values = data.validated_data
    name = name if name is not None else values.get("name", "")
    replace = values["replace"] if replace is None else replace
    if not multipart:
        return services.system_save(
            campaign=campaign,
            name=name,
            predictions=values["predictions"],
            samples=values.get("samples"),
            by=request.user,
            replace=replace,
        )
    upload, samples = values["file"], values.get("samples")
    limit = settings.CHORUS_MAX_IMPORT_BYTES
    for part in (upload, samples):
        if part is not None and part.size > limit:
            raise PayloadTooLarge(upload_too_large_message(size=part.size, limit=limit))
    return services.system_upload(
        campaign=campaign,
        name=name,
        data=upload.read(),
        filename=upload.name,
        by=request.user,
        replace=replace,
        samples=samples.read() if samples is not None else None,
        samples_filename=samples.name if samples is not None else "",
    )


REQUEST = {"multipart/form-data": FileInput, "application/json": JsonInput}


class SystemListApi(APIView):
    """The campaign's systems (without their predictions); POST uploads one (``replace``: true to
    replace a system of that name, else a taken name is refused)."""

    parser_classes = (BoundedJSONParser, BoundedMultiPartParser)

    @extend_schema(responses={200: SystemOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return Response(SystemOutput(selectors.systems_list(campaign=campaign), many=True).data)

    @extend_schema(request=REQUEST, responses={201: SystemOutput})
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        system = _store(request, campaign, name=None, replace=None)
        return Response(SystemOutput(_summary(system)).data, status=status.HTTP_201_CREATED)


class SystemDetailApi(APIView):
    """One system with its predictions; PUT replaces its predictions (or creates it), DELETE removes it."""

    parser_classes = (BoundedJSONParser, BoundedMultiPartParser)

    def _system(self, request, slug, name):
        campaign = campaign_for_request(request, slug)
        system = selectors.system_detail(campaign=campaign, name=name)
        if system is None:
            raise Http404("No system of that name.")
        return system

    @extend_schema(responses={200: SystemDetailOutput})
    def get(self, request, slug: str, name: str):
        system = self._system(request, slug, name)
        return Response(SystemDetailOutput({**_summary(system), "predictions": system.predictions}).data)

    @extend_schema(request=REQUEST, responses={200: SystemOutput, 201: SystemOutput})
    def put(self, request, slug: str, name: str):
        campaign = campaign_for_request(request, slug)
        existed = selectors.system_detail(campaign=campaign, name=name) is not None
        system = _store(request, campaign, name=name, replace=True)
        return Response(SystemOutput(_summary(system)).data, status=200 if existed else 201)

    @extend_schema(responses={204: OpenApiResponse(description="Deleted.")})
    def delete(self, request, slug: str, name: str):
        system = self._system(request, slug, name)
        services.system_delete(campaign=system.campaign, name=system.name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SystemLeaderboardApi(APIView):
    """The leaderboard: every system's scores with 95 % intervals (against the modal label or the
    prompts' mean rating, gold, each alternative ground truth), per noise partition with the z-tests,
    per group, per rater; the ranking; and for every pair the paired t-test across raters and the
    test across prompts (exact McNemar, or a paired bootstrap of the Spearman difference), each with
    a verdict in words."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return Response(selectors.leaderboard(campaign=campaign))
