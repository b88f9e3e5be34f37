"""Quality rules, judged: which of a campaign's active rules call for an action on which worker (a read).

The quick run (``audits.services.audit_refresh``) asks after each snapshot, on the worker numbers it
just read (``audits.selectors.worker_numbers``); ``audits.services.worker_rules`` then has the
annotation app carry the decisions out. Nothing here writes.

When a rule fires again. A rule acts on a worker when its condition holds and the rule has not acted
on that worker yet. Once it has, it acts again only after the action was undone (``action_undo``) and
the worker has given ``min_labels`` more labels (straight-lining) or answered ``min_labels`` more
controls (control accuracy) than when it acted, with the condition holding on their whole record: an
undone action is the researcher's judgement on those numbers, and only new evidence of the rule's own
size overrides it. An action the researcher reversed by hand (an include or unblock of their own)
keeps the rule from acting on that worker again.

Cost: one query for the rules and one for the actions they took, once per quick run.
"""

from __future__ import annotations

import dataclasses

from annotation.models import Campaign, QualityRule, WorkerAction
from audits.selectors.stats import scaled_value_names
from audits.selectors.worker_numbers import WorkerQuality, WorkerRow


@dataclasses.dataclass(frozen=True)
class RuleDecision:
    """One action a rule calls for: ``kind`` (a ``WorkerAction.Kind``, the rule's action) on the worker,
    with the reason in words and the worker's numbers, as the action's log keeps them."""

    rule: QualityRule
    worker_id: int
    worker: str  # the public id, for the log line of a refusal
    kind: str
    reason: str
    numbers: dict


def _rule_reading(rule: QualityRule, row: WorkerRow, names: dict) -> tuple[bool, int, str]:
    """``(fires, the count the rule's min_labels applies to, the reason in words)``."""
    if rule.metric == QualityRule.Metric.CONTROL_ACCURACY:
        count, value = row.n_controls, row.control_accuracy
        if value is None or not value < rule.threshold or count < rule.min_labels:
            return False, count, ""
        lo, hi = row.control_ci
        plural = "s" if count != 1 else ""
        reason = (
            f"control accuracy {value:.2f} [{lo:.2f}, {hi:.2f}] after {count} control{plural}, "
            f"below the rule's {rule.threshold:.2f}"
        )
        return True, count, reason
    count, share = row.n_labels, row.top_share
    if share is None or not share > rule.threshold or count < rule.min_labels:
        return False, count, ""
    answer = str(int(row.top_value)) if float(row.top_value).is_integer() else f"{row.top_value:g}"
    word = names.get(float(row.top_value))
    if word:
        answer += f" ({word})"
    plural = "s" if count != 1 else ""
    reason = (
        f"answers {answer} to {share * 100:.0f} % of {count} label{plural}, "
        f"above the rule's {rule.threshold * 100:.0f} %"
    )
    return True, count, reason


def rule_decisions(*, campaign: Campaign, quality: WorkerQuality) -> list[RuleDecision]:
    """The actions the campaign's active rules call for on ``quality``, in rule order, then in the
    order of ``quality.rows`` (module docstring: when a rule acts again)."""
    rules = list(QualityRule.objects.filter(campaign=campaign, active=True))
    if not rules or not quality.rows:
        return []
    # Each rule's last action on each worker: whether it was undone and the count it acted at. Columns,
    # not objects: a campaign whose rules acted on many workers would otherwise decode every action's
    # numbers on every run.
    last: dict[tuple[int, int], tuple] = {}
    actions = WorkerAction.objects.filter(campaign=campaign, rule__in=rules).order_by("-created_at", "-id")
    for rule_id, worker_id, undone_at, rule_count in actions.values_list(
        "rule_id", "worker_id", "undone_at", "numbers__rule_count"
    ):
        last.setdefault((rule_id, worker_id), (undone_at, rule_count))
    names, decisions = scaled_value_names(campaign), []
    for rule in rules:
        for row in quality.rows:
            fires, count, reason = _rule_reading(rule, row, names)
            if not fires:
                continue
            previous = last.get((rule.pk, row.worker_id))
            if previous is not None and (previous[0] is None or count < (previous[1] or 0) + rule.min_labels):
                continue
            decisions.append(
                RuleDecision(
                    rule=rule,
                    worker_id=row.worker_id,
                    worker=row.worker,
                    kind=rule.action,  # a rule's actions are worker-action kinds of the same names
                    reason=reason,
                    numbers={**row.numbers(), "rule_count": count},
                )
            )
    return decisions


__all__ = ["RuleDecision", "rule_decisions"]
