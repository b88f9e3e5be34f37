"""Labels out: a researcher's export (paginated JSON, or a streamed CSV, JSONL or Parquet file) and a
worker's own labels.

All of it goes through ``annotation.exporting`` (the same rows, pseudonyms and formula defusing as
the web download).
"""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.pagination import CursorPagination
from rest_framework.views import APIView

from annotation import selectors, services
from annotation.exporting import (
    BINARY_FORMATS,
    FORMATS,
    PSEUDONYMIZE_HELP,
    ExportOptionError,
    export_response,
    export_rows,
    parse_pseudonymize,
)
from annotation.models import Label
from annotation.permissions import campaign_for_request


class LabelPagination(CursorPagination):
    ordering = "id"
    page_size = 500
    page_size_query_param = "page_size"
    max_page_size = 5000


class LabelRowOutput(serializers.Serializer):
    """One audit unit (a per-option label gives one row per option), as in the exported files."""

    worker = serializers.CharField(help_text="channel:id, or a stable pseudonym with pseudonymize=1.")
    prompt = serializers.CharField()
    value = serializers.JSONField()
    gold = serializers.JSONField(allow_null=True)
    group = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    leased_at = serializers.DateTimeField()
    time_spent_s = serializers.FloatField()
    campaign = serializers.CharField()
    label_id = serializers.IntegerField()
    prompt_text = serializers.CharField()
    control = serializers.BooleanField(
        help_text="A control prompt's label: it measures the worker, never enters the audit."
    )
    excluded = serializers.BooleanField(
        help_text=(
            "The worker is excluded from the campaign's audit: the row is kept, and left out of every audit number."
        )
    )
    final_k = serializers.IntegerField(
        allow_null=True, help_text="The prompt's own number of labels (adaptive k: so far, while it is open)."
    )
    k_rule = serializers.CharField(help_text="The campaign's rule for the number of labels per prompt, in words.")


class PseudonymizeField(serializers.BooleanField):
    """The web download's flag rules (``parse_pseudonymize``), not DRF's looser boolean ones (which
    also take t/y/f/n but only some capitalisations); documented as a boolean in the schema."""

    def to_internal_value(self, data) -> bool:
        try:
            return parse_pseudonymize(str(data))
        except ExportOptionError as exc:
            raise serializers.ValidationError(str(exc), code="invalid") from exc


class ExportOptions(serializers.Serializer):
    # An empty value (?pseudonymize=) never reaches the field: DRF treats it as absent, so the default.
    pseudonymize = PseudonymizeField(default=False, help_text=PSEUDONYMIZE_HELP)


class LabelFilters(ExportOptions):
    worker = serializers.CharField(required=False, max_length=221, help_text="Only this worker's (channel:id).")
    prompt = serializers.CharField(required=False, max_length=200, help_text="Only this prompt's (imported id).")
    since = serializers.DateTimeField(required=False, help_text="Only labels created at or after this time.")


def _page_rows(request, view, *, campaign, labels, pseudonymize: bool):
    paginator = LabelPagination()
    page = paginator.paginate_queryset(labels.only("id"), request, view=view)
    rows = export_rows(
        campaign=campaign, pseudonymize=pseudonymize, labels=Label.objects.filter(pk__in=[label.pk for label in page])
    )
    return paginator.get_paginated_response(LabelRowOutput(rows, many=True).data)


class LabelListApi(APIView):
    pagination_class = LabelPagination

    @extend_schema(parameters=[LabelFilters], responses={200: LabelRowOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        options = LabelFilters(data=request.query_params)
        options.is_valid(raise_exception=True)
        pseudonymize = options.validated_data.pop("pseudonymize")
        labels = selectors.campaign_labels(campaign=campaign, **options.validated_data)
        return _page_rows(request, self, campaign=campaign, labels=labels, pseudonymize=pseudonymize)


class LabelExportApi(APIView):
    """The campaign's labels as one file, streamed row by row, so its size does not matter; the same
    filters as the paginated list narrow it."""

    fmt: str = ""  # bound in urls.py, one URL per format

    @extend_schema(
        parameters=[LabelFilters],
        responses={
            (200, media.split(";")[0]): OpenApiResponse(
                OpenApiTypes.BINARY if fmt in BINARY_FORMATS else OpenApiTypes.STR
            )
            for fmt, media in FORMATS.items()
        },
    )
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        options = LabelFilters(data=request.query_params)
        options.is_valid(raise_exception=True)
        pseudonymize = options.validated_data.pop("pseudonymize")
        labels = (
            selectors.campaign_labels(campaign=campaign, **options.validated_data) if options.validated_data else None
        )
        return export_response(campaign=campaign, fmt=self.fmt, pseudonymize=pseudonymize, labels=labels)


class MyLabelsApi(APIView):
    """A worker's own labels in a campaign: what they answered, never the gold or others' labels."""

    pagination_class = LabelPagination

    class OutputSerializer(serializers.Serializer):
        label_id = serializers.IntegerField(source="pk")
        prompt = serializers.CharField(source="prompt.external_id")
        value = serializers.JSONField()
        created_at = serializers.DateTimeField()

    @extend_schema(responses={200: OutputSerializer(many=True)})
    def get(self, request, slug: str):
        campaign = selectors.campaign_for_workers(slug=slug, user=request.user)
        worker = services.worker_for_user(user=request.user)
        labels = selectors.campaign_labels(campaign=campaign, worker=worker.public_id).select_related("prompt")
        paginator = LabelPagination()
        page = paginator.paginate_queryset(labels, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)
