"""Every write of the live audit: statistics upkeep, scheduling, snapshots.

The numbers themselves come from the audit engine, through the reads in ``audits.selectors``; this
package only keeps their inputs and results in the database. Its settings are in ``audits.conf``.

* ``label_stats_add`` marks one label for the next fold, inside ``label_submit``'s transaction, and
  schedules a recomputation for after the commit; ``stats_fold`` folds the marked labels into the
  campaign's sufficient statistics, exactly once (the quick run's first step).
* ``audit_schedule_recompute`` debounces per campaign (style guide §4, "Debounce, Sentry style"):
  ``cache.add("audit:pending:<id>")`` and enqueue with a short countdown only when the key is new.
  It never raises: with the broker or the cache down, labels are still accepted.
* ``audit_refresh`` (the quick run, Celery task ``audits.refresh``) folds, computes the six numbers from
  the running statistics and every worker's numbers (``audits.selectors.worker_numbers``), saves a
  snapshot keyed by the watermark, then applies the campaign's quality rules (``worker_rules``); it
  holds the key until it ends, then schedules the next run itself if labels arrived meanwhile.
* ``audit_full`` (task ``audits.full``) runs the engine's whole report on the label matrix.
* ``ground_truths_request`` and ``ground_truths_compute`` (task ``audits.ground_truths``): the
  alternative ground truths, inferred when a researcher asks (``truths``).
* ``bootstrap_request`` and ``bootstrap_compute`` (task ``audits.bootstrap``): the instrument card's
  bootstrap intervals, resampled when a researcher asks (``bootstrap``, on the ground truths'
  request pattern, shared in ``requests``).
* ``clustering_save``, ``clustering_revert``, ``clustering_propose``, ``expert_clusters_import``:
  versions of free-text prompts' answer clusterings (``clustering``).
* ``audit_sweep`` (Celery beat) schedules every campaign whose audit is behind: it heals lost
  enqueues and catches up after a broker outage.

By job: ``stats`` (the statistics and their rebuild), ``scheduling`` (debounce, sweep, "Recompute
now"), ``runs`` (the quick and full runs) and ``worker_rules`` (quality rules applied, through the
annotation app); what the rest of Chorus calls is re-exported here.
"""

from .bootstrap import bootstrap_compute, bootstrap_request
from .clustering import clustering_propose, clustering_revert, clustering_save, expert_clusters_import
from .runs import audit_full, audit_refresh
from .scheduling import audit_request_full, audit_schedule_recompute, audit_sweep
from .stats import audit_stats_invalidate, label_stats_add, stats_fold, stats_rebuild
from .systems import system_delete, system_save, system_upload
from .truths import ground_truths_compute, ground_truths_request

__all__ = [
    "audit_full",
    "audit_refresh",
    "audit_request_full",
    "audit_schedule_recompute",
    "audit_stats_invalidate",
    "audit_sweep",
    "bootstrap_compute",
    "bootstrap_request",
    "clustering_propose",
    "clustering_revert",
    "clustering_save",
    "expert_clusters_import",
    "ground_truths_compute",
    "ground_truths_request",
    "label_stats_add",
    "stats_fold",
    "stats_rebuild",
    "system_delete",
    "system_save",
    "system_upload",
]
