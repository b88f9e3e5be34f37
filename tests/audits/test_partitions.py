"""Noise partitions and scoring a system per partition."""

from __future__ import annotations

import pytest
from scipy import stats

from audits import LabelMatrix, modal_labels, noise_partitions, score_partitions, two_proportion_ztest


def five_label_matrix():
    # prompts 0-3 with 5 labels: minority 0, 1, 2, 0; prompt 4 has 3 labels (not partitioned)
    rows = {0: [1, 1, 1, 1, 1], 1: [1, 1, 1, 1, 0], 2: [1, 1, 1, 0, 0], 3: [0, 0, 0, 0, 0], 4: [1, 0, 1]}
    w, p, v = [], [], []
    for prompt, vals in rows.items():
        for i, x in enumerate(vals):
            w.append(f"w{i}")
            p.append(prompt)
            v.append(x)
    return LabelMatrix.from_triples(w, p, v, gold={0: 1, 1: 0, 2: 1, 3: 0, 4: 1})


def test_partitions_counts_and_meta():
    parts = noise_partitions(five_label_matrix())
    assert parts.k == 5 and parts.k_source == "most common label count"
    assert parts.to_dict() == {"0": 2, "1": 1, "2": 1}
    assert parts.n_prompts_other == 1
    assert noise_partitions(five_label_matrix(), k=3).to_dict() == {"0": 0, "1": 1}
    with pytest.raises(ValueError, match="k"):
        noise_partitions(five_label_matrix(), k=0)


def test_modal_labels_nan_on_ties():
    m = LabelMatrix.from_triples(["a", "b", "a", "b"], [1, 1, 2, 2], [1, 0, 1, 1])
    modal = modal_labels(m)
    assert modal[1] == 1.0 and modal[0] != modal[0]


@pytest.mark.parametrize("x1, n1, x2, n2", [(95, 100, 70, 100), (30, 40, 12, 20), (5, 9, 1, 3)])
def test_two_proportion_ztest_agrees_with_chi_square(x1, n1, x2, n2):
    z, p, reason = two_proportion_ztest(x1, n1, x2, n2)
    chi2, p_chi, _, _ = stats.chi2_contingency([[x1, n1 - x1], [x2, n2 - x2]], correction=False)
    assert z**2 == pytest.approx(chi2) and p == pytest.approx(p_chi) and reason is None


def test_two_proportion_ztest_undefined():
    assert two_proportion_ztest(3, 3, 5, 5)[0] is None
    assert two_proportion_ztest(0, 0, 5, 5)[2] == "a partition has no scored prompts"


def test_score_partitions_against_modal_and_gold():
    m = five_label_matrix()
    preds = {0: 1, 1: 1, 2: 0, 3: 0, 4: 1, "unknown": 1}
    res = score_partitions(m, preds)
    rows = {r.minority: r for r in res.rows}
    assert (rows[0].n_modal, rows[0].correct_modal) == (2, 2)
    assert (rows[1].correct_modal, rows[1].correct_gold) == (1, 0)
    assert (rows[2].correct_modal, rows[2].correct_gold) == (0, 0)
    assert res.n_unmatched == 1
    d = res.to_dict()
    assert set(d["partitions"]) == {"0", "1", "2"}
    assert len(d["tests"]) == 6  # 3 pairs × (modal, gold)
