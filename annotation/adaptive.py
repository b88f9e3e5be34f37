"""Adaptive k's stopping rule and its planner, as pure arithmetic: no query, no scipy.

The rule (stated in ``annotation.services.adaptive``, which carries it out in ``label_submit``'s
transaction) is evaluated on every label that fills a prompt's last slot; the planner (``stop_plan``)
on the campaign page, through ``annotation.selectors.campaign_stop_plan``. Outside the write package,
as ``annotation/channels/pricing.py`` is, so that reads import it at module level.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from annotation.models import StopDecision

Outcome = StopDecision.Outcome

#: The study's ComVE crowd (``../shared/datasets/mcs-noise-audit``, PROVENANCE.md): how many of its 2,000
#: sentences got 0, 1, … 5 "plausible" votes of 5. The planner's stated default before a campaign has
#: labels of its own.
COMVE_VOTES_OF_FIVE = (468, 308, 156, 98, 189, 781)
#: The default counts as this many prompts beside a campaign's own: a few prompts of its own move the
#: plan a little, a few hundred settle it.
DEFAULT_WEIGHT_PROMPTS = 20


def stop_posterior(n_positive: int, n_labels: int) -> float:
    """P(the prompt's current majority is the crowd's majority | s ones among n labels), uniform prior.

    With a Beta(1, 1) prior on the crowd's share p of 1s, p given the labels is Beta(s + 1, n − s + 1),
    and when 1 is the majority (s > n − s) the posterior is

    .. math::

        P(p > 1/2) = 1 - I_{1/2}(s + 1,\\, n - s + 1)
                   = 2^{-(n+1)} \\sum_{j=0}^{s} \\binom{n+1}{j}

    (the regularised incomplete beta function with integer parameters is a binomial tail:
    :math:`I_x(a, b) = P(\\mathrm{Bin}(a + b - 1, x) \\ge a)`); symmetrically
    :math:`P(p < 1/2) = I_{1/2}(s + 1, n - s + 1)` when 0 is the majority. Both are
    :math:`P(\\mathrm{Bin}(n + 1, 1/2) \\le \\max(s, n - s))`, computed here in exact integers.

    Notes
    -----
    * A tie (``2s = n``, including no labels) gives exactly 0.5: neither value is the majority.
    * Unanimous labels give :math:`1 - 2^{-(n+1)}`: 0.9375 for 3 of 3, 0.96875 for 4 of 4.
    * Raises ValueError naming the argument unless ``0 <= n_positive <= n_labels`` are integers.

    Examples
    --------
    >>> stop_posterior(4, 4)
    0.96875
    >>> round(stop_posterior(1, 5), 4)
    0.8906
    >>> stop_posterior(2, 4)
    0.5
    """
    for name, value in (("n_positive", n_positive), ("n_labels", n_labels)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}: expected a whole number >= 0, got {value!r}")
    if n_positive > n_labels:
        raise ValueError(f"n_positive: expected at most n_labels = {n_labels}, got {n_positive}")
    majority = max(n_positive, n_labels - n_positive)
    return sum(math.comb(n_labels + 1, j) for j in range(majority + 1)) / 2 ** (n_labels + 1)


def stop_rule(n_positive: int, n_labels: int, *, k: int, k_max: int, stop_confidence: float) -> tuple[str, float]:
    """The rule's outcome for a prompt whose slots are all filled, and the posterior it was taken on.

    ``Outcome.STOP`` when ``n_labels >= k``, there is a majority and ``stop_posterior`` reaches
    ``stop_confidence``; else ``Outcome.AT_MAX`` when ``n_labels >= k_max``; else ``Outcome.EXTEND``
    (also below ``k``, which the planner walks through and a live prompt never reaches: it has k slots).
    """
    posterior = stop_posterior(n_positive, n_labels)
    if n_labels >= k and 2 * n_positive != n_labels and posterior >= stop_confidence:
        return Outcome.STOP, posterior
    if n_labels >= k_max:
        return Outcome.AT_MAX, posterior
    return Outcome.EXTEND, posterior


# --- the planner ----------------------------------------------------------------------------------


def stop_thresholds(*, k: int, k_max: int, stop_confidence: float) -> list[tuple[int, int | None]]:
    """The rule as a table: for each number of labels n from k to k_max, the fewest labels m of the
    majority answer that stop a prompt there (m of n, or more lopsided), or None when none does."""
    rows = []
    for n in range(k, k_max + 1):
        stops = [
            m
            for m in range(n // 2 + 1, n + 1)
            if stop_rule(m, n, k=k, k_max=k_max, stop_confidence=stop_confidence)[0] == Outcome.STOP
        ]
        rows.append((n, stops[0] if stops else None))
    return rows


@dataclass(frozen=True)
class StopConsequences:
    """What a campaign's settings mean for its prompts, said before any label (the campaign form).

    ``lines`` says, for each number of labels n from k to k_max, whether a prompt can stop there and
    with what agreement (``stop_thresholds``); ``pointless`` is set when no prompt can stop before k_max,
    so that adaptive k would give every prompt k_max labels, and ``warning`` then says so and what to change.
    """

    lines: list[str]
    pointless: bool
    warning: str


def stop_consequences(*, k: int, k_max: int, stop_confidence: float) -> StopConsequences:
    """The rule (``stop_rule``, through ``stop_thresholds``) in words, one line per number of labels.

    At n labels the most lopsided answers (n of n alike) give the largest posterior, 1 − 2^−(n+1)
    (``stop_posterior``); a line that says no prompt stops at n quotes it against ``stop_confidence``.
    """
    lines = []
    early_stop = False
    for n, m in stop_thresholds(k=k, k_max=k_max, stop_confidence=stop_confidence):
        if m is not None:
            early_stop = early_stop or n < k_max
            lines.append(
                f"At {n} labels a prompt stops when {m} or more of {n} are alike "
                f"(probability {stop_posterior(m, n):.4f} ≥ {stop_confidence:g})"
                + ("; otherwise it stops there anyway, the most labels." if n == k_max else ".")
            )
        elif n == k_max:
            lines.append(f"At {n} labels (the most) every prompt stops, whatever its answers.")
        else:
            lines.append(
                f"With k = {k} and {stop_confidence:g}, no prompt stops at {n}: even {n} of {n} alike give "
                f"{stop_posterior(n, n):.4f}, below {stop_confidence:g}."
                if n == k
                else f"At {n} labels no prompt stops: even {n} of {n} alike give {stop_posterior(n, n):.4f}."
            )
    warning = ""
    if k_max == k:
        warning = (
            f"k_max = k = {k}: every prompt gets {k} labels, as without adaptive k. Leave k_max empty, or raise it."
        )
    elif not early_stop:
        warning = (
            f"No prompt can stop before k_max = {k_max} labels, so adaptive k would give every prompt {k_max}: "
            f"lower the confidence to stop at, raise k_max, or leave k_max empty and set k = {k_max}."
        )
    return StopConsequences(lines=lines, pointless=not early_stop, warning=warning)


@dataclass(frozen=True)
class StopPlan:
    """What the rule is expected to cost per prompt, before the labels are collected.

    ``final_k`` maps each possible final number of labels (k … k_max) to its probability for a prompt
    whose crowd share of 1s is drawn from the prior (``stop_plan``); ``expected`` is its mean.
    ``thresholds`` is the rule as a table (``stop_thresholds``).
    """

    k: int
    k_max: int
    stop_confidence: float
    final_k: dict[int, float]
    thresholds: list[tuple[int, int | None]]
    basis: str  # what the prior was estimated from, in words

    @property
    def expected(self) -> float:
        return sum(n * p for n, p in self.final_k.items())

    def expected_total(self, n_prompts: int) -> float:
        return self.expected * n_prompts


def comve_prior() -> list[tuple[float, int, int]]:
    """The default prior: the ComVE crowd's sentences, each as the Beta posterior of its 5 votes."""
    return [(float(n), 1 + s, 1 + 5 - s) for s, n in enumerate(COMVE_VOTES_OF_FIVE)]


