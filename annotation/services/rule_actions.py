"""The actions the live audit's quality rules call for, taken on the campaign's workers.

The audit decides (``audits.selectors.worker_rules``, after each quick run) and sends its decisions
with the signal ``audits.hook.worker_actions_due``; :func:`worker_actions_receive`, connected in
``AnnotationConfig.ready``, hands them to :func:`rule_decisions_act`, which acts through
``annotation.services.quality.worker_act`` as a researcher's action would, the rule named as the actor.
Why a signal: ``audits.services.worker_rules``.
"""

from __future__ import annotations

import logging

from annotation.models import Campaign, Worker, WorkerAction
from annotation.services.errors import ServiceError
from annotation.services.quality import worker_act
from audits.hook import RuleDecision

logger = logging.getLogger(__name__)


def rule_decisions_act(*, campaign: Campaign, decisions: list[RuleDecision]) -> list[WorkerAction]:
    """Take the action of each decision, in order; returns the actions taken (or found: each action is
    idempotent, so a decision already carried out returns the action that carried it out). Each action
    has its own transaction. A refusal (``ServiceError``) is logged and the other decisions go on."""
    workers = Worker.objects.in_bulk([decision.worker_id for decision in decisions])
    taken = []
    for decision in decisions:
        try:
            action = worker_act(
                kind=decision.kind,
                campaign=campaign,
                worker=workers[decision.worker_id],
                rule=decision.rule,
                reason=decision.reason,
                numbers=decision.numbers,
            )
        except ServiceError as exc:
            logger.warning("quality rule %s on worker %s refused: %s", decision.rule.pk, decision.worker, exc.message)
            continue
        taken.append(action)
    return taken


def worker_actions_receive(
    sender, *, campaign: Campaign, decisions: list[RuleDecision], **kwargs
) -> list[WorkerAction]:
    """The receiver of ``audits.hook.worker_actions_due``."""
    return rule_decisions_act(campaign=campaign, decisions=decisions)


__all__ = ["rule_decisions_act", "worker_actions_receive"]
