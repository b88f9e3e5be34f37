"""Alternative ground truths on request: a researcher asks, a Celery worker infers them.

Majority vote is instant, but Dawid–Skene and MACE take seconds and GLAD minutes on thousands of
prompts (``benchmarks/ground_truths.py``), so they are not part of the full audit's cadence: each
request is a ``GroundTruthRun`` on the labels counted when the worker reads them, shown on the
dashboard and merged into the report downloads (``audits.selectors.truths``).
"""

import time

from django.core.exceptions import ValidationError
from django.utils import timezone

from annotation.models import Campaign
from audits.engine.truths import METHODS, ground_truths
from audits.models import GroundTruthRun
from audits.selectors.full import campaign_label_matrix
from audits.services.run_requests import run_request
from audits.tasks import ground_truths_task


def ground_truths_request(*, campaign: Campaign, methods, by=None) -> tuple[GroundTruthRun, bool]:
    """Ask for the campaign's ground truths by ``methods`` (a subset of ``METHODS``); the run is
    enqueued after the commit (``audits.services.run_requests.run_request``). Returns ``(run, created)``:
    while a run is still waiting, asking again returns it instead of queueing a second one. Refuses
    an empty or unknown choice with a ``ValidationError`` naming ``methods``."""
    methods = list(dict.fromkeys(methods))
    unknown = [m for m in methods if m not in METHODS]
    if not methods or unknown:
        raise ValidationError(
            {
                "methods": f"Choose one or more of {', '.join(METHODS)}"
                + (f"; not {', '.join(unknown)}." if unknown else ".")
            }
        )
    return run_request(
        GroundTruthRun,
        campaign=campaign,
        waiting=(GroundTruthRun.Status.PENDING,),
        task=ground_truths_task,
        create={"methods": [m for m in METHODS if m in methods], "requested_by": by},
    )


def ground_truths_compute(*, run_id: int) -> GroundTruthRun | None:
    """Infer a waiting run's ground truths on the campaign's labels now (task ``audits.ground_truths``).
    A run that is done or failed is left as it is; an error of the engine marks the run failed with
    its message, so the dashboard says what went wrong."""
    run = GroundTruthRun.objects.select_related("campaign").filter(pk=run_id).first()
    if run is None or run.status != GroundTruthRun.Status.PENDING:
        return run
    started = time.perf_counter()
    matrix, watermark = campaign_label_matrix(campaign=run.campaign)
    try:
        run.data, run.status = ground_truths(matrix, methods=run.methods), GroundTruthRun.Status.DONE
    except (ValueError, ArithmeticError) as error:
        run.error, run.status = str(error), GroundTruthRun.Status.FAILED
    run.watermark, run.computed_at = watermark, timezone.now()
    run.duration_ms = (time.perf_counter() - started) * 1000
    GroundTruthRun.objects.filter(pk=run.pk, status=GroundTruthRun.Status.PENDING).update(
        status=run.status,
        data=run.data,
        error=run.error,
        watermark=watermark,
        computed_at=run.computed_at,
        duration_ms=run.duration_ms,
    )
    return run
