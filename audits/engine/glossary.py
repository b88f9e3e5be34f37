"""What each number of the audit means, in words: the one place the dashboard, the "How to read
this" page and the Markdown report take their names, definitions and reference values from.

Plain Python (no numpy, no Django). The definitions restate ``noise-audit.md``; the reference
values are what Chorus's engine computes on the labels the study released
(``shared/datasets/mcs-noise-audit``, see its PROVENANCE.md): sample SD, every label, no filter;
TG-CSR is its eight sheets (four contexts, true/false and 1–4 ratings binarized 1, 2 → 0 and
3, 4 → 1, six trained annotators each), ComVE the 10,000 MTurk labels of 2,000 sentences by 244
workers. ``tests/audits/test_glossary.py`` recomputes every one of them, so they cannot drift
from the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Metric",
    "NUMBERS",
    "ACCURACY",
    "AGREEMENT",
    "ALPHA_BANDS",
    "agreement_name",
    "agreement_reading",
    "REFERENCE",
]

# Reference values: {key: {"tg_csr": (lowest, highest over the 8 sheets), "comve": value}}, to 2 or 3
# decimals as shown. Agreement keys are those of the report's "agreement" section.
REFERENCE = {
    "level_noise": {"tg_csr": (0.02, 0.07), "comve": 0.198},
    "pattern_noise_orig": {"tg_csr": (0.38, 0.41), "comve": 0.420},
    "pattern_noise_mod": {"tg_csr": (0.22, 0.23), "comve": 0.235},
    "system_noise_orig": {"tg_csr": (0.46, 0.49), "comve": 0.497},
    "residual": {"tg_csr": (0.06, 0.07), "comve": 0.031},
    "system_noise_mod": {"tg_csr": (0.33, 0.36), "comve": 0.354},
    "loo_accuracy": {"comve": 0.891},
    "gold_accuracy": {"comve": 0.874},
    "alpha_nominal": {"tg_csr_tf": (0.63, 0.67), "tg_csr_mc": (0.39, 0.48), "comve": 0.644},
    "alpha_ordinal": {"tg_csr_mc": (0.65, 0.72)},
    "gwet_ac1": {"tg_csr_tf": (0.68, 0.74), "comve": 0.653},
}


def _typical(key: str) -> str:
    ref = REFERENCE[key]
    parts = []
    if "tg_csr" in ref:
        lo, hi = ref["tg_csr"]
        parts.append(f"{lo:.2f}–{hi:.2f} on TG-CSR (six trained annotators)")
    if "comve" in ref:
        parts.append(f"{ref['comve']:.3f} on ComVE (244 crowd workers, all labels)")
    return "In the study's data: " + "; ".join(parts) + "."


@dataclass(frozen=True)
class Metric:
    """One number: ``name`` and ``symbol`` (``sub`` is its subscript), a one-sentence ``definition``,
    its ``direction`` (what higher means), what is ``typical``, and the guide's ``anchor``."""

    key: str
    name: str
    symbol: str
    sub: str
    definition: str
    direction: str
    typical: str
    anchor: str


NUMBERS = (
    Metric(
        "level_noise",
        "Level noise",
        "LN",
        "",
        "How much workers differ in their overall leaning: the spread (SD), across workers, of each worker's "
        "average label.",
        "Higher = more noise: some workers answer 1 far more often than others, whatever the prompt.",
        _typical("level_noise"),
        "level-noise",
    ),
    Metric(
        "pattern_noise_orig",
        "Pattern noise, original",
        "PN",
        "orig",
        "The spread (SD), across prompts, of each prompt's average label.",
        "Higher = prompts' averages differ more; it is large even when everyone agrees, because it grows "
        "with the mix of 1-prompts and 0-prompts (at most about 0.5), so read it next to the modified one.",
        _typical("pattern_noise_orig"),
        "pattern-noise",
    ),
    Metric(
        "pattern_noise_mod",
        "Pattern noise, modified",
        "PN",
        "mod",
        "How unevenly disagreement falls on the prompts: the spread (SD), across prompts with two or more "
        "labels, of the spread of each prompt's labels.",
        "Higher = more noise: some prompts split the workers while others are unanimous; "
        "0 when every prompt is unanimous.",
        _typical("pattern_noise_mod"),
        "pattern-noise",
    ),
    Metric(
        "system_noise_orig",
        "System noise, original",
        "SN",
        "orig",
        "The spread (SD) of all labels taken as one list.",
        "Higher = more noise overall; like the original pattern noise it also grows with the mix of 1s and 0s.",
        _typical("system_noise_orig"),
        "system-noise",
    ),
    Metric(
        "system_noise_mod",
        "System noise, modified",
        "SN",
        "mod",
        "Total noise built from the parts that measure disagreement: √(LN² + PN_mod² + residual).",
        "Higher = more noise; undefined when the sum under the root is negative.",
        _typical("system_noise_mod"),
        "system-noise",
    ),
    Metric(
        "residual",
        "Residual",
        "",
        "",
        "The part of the labels' variance that belongs to particular worker–prompt pairs: SN_orig² − LN² − PN_orig² "
        "(a variance, not an SD).",
        "Higher = more noise that neither a worker's leaning nor a prompt's average explains; it can be "
        "slightly negative when many cells are empty, and is shown as it is.",
        _typical("residual"),
        "residual",
    ),
)

