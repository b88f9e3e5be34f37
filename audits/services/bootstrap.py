"""The instrument card's bootstrap on request: a researcher presses the card's button, a Celery worker
resamples (task ``audits.bootstrap``).

1,000 crossed-bootstrap resamples of the six numbers and of Krippendorff's α take about a second
at 10,000 labels and grow with the campaign (``benchmarks/instrument_card.py``), too slow for a
page, so each request is a ``BootstrapRun`` on the labels counted when the worker reads them. The
worker resamples in blocks and writes its progress (``done_resamples``) as it goes; the card polls
it (``audits.selectors.card.bootstrap_summary``). Requests follow the ground truths' pattern
(``audits.services.run_requests``): one waiting run per campaign, broker outages never fail the page.
"""

from __future__ import annotations

import math
import time

from django.utils import timezone

from annotation.models import Campaign
from audits.conf import audit_setting
from audits.engine.intervals import alpha_interval, noise_intervals
from audits.models import BootstrapRun
from audits.selectors.card import card_alpha_options
from audits.selectors.full import campaign_label_matrix
from audits.services.run_requests import run_request
from audits.tasks import bootstrap_task

Status = BootstrapRun.Status
WAITING = (Status.PENDING, Status.RUNNING)
# Progress is written after each block of this many resamples (at least 20 updates a run).
PROGRESS_BLOCK = 50


def bootstrap_request(
    *, campaign: Campaign, by=None, resamples: int = 1000, seed: int = 0
) -> tuple[BootstrapRun, bool]:
    """Ask for the campaign's bootstrap intervals; the run is enqueued after the commit. Returns
    ``(run, created)``: while a run is waiting or resampling, asking again returns it. A run lost
    for ``LOST_AFTER`` (its worker died midway) goes back to waiting and is enqueued again."""
    return run_request(
        BootstrapRun,
        campaign=campaign,
        waiting=WAITING,
        task=bootstrap_task,
        create={"requested_by": by, "resamples": resamples, "seed": seed},
        reset={"status": Status.PENDING, "started_at": None, "done_resamples": 0},
    )


def bootstrap_compute(*, run_id: int) -> BootstrapRun | None:
    """Resample a waiting run now (task ``audits.bootstrap``), writing ``done_resamples`` after each
    block. The run is claimed by a conditional update (pending → running), so a duplicate delivery
    of the task does nothing; every later write is conditional on that claim (status running and
    this ``started_at``), so a run taken as lost and restarted is never overwritten by the old
    worker. A run that is not pending is returned as it is; an error of the engine marks the run
    failed with its message, which the card shows."""
    started_at = timezone.now()
    claimed = BootstrapRun.objects.filter(pk=run_id, status=Status.PENDING).update(
        status=Status.RUNNING, started_at=started_at, done_resamples=0
    )
    run = BootstrapRun.objects.select_related("campaign").filter(pk=run_id).first()
    if not claimed or run is None:
        return run
    mine = BootstrapRun.objects.filter(pk=run_id, status=Status.RUNNING, started_at=started_at)
    clock = time.perf_counter()
    total, watermark = run.resamples, None

    def progress(offset: int):
        # two passes over the same resamples (the six numbers, then α): each is half the progress
        return lambda done: mine.update(done_resamples=math.floor((offset + done) / 2))

    options = {"n_resamples": total, "seed": run.seed, "block_size": PROGRESS_BLOCK}
    try:
        matrix, watermark = campaign_label_matrix(campaign=run.campaign)  # ValueError: no matrix (free text)
        if matrix.n_labels == 0:
            raise ValueError("no audited labels yet: nothing to resample")
        noise = noise_intervals(matrix, ddof=audit_setting("DDOF"), progress=progress(0), **options)
        alpha = alpha_interval(matrix, **card_alpha_options(run.campaign, matrix), progress=progress(total), **options)
        run.data = {"noise": noise.to_dict(), "alpha": alpha.to_dict()}
        run.status, run.error = Status.DONE, ""
    except (ValueError, ArithmeticError) as error:
        run.data, run.status, run.error = None, Status.FAILED, str(error)
    run.watermark, run.computed_at = watermark, timezone.now()
    run.duration_ms = (time.perf_counter() - clock) * 1000
    outcome = {"status": run.status, "data": run.data, "error": run.error, "watermark": watermark}
    outcome.update(computed_at=run.computed_at, duration_ms=run.duration_ms)
    if run.status == Status.DONE:
        outcome["done_resamples"] = run.done_resamples = total
    mine.update(**outcome)
    return run
