"""The one door between the annotation app and the live audit.

``annotation`` imports this module of ``audits`` and no other (the engine, ``audits.engine``, aside:
it is a library with no Django); ``tests/annotation/test_audit_boundary.py`` fails when it imports
anything else. Through it the labeling platform tells the audit what changed, and the audit has its
decisions acted on by the labeling platform:

* ``label_stats_add``: mark one new label for its campaign's statistics (``label_submit``, inside its
  transaction: the quick run folds it in), and schedule a recomputation of the audit after the commit.
  ``label_mark_sql`` is the mark's statement, for a label's INSERT to carry it (then ``marked=True``).
* ``audit_stats_invalidate``: the statistics no longer match the labels (a void label, a changed
  binarization map, a worker excluded or included); they are rebuilt by the next run, which it
  schedules after the commit.
* ``stats_rebuild``: build the statistics from the labels now, for labels that arrived without
  ``label_submit`` (an imported finished campaign, which no label will ever trigger).
* ``worker_actions_due``: the signal the quick run sends with the actions the campaign's quality
  rules call for (``RuleDecision``); annotation's receiver takes them (``annotation.services.rule_actions``).
  Why a signal: ``audits.services.worker_rules``.
* ``analysis_recorded``: the signal an analysis the audit stores (a clustering saved) sends, for the
  campaign's activity log, which is annotation's.
* ``rules_applied``: the signal the quick run sends once the rules were applied (the Prolific channel
  approves the submissions that were waiting for the audit).

And four reads of the audit's latest state, for the apps that act on it (``audits.selectors.coverage``):

* ``worker_audited``: the newest quick run whose rules were applied counted every label of a worker
  (the Prolific channel approves a submission only then).
* ``worker_numbers``: each worker's numbers as that run judged them (bonus rules).
* ``worker_audit_table``: each worker's numbers and flags as the dashboard shows them (the workers
  pages, to act on a worker beside the numbers that call for it).
* ``latest_numbers``: the six noise numbers and alpha, newest (webhooks' thresholds).

Scheduling has no entry point of its own here: the mark and the invalidation schedule the audit's run
themselves, on commit, which is the only moment annotation has anything for it.
"""

from audits.selectors.coverage import latest_numbers, worker_audit_table, worker_audited, worker_numbers
from audits.selectors.worker_rules import RuleDecision
from audits.services.stats import audit_stats_invalidate, label_mark_sql, label_stats_add, stats_rebuild
from audits.signals import analysis_recorded, rules_applied, worker_actions_due

__all__ = [
    "RuleDecision",
    "analysis_recorded",
    "audit_stats_invalidate",
    "label_mark_sql",
    "label_stats_add",
    "latest_numbers",
    "rules_applied",
    "stats_rebuild",
    "worker_actions_due",
    "worker_audit_table",
    "worker_audited",
    "worker_numbers",
]
