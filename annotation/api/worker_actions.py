"""A campaign's workers and the actions on them (``/api/v1/campaigns/<slug>/workers/`` and ``…/worker-actions/``):
each worker's standing with the live audit's numbers and flags for them (filtered by flag and status);
a worker's labels (``…/workers/<worker id>/labels/``); the log; acting on a worker or on several at once,
all or nothing (flag, unflag, exclude, include, block, unblock, recollect); undoing an action.

For the people who manage the campaign (``campaign_for_request``: owner, collaborators, staff; 404 for
anybody else). ``annotation.services.quality`` checks and writes: a worker who is not in the campaign,
an unknown action or a missing reason answers 400 naming the field; an action the worker's standing
makes meaningless (including a worker never excluded, undoing an include) answers 409. Nothing is
changed by a refusal.
"""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.models import WorkerAction
from annotation.models.workers import public_worker_id_parse
from annotation.permissions import campaign_for_request
from annotation.selectors import worker_audit
from annotation.services import quality

WORKER_HELP = "The worker's public id, channel:id, as the dashboard and the label export name them."


class WorkerPagination(CursorPagination):
    ordering = "id"
    page_size = 500
    page_size_query_param = "page_size"
    max_page_size = 5000


class ActionPagination(WorkerPagination):
    ordering = "-id"  # newest first


class FlagOutput(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=list(worker_audit.FLAG_KINDS), help_text="What the audit flags: " + ", ".join(worker_audit.FLAG_KINDS)
    )
    text = serializers.CharField(help_text="The flag in words, with the numbers behind it.")


def _audit(name: str, field, help_text: str):
    """A number of the worker's row in the live audit's table: null where the audit has none."""
    return field(source=f"audit.{name}", allow_null=True, read_only=True, help_text=help_text)


def _interval(name: str, what: str):
    return serializers.ListField(
        source=f"audit.{name}",
        child=serializers.FloatField(),
        allow_null=True,
        read_only=True,
        help_text=f"95 % interval of {what}: [low, high]; null without one.",
    )


class WorkerStatusOutput(serializers.Serializer):
    id = serializers.IntegerField(
        source="worker_id", help_text="The worker's id: …/workers/<id>/labels/ lists their labels."
    )
    worker = serializers.CharField(source="worker.public_id", help_text=WORKER_HELP)
    labels = serializers.IntegerField(source="n_labels", help_text="Counted labels in this campaign.")
    joined_at = serializers.DateTimeField()
    excluded_at = serializers.DateTimeField(allow_null=True, help_text="Excluded from the audit since; null: included.")
    blocked_at = serializers.DateTimeField(allow_null=True, help_text="Blocked since; null: may take prompts.")
    flagged = serializers.BooleanField(help_text="A flag on this worker is not undone.")
    flags = FlagOutput(
        source="audit_flags",
        many=True,
        help_text="The live audit's flags on the worker, as the dashboard shows them (none before it saw them).",
    )
    top_value = _audit("top_value", serializers.FloatField, "Their most frequent answer, scaled as the audit scales.")
    top_share = _audit("top_share", serializers.FloatField, "Its share of their answers (straight-lining).")
    n_controls = _audit("n_controls", serializers.IntegerField, "Control prompts they answered.")
    n_correct = _audit("n_correct", serializers.IntegerField, "Control prompts they answered right.")
    control_accuracy = _audit("control_accuracy", serializers.FloatField, "n_correct / n_controls.")
    control_ci = _interval("control_ci", "the control accuracy (Wilson)")
    median_seconds = _audit("median_seconds", serializers.FloatField, "Their median seconds from lease to label.")
    speed_ratio = _audit("speed_ratio", serializers.FloatField, "median_seconds over the campaign's median.")
    bias = _audit("bias", serializers.FloatField, "Mean of their scaled value minus the others' mean, per prompt.")
    bias_ci = _interval("bias_ci", "the bias (t)")
    n_compared = _audit("n_compared", serializers.IntegerField, "Prompts the bias compares on.")
    accuracy = _audit(
        "accuracy", serializers.FloatField, "Agreement with the others (the full audit's leave-one-out accuracy)."
    )
    accuracy_ci = _interval("ci_wilson", "the accuracy (Wilson)")
    n_scored = _audit("n_scored", serializers.IntegerField, "Prompts the accuracy is scored on.")


