"""The worker loop: ask for a prompt, keep it alive, label it or give it back.

Every call needs a signed-in user (the API's default permission) and acts as their native worker
identity (``worker_for_user``). The lease calls do not read the lease first: the services refuse
another worker's lease themselves (``not_leased``), which the API answers with a 404 (exceptions.py).
"""

from dataclasses import asdict
from functools import cache

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import services
from annotation.models import Lease
from annotation.models.campaigns import MAX_ANSWER_LENGTH
from annotation.models.prompts import MAX_OPTIONS

# The longest text a submitted value may be before the schema reads it: a free-text answer is checked
# against its campaign's limit after trimming, so spaces around it must not make it refused here.
MAX_VALUE_TEXT = 4 * MAX_ANSWER_LENGTH


@cache
def _output(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    """One instance of an output serializer per process. DRF deep-copies a serializer's declared fields
    into every new instance (a tenth of the API cycle's CPU, ``benchmarks/cycle_cost.py --profile``),
    while ``to_representation`` only reads them, so the worker loop's answers are shaped by one built
    instance: ``_output(OutputSerializer).to_representation(x)`` is ``OutputSerializer(x).data``."""
    return serializer_class()


def _is_scalar(item) -> bool:
    return isinstance(item, (int, float)) or (isinstance(item, str) and len(item) <= MAX_VALUE_TEXT)


class PromptOutput(serializers.Serializer):
    id = serializers.CharField(source="external_id", help_text="The prompt's id in the imported file.")
    text = serializers.CharField()
    options = serializers.ListField(child=serializers.CharField())


class LeaseOutput(serializers.Serializer):
    id = serializers.IntegerField()
    expires_at = serializers.DateTimeField()
    prompt = PromptOutput()


# The schema's component keeps the name it had as next-task's own OutputSerializer: clients generated
# from the schema refer to it.
@extend_schema_serializer(component_name="NextTaskApiOutput")
class NextTaskOutput(serializers.Serializer):
    lease = LeaseOutput(allow_null=True, help_text="null when there is no work for you; see code.")
    worker_labels = serializers.IntegerField(required=False, help_text="Your labels in this campaign.")
    code = serializers.CharField(
        required=False,
        help_text="Why there is no lease: nothing_left, cap_reached, campaign_<status>; after a submit with "
        "next, also next_task_failed (your label is saved, but no prompt could be claimed just then: ask "
        "next-task).",
    )
    message = serializers.CharField(required=False)


# A submit's label is committed before its next claim begins: when the claim fails, the label stands.
NEXT_TASK_FAILED = {
    "lease": None,
    "code": "next_task_failed",
    "message": "Your label is saved, but no prompt could be claimed just now: ask for your next task.",
}


def _next_task(lease: Lease | services.NothingLeft) -> dict:
    """next-task's answer (``NextTaskOutput``'s data) for what ``lease_acquire`` answered."""
    if isinstance(lease, services.NothingLeft):
        return {"lease": None, "code": lease.code, "message": lease.reason}
    return {"lease": lease, "worker_labels": lease.worker_labels}


class NextTaskApi(APIView):
    @extend_schema(request=None, responses={200: NextTaskOutput})
    def post(self, request, slug: str):
        lease = services.lease_acquire_by_slug(slug=slug, user=request.user)
        return Response(_output(NextTaskOutput).to_representation(_next_task(lease)))


class LeaseHeartbeatApi(APIView):
    class OutputSerializer(serializers.Serializer):
        expires_at = serializers.DateTimeField()

    @extend_schema(request=None, responses={200: OutputSerializer})
    def post(self, request, lease_id: int):
        worker = services.worker_for_user(user=request.user)
        lease = services.lease_heartbeat(lease_id=lease_id, worker=worker)
        return Response(_output(self.OutputSerializer).to_representation(lease))


class LeaseSubmitApi(APIView):
    class InputSerializer(serializers.Serializer):
        value = serializers.JSONField(
            help_text="A number, a list with one rating per option (per-option schemas), or the answer's text "
            "(free text: trimmed, spaces collapsed, within the campaign's answer_min_length..answer_max_length)."
        )
        client_token = serializers.CharField(
            max_length=64, help_text="Chosen by the client for this label; resending it is a safe retry."
        )
        next = serializers.BooleanField(
            default=False,
            help_text="true: once the label is stored, also ask for your next prompt in its campaign, as "
            "next-task does, and answer it in next_task: one request per label instead of two.",
        )

        def validate_value(self, value):
            """Only the shape; the campaign's schema checks the rest. Keeps absurd values (deep or huge
            structures) out of the service and its error messages."""
            items = value if isinstance(value, list) else [value]
            if len(items) > MAX_OPTIONS or not all(_is_scalar(item) for item in items):
                raise serializers.ValidationError(
                    f"A label is a number, a text of at most {MAX_VALUE_TEXT} characters, or a list with one "
                    "number per answer option."
                )
            return value

    class OutputSerializer(serializers.Serializer):
        label_id = serializers.IntegerField()
        prompt_id = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        worker_labels = serializers.IntegerField()
        duplicate = serializers.BooleanField(help_text="true when this repeats an already acknowledged submission.")
        next_task = NextTaskOutput(
            required=False,
            help_text="With next: what next-task answers now (a retried submit gets the prompt it was given "
            "the first time, if still yours). Absent without next.",
        )

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer, 200: OutputSerializer})
    def post(self, request, lease_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        then_next = data.validated_data.pop("next")
        worker = services.worker_for_user(user=request.user)
        ack = services.label_submit(lease_id=lease_id, worker=worker, **data.validated_data)
        answer = ack
        if then_next:  # the label is committed: its claim is a transaction of its own
            lease = services.lease_acquire_after_label(campaign_slug=ack.campaign_slug, worker=worker)
            answer = {**asdict(ack), "next_task": NEXT_TASK_FAILED if lease is None else _next_task(lease)}
        return Response(
            _output(self.OutputSerializer).to_representation(answer),
            status=status.HTTP_200_OK if ack.duplicate else status.HTTP_201_CREATED,
        )


class LeaseReleaseApi(APIView):
    @extend_schema(request=None, responses={204: None})
    def post(self, request, lease_id: int):
        worker = services.worker_for_user(user=request.user)
        services.lease_release(lease_id=lease_id, worker=worker)
        return Response(status=status.HTTP_204_NO_CONTENT)
