"""Quality rules, applied: the quick run's decisions (``audits.selectors.worker_rules``, a read) sent
to the annotation app, which acts on its workers (``annotation.services.rule_actions``, the writes).

The audit decides and annotation acts, through a Django signal (``audits.hook.worker_actions_due``)
rather than an import of annotation's services: those import the audit's statistics hook, so calling
them from here closed a circle through three apps. Why a signal and not a Celery task of annotation:

* The actions stay in the quick run, right after the snapshot whose numbers they were decided on, as
  they always were: no queue hop between the numbers and the action, no second failure mode (a lost
  enqueue would leave a rule silent until the next run), and a caller of ``audit_refresh`` (a test,
  the demo, "Recompute now" in an eager worker) sees the actions when it returns. The work is a few
  small transactions, not worth a task of its own.
* It is an explicit interface, not a model signal hiding writes behind ``save()`` (style guide §3):
  sent in this one place with plain decisions, received by one named annotation service that owns
  its writes and their transactions; annotation connects it in ``AnnotationConfig.ready``.
"""

from __future__ import annotations

from annotation.models import Campaign, WorkerAction
from audits.selectors.worker_numbers import WorkerQuality
from audits.selectors.worker_rules import rule_decisions
from audits.signals import worker_actions_due


def rules_apply(*, campaign: Campaign, quality: WorkerQuality) -> list[WorkerAction]:
    """Evaluate the campaign's active rules on ``quality`` and have the action of each rule that fires
    taken (``audits.selectors.worker_rules``: when a rule acts again). Returns the actions taken, in
    rule order.

    Each action is a service of ``annotation.services.quality`` with its own transaction; they are
    idempotent, so a run repeated on the same numbers logs nothing new. A refusal (``ServiceError``)
    is logged and the other rules go on.
    """
    decisions = rule_decisions(campaign=campaign, quality=quality)
    if not decisions:
        return []
    answers = worker_actions_due.send(sender=Campaign, campaign=campaign, decisions=decisions)
    return [action for _, actions in answers for action in actions]


__all__ = ["rules_apply"]
