"""Per-prompt dispersion for the instrument card (``audits.engine.dispersion``), against hand-worked
values and numpy; and the docstring examples of the card's engine modules."""

import doctest

import numpy as np
import pytest

import audits.engine.dispersion
import audits.engine.intervals
from audits.engine import LabelMatrix
from audits.engine.dispersion import item_dispersion


def test_modal_share_by_hand():
    # prompt 1: 1, 1, 0 → 1 − 2/3; prompt 2: 0, 0 → 0; prompt 3: a, b, c, c → 1 − 2/4
    m = LabelMatrix.from_triples(
        list("abcabwxyz"),
        [1, 1, 1, 2, 2, 3, 3, 3, 3],
        ["1", "1", "0", "0", "0", "0", "1", "2", "2"],
        binarize={"0": 0, "1": 1, "2": 1},
    )
    d = item_dispersion(m, categorical=True)
    assert d.kind == "one_minus_modal_share"
    assert d.dispersion.tolist() == pytest.approx([1 / 3, 0.0, 0.5])
    assert d.item_mean.tolist() == pytest.approx([2 / 3, 0.0, 0.75])  # share of scaled 1s
    assert d.counts.tolist() == [3, 2, 4]
    assert d.mean_dispersion == pytest.approx(np.mean([1 / 3, 0, 0.5]))
    assert d.sd_dispersion == pytest.approx(np.std([1 / 3, 0, 0.5], ddof=1))
    out = d.to_dict()
    assert out["points"]["n"] == [3, 2, 4] and out["n_defined"] == 3


def test_numeric_scales_use_the_item_sd():
    rng = np.random.default_rng(0)
    dense = rng.integers(0, 11, size=(40, 6)).astype(float)
    w, p = np.tile(np.arange(6), 40), np.repeat(np.arange(40), 6)
    m = LabelMatrix.from_triples(w, p, dense.ravel(), binarize={float(v): int(v >= 5) for v in range(11)})
    d = item_dispersion(m, categorical=False)
    assert d.kind == "sd"
    assert d.dispersion == pytest.approx(dense.std(axis=1, ddof=1))
    assert d.mean_dispersion == pytest.approx(dense.std(axis=1, ddof=1).mean())
    assert d.sd_dispersion == pytest.approx(dense.std(axis=1, ddof=1).std(ddof=1))
    assert item_dispersion(m, categorical=False, ddof=0).mean_dispersion == pytest.approx(dense.std(axis=1).mean())


def test_many_prompts_are_sampled_evenly():
    n = 60
    m = LabelMatrix.from_triples(np.tile([0, 1], n), np.repeat(np.arange(n), 2), np.tile([0, 1], n))
    points = item_dispersion(m, categorical=True).to_dict(max_points=7)["points"]
    assert points["sampled"] is True and len(points["dispersion"]) == 7


@pytest.mark.parametrize("module", [audits.engine.dispersion, audits.engine.intervals])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0
