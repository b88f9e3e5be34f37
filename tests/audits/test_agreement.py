"""Krippendorff's alpha and Gwet's AC1/AC2 against hand-worked and published examples."""

from __future__ import annotations

import numpy as np
import pytest

from audits import (
    LabelMatrix,
    agreement_coefficients,
    cohen_kappa_pairs,
    fleiss_kappa,
    gwet_ac,
    gwet_weights,
    krippendorff_alpha,
    prompt_agreement,
    value_count_table,
)
from audits.engine.agreement import KAPPA_MIN_SHARED

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 observers × 12 units
# example; it is also irrCAC's ``cac.raw4raters`` (Gwet, Handbook, 4th ed.). None = missing.
KRIPP_EXAMPLE = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]

# irrCAC's ``raw_5observers`` (Gwet 2014): 5 observers, 15 units, scores 0-3.
FIVE_OBSERVERS = dict(
    o1=[1, 1, 2, None, 0, 0, 1, 1, 2, 2, None, 0, 1, 3, 1],
    o2=[1, 1, 3, 0, 0, 0, 0, None, 2, 1, 1, 0, 2, 3, 1],
    o3=[2, 0, 3, 0, 0, 0, 2, 2, 2, 1, 0, 0, 2, 2, 1],
    o4=[None, 1, 3, None, None, None, None, 0, None, 1, 0, 0, 2, 2, None],
    o5=[2, None, None, 0, 0, 0, 1, None, 2, None, None, None, None, 3, 1],
)


def matrix_from_rows(rows: dict | list) -> LabelMatrix:
    if isinstance(rows, list):
        rows = {f"r{i}": r for i, r in enumerate(rows)}
    w, p, v = [], [], []
    for rater, row in rows.items():
        for unit, x in enumerate(row):
            w.append(rater)
            p.append(unit)
            v.append(x)
    return LabelMatrix.from_triples(w, p, v)


def test_alpha_hand_worked_two_coders_three_units():
    # units (1,1), (1,0), (0,0). Coincidences o00 = 2, o01 = o10 = 1, o11 = 2; n = 6, n0 = n1 = 3.
    # D_o = (o01 + o10)/n = 1/3;  D_e = 2·n0·n1 / (n(n-1)) = 18/30 = 3/5;  alpha = 1 - (1/3)/(3/5) = 4/9
    m = matrix_from_rows({"a": [1, 1, 0], "b": [1, 0, 0]})
    for level in ("nominal", "ordinal", "interval"):
        assert krippendorff_alpha(m, level=level).value == pytest.approx(4 / 9, abs=1e-12)


def test_alpha_hand_worked_three_categories_with_missing():
    # units: (1,2,-), (2,2,2), (3,3,1), (-,1,1). Nominal coincidences, pairable values n = 10:
    # unit1 (m=2): o12=o21=1; unit2 (m=3): o22 += 6/2=3; unit3 (m=3): o33 += 2/2=1, o31=o13 += 2/2=1
    # each; unit4 (m=2): o11 += 2.  Totals n1 = 1+1+2 = 4? -> computed below by hand:
    # rows: o11=2, o12=1, o13=1 (n1=4); o21=1, o22=3 (n2=4); o31=1, o33=1 (n3=2).
    # D_o = (o12+o13+o21+o31)/10 = 4/10;  D_e = (n1n2+n1n3+n2n1+n2n3+n3n1+n3n2)/(10·9) = (16+8+16+8+8+8)/90 = 64/90
    # alpha = 1 - 0.4/(64/90) = 1 - 36/64 = 7/16
    m = matrix_from_rows({"a": [1, 2, 3, None], "b": [2, 2, 3, 1], "c": [None, 2, 1, 1]})
    assert krippendorff_alpha(m, level="nominal").value == pytest.approx(7 / 16, abs=1e-12)


