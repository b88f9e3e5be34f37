"""The campaign's activity log (``Activity``): who changed what, and when. For everybody who sees the
campaign (viewers included), newest first."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.permissions import campaign_for_request

MAX_LIMIT = 1000


class ActivityOutput(serializers.Serializer):
    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    actor = serializers.CharField(
        source="actor.username", default=None, allow_null=True, help_text="Null: Chorus itself (a rule, a task)."
    )
    verb = serializers.CharField(help_text="What happened, dotted: campaign.created, prompts.imported, worker.block…")
    summary = serializers.CharField(help_text="The sentence the campaign page shows.")
    detail = serializers.JSONField(help_text="The values involved (ids, counts, the fields changed).")


class ActivityQuery(serializers.Serializer):
    verb = serializers.CharField(required=False, help_text="Only this verb, or verbs starting with it and a dot.")
    before = serializers.IntegerField(
        required=False, min_value=1, help_text="Only entries older than this id (paging)."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=100)


class ActivityListApi(APIView):
    @extend_schema(
        parameters=[ActivityQuery],
        responses={200: ActivityOutput(many=True)},
        summary="The campaign's activity log, newest first; page with ?before=<the last id>",
    )
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        query = ActivityQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        entries = selectors.campaign_activity(campaign=campaign)
        if "verb" in query.validated_data:
            verb = query.validated_data["verb"]
            entries = entries.filter(verb=verb) | entries.filter(verb__startswith=verb + ".")
        if "before" in query.validated_data:
            entries = entries.filter(pk__lt=query.validated_data["before"])
        return Response(ActivityOutput(entries[: query.validated_data["limit"]], many=True).data)
