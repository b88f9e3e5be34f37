"""The REST API of a campaign's live audit (``/api/v1/campaigns/<slug>/audit/…``, routed by
``audits.api.urls``), for the people who manage it (never for its workers): the dashboard's
numbers, the snapshot history, the full report, and "recompute now".

``audits.selectors`` and ``audits.services`` compute everything; these views only check who is
asking (``campaign_for_request``) and serialise. Errors take the API's shape (``annotation.api.exceptions``).
"""

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import parquet
from annotation.permissions import campaign_for_request
from audits import selectors, services
from audits.engine.markdown import render_markdown
from audits.models import AuditSnapshot
from audits.selectors import agreement
from audits.selectors.full import full_audit_skip_reason
from audits.views.dashboard import agreement_csv_response, feed_response


class AuditApi(APIView):
    """Everything the audit dashboard shows: status, latest quick numbers, history, workers (with their live
    quality numbers and flags: bias, most frequent answer, control accuracy, time), full report.

    Tagged with an ETag, as the dashboard's feed: send it back in If-None-Match and an unchanged audit
    answers 304 with no body."""

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT, 304: OpenApiResponse(description="Not modified since the ETag sent.")}
    )
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return feed_response(request, campaign=campaign, have_full=-1, respond=Response)


class SnapshotPagination(CursorPagination):
    ordering = "-watermark"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class AgreementPoint(serializers.Serializer):
    alpha = serializers.FloatField(allow_null=True, help_text="Krippendorff's α of the full audit (null: undefined).")
    alpha_level = serializers.ChoiceField(
        choices=["nominal", "interval"],
        help_text="interval where the raw labels are numbers with more than two values, else nominal.",
    )
    ac1 = serializers.FloatField(allow_null=True, help_text="Gwet's AC1 of the full audit (null: undefined).")


class AuditSnapshotListApi(APIView):
    """The audit's history, newest first: one row per audit run (``kind`` quick or full)."""

    pagination_class = SnapshotPagination

    class FilterSerializer(serializers.Serializer):
        # "cheap" is the quick kind's former name: clients written before the rename keep working.
        kind = serializers.ChoiceField(
            choices=[*AuditSnapshot.Kind.choices, ("cheap", "cheap: the former name of quick, still accepted")],
            default=AuditSnapshot.Kind.QUICK,
        )

        def validate_kind(self, value: str) -> str:
            return AuditSnapshot.Kind.QUICK if value == "cheap" else value

    class OutputSerializer(serializers.ModelSerializer):
        agreement = serializers.SerializerMethodField(
            help_text="Full runs: α and AC1 for a history chart (from data.agreement); null for quick runs."
        )

        class Meta:
            model = AuditSnapshot
            fields = ["kind", "watermark", "computed_at", "duration_ms", "cpu_ms", "data", "agreement"]

        @extend_schema_field(AgreementPoint(allow_null=True))
        def get_agreement(self, snapshot) -> dict | None:
            if snapshot.kind != AuditSnapshot.Kind.FULL:
                return None
            return selectors.agreement_point(snapshot.data.get("agreement"))

    @extend_schema(parameters=[FilterSerializer], responses={200: OutputSerializer(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        snapshots = campaign.audit_snapshots.filter(kind=filters.validated_data["kind"])
        paginator = SnapshotPagination()
        page = paginator.paginate_queryset(snapshots, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class AuditReportApi(APIView):
    """The latest full audit report, as the dashboard's downloads give it (with the alternative ground
    truths once a researcher asked for them): the JSON dict, its Markdown rendering, or its Parquet form
    (one row per value, addressed by its JSON Pointer). 404 (code ``not_found``) until a full audit has run."""

    fmt: str = ""  # bound in urls.py: json, md or parquet
    MEDIA_TYPES = {"json": "application/json", "md": "text/markdown; charset=utf-8", "parquet": parquet.CONTENT_TYPE}

    @extend_schema(
        responses={
            (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT),
            (200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR),
            (200, parquet.CONTENT_TYPE): OpenApiResponse(OpenApiTypes.BINARY),
        }
    )
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        found = selectors.report_download(campaign=campaign)
        if found is None:
            raise Http404("No full audit yet.")
        _, report = found
        if self.fmt == "json":
            return Response(report)
        if self.fmt == "parquet":
            return HttpResponse(selectors.report_parquet(report), content_type=self.MEDIA_TYPES["parquet"])
        return HttpResponse(render_markdown(report), content_type=self.MEDIA_TYPES["md"])


class AuditRecomputeApi(APIView):
    @extend_schema(
        request=None,
        responses={
            202: inline_serializer(
                "AuditRecompute",
                {
                    "queued": serializers.BooleanField(
                        help_text="false when a run was already queued (or the queue is unreachable; "
                        "it retries by itself)."
                    )
                },
            )
        },
    )
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return Response({"queued": services.audit_request_full(campaign=campaign)}, status=status.HTTP_202_ACCEPTED)


class PromptAgreementRow(serializers.Serializer):
    prompt = serializers.CharField(help_text="The prompt's id (``<id>#<option>`` for a per-option rating).")
    n_labels = serializers.IntegerField(help_text="Its audited labels.")
    mode_share = serializers.FloatField(help_text="Share of its labels equal to its most common raw value.")
    entropy_bits = serializers.FloatField(help_text="Shannon entropy of its raw values, in bits (0 = unanimous).")


class PairKappaRow(serializers.Serializer):
    worker_a = serializers.CharField(help_text="A worker's public id (``<channel>:<id>``).")
    worker_b = serializers.CharField(help_text="The other worker's public id.")
    n_shared = serializers.IntegerField(help_text="Prompts both labeled (at least ``min_shared``).")
    kappa = serializers.FloatField(
        allow_null=True, help_text="Cohen's κ on those prompts; null when undefined (chance agreement is 1)."
    )


class AgreementOutput(serializers.Serializer):
    n_labels = serializers.IntegerField(help_text="Audited labels read (the current labels, not a snapshot's).")
    min_shared = serializers.IntegerField(help_text="Prompts a pair of workers must share to get a κ.")
    cohen_kappa_mean = serializers.JSONField(
        help_text="The mean of the pairs' κs as the report states it (value, n_pairs, reason when undefined)."
    )
    fleiss_kappa = serializers.JSONField(help_text="Fleiss' κ over the prompts with the modal label count k.")
    prompts = PromptAgreementRow(many=True, help_text="One row per prompt with an audited label.")
    pairs = PairKappaRow(many=True, help_text="One row per pair of workers sharing at least min_shared prompts.")


class AgreementApi(APIView):
    """Agreement per prompt (share of the mode, entropy) and Cohen's κ per pair of workers, on the
    campaign's current audited labels; 404 for a free-text campaign (no label matrix)."""

    @extend_schema(responses={200: AgreementOutput})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        if (reason := full_audit_skip_reason(campaign)) is not None:
            raise Http404(f"No agreement table: {reason}.")
        return Response(AgreementOutput(agreement.agreement_tables(campaign=campaign)).data)


class AgreementCsvApi(APIView):
    """The same tables as the dashboard's agreement CSV: a ``kind`` column ("prompt" or "pair"), then
    ``prompt, n_labels, mode_share, entropy_bits`` and ``worker_a, worker_b, n_shared, cohen_kappa``."""

    @extend_schema(responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR)})
    def get(self, request, slug: str):
        return agreement_csv_response(campaign_for_request(request, slug))
