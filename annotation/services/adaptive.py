"""Adaptive k: a prompt gets one more slot at a time until its majority is settled or it reaches k_max.

The stated rule, for binary labels (or ratings through a binarization that maps every point of the
scale to 0 or 1): a campaign with ``k_max`` set gives every prompt ``k`` slots at import (``k`` is the
minimum). When a prompt's last open slot is filled, with ``n`` counted labels of which ``s`` are 1:

* **stop** when ``n >= k`` and the posterior probability that the prompt's current majority is the
  majority of the crowd (``stop_posterior``, uniform Beta(1, 1) prior on the crowd's share of 1s)
  reaches ``stop_confidence``;
* else **at max** when ``n >= k_max``: the prompt stops with the most labels allowed;
* else **extend**: one new slot, index ``n``, drawn like the slots of an import.

A tie (``2s = n``) has no majority: its posterior is exactly 1/2, and it never stops before ``k_max``,
whatever ``stop_confidence`` is (even 0.5). Each decision is logged as a ``StopDecision`` (prompt, ``n``,
``s``, posterior, outcome) in ``label_submit``'s transaction, so a prompt's slot count is its own final
number of labels at every instant: ``k`` plus one slot per logged "extend".

The rule's arithmetic and the planner are pure (no database, no scipy) and live outside the write
package, in ``annotation.adaptive``; this module carries the rule out.
"""

import random
from collections.abc import Iterable
from datetime import datetime

from django.db import transaction

# The rule's names stay importable from here, where they were first (tests and scripts import them).
from annotation.adaptive import (
    COMVE_VOTES_OF_FIVE,
    Outcome,
    final_k_distribution,
    stop_plan,
    stop_posterior,
    stop_rule,
    stop_thresholds,
)
from annotation.models import Campaign, Label, Slot, StopDecision


def _scaled_ones(campaign: Campaign, values: Iterable) -> int:
    binarize = campaign.label_schema.binarize
    return sum(binarize(value) for value in values)


@transaction.atomic(savepoint=False)
def prompt_stop_decide(*, campaign: Campaign, prompt_id: int, now: datetime) -> StopDecision:
    """Decide, log and carry out the rule for a prompt whose last open slot was just filled.

    Runs inside ``label_submit``'s transaction, which holds the prompt's row lock (its counter's
    UPDATE), so the prompt's labels and slots cannot change under it. Reads the prompt's counted labels
    (their number is its slot count), logs a ``StopDecision`` and, on "extend", creates slot ``n``
    (unique per prompt and index: the database refuses a second one).

    A prompt that comes back to a count it was already decided at (a void label's slot filled again)
    keeps that decision: it is returned and nothing is written. Such a decision was "stop" or "at max"
    (after "extend" the prompt has one slot more than the count), so the prompt stays stopped, and its
    slot count stays k plus one per logged "extend".
    """
    values = list(Label.objects.counted().filter(prompt_id=prompt_id).values_list("value", flat=True))
    n_labels = len(values)
    decided = StopDecision.objects.filter(prompt_id=prompt_id, n_labels=n_labels).first()
    if decided is not None:
        return decided
    n_positive = _scaled_ones(campaign, values)
    outcome, posterior = stop_rule(
        n_positive, n_labels, k=campaign.k, k_max=campaign.k_max, stop_confidence=campaign.stop_confidence
    )
    decision = StopDecision.objects.create(
        campaign=campaign,
        prompt_id=prompt_id,
        n_labels=n_labels,
        n_positive=n_positive,
        posterior=posterior,
        outcome=outcome,
        created_at=now,
    )
    if outcome == Outcome.EXTEND:
        # As an import draws them (prompts_import); the priority is the prompt's label count, for fill-first.
        Slot.objects.create(
            campaign=campaign, prompt_id=prompt_id, index=n_labels, rand=random.random(), priority=n_labels
        )
    return decision


__all__ = [
    "COMVE_VOTES_OF_FIVE",
    "Outcome",
    "final_k_distribution",
    "prompt_stop_decide",
    "stop_plan",
    "stop_posterior",
    "stop_rule",
    "stop_thresholds",
]
