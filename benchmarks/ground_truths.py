"""Cost of the alternative ground truths (``audits.engine.truths``) on real crowd labels.

Run from the repository root::

    .venv/bin/python benchmarks/ground_truths.py              # ComVE (10,000 labels) and Snow et al.'s RTE
    .venv/bin/python benchmarks/ground_truths.py --repeat 3

Data: ``../shared/datasets`` (or ``CHORUS_DATASETS``): the noise-audit study's ComVE MTurk labels
(2,000 prompts × 5, 244 workers, SemEval gold), the largest labelled set there, and Snow et al.
(2008) RTE (800 prompts × 10, 164 workers, gold). For each method: wall time of
``ground_truths(matrix, methods=(method,))`` on an already built matrix (best of ``--repeat``,
after one untimed run that pays crowd-kit's import), and its accuracy against gold. The import of
crowd-kit (with pandas and scipy) is timed apart, in a new process.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from audits.engine.matrix import LabelMatrix

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the engine is imported inside the functions, once this is set

DATASETS = Path(os.environ.get("CHORUS_DATASETS", REPO / ".." / "shared" / "datasets")).resolve()


def comve() -> LabelMatrix:
    from audits.engine.matrix import LabelMatrix

    data = json.loads((DATASETS / "mcs-noise-audit" / "raw" / "ComVE-annotation.json").read_text())
    triples = [(a["workerId"], key, a["annotation"]) for key, item in data.items() for a in item["annotations"]]
    with open(DATASETS / "mcs-noise-audit" / "derived_comve_key_to_semeval_train.csv", newline="") as fh:
        gold = {r["annotation_key"]: int(r["semeval_gold_plausible"]) for r in csv.DictReader(fh)}
    workers, prompts, values = zip(*triples)
    return LabelMatrix.from_triples(list(workers), list(prompts), list(values), gold=gold, source="ComVE")


def rte() -> LabelMatrix:
    from audits.engine.matrix import LabelMatrix

    with open(DATASETS / "snow2008-amt" / "rte.standardized.tsv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    gold = {r["orig_id"]: int(r["gold"]) for r in rows}
    return LabelMatrix.from_triples(
        [r["!amt_worker_ids"] for r in rows],
        [r["orig_id"] for r in rows],
        [int(r["response"]) for r in rows],
        gold=gold,
        source="Snow RTE",
    )


def import_seconds() -> float:
    code = "import time; t = time.perf_counter(); import crowdkit.aggregation; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    from audits.engine.truths import METHODS, ground_truths

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per method (best is reported)")
    args = parser.parse_args()
    print(f"import crowdkit.aggregation (pandas, scipy, sklearn, nltk): {import_seconds():.2f} s")
    ground_truths(rte(), methods=("majority",))  # pays the import in this process
    print("| data | labels | prompts | workers | method | seconds | accuracy vs gold |")
    print("|---|---|---|---|---|---|---|")
    for load in (comve, rte):
        matrix = load()
        for method in METHODS:
            best, result = float("inf"), None
            for _ in range(args.repeat):
                t = time.perf_counter()
                result = ground_truths(matrix, methods=(method,))[method]
                best = min(best, time.perf_counter() - t)
            print(
                f"| {matrix.source} | {matrix.n_labels:,} | {matrix.n_prompts:,} | {matrix.n_workers} | {method} "
                f"| {best:.2f} | {result['accuracy_gold']:.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