@pytest.mark.parametrize(
    "level, published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_alpha_krippendorff_2011_example(level, published):
    m = matrix_from_rows(KRIPP_EXAMPLE)
    assert round(krippendorff_alpha(m, level=level).value, 3) == published


def test_gwet_ac1_published_4raters_example():
    # irrCAC (R and Python) for cac.raw4raters: AC1 = 0.77544, pa = 0.81818, pe = 0.19032
    m = matrix_from_rows(KRIPP_EXAMPLE)
    table, cats = value_count_table(m)
    res = gwet_ac(table, categories=cats)
    assert round(res.value, 5) == 0.77544
    assert round(res.pa, 5) == 0.81818
    assert round(res.pe, 5) == 0.19032
    assert res.name == "gwet_ac1"


@pytest.mark.parametrize(
    "weights, pa, pe, coeff",
    [("quadratic", 0.975, 0.714, 0.914), ("linear", 0.939, 0.571, 0.859), ("ordinal", 0.968, 0.685, 0.899)],
)
def test_gwet_ac2_published_4raters_weighted(weights, pa, pe, coeff):
    # irrCAC's published test values for cac.raw4raters with weights (3 decimals)
    m = matrix_from_rows(KRIPP_EXAMPLE)
    table, cats = value_count_table(m)
    res = gwet_ac(table, weights=weights, categories=cats)
    assert (round(res.pa, 3), round(res.pe, 3), round(res.value, 3)) == (pa, pe, coeff)
    assert res.name == f"gwet_ac2_{weights}"


def test_gwet_ac1_published_5observers():
    # irrCAC for raw_5observers: pa = 0.616, pe = 0.236, AC1 = 0.497
    m = matrix_from_rows(FIVE_OBSERVERS)
    table, cats = value_count_table(m)
    res = gwet_ac(table, categories=cats)
    assert (round(res.pa, 3), round(res.pe, 3), round(res.value, 3)) == (0.616, 0.236, 0.497)


def test_gwet_ac1_hand_worked_binary():
    # 3 units × 2 raters: (1,1), (1,0), (0,0). pa = (1 + 0 + 1)/3 = 2/3.
    # pi_0 = (0 + .5 + 1)/3 = .5, pi_1 = .5; pe = Σ pi(1-pi)/(q-1) = .5; AC1 = (2/3 - 1/2)/(1/2) = 1/3
    res = gwet_ac([[0, 2], [1, 1], [2, 0]])
    assert res.pa == pytest.approx(2 / 3) and res.pe == pytest.approx(0.5) and res.value == pytest.approx(1 / 3)


def test_gwet_weights_match_irrcac_tables():
    # irrCAC vignette, categories 1:3
    np.testing.assert_allclose(gwet_weights([1, 2, 3], "linear"), [[1, 0.5, 0], [0.5, 1, 0.5], [0, 0.5, 1]])
    np.testing.assert_allclose(gwet_weights([1, 2, 3], "quadratic"), [[1, 0.75, 0], [0.75, 1, 0.75], [0, 0.75, 1]])
    np.testing.assert_allclose(gwet_weights([1, 2, 3], "ordinal"), [[1, 2 / 3, 0], [2 / 3, 1, 2 / 3], [0, 2 / 3, 1]])


def test_undefined_agreement_has_a_reason():
    m = matrix_from_rows({"a": [1, 1], "b": [1, 1]})
    assert krippendorff_alpha(m).value is None and "one distinct value" in krippendorff_alpha(m).reason
    assert gwet_ac([[2], [2]]).value is None
    lonely = matrix_from_rows({"a": [1, None], "b": [None, 0]})
    assert krippendorff_alpha(lonely).value is None


def test_bad_arguments_name_the_argument():
    m = matrix_from_rows({"a": [1, 0], "b": [1, 1]})
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(m, level="nominalish")
    with pytest.raises(ValueError, match="weights"):
        gwet_ac([[1, 1]], weights=np.eye(3))
    with pytest.raises(ValueError, match="table"):
        gwet_ac([1, 2, 3])


def test_agreement_section_uses_raw_values_not_binarized():
    m = LabelMatrix.from_triples(["a", "b", "a", "b"], [1, 1, 2, 2], [3, 4, 1, 2], binarize="1:0,2:0,3:1,4:1")
    sec = agreement_coefficients(m)
    # binarized the two raters agree perfectly; on the raw 1-4 scale they never do: four values
    # seen once each, D_o = D_e = 1, nominal alpha = 0
    assert sec["alpha_nominal"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert krippendorff_alpha(m, values="scaled").value == pytest.approx(1.0)
    assert sec["gwet_ac1"]["value"] < 0.5


def test_alpha_is_undefined_without_warning_when_every_pairable_prompt_is_unanimous():
    """Two values occur, but only on different prompts, and the one prompt with two labels agrees:
    the expected disagreement among pairable values is 0, so alpha is 0/0 — reported with a reason."""
    import warnings

    matrix = matrix_from_rows({"a": [1, 0], "b": [1, None]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = krippendorff_alpha(matrix)
    assert result.value is None and result.reason == "expected disagreement is 0"


# ---------------------------------------------------------------------------------- Cohen's and Fleiss' κ
def test_cohen_kappa_hand_worked_pair_and_the_min_shared_rule():
    # a and b share 10 prompts: (1,1) ×4, (1,0) ×2, (0,0) ×3, (0,1) ×1.
    # p_o = 7/10; a says 1 on 6/10, b on 5/10: p_e = 0.6·0.5 + 0.4·0.5 = 0.5; κ = (0.7 − 0.5)/(1 − 0.5) = 0.4.
    # c shares only 5 prompts with each: below KAPPA_MIN_SHARED = 10, left out (but counted as met).
    a = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    c = [1, 0, 1, 0, 1, None, None, None, None, None]
    m = matrix_from_rows({"a": a, "b": b, "c": c})
    pairs = cohen_kappa_pairs(m)
    assert KAPPA_MIN_SHARED == 10
    assert pairs.rows() == [{"worker_a": "a", "worker_b": "b", "n_shared": 10, "kappa": pytest.approx(0.4, abs=1e-12)}]
    summary = pairs.summary()
    assert summary["value"] == pytest.approx(0.4, abs=1e-12)
    assert (summary["n_pairs"], summary["n_pairs_met"], summary["n_units"], summary["n_labels"]) == (1, 3, 10, 20)
    # With a lower bar every pair counts. a–c: a = 1,1,1,1,1 vs c = 1,0,1,0,1 → p_o = 3/5; a says 1 on 5/5,
    # c on 3/5 → p_e = 1·0.6 + 0·0.4 = 0.6; κ = (0.6 − 0.6)/0.4 = 0 (agreement no better than chance).
    # b–c: b = 1,1,1,1,0 vs c = 1,0,1,0,1 → p_o = 2/5; b: 1 on 4/5, c on 3/5: p_e = 0.8·0.6 + 0.2·0.4 = 0.56;
    # κ = (0.4 − 0.56)/0.44 = −4/11
    low = {(r["worker_a"], r["worker_b"]): r["kappa"] for r in cohen_kappa_pairs(m, min_shared=5).rows()}
    assert low == {
        ("a", "b"): pytest.approx(0.4, abs=1e-12),
        ("a", "c"): pytest.approx(0.0, abs=1e-12),
        ("b", "c"): pytest.approx(-4 / 11, abs=1e-12),
    }


def test_cohen_kappa_published_example():
    # Wikipedia "Cohen's kappa": 50 proposals, yes/yes 20, yes/no 5, no/yes 10, no/no 15 → κ = 0.4.
    cells = [(1, 1)] * 20 + [(1, 0)] * 5 + [(0, 1)] * 10 + [(0, 0)] * 15
    m = matrix_from_rows({"a": [x for x, _ in cells], "b": [y for _, y in cells]})
    assert cohen_kappa_pairs(m).kappa[0] == pytest.approx(0.4, abs=1e-12)


def test_cohen_kappa_undefined_pair_and_no_pair():
    m = matrix_from_rows({"a": [1] * 10, "b": [1] * 10})
    summary = cohen_kappa_pairs(m).summary()
    assert summary["value"] is None and "chance agreement is 1" in summary["reason"]
    assert summary["n_pairs_undefined"] == 1
    few = cohen_kappa_pairs(matrix_from_rows({"a": [1, 0], "b": [1, 1]})).summary()
    assert few["value"] is None and "10 or more prompts" in few["reason"]


def test_cohen_kappa_equals_a_loop_over_pairs_on_sparse_ratings():
    rng = np.random.default_rng(7)
    rows = {f"w{i}": [int(v) if rng.random() < 0.6 else None for v in rng.integers(1, 5, size=60)] for i in range(7)}
    m = matrix_from_rows(rows)
    got = {(r["worker_a"], r["worker_b"]): (r["n_shared"], r["kappa"]) for r in cohen_kappa_pairs(m).rows()}
    names = sorted(rows)
    want = {}
    for x, a in enumerate(names):
        for b in names[x + 1 :]:
            both = [(u, v) for u, v in zip(rows[a], rows[b]) if u is not None and v is not None]
            if len(both) < KAPPA_MIN_SHARED:
                continue
            n = len(both)
            po = sum(u == v for u, v in both) / n
            pe = sum(sum(u == c for u, _ in both) * sum(v == c for _, v in both) for c in range(1, 5)) / n**2
            want[(a, b)] = (n, (po - pe) / (1 - pe))
    assert got.keys() == want.keys() and len(got) == 21
    for key, (n, kappa) in want.items():
        assert got[key][0] == n and got[key][1] == pytest.approx(kappa, abs=1e-12)


def test_fleiss_kappa_hand_worked_on_the_modal_k():
    # prompts with 3 labels: (1,1,1), (1,1,0), (0,0,0); one prompt with 2 labels is left out (k = 3 is modal).
    # P_i = Σ n_ik(n_ik − 1)/(3·2): 1, (2·1)/6 = 1/3, 1 → P̄ = 7/9; p_1 = 5/9, p_0 = 4/9, P̄e = 41/81;
    # κ = (63/81 − 41/81)/(40/81) = 22/40 = 0.55
    m = matrix_from_rows({"a": [1, 1, 0, 1], "b": [1, 1, 0, 0], "c": [1, 0, 0, None]})
    res = fleiss_kappa(m)
    assert res["value"] == pytest.approx(0.55, abs=1e-12)
    assert (res["k"], res["n_units"], res["n_labels"]) == (3, 3, 9)
    assert res["pa"] == pytest.approx(7 / 9) and res["pe"] == pytest.approx(41 / 81)


def test_fleiss_kappa_published_example():
    # Fleiss (1971) as on Wikipedia "Fleiss' kappa": 10 subjects, 14 raters, 5 categories → κ = 0.210.
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1]]
    table += [[7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    w, p, v = [], [], []
    for unit, row in enumerate(table):
        labels = [c + 1 for c, n in enumerate(row) for _ in range(n)]
        w += [f"r{r}" for r in range(len(labels))]
        p += [unit] * len(labels)
        v += labels
    res = fleiss_kappa(LabelMatrix.from_triples(w, p, v))
    assert round(res["value"], 3) == 0.210 and round(res["pa"], 3) == 0.378 and round(res["pe"], 3) == 0.213


def test_fleiss_kappa_undefined():
    assert "chance agreement is 1" in fleiss_kappa(matrix_from_rows({"a": [1, 1], "b": [1, 1]}))["reason"]
    assert fleiss_kappa(matrix_from_rows({"a": [1, 0]}))["reason"] == "no prompt has two or more labels"


def test_kappas_against_statsmodels():
    # Fleiss' κ comes from statsmodels on the engine's table (this checks the table); Cohen's pairwise κ is
    # the engine's own vectorised equation, checked here against the library pair by pair.
    from statsmodels.stats import inter_rater

    m = matrix_from_rows(FIVE_OBSERVERS)
    table, _ = value_count_table(m)
    k = fleiss_kappa(m)["k"]
    assert fleiss_kappa(m)["value"] == pytest.approx(inter_rater.fleiss_kappa(table[table.sum(axis=1) == k]))
    for row in cohen_kappa_pairs(m, min_shared=5).rows():
        crosstab = np.zeros((4, 4))
        for x, y in zip(FIVE_OBSERVERS[row["worker_a"]], FIVE_OBSERVERS[row["worker_b"]]):
            if None not in (x, y):
                crosstab[x, y] += 1
        assert row["kappa"] == pytest.approx(inter_rater.cohens_kappa(crosstab).kappa)


def test_the_report_carries_the_kappas_beside_alpha_and_ac1():
    m = matrix_from_rows(KRIPP_EXAMPLE)
    ag = agreement_coefficients(m)
    assert list(ag)[-2:] == ["cohen_kappa_mean", "fleiss_kappa"]
    assert ag["fleiss_kappa"]["value"] == fleiss_kappa(m)["value"]
    kappas = [r["kappa"] for r in cohen_kappa_pairs(m).rows()]
    # of the 6 pairs of observers only r1–r3 and r2–r3 share 10 units (r0 labeled 9, r1–r2 share 9)
    assert len(kappas) == 2
    assert ag["cohen_kappa_mean"]["value"] == pytest.approx(np.mean(kappas), abs=1e-12)


# ---------------------------------------------------------------------------------- per prompt
def test_prompt_agreement_hand_worked():
    # prompt 0: 1,1,0,0,0 → mode share 3/5, entropy −(0.4·log2 0.4 + 0.6·log2 0.6) = 0.970951 bits;
    # prompt 1: unanimous → 1 and 0; prompt 2: 1,2,3 on a rating → 1/3 and log2 3.
    workers = ["a", "b", "c", "d", "e", "a", "b", "a", "b", "c"]
    m = LabelMatrix.from_triples(workers, [0, 0, 0, 0, 0, 1, 1, 2, 2, 2], [1, 1, 0, 0, 0, 4, 4, 1, 2, 3])
    rows = prompt_agreement(m).rows()
    assert [r["n_labels"] for r in rows] == [5, 2, 3]
    assert [r["mode_share"] for r in rows] == pytest.approx([0.6, 1.0, 1 / 3])
    assert [r["entropy_bits"] for r in rows] == pytest.approx([0.9709505944546686, 0.0, np.log2(3)])
    assert rows[1]["entropy_bits"] == 0.0 and str(rows[1]["entropy_bits"]) == "0.0"


def test_cohen_kappa_refuses_too_many_label_pairs_and_the_report_says_why(monkeypatch):
    import audits.engine.agreement as agreement

    m = matrix_from_rows(KRIPP_EXAMPLE)
    monkeypatch.setattr(agreement, "_MAX_LABEL_PAIRS", 10)
    with pytest.raises(ValueError, match="pairs of labels on the same prompts"):
        cohen_kappa_pairs(m)
    summary = agreement_coefficients(m)["cohen_kappa_mean"]
    assert summary["value"] is None and "too many for Cohen's κ" in summary["reason"]
