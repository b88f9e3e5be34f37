"""The study's tables and figures for a token client (``audits.selectors.figures``, the numbers the
pages draw): campaigns side by side (Table 2) as JSON or CSV, a campaign's groups side by side, and
the data of Figs. 4–6 (not the SVG).

Each campaign is looked up with ``campaign_for_user`` (404 for a campaign that is not yours, as for
one that does not exist, so nothing leaks).
"""

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.permissions import campaign_for_request
from annotation.selectors import campaign_for_user
from audits.selectors import figures
from audits.selectors.full import full_audit_skip_reason
from audits.views.compare import compare_csv, requested_slugs

COLUMNS = [{"key": k, "name": name} for k, name in figures.TABLE_COLUMNS]


class CompareQuery(serializers.Serializer):
    campaigns = serializers.CharField(help_text="Campaign slugs, joined by commas (or the parameter repeated).")


class Column(serializers.Serializer):
    key = serializers.CharField()
    name = serializers.CharField()


class CompareRow(serializers.Serializer):
    slug = serializers.CharField(source="campaign.slug")
    title = serializers.CharField(source="campaign.title")
    watermark = serializers.IntegerField(
        allow_null=True, help_text="Labels of the full audit it reads; null before one."
    )
    computed_at = serializers.DateTimeField(allow_null=True)
    row = serializers.DictField(
        allow_null=True, help_text="Table 2's numbers by column key (and mean_others, mean_gold)."
    )


class CompareOutput(serializers.Serializer):
    columns = Column(many=True)
    rows = CompareRow(many=True)


def _compared(request) -> list:
    query = CompareQuery(data={"campaigns": ",".join(request.query_params.getlist("campaigns"))})
    query.is_valid(raise_exception=True)
    slugs = requested_slugs([query.validated_data["campaigns"]])
    if not slugs:
        raise serializers.ValidationError({"campaigns": ["Name one or more campaigns."]})
    return figures.compare_rows(campaigns=[campaign_for_user(user=request.user, slug=s) for s in slugs])


class CompareApi(APIView):
    """Several campaigns side by side (the study's Table 2), from each one's latest full audit."""

    @extend_schema(parameters=[CompareQuery], responses={200: CompareOutput})
    def get(self, request):
        return Response(CompareOutput({"columns": COLUMNS, "rows": _compared(request)}).data)


class CompareCsvApi(APIView):
    """The same table as the page's CSV download."""

    @extend_schema(parameters=[CompareQuery], responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR)})
    def get(self, request):
        return compare_csv(_compared(request))


class GroupsOutput(serializers.Serializer):
    skip_reason = serializers.CharField(allow_null=True, help_text="Why there is no table (free-text answers).")
    columns = Column(many=True)
    rows = serializers.ListField(
        child=serializers.DictField(),
        help_text="One row per group: Table 2's numbers by key, and ``cells`` in the order of ``columns``.",
    )
    whole = serializers.DictField(allow_null=True, help_text="The same row for the whole campaign.")
    n_ungrouped = serializers.IntegerField(allow_null=True, help_text="Prompts without a group.")
    n_labels = serializers.IntegerField(allow_null=True, help_text="The labels it was computed on.")


class GroupsApi(APIView):
    """The campaign's groups (``Prompt.group``) side by side, computed on the current labels: the
    groups page's table."""

    @extend_schema(responses={200: GroupsOutput})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        skip_reason = full_audit_skip_reason(campaign)
        table = {"rows": [], "whole": None, "n_ungrouped": None, "n_labels": None}
        if not skip_reason:
            table = figures.group_table(campaign=campaign)
        return Response(GroupsOutput({"skip_reason": skip_reason, "columns": COLUMNS, **table}).data)


class FiguresOutput(serializers.Serializer):
    watermark = serializers.IntegerField()
    computed_at = serializers.DateTimeField()
    sd = serializers.JSONField(allow_null=True)
    thresholds = serializers.ListField(child=serializers.IntegerField())
    boxes = serializers.JSONField(help_text="Fig. 5: [threshold, accuracies vs others of the workers kept].")
    boxes_gold = serializers.JSONField(allow_null=True, help_text="Fig. 5 against gold; null without gold.")
    regressions = serializers.JSONField(help_text="Fig. 6: per reference and noise number, points, fit, line, band.")
    gold_vs_others = serializers.JSONField(help_text="Fig. 4: each worker's [accuracy vs gold, accuracy vs others].")


class FiguresApi(APIView):
    """The numbers behind the figures page (Figs. 4–6), from the latest full audit; 404 before one."""

    @extend_schema(responses={200: FiguresOutput})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        data = figures.figures_data(campaign=campaign)
        if data is None:
            raise Http404("No full audit yet.")
        return Response(FiguresOutput(data).data)
