"""Fixtures for the audit tests: dataset locations and converters into labels files.

The datasets live in ``shared/datasets`` next to the repository (``../shared/datasets`` from the
repo root), or wherever ``CHORUS_DATASETS`` points. Converters write temporary labels files; no copy
of the data is committed.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATASETS = Path(os.environ.get("CHORUS_DATASETS", REPO / ".." / "shared" / "datasets")).resolve()


def dataset(*parts: str) -> Path:
    path = DATASETS.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"dataset not available: {path} (see shared/datasets/*/PROVENANCE.md; set CHORUS_DATASETS to their folder)"
        )
    return path


def write_csv(path: Path, header: list[str], rows) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.fixture(scope="session")
def comve_labels(tmp_path_factory) -> Path:
    """ComVE MTurk labels as a Chorus labels file (worker, prompt, value)."""
    src = dataset("mcs-noise-audit", "raw", "ComVE-annotation.json")
    data = json.loads(src.read_text())
    rows = [(a["workerId"], key, a["annotation"]) for key, item in data.items() for a in item["annotations"]]
    return write_csv(tmp_path_factory.mktemp("comve") / "comve.csv", ["worker", "prompt", "value"], rows)


@pytest.fixture(scope="session")
def comve_gold(tmp_path_factory) -> Path:
    """SemEval-2020 gold plausibility per ComVE key, as a gold file (prompt, gold)."""
    src = dataset("mcs-noise-audit", "derived_comve_key_to_semeval_train.csv")
    with open(src, newline="") as fh:
        rows = [(r["annotation_key"], r["semeval_gold_plausible"]) for r in csv.DictReader(fh)]
    return write_csv(tmp_path_factory.mktemp("comve_gold") / "gold.csv", ["prompt", "gold"], rows)


def tgcsr_labels(tmp_path: Path, name: str) -> Path:
    """One TG-CSR sheet (csv/<name>.csv) as a labels file; empty cells become empty values."""
    src = dataset("mcs-noise-audit", "csv", f"{name}.csv")
    rows = []
    with open(src, newline="", encoding="utf-8-sig") as fh:
        for r in csv.DictReader(fh):
            prompt = f"q{r['questionID']}-a{r['answerID']}"
            for rater in "ABCDEF":
                rows.append((rater, prompt, r[rater].strip(), r["category"], "2023-01-01T00:00:00Z"))
    return write_csv(tmp_path / f"{name}.csv", ["worker", "prompt", "value", "group", "created_at"], rows)


def wordsim_labels(tmp_path: Path, sets=("set1", "set2"), raters=None) -> Path:
    """WordSim-353 individual ratings (panels of 13 and 16 raters are different people)."""
    rows = []
    for s in sets:
        src = dataset("wordsim353", f"{s}.csv")
        with open(src, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader)
            rater_cols = [i for i, h in enumerate(header) if h.strip().isdigit()]
            for no, r in enumerate(reader):
                if not r:
                    continue
                for i in rater_cols:
                    if raters is None or int(header[i]) in raters:
                        # row number in the prompt id: money-cash occurs twice in set1
                        rows.append((f"{s}-r{header[i].strip()}", f"{s}-{no}:{r[0]}-{r[1]}", r[i].strip()))
    tag = "-".join(sets) + ("" if raters is None else "-" + "_".join(map(str, sorted(raters))))
    return write_csv(tmp_path / f"wordsim-{tag}.csv", ["worker", "prompt", "value"], rows)


def snow_labels(tmp_path: Path, task: str) -> Path:
    """Snow et al. 2008 TSV (one label per row) as a labels file with gold and an extra column."""
    src = dataset("snow2008-amt", f"{task}.standardized.tsv")
    rows = []
    with open(src, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        for r in reader:
            rows.append((r["!amt_worker_ids"], r["orig_id"], r["response"], r["gold"], r["!amt_annotation_ids"]))
    return write_csv(tmp_path / f"snow-{task}.csv", ["worker", "prompt", "value", "gold", "assignment"], rows)
