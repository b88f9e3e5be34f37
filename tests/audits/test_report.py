"""The report: fixed keys, JSON, Markdown, optional sections."""

from __future__ import annotations

import json

import numpy as np
import pytest

from audits import LabelMatrix, full_report, render_markdown
from audits.engine.report import REPORT_KEYS


def small_matrix(seed=0, gold=True):
    rng = np.random.default_rng(seed)
    w, p, v = [], [], []
    for j in range(40):
        for i in rng.choice(8, size=5, replace=False):
            w.append(f"w{i}")
            p.append(j)
            v.append(int(rng.random() < 0.3 + 0.4 * (j % 2)))
    return LabelMatrix.from_triples(w, p, v, gold={j: j % 2 for j in range(40)} if gold else None)


def test_report_has_the_spec_keys_and_is_strict_json():
    rep = full_report(small_matrix(), sweeps=("min", "max"), filters=(("min", 10),))
    d = rep.to_dict()
    for k in REPORT_KEYS:
        assert k in d
    text = rep.to_json()
    assert json.loads(text)["n_labels"] == 200
    assert d["accuracy_gold"] and set(d["accuracy_gold"][0]) == set(d["accuracy"][0])
    assert set(d["partitions"]) == {"0", "1", "2"}
    assert d["computed_on"]["n_labels"] == 200 and d["computed_on"]["sd"] == "sample"
    # the watermark (label rows) is the live audit's to state: the engine only knows its matrix
    assert "label_count" not in d["computed_on"] and "watermark" not in d["computed_on"]
    assert len(d["filters"]["min"]["threshold"]) == int(max(r["n_labels"] for r in d["accuracy"])) + 1
    assert d["worker_noise"] and len(d["noise_vs_accuracy"]["gold"]) == 6


def test_report_with_predictions_systems_and_second_run():
    m = small_matrix()
    preds = {j: j % 2 for j in range(40)}
    other = {j: 1 for j in range(40)}
    d = full_report(m, predictions=preds, predictions_b=other, second=small_matrix(seed=1)).to_dict()
    assert d["partition_scores"]["partitions"]["0"]["accuracy_gold"] == 1.0
    assert d["systems"]["n_raters"] == 8 and d["systems"]["distinguishable"] is True
    assert d["reproducibility"]["n_common"] == 40
    md = render_markdown(d)
    for title in (
        "The six numbers",
        "Noise partitions",
        "System scored per partition",
        "two systems apart",
        "Reproducibility",
        "Minimum-labels filter sweep",
    ):
        assert title in md


def test_markdown_shows_undefined_numbers_with_reasons():
    m = LabelMatrix.from_triples(["a"], [1], [1])
    md = full_report(m).to_markdown()
    assert "undefined: 1 worker(s)" in md
    d = full_report(m).to_dict()
    assert d["level_noise"] is None and d["accuracy"] == [] and d["notes"]["accuracy_gold"] == "no gold labels"


def test_bad_report_arguments():
    with pytest.raises(ValueError, match="sweeps"):
        full_report(small_matrix(), sweeps=("median",))
    with pytest.raises(ValueError, match="ddof"):
        full_report(small_matrix(), ddof=3)


def test_markdown_states_the_watermark_only_when_the_report_has_one():
    d = full_report(small_matrix()).to_dict()
    header = render_markdown(d).splitlines()[2]
    assert header.startswith("Computed on **labels**: 8 workers, 40 prompts, 200 labels; sample SD; at ")
    assert "watermark" not in header and "label count" not in header and header.endswith(".")
    d["computed_on"]["watermark"] = 215
    header = render_markdown(d).splitlines()[2]
    assert header.endswith(" (watermark: 215 counted label rows).")


def _walk(x, path="report"):
    if isinstance(x, dict):
        for k, v in x.items():
            assert isinstance(k, str), path
            _walk(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _walk(v, f"{path}[{i}]")
    else:
        assert x is None or type(x) in (str, int, float, bool), f"{path}: {type(x).__name__}"
        if type(x) is float:
            assert x == x and abs(x) != float("inf"), path


def test_to_dict_holds_only_plain_python_values():
    m = small_matrix()
    d = full_report(
        m,
        sweeps=("min", "max"),
        filters=(("max", 30),),
        predictions={j: 1 for j in range(40)},
        predictions_b={j: 0 for j in range(40)},
        second=small_matrix(seed=2),
    ).to_dict()
    _walk(d)
