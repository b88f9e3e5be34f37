"""A campaign's workers and the actions on them (``/api/v1/campaigns/<slug>/workers/`` and ``…/worker-actions/``):
each worker's standing; the log; acting on a worker (flag, exclude, include, block, unblock, recollect);
undoing an action.

For the people who manage the campaign (``campaign_for_request``: owner, collaborators, staff; 404 for
anybody else). ``annotation.services.quality`` checks and writes: a worker who is not in the campaign,
an unknown action or a missing reason answers 400 naming the field; an action the worker's standing
makes meaningless (including a worker never excluded, undoing an include) answers 409. Nothing is
changed by a refusal.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.models import WorkerAction
from annotation.models.workers import public_worker_id_parse
from annotation.permissions import campaign_for_request
from annotation.services import quality

WORKER_HELP = "The worker's public id, channel:id, as the dashboard and the label export name them."


class WorkerPagination(CursorPagination):
    ordering = "id"
    page_size = 500
    page_size_query_param = "page_size"
    max_page_size = 5000


class ActionPagination(WorkerPagination):
    ordering = "-id"  # newest first


class WorkerStatusOutput(serializers.Serializer):
    worker = serializers.CharField(source="worker.public_id", help_text=WORKER_HELP)
    labels = serializers.IntegerField(source="n_labels", help_text="Counted labels in this campaign.")
    joined_at = serializers.DateTimeField()
    excluded_at = serializers.DateTimeField(allow_null=True, help_text="Excluded from the audit since; null: included.")
    blocked_at = serializers.DateTimeField(allow_null=True, help_text="Blocked since; null: may take prompts.")
    flagged = serializers.BooleanField(help_text="A flag on this worker is not undone.")


class WorkerActionOutput(serializers.ModelSerializer):
    worker = serializers.CharField(source="worker.public_id", help_text=WORKER_HELP)
    by = serializers.CharField(source="by.username", default=None, help_text="Who acted; null when a rule did.")
    rule = serializers.IntegerField(source="rule_id", allow_null=True, help_text="The quality rule that acted, if any.")
    automatic = serializers.SerializerMethodField(help_text="Taken by a quality rule, not by a person.")
    undone_by = serializers.CharField(source="undone_by.username", default=None)
    undoable = serializers.SerializerMethodField(help_text="POST …/undo/ would undo it now.")
    undo_note = serializers.SerializerMethodField(help_text="What undoing it cannot give back, if anything.")

    class Meta:
        model = WorkerAction
        fields = [
            "id",
            "worker",
            "kind",
            "by",
            "rule",
            "automatic",
            "reason",
            "numbers",
            "created_at",
            "undone_at",
            "undone_by",
            "undoable",
            "undo_note",
        ]
        read_only_fields = fields

    def get_automatic(self, action) -> bool:
        return action.by_id is None

    def get_undoable(self, action) -> bool:
        return selectors.action_undoable(action)

    def get_undo_note(self, action) -> str | None:
        return quality.RECOLLECT_UNDO_NOTE if action.kind == WorkerAction.Kind.RECOLLECT else None


class WorkerActionInput(serializers.Serializer):
    worker = serializers.CharField(max_length=221, help_text=WORKER_HELP)
    action = serializers.ChoiceField(
        choices=WorkerAction.Kind.choices,
        help_text="flag; exclude from the audit, or include again; block, or unblock; recollect: exclude, block "
        "and void their counted labels so other workers label those prompts again (the voids cannot be undone).",
    )
    reason = serializers.CharField(max_length=quality.REASON_MAX, help_text="Why; the log keeps it with the action.")


class LogFilters(serializers.Serializer):
    worker = serializers.CharField(required=False, max_length=221, help_text="Only this worker's actions (channel:id).")


class WorkerListApi(APIView):
    """The campaign's workers, in the order they joined, with their standing."""

    pagination_class = WorkerPagination

    @extend_schema(responses={200: WorkerStatusOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        paginator = WorkerPagination()
        page = paginator.paginate_queryset(selectors.campaign_workers(campaign=campaign), request, view=self)
        return paginator.get_paginated_response(WorkerStatusOutput(page, many=True).data)


class WorkerActionListApi(APIView):
    """The log of actions on the campaign's workers, newest first (GET), and acting on a worker (POST).

    Acting is idempotent: when the worker already is what the action would make them, nothing is
    written and the answer (200) is the action that made them so; a new action answers 201.
    """

    pagination_class = ActionPagination

    @extend_schema(parameters=[LogFilters], responses={200: WorkerActionOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        filters = LogFilters(data=request.query_params)
        filters.is_valid(raise_exception=True)
        actions = selectors.worker_actions_of(campaign=campaign)
        if "worker" in filters.validated_data:
            channel, external_id = public_worker_id_parse(filters.validated_data["worker"])
            actions = actions.filter(worker__channel=channel, worker__external_id=external_id)
        paginator = ActionPagination()
        page = paginator.paginate_queryset(actions, request, view=self)
        return paginator.get_paginated_response(WorkerActionOutput(page, many=True).data)

    @extend_schema(
        request=WorkerActionInput,
        responses={
            201: WorkerActionOutput,
            200: OpenApiResponse(
                WorkerActionOutput,
                description="Nothing changed: the worker already was so; the action that made them so.",
            ),
        },
    )
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        data = WorkerActionInput(data=request.data)
        data.is_valid(raise_exception=True)
        worker = selectors.campaign_worker(campaign=campaign, public_id=data.validated_data["worker"])
        if worker is None:
            raise ValidationError({"worker": [f"{data.validated_data['worker']} is not a worker of this campaign."]})
        action = quality.worker_act(
            kind=data.validated_data["action"],
            campaign=campaign,
            worker=worker,
            by=request.user,
            reason=data.validated_data["reason"],
        )
        answer = status.HTTP_201_CREATED if action.logged else status.HTTP_200_OK
        return Response(WorkerActionOutput(action).data, status=answer)


class WorkerActionUndoApi(APIView):
    """Undo a flag, an exclusion, a block or a re-collection: the inverse is logged (include, unblock),
    and the action is marked undone. A re-collection's voided labels stay void. Idempotent: undoing an
    undone action answers it unchanged. An include or unblock cannot be undone (409): act again."""

    @extend_schema(request=None, responses={200: WorkerActionOutput})
    def post(self, request, slug: str, action_id: int):
        campaign = campaign_for_request(request, slug)
        action = get_object_or_404(WorkerAction, campaign=campaign, pk=action_id)
        return Response(WorkerActionOutput(quality.action_undo(action=action, by=request.user)).data)
