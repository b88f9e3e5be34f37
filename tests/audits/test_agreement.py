"""Krippendorff's alpha and Gwet's AC1/AC2 against hand-worked and published examples."""

from __future__ import annotations

import numpy as np
import pytest

from audits import LabelMatrix, agreement_coefficients, gwet_ac, gwet_weights, krippendorff_alpha, value_count_table

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
