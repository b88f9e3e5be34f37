"""Adaptive k replayed on real crowd labels: labels spent against a fixed k, and majorities that change.

Run from the repository root::

    .venv/bin/python benchmarks/adaptive_k.py
    .venv/bin/python benchmarks/adaptive_k.py --confidence 0.9 0.95

Data: ``../shared/datasets`` (or ``CHORUS_DATASETS``), the noise-audit study's labels
(``mcs-noise-audit/PROVENANCE.md``):

* ComVE: 2,000 sentences, 5 MTurk labels each (1 = plausible), SemEval gold. The crowd is replayed in
  label order (the order of each sentence's ``annotations``): a prompt gets its first k labels, then
  the stopping rule (``annotation.adaptive.stop_rule``) decides after each label whether it
  takes the next one, up to k_max = 5, all the data has. The baseline is fixed k = 5: all 10,000 labels.
* TG-CSR true/false, where the data allows k_max = 6: the 4 contexts' question–answer pairs with all six
  annotators' labels, replayed in annotator order A → F, against fixed k = 6. No gold.

For each minimum k from 3 to k_max − 1 and each ``--confidence``, the table gives the labels spent (and the
share of the fixed-k labels), the mean final k against the planner's exact expectation
(``stop_plan`` fed with the replay's own first-k labels, as the campaign page feeds it), how often the
final majority differs from the fixed-k majority (a tie counts as differing from a majority; how many
of the differences are a tie on either side is in brackets: six labels can tie), and, for ComVE, each
majority's accuracy against gold (a tie counts as wrong).
``tests/annotation/test_adaptive_k.py`` runs a subset through the real services (lease_acquire /
label_submit) and checks that the live rule ends every prompt where this replay does.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATASETS = Path(os.environ.get("CHORUS_DATASETS", REPO / ".." / "shared" / "datasets")).resolve()
STUDY = DATASETS / "mcs-noise-audit"
TG_CSR_CONTEXTS = ("vacationing-abroad", "camping", "bad-weather", "dental-cleaning")


def comve() -> tuple[dict[str, list[tuple[str, int]]], dict[str, int]]:
    """Each sentence's (worker, label) in label order, and its SemEval gold (1 = plausible)."""
    data = json.loads((STUDY / "raw" / "ComVE-annotation.json").read_text())
    labels = {key: [(a["workerId"], int(a["annotation"])) for a in item["annotations"]] for key, item in data.items()}
    with open(STUDY / "derived_comve_key_to_semeval_train.csv", newline="") as fh:
        gold = {row["annotation_key"]: int(row["semeval_gold_plausible"]) for row in csv.DictReader(fh)}
    return labels, gold


def tg_csr_true_false() -> dict[str, list[tuple[str, int]]]:
    """The TG-CSR true/false pairs with all six annotators' labels, in annotator order A → F."""
    labels = {}
    for context in TG_CSR_CONTEXTS:
        for line in (STUDY / "jsonl" / f"{context}-tf.jsonl").read_text().splitlines():
            row = json.loads(line)  # missing labels are the bare token NaN, which json reads
            given = [(entry["annotatorID"], entry["label"]) for entry in row["labels"]]
            if all(isinstance(value, int) for _, value in given):
                labels[f"{context}:{row['questionID']}:{row['answerID']}"] = given
    return labels


def replay(sequences: dict[str, list[int]], *, k: int, k_max: int, stop_confidence: float) -> dict[str, int]:
    """Each prompt's final number of labels when its labels arrive in the given order under the rule."""
    from annotation.adaptive import Outcome, stop_rule  # Django is set up by main() or the caller

    final = {}
    for prompt, values in sequences.items():
        n = k
        while stop_rule(sum(values[:n]), n, k=k, k_max=k_max, stop_confidence=stop_confidence)[0] == Outcome.EXTEND:
            n += 1
        final[prompt] = n
    return final


def majority(values: list[int]) -> int | None:
    ones = sum(values)
    return None if 2 * ones == len(values) else int(2 * ones > len(values))


