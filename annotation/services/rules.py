"""Quality rules: the researcher's "when <metric> is past <threshold> after <min_labels>, <action>".

The live audit evaluates a campaign's active rules after each quick audit (``audits.services.worker_rules``);
these services only write them. A rule is a log entry like the actions it takes: never edited, only
deactivated, so every action it took still names the rule as it was.
"""

import math

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Campaign, QualityRule
from annotation.services.activity import activity_record
from annotation.services.studies import study_check

#: The most labels (or controls) a rule may wait for: far beyond any worker's record, and well inside
#: the column's integer range.
MAX_MIN_LABELS = 1_000_000


def rule_check(*, metric, threshold, min_labels, action) -> dict:
    """The rule's fields, checked and normalised (``threshold`` a float, ``min_labels`` an int); raises
    ``ValidationError`` naming each bad field. One place for the rules, so the page, the API and any
    script refuse the same things.

    A threshold is a share in [0, 1]; one that no worker can ever pass (control accuracy below 0,
    straight-lining above 1) is refused as impossible, since the rule could never act.
    """
    errors = {}
    if metric not in QualityRule.Metric.values:
        errors["metric"] = f"Unknown metric {metric!r}; use one of {', '.join(QualityRule.Metric.values)}."
    if action not in QualityRule.Action.values:
        errors["action"] = f"Unknown action {action!r}; use one of {', '.join(QualityRule.Action.values)}."
    try:
        value = float(threshold)
        if isinstance(threshold, bool) or not math.isfinite(value):
            raise ValueError
    except (TypeError, ValueError):
        errors["threshold"] = f"The threshold is a share between 0 and 1; got {threshold!r}."
    else:
        if not 0 <= value <= 1:
            errors["threshold"] = f"The threshold is a share between 0 and 1; got {threshold!r}."
        elif metric == QualityRule.Metric.CONTROL_ACCURACY and value == 0:
            errors["threshold"] = "No control accuracy is below 0: the rule could never act. Give a share above 0."
        elif metric == QualityRule.Metric.STRAIGHT_LINING and value == 1:
            errors["threshold"] = (
                "No worker's answer has a share above 1: the rule could never act. Give a share below 1."
            )
    if isinstance(min_labels, bool) or not isinstance(min_labels, int) or not 1 <= min_labels <= MAX_MIN_LABELS:
        errors["min_labels"] = (
            f"The least number of labels (or controls) is a whole number from 1 to {MAX_MIN_LABELS}; "
            f"got {min_labels!r}."
        )
    if errors:
        raise ValidationError(errors)
    return {"metric": metric, "threshold": value, "min_labels": min_labels, "action": action}


def rule_create(*, campaign: Campaign, by, metric: str, threshold: float, min_labels: int, action: str) -> QualityRule:
    """Add an active rule to the campaign (checked first: :func:`rule_check`); the next quick audit
    applies it to every worker's record so far."""
    study_check(campaign)
    fields = rule_check(metric=metric, threshold=threshold, min_labels=min_labels, action=action)
    with transaction.atomic(durable=True):
        rule = QualityRule.objects.create(campaign=campaign, created_by=by, **fields)
        activity_record(
            campaign=campaign, verb="rule.created", summary=f"Added the rule “{rule}”", detail=fields, actor=by
        )
    return rule


def rule_deactivate(*, rule: QualityRule) -> QualityRule:
    """Stop the rule from acting (idempotent). Its past actions stay, and stay undoable."""
    with transaction.atomic(durable=True):
        if QualityRule.objects.filter(pk=rule.pk, active=True).update(active=False):
            activity_record(
                campaign=rule.campaign,
                verb="rule.deactivated",
                summary=f"Stopped the rule “{rule}”",
                detail={"rule_id": rule.pk},
            )
    rule.active = False
    return rule