def prior_from_first_labels(counts: dict[int, int], *, k: int) -> list[tuple[float, int, int]]:
    """A campaign's own prior: each prompt that reached k labels, with s ones among them, as the Beta
    posterior Beta(1 + s, 1 + k − s) of its share; ``counts`` maps s to how many prompts had it.

    The first k labels of every prompt are taken alike, whatever the rule did next, so prompts the rule
    extended (contested ones) weigh as much as those it stopped.
    """
    return [(float(n), 1 + s, 1 + k - s) for s, n in sorted(counts.items()) if n]


def stop_plan(*, k: int, k_max: int, stop_confidence: float, first_labels: dict[int, int] | None = None) -> StopPlan:
    """The distribution of a prompt's final number of labels under the rule, computed exactly.

    The crowd's share p of 1s for a prompt is drawn from a mixture of Beta distributions: the ComVE
    default (``COMVE_VOTES_OF_FIVE``, weighing as ``DEFAULT_WEIGHT_PROMPTS`` prompts) plus, given
    ``first_labels`` ({s: prompts with s ones among their first k labels}), one Beta posterior per
    prompt of the campaign (``prior_from_first_labels``). Within each Beta(a, b) component the labels
    follow the Beta-binomial predictive (Pólya urn): the next label is 1 with probability
    (a + s) / (a + b + n) after s ones of n. Dynamic programming over (n, s) carries each state's
    probability forward through the rule (``stop_rule``) from (0, 0) to k_max: exact, no simulation,
    O(k_max²) per component.

    Each component is a prompt's posterior after only a few labels, so the mixture is wider than the
    crowd's true spread of shares: the plan leans to more labels, the safe side for a budget.
    """
    if first_labels:
        own = prior_from_first_labels(first_labels, k=k)
        n_own = sum(first_labels.values())
        basis = (
            f"the first {k} labels of the campaign's {n_own} prompt{'s' if n_own != 1 else ''} that have them, "
            f"with the study's ComVE crowd weighing as {DEFAULT_WEIGHT_PROMPTS} prompts"
        )
    else:
        own = []
        basis = "the study's ComVE crowd (2,000 sentences, 5 labels each): no prompt has k labels yet"
    default_total = sum(COMVE_VOTES_OF_FIVE)
    prior = [(w * DEFAULT_WEIGHT_PROMPTS / default_total, a, b) for w, a, b in comve_prior()] + own
    total_weight = sum(w for w, _, _ in prior)
    final = final_k_distribution(
        k=k, k_max=k_max, stop_confidence=stop_confidence, prior=[(w / total_weight, a, b) for w, a, b in prior]
    )
    thresholds = stop_thresholds(k=k, k_max=k_max, stop_confidence=stop_confidence)
    return StopPlan(
        k=k, k_max=k_max, stop_confidence=stop_confidence, final_k=final, thresholds=thresholds, basis=basis
    )


