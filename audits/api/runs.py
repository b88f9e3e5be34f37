"""Runs a researcher asks for and a Celery worker computes, for a token client: the alternative ground
truths (the dashboard's "Ground truths" form) and the instrument card's bootstrap intervals (its
"Compute intervals" button). Start one (202 with its id and status), poll it (status, progress),
read its result once done.

Starting goes through the pages' services (``ground_truths_request``, ``bootstrap_request``): one
waiting run per campaign, so starting again while one waits answers that run (``created`` false).
Managers only (``campaign_for_request``: 404 for anyone else and for a run of another campaign; 403
for a viewer's POST).
"""

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.permissions import campaign_for_request
from audits import services
from audits.engine.truths import METHODS
from audits.models import BootstrapRun, GroundTruthRun
from audits.selectors.card import bootstrap_run
from audits.selectors.truths import ground_truths_run


class RunNotDone(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "run_not_done"
    default_detail = "The run has not finished yet: poll it until its status is done."


class RunStarted(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    created = serializers.BooleanField(help_text="false when a run was already waiting: this is that run.")


class GroundTruthRunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=GroundTruthRun.Status.choices)
    methods = serializers.ListField(child=serializers.ChoiceField(choices=METHODS))
    watermark = serializers.IntegerField(allow_null=True, help_text="The label rows it was computed on.")
    requested_at = serializers.DateTimeField()
    computed_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.FloatField()
    error = serializers.CharField(help_text="Why the run failed; empty otherwise.")


class GroundTruthResult(GroundTruthRunOutput):
    data = serializers.DictField(help_text="Per method: its labels, accuracy against gold, changes, ties, …")


class GroundTruthInput(serializers.Serializer):
    methods = serializers.ListField(child=serializers.CharField(), help_text=f"One or more of {', '.join(METHODS)}.")


class BootstrapRunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=BootstrapRun.Status.choices)
    resamples = serializers.IntegerField()
    seed = serializers.IntegerField()
    done_resamples = serializers.IntegerField(help_text="Progress: resamples done so far, of ``resamples``.")
    watermark = serializers.IntegerField(allow_null=True)
    requested_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    computed_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.FloatField()
    error = serializers.CharField()


class BootstrapResult(BootstrapRunOutput):
    data = serializers.DictField(help_text="``noise``: the six numbers' intervals; ``alpha``: Krippendorff's α's.")


def _started(run, created: bool) -> Response:
    return Response({"id": run.pk, "status": run.status, "created": created}, status=status.HTTP_202_ACCEPTED)


class GroundTruthRunStartApi(APIView):
    @extend_schema(request=GroundTruthInput, responses={202: RunStarted})
    def post(self, request, slug: str):
        """Ask for the campaign's ground truths by ``methods``; a Celery worker infers them."""
        campaign = campaign_for_request(request, slug)
        data = GroundTruthInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _started(*services.ground_truths_request(campaign=campaign, by=request.user, **data.validated_data))


class BootstrapRunStartApi(APIView):
    @extend_schema(request=None, responses={202: RunStarted})
    def post(self, request, slug: str):
        """Ask for the instrument card's bootstrap intervals (the card's defaults: resamples, seed)."""
        campaign = campaign_for_request(request, slug)
        return _started(*services.bootstrap_request(campaign=campaign, by=request.user))


class _RunApi(APIView):
    read = None  # the selector of one run: (campaign=, run_id=) -> dict | None
    output = None
    result = False  # the result: the run's numbers, refused (409) until it is done

    def answer(self, request, slug: str, run_id: int) -> Response:
        campaign = campaign_for_request(request, slug)
        run = self.read(campaign=campaign, run_id=run_id)
        if run is None:
            raise Http404("No such run.")
        if self.result and run["status"] != "done":
            if run["status"] == "failed":
                raise RunNotDone(f"The run failed: {run['error']}", code="run_failed")
            raise RunNotDone()
        return Response(self.output(run).data)


class GroundTruthRunApi(_RunApi):
    """The run: its status and, once done, when and on how many labels it was computed."""

    read, output = staticmethod(ground_truths_run), GroundTruthRunOutput

    @extend_schema(responses={200: GroundTruthRunOutput})
    def get(self, request, slug: str, run_id: int):
        return self.answer(request, slug, run_id)


class GroundTruthResultApi(_RunApi):
    """The run's ground truths (409 ``run_not_done`` while it waits, ``run_failed`` with its error)."""

    read, output, result = staticmethod(ground_truths_run), GroundTruthResult, True

    @extend_schema(responses={200: GroundTruthResult})
    def get(self, request, slug: str, run_id: int):
        return self.answer(request, slug, run_id)


class BootstrapRunApi(_RunApi):
    """The run: its status and progress (``done_resamples`` of ``resamples``)."""

    read, output = staticmethod(bootstrap_run), BootstrapRunOutput

    @extend_schema(responses={200: BootstrapRunOutput})
    def get(self, request, slug: str, run_id: int):
        return self.answer(request, slug, run_id)


class BootstrapResultApi(_RunApi):
    """The run's intervals (409 ``run_not_done`` while it waits or resamples, ``run_failed`` with its error)."""

    read, output, result = staticmethod(bootstrap_run), BootstrapResult, True

    @extend_schema(responses={200: BootstrapResult})
    def get(self, request, slug: str, run_id: int):
        return self.answer(request, slug, run_id)
