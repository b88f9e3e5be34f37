"""The spec's worked examples (noise-audit.md): 100 prompts, 5 workers in perfect agreement."""

import math

import pytest

from audits import LabelMatrix, full_report, noise_audit


def perfect_agreement(n_positive: int) -> LabelMatrix:
    workers = [f"w{i}" for j in range(100) for i in range(5)]
    prompts = [f"p{j}" for j in range(100) for i in range(5)]
    values = [int(j < n_positive) for j in range(100) for i in range(5)]
    return LabelMatrix.from_triples(workers, prompts, values)


@pytest.mark.parametrize(
    "n_positive, ddof, expected",
    [
        (60, 1, math.sqrt(0.24 * 100 / 99)),  # ≈ 0.49237
        (60, 0, math.sqrt(0.24)),  # ≈ 0.48990
        (90, 1, math.sqrt(0.09 * 100 / 99)),  # ≈ 0.30151
        (90, 0, 0.3),
    ],
)
def test_worked_example(n_positive, ddof, expected):
    a = noise_audit(perfect_agreement(n_positive), ddof=ddof)
    assert a.level_noise == 0.0
    assert a.pattern_noise_mod == 0.0
    assert a.pattern_noise_orig == pytest.approx(expected, abs=1e-12)
    assert (a.n_workers, a.n_prompts, a.n_labels) == (5, 100, 500)
    assert a.sd == ("sample" if ddof == 1 else "population")


def test_worked_example_rounded_values_from_the_spec():
    assert round(noise_audit(perfect_agreement(60)).pattern_noise_orig, 5) == 0.49237
    assert round(noise_audit(perfect_agreement(60), ddof=0).pattern_noise_orig, 5) == 0.48990
    assert round(noise_audit(perfect_agreement(90)).pattern_noise_orig, 5) == 0.30151
    assert round(noise_audit(perfect_agreement(90), ddof=0).pattern_noise_orig, 5) == 0.3


@pytest.mark.parametrize("n_positive", [60, 90])
def test_worked_example_population_residual_is_zero_and_sn_mod_zero(n_positive):
    # population SD: the flat variance p(1-p) equals PN_orig², so the residual is 0 and SN_mod = 0
    a = noise_audit(perfect_agreement(n_positive), ddof=0)
    assert a.residual == 0.0
    assert a.system_noise_mod == 0.0
    assert a.system_noise_orig == pytest.approx(a.pattern_noise_orig, abs=1e-12)


@pytest.mark.parametrize("n_positive", [60, 90])
def test_worked_example_sample_sd_residual_negative_so_sn_mod_is_null(n_positive):
    # sample SD: SN_orig² = p(1-p)·500/499 < PN_orig² = p(1-p)·100/99, so the residual is negative
    # and SN_mod = sqrt(0 + 0 + residual) is undefined: null with a reason, never 0 (spec).
    p = n_positive / 100
    a = noise_audit(perfect_agreement(n_positive), ddof=1)
    assert a.residual == pytest.approx(p * (1 - p) * (500 / 499 - 100 / 99), abs=1e-12)
    assert a.residual < 0
    assert a.system_noise_mod is None
    assert "negative" in a.reasons["system_noise_mod"]


def test_worked_example_report_keys():
    d = full_report(perfect_agreement(60)).to_dict()
    assert d["level_noise"] == 0.0 and d["pattern_noise_mod"] == 0.0
    assert d["sd"] == "sample"
    assert d["system_noise_mod"] is None and "system_noise_mod" in d["reasons"]
    assert d["partitions"] == {"0": 100, "1": 0, "2": 0}