class WorkerFilters(serializers.Serializer):
    flag = serializers.ChoiceField(
        choices=list(worker_audit.FLAG_KINDS), required=False, help_text="Only the workers the audit flags so."
    )
    status = serializers.ChoiceField(
        choices=list(worker_audit.STATUSES),
        required=False,
        help_text="Only the workers who are: active (neither excluded nor blocked), excluded, blocked, or flagged "
        "(a flag in the log not undone).",
    )


class WorkerLabelOutput(serializers.Serializer):
    label_id = serializers.IntegerField(source="pk", help_text="The label's id, as in the export's label_id.")
    prompt = serializers.CharField(source="prompt.external_id", help_text="The prompt's imported id.")
    prompt_text = serializers.CharField(source="prompt.text", help_text="The prompt's text.")
    value = serializers.JSONField(help_text="The raw value, as in the export.")
    control = serializers.BooleanField(source="is_control", help_text="A control prompt's label.")
    leased_at = serializers.DateTimeField(help_text="When the prompt was leased to the worker.")
    created_at = serializers.DateTimeField(help_text="When the label arrived.")
    time_spent_s = serializers.SerializerMethodField(help_text="Seconds from the lease to the label.")
    voided_at = serializers.DateTimeField(allow_null=True, help_text="Void since (it does not count); null: counted.")
    void_reason = serializers.CharField(allow_blank=True, help_text="Why it is void; empty when it counts.")
    correct = serializers.SerializerMethodField(
        help_text="Agrees with the prompt's gold, judged as control answers are; null: the prompt has no gold."
    )

    def get_time_spent_s(self, label) -> float:
        return label.time_spent.total_seconds()

    def get_correct(self, label) -> bool | None:
        return selectors.label_correct(self.context["campaign"], label)


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
    worker = serializers.CharField(max_length=221, required=False, help_text=WORKER_HELP + " Or give workers.")
    workers = serializers.ListField(
        child=serializers.CharField(max_length=221),
        required=False,
        min_length=1,
        help_text="Several workers (public ids), instead of worker: one action, all or nothing (not recollect).",
    )
    action = serializers.ChoiceField(
        choices=[*WorkerAction.Kind.choices, (quality.UNFLAG, "Unflag")],
        help_text="flag, or unflag (undo their standing flags); exclude from the audit, or include again; block, or "
        "unblock; recollect: exclude, block and void their counted labels so other workers label those prompts "
        "again (the voids cannot be undone).",
    )
    reason = serializers.CharField(max_length=quality.REASON_MAX, help_text="Why; the log keeps it with the action.")

    def validate(self, data):
        if ("worker" in data) == ("workers" in data):
            raise serializers.ValidationError({"worker": ["Give worker, or workers, not both."]})
        return data


class WorkerActionsOutput(serializers.Serializer):
    actions = WorkerActionOutput(
        many=True, help_text="One per worker, in the order of their ids: new (logged) or what made them so already."
    )


class LogFilters(serializers.Serializer):
    worker = serializers.CharField(required=False, max_length=221, help_text="Only this worker's actions (channel:id).")