def final_k_distribution(
    *, k: int, k_max: int, stop_confidence: float, prior: Sequence[tuple[float, float, float]]
) -> dict[int, float]:
    """P(final number of labels = n) for n = k … k_max, for a share p ~ Σ w · Beta(a, b) (``stop_plan``).

    ``prior`` lists (weight, a, b); the weights sum to 1.
    """
    if k < 1:
        raise ValueError(f"k: expected a positive integer, got {k!r}")
    if k_max < k:
        raise ValueError(f"k_max: expected at least k = {k}, got {k_max!r}")
    outcomes = {
        (n, s): stop_rule(s, n, k=k, k_max=k_max, stop_confidence=stop_confidence)[0]
        for n in range(k_max + 1)
        for s in range(n + 1)
    }
    final = {n: 0.0 for n in range(k, k_max + 1)}
    for weight, a, b in prior:
        level = {0: weight}  # s -> probability of having s ones among the first n labels, still open
        for n in range(k_max + 1):
            after: dict[int, float] = {}
            for s, mass in level.items():
                if outcomes[n, s] != Outcome.EXTEND:
                    final[n] += mass
                    continue
                one = (a + s) / (a + b + n)
                after[s + 1] = after.get(s + 1, 0.0) + mass * one
                after[s] = after.get(s, 0.0) + mass * (1 - one)
            level = after
    return final