def rows_for(name: str, sequences: dict[str, list[int]], gold: dict[str, int] | None, confidences) -> list[list]:
    from annotation.adaptive import stop_plan

    k_max = min(len(values) for values in sequences.values())
    fixed = {prompt: majority(values[:k_max]) for prompt, values in sequences.items()}
    fixed_total = k_max * len(sequences)
    rows = []
    for k in range(3, k_max):
        first = {}
        for values in sequences.values():
            first[sum(values[:k])] = first.get(sum(values[:k]), 0) + 1
        for confidence in confidences:
            final = replay(sequences, k=k, k_max=k_max, stop_confidence=confidence)
            spent = sum(final.values())
            ends = {prompt: majority(sequences[prompt][:n]) for prompt, n in final.items()}
            differ = [prompt for prompt in sequences if ends[prompt] != fixed[prompt]]
            ties = sum(ends[prompt] is None or fixed[prompt] is None for prompt in differ)
            planned = stop_plan(k=k, k_max=k_max, stop_confidence=confidence, first_labels=first).expected
            row = [
                name,
                k,
                k_max,
                f"{confidence:g}",
                f"{spent:,}",
                f"{100 * spent / fixed_total:.1f} %",
                f"{spent / len(sequences):.3f}",
                f"{planned:.3f}",
                f"{len(differ)} ({ties})",
                f"{100 * len(differ) / len(sequences):.2f} %",
            ]
            if gold is not None:
                row += [f"{_accuracy(ends, gold):.4f}", f"{_accuracy(fixed, gold):.4f}"]
            else:
                row += ["—", "—"]
            rows.append(row)
    return rows


def _accuracy(majorities: dict[str, int | None], gold: dict[str, int]) -> float:
    """Share of prompts whose majority equals gold; a tie counts as wrong."""
    return sum(majorities[prompt] == gold[prompt] for prompt in majorities) / len(majorities)


HEAD = [
    "data",
    "k",
    "k_max",
    "stop at",
    "labels",
    "of fixed k_max",
    "mean final k",
    "planner's mean",
    "majority differs (ties)",
    "share differs",
    "acc. vs gold",
    "fixed k_max acc.",
]


def table(rows: list[list]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(HEAD, *rows)]
    line = lambda cells: "  ".join(str(cell).rjust(width) for cell, width in zip(cells, widths))  # noqa: E731
    return "\n".join([line(HEAD), line(["-" * width for width in widths]), *(line(row) for row in rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--confidence",
        type=float,
        nargs="+",
        default=[0.6, 0.7, 0.8, 0.9, 0.95],
        help="stop_confidence values to replay (0.5 to 0.999)",
    )
    args = parser.parse_args()
    if not (STUDY / "raw" / "ComVE-annotation.json").exists():
        sys.exit(f"dataset not available: {STUDY} (see shared/datasets/*/PROVENANCE.md; set CHORUS_DATASETS)")
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()  # to import the rule's module; no database is touched

    labels, gold = comve()
    comve_values = {prompt: [value for _, value in given] for prompt, given in labels.items()}
    tg_values = {prompt: [value for _, value in given] for prompt, given in tg_csr_true_false().items()}
    rows = rows_for("ComVE", comve_values, gold, args.confidence)
    rows += rows_for("TG-CSR t/f", tg_values, None, args.confidence)
    print(
        f"ComVE: {len(comve_values):,} sentences × 5 labels, label order; TG-CSR true/false: {len(tg_values):,} "
        f"pairs with all 6 annotators, order A→F. Baseline: fixed k = k_max.\n"
    )
    print(table(rows))
    kept = [row for row in rows if row[0] == "ComVE" and row[8].startswith("0 ")]
    best = min(kept, key=lambda row: float(row[5].rstrip(" %")))
    print(
        f"\nFewest ComVE labels with every majority as at k = 5: k = {best[1]}, stop at {best[3]}: {best[4]} labels "
        f"({best[5]} of fixed k = 5)."
    )


if __name__ == "__main__":
    main()