ACCURACY = (
    Metric(
        "loo_accuracy",
        "Agreement with the others",
        "",
        "",
        "The share of a worker's labels that equal the most common label of the other workers on the same "
        "prompt (prompts where the others tie are skipped).",
        "Higher = closer to the crowd; the 95 % interval says how sure that is.",
        f"In the study's data: {REFERENCE['loo_accuracy']['comve']:.3f} pooled over ComVE's crowd workers.",
        "accuracy",
    ),
    Metric(
        "gold_accuracy",
        "Accuracy against gold",
        "",
        "",
        "The share of a worker's labels that equal the gold label imported with the prompt.",
        "Higher = closer to the gold labels (which may themselves be wrong).",
        f"In the study's data: {REFERENCE['gold_accuracy']['comve']:.3f} pooled over ComVE's crowd workers "
        "against the SemEval-2020 gold labels.",
        "accuracy",
    ),
)

# Krippendorff's (2004) reading of alpha, highest band first: (lowest value, words).
ALPHA_BANDS = ((0.8, "reliable"), (0.667, "tentative"), (float("-inf"), "not reliable"))

# The report's agreement keys → (name, what the variant counts as disagreement).
AGREEMENT = {
    "alpha_nominal": ("Krippendorff's α (nominal)", "every pair of different answers disagrees equally"),
    "alpha_ordinal": ("Krippendorff's α (ordinal)", "answers further apart in rank disagree more"),
    "alpha_interval": ("Krippendorff's α (interval)", "disagreement grows with the squared difference of the values"),
    "alpha_ratio": ("Krippendorff's α (ratio)", "disagreement grows with the relative difference of the values"),
    "gwet_ac1": (
        "Gwet's AC1",
        "every pair of different answers disagrees equally; chance agreement stays small when one answer dominates",
    ),
    "gwet_ac2_linear": (
        "Gwet's AC2 (linear weights)",
        "partial credit falling linearly with the distance between answers",
    ),
    "gwet_ac2_quadratic": ("Gwet's AC2 (quadratic weights)", "partial credit falling with the squared distance"),
    "gwet_ac2_ordinal": ("Gwet's AC2 (ordinal weights)", "partial credit by rank distance"),
    "cohen_kappa_mean": (
        "Cohen's κ (mean over pairs of workers)",
        "every pair of different answers disagrees equally; one κ per pair of workers sharing enough prompts",
    ),
    "fleiss_kappa": (
        "Fleiss' κ",
        "every pair of different answers disagrees equally; over the prompts with the most common label count",
    ),
}


def agreement_name(key: str) -> str:
    """A report agreement key (``"alpha_nominal"``) as people say it (``"Krippendorff's α (nominal)"``)."""
    return AGREEMENT.get(key, (key, ""))[0]


def agreement_reading(value: float | None) -> str | None:
    """Krippendorff's bands: ≥ 0.8 reliable, 0.667–0.8 tentative, below not reliable (None: undefined).

    >>> agreement_reading(0.82), agreement_reading(0.7), agreement_reading(0.644), agreement_reading(None)
    ('reliable', 'tentative', 'not reliable', None)
    """
    if value is None:
        return None
    return next(words for low, words in ALPHA_BANDS if value >= low)
