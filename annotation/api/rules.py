"""A campaign's quality rules (``/api/v1/campaigns/<slug>/quality-rules/…``): list, add, deactivate.

For the people who manage the campaign (``campaign_for_request``: owner, collaborators, staff; 404 for
anybody else). ``annotation.services.rules`` checks and writes; a bad field answers 400 naming it.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import QualityRule
from annotation.permissions import campaign_for_request
from annotation.services.rules import rule_create, rule_deactivate


class RuleOutput(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = QualityRule
        fields = ["id", "metric", "threshold", "min_labels", "action", "active", "created_by", "created_at"]
        read_only_fields = fields


class RuleInput(serializers.Serializer):
    metric = serializers.ChoiceField(choices=QualityRule.Metric.choices)
    threshold = serializers.FloatField(
        help_text="A share between 0 and 1: control accuracy below it, or the most frequent answer's share above it."
    )
    min_labels = serializers.IntegerField(
        help_text="Controls answered (control accuracy) or labels given "
        "(straight-lining) before the rule applies; at least 1."
    )
    action = serializers.ChoiceField(choices=QualityRule.Action.choices)


class QualityRuleListApi(APIView):
    """The campaign's rules, oldest first (deactivated ones included), and adding one."""

    @extend_schema(responses={200: RuleOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return Response(RuleOutput(campaign.quality_rules.select_related("created_by"), many=True).data)

    @extend_schema(request=RuleInput, responses={201: RuleOutput})
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        data = RuleInput(data=request.data)
        data.is_valid(raise_exception=True)
        rule = rule_create(campaign=campaign, by=request.user, **data.validated_data)
        return Response(RuleOutput(rule).data, status=status.HTTP_201_CREATED)


class QualityRuleDeactivateApi(APIView):
    """Stop a rule from acting (idempotent); the actions it took stay, and stay undoable."""

    @extend_schema(request=None, responses={200: RuleOutput})
    def post(self, request, slug: str, rule_id: int):
        campaign = campaign_for_request(request, slug)
        rule = rule_deactivate(rule=get_object_or_404(QualityRule, campaign=campaign, pk=rule_id))
        return Response(RuleOutput(rule).data)
