"""The label matrix: constructors, schema/invalid counting, sub-matrices, large-input paths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import audits.engine._util
import audits.engine.label_files
import audits.engine.matrix
from audits import DuplicateLabelError, LabelMatrix, noise_audit, parse_binarize


def test_from_triples_database_style_ids_gold_and_binarization():
    # what a selector over the database passes: int ids, raw ratings, gold per prompt id
    m = LabelMatrix.from_triples(
        workers=[10, 11, 10, 12, 11],
        prompts=[501, 501, 502, 502, 503],
        values=[4, 1, 3, None, 9],
        gold={501: 4, 502: 2, 999: 1},
        binarize={1: 0, 2: 0, 3: 1, 4: 1},
    )
    assert m.worker_ids.tolist() == [10, 11] and m.prompt_ids.tolist() == [501, 502]  # 12 and 503: no valid label
    assert (m.n_labels, m.n_missing, m.n_invalid) == (3, 1, 1)
    assert m.value.tolist() == [1.0, 0.0, 1.0] and m.raw.tolist() == [4.0, 1.0, 3.0]
    assert m.gold.tolist() == [1.0, 0.0]
    assert m.transform([1, 3, 7]).tolist()[:2] == [0.0, 1.0]


def test_string_categories_with_binarize_and_raw_levels():
    m = LabelMatrix.from_triples(
        ["a", "b", "c"], [1, 1, 1], ["Plausible", "implausible ", "maybe"], binarize={"plausible": 1, "implausible": 0}
    )
    assert m.value.tolist() == [1.0, 0.0] and m.n_invalid == 1
    assert m.raw_levels.tolist() == ["implausible", "plausible"]


def test_rescale_and_valid_values():
    m = LabelMatrix.from_triples(["a", "b", "c"], [1, 1, 1], [0, 7.5, 11], rescale=(0, 10))
    assert m.value.tolist() == [0.0, 0.75] and m.n_invalid == 1
    m2 = LabelMatrix.from_triples(["a", "b", "c"], [1, 1, 1], [0, 1, 2], valid_values=[0, 1])
    assert m2.n_labels == 2 and m2.n_invalid == 1


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        (dict(workers=["a"], prompts=[1, 2], values=[1, 1]), "prompts"),
        (dict(workers=["a", None], prompts=[1, 2], values=[1, 1]), "workers"),
        (dict(workers=["a", "b"], prompts=[1, 2], values=[1]), "values"),
        (dict(workers=["a"], prompts=[1], values=[1], duplicates="keep"), "duplicates"),
        (dict(workers=["a"], prompts=[1], values=[1], binarize="1-0"), "binarize"),
        (dict(workers=["a"], prompts=[1], values=[1], rescale=(1, 1)), "rescale"),
        (dict(workers=["a"], prompts=[1], values=[1], binarize={1: 1}, rescale=(0, 1)), "rescale"),
        (dict(workers=["a", "b"], prompts=[1, 1], values=[1, 0], gold=[1, 0]), "gold"),
        (dict(workers=["a"], prompts=[1], values=[1], group=[1, 2]), "group"),
    ],
)
def test_value_errors_name_the_argument(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        LabelMatrix.from_triples(**kwargs)


def test_duplicate_error_carries_positions():
    with pytest.raises(DuplicateLabelError) as info:
        LabelMatrix.from_triples(["a", "b", "a"], [1, 1, 1], [1, 0, 1])
    assert info.value.positions == (0, 2) and info.value.worker == "a"


def test_from_frame_and_to_frame_round_trip():
    df = pd.DataFrame(
        {"annotator": ["x", "y", "x"], "item": ["i1", "i1", "i2"], "label": [1, 0, 1], "noise": [0.3, 0.1, 0.2]}
    )
    m = LabelMatrix.from_frame(df, worker="annotator", prompt="item", value="label")
    back = m.to_frame()
    assert back[["worker", "prompt", "value"]].values.tolist() == [["x", "i1", 1.0], ["y", "i1", 0.0], ["x", "i2", 1.0]]
    with pytest.raises(ValueError, match="worker"):
        LabelMatrix.from_frame(df)


def test_select_workers_drops_empty_prompts():
    m = LabelMatrix.from_triples(["a", "b", "b"], [1, 1, 2], [1, 0, 1], gold={1: 1, 2: 0})
    sub = m.select_workers(np.array([True, False]))
    assert (sub.n_workers, sub.n_prompts, sub.n_labels) == (1, 1, 1) and sub.gold.tolist() == [1.0]


def test_parse_binarize():
    assert parse_binarize("1:0, 2:0,3:1,4:1") == {1.0: 0.0, 2.0: 0.0, 3.0: 1.0, 4.0: 1.0}
    assert parse_binarize({"Yes": 1, "no": 0}) == {"yes": 1.0, "no": 0.0}
    with pytest.raises(ValueError, match="is not of the form raw:scaled"):
        parse_binarize("1-0")


def test_large_input_paths_equal_small_ones(monkeypatch, tmp_path):
    """Above 200k labels the constructor and reader use pandas' hash tables: same matrix."""
    rng = np.random.default_rng(1)
    n = 3000
    workers = np.array([f"w{i}" for i in rng.integers(0, 60, n)], dtype=object)
    prompts = np.array([f"p{i}" for i in range(n)], dtype=object)
    raw = rng.choice(np.array(["1", "2", "3", "4", "", "x", "NA"], dtype=object), n)
    path = tmp_path / "l.csv"
    pd.DataFrame({"worker": workers, "prompt": prompts, "value": raw, "gold": "3"}).to_csv(path, index=False)
    small = audits.engine.label_files.read_labels(path, binarize="1:0,2:0,3:1,4:1")
    for mod in (audits.engine._util, audits.engine.matrix, audits.engine.label_files):
        monkeypatch.setattr(mod, "SMALL", 10)
    large = audits.engine.label_files.read_labels(path, binarize="1:0,2:0,3:1,4:1")
    for attr in ("worker_ids", "prompt_ids", "worker", "prompt", "value", "raw", "gold"):
        np.testing.assert_array_equal(getattr(small, attr), getattr(large, attr))
    assert (small.n_missing, small.n_invalid) == (large.n_missing, large.n_invalid)
    assert noise_audit(small) == noise_audit(large)