class WorkerListApi(APIView):
    """The campaign's workers, in the order they joined, with their standing and the live audit's numbers
    and flags for them (as the dashboard shows them; null before the audit saw them)."""

    pagination_class = WorkerPagination

    @extend_schema(parameters=[WorkerFilters], responses={200: WorkerStatusOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        filters = WorkerFilters(data=request.query_params)
        filters.is_valid(raise_exception=True)
        workers, audit = worker_audit.workers_filtered(campaign=campaign, **filters.validated_data)
        paginator = WorkerPagination()
        page = worker_audit.audit_attach(paginator.paginate_queryset(workers, request, view=self), audit)
        return paginator.get_paginated_response(WorkerStatusOutput(page, many=True).data)


class WorkerLabelListApi(APIView):
    """One worker's labels in the campaign, in label order, void ones too, each with whether it agrees
    with its prompt's gold. 404 for a worker who does not take part in the campaign."""

    pagination_class = WorkerPagination

    @extend_schema(responses={200: WorkerLabelOutput(many=True)})
    def get(self, request, slug: str, worker_id: int):
        campaign = campaign_for_request(request, slug)
        participation = selectors.campaign_worker_by_pk(campaign=campaign, worker_id=worker_id)
        if participation is None:
            raise Http404("No such worker in this campaign.")
        labels = selectors.worker_labels(campaign=campaign, worker=participation.worker)
        paginator = WorkerPagination()
        page = paginator.paginate_queryset(labels, request, view=self)
        output = WorkerLabelOutput(page, many=True, context={"campaign": campaign})
        return paginator.get_paginated_response(output.data)


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
            201: PolymorphicProxySerializer(
                component_name="WorkerActionResult",
                serializers=[WorkerActionOutput, WorkerActionsOutput],
                resource_type_field_name=None,
                many=False,
            ),
            200: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="WorkerActionResult",
                    serializers=[WorkerActionOutput, WorkerActionsOutput],
                    resource_type_field_name=None,
                    many=False,
                ),
                description="Nothing changed: the worker(s) already were so; the action(s) that made them so.",
            ),
        },
    )
    def post(self, request, slug: str):
        """Act on one worker (``worker``: the action) or on several (``workers``: ``{"actions": [...]}``,
        all or nothing: one worker refused, nobody is acted on, and the error names them). 201 when
        anything was written."""
        campaign = campaign_for_request(request, slug)
        data = WorkerActionInput(data=request.data)
        data.is_valid(raise_exception=True)
        given = data.validated_data
        ids = given["workers"] if "workers" in given else [given["worker"]]
        workers = [selectors.campaign_worker(campaign=campaign, public_id=public_id) for public_id in ids]
        if unknown := [public_id for public_id, worker in zip(ids, workers) if worker is None]:
            field = "workers" if "workers" in given else "worker"
            raise ValidationError({field: [f"{', '.join(unknown)}: not a worker of this campaign."]})
        act = dict(campaign=campaign, by=request.user, reason=given["reason"])
        if "worker" in given:
            action = quality.worker_act(kind=given["action"], worker=workers[0], **act)
            answer = status.HTTP_201_CREATED if action.logged else status.HTTP_200_OK
            return Response(WorkerActionOutput(action).data, status=answer)
        try:
            actions = quality.workers_act(kind=given["action"], workers=workers, **act)
        except DjangoValidationError as exc:  # the kind names the field "kind"; the API calls it "action"
            raise ValidationError(
                {("action" if field == "kind" else field): errors for field, errors in exc.message_dict.items()}
            ) from exc
        answer = status.HTTP_201_CREATED if any(a.logged for a in actions) else status.HTTP_200_OK
        return Response({"actions": WorkerActionOutput(actions, many=True).data}, status=answer)


class WorkerActionUndoApi(APIView):
    """Undo a flag, an exclusion, a block or a re-collection: the inverse is logged (include, unblock),
    and the action is marked undone. A re-collection's voided labels stay void. Idempotent: undoing an
    undone action answers it unchanged. An include or unblock cannot be undone (409): act again."""

    @extend_schema(request=None, responses={200: WorkerActionOutput})
    def post(self, request, slug: str, action_id: int):
        campaign = campaign_for_request(request, slug)
        action = get_object_or_404(WorkerAction, campaign=campaign, pk=action_id)
        return Response(WorkerActionOutput(quality.action_undo(action=action, by=request.user)).data)
