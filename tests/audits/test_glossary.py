"""The words the dashboard, the guide and the Markdown report use: every reference value they quote is
recomputed here from the study's released labels (skipped, saying why, where the datasets are absent)."""

from __future__ import annotations

import pytest

from audits import LabelMatrix, agreement_coefficients, full_report, noise_audit, read_labels
from audits.engine.flags import straight_lining
from audits.engine.glossary import ACCURACY, AGREEMENT, NUMBERS, REFERENCE, agreement_name, agreement_reading
from audits.engine.noise import NOISE_KEYS

from .conftest import REPO, tgcsr_labels

SHEETS = [
    f"{context}-{fmt}"
    for context in ("vacationing-abroad", "camping", "bad-weather", "dental-cleaning")
    for fmt in ("tf", "mc")
]


@pytest.fixture(scope="module")
def tgcsr(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tgcsr")
    return {
        sheet: read_labels(tgcsr_labels(tmp, sheet), binarize="1:0,2:0,3:1,4:1" if sheet.endswith("mc") else None)
        for sheet in SHEETS
    }


@pytest.fixture(scope="module")
def comve(comve_labels, comve_gold):
    return read_labels(comve_labels, gold=comve_gold)


def within(values, bounds):
    lo, hi = bounds
    return all(lo <= round(v, 2) <= hi for v in values) and {round(min(values), 2), round(max(values), 2)} == {lo, hi}


def test_every_number_has_its_words():
    assert [m.key for m in NUMBERS] == list(NOISE_KEYS)
    for m in (*NUMBERS, *ACCURACY):
        assert m.definition.endswith(".") and m.direction and m.typical.startswith("In the study's data")
        assert m.definition.count(". ") == 0, m.definition  # one sentence
    assert all(m.direction.startswith("Higher") for m in (*NUMBERS, *ACCURACY))


def test_noise_references_are_the_engines_numbers_on_the_released_labels(tgcsr, comve):
    per_sheet = {sheet: noise_audit(m) for sheet, m in tgcsr.items()}
    whole = noise_audit(comve)
    for key in NOISE_KEYS:
        ref = REFERENCE[key]
        # the stated range is the sheets' lowest and highest value, to 2 decimals
        assert within([getattr(a, key) for a in per_sheet.values()], ref["tg_csr"]), key
        assert round(getattr(whole, key), 3) == ref["comve"], key
    # the figures the task brief quoted: TG-CSR LN 0.02–0.07, PN_mod about 0.22–0.23, ComVE LN 0.198
    assert REFERENCE["level_noise"]["tg_csr"] == (0.02, 0.07) and REFERENCE["level_noise"]["comve"] == 0.198
    assert REFERENCE["pattern_noise_mod"]["tg_csr"] == (0.22, 0.23)


def test_agreement_and_accuracy_references(tgcsr, comve):
    tf = [agreement_coefficients(m) for sheet, m in tgcsr.items() if sheet.endswith("tf")]
    mc = [agreement_coefficients(m) for sheet, m in tgcsr.items() if sheet.endswith("mc")]
    assert within([a["alpha_nominal"]["value"] for a in tf], REFERENCE["alpha_nominal"]["tg_csr_tf"])
    assert within([a["gwet_ac1"]["value"] for a in tf], REFERENCE["gwet_ac1"]["tg_csr_tf"])
    assert within([a["alpha_nominal"]["value"] for a in mc], REFERENCE["alpha_nominal"]["tg_csr_mc"])
    assert within([a["alpha_ordinal"]["value"] for a in mc], REFERENCE["alpha_ordinal"]["tg_csr_mc"])
    report = full_report(comve, sweeps=(), per_worker=False).to_dict()
    assert round(report["agreement"]["alpha_nominal"]["value"], 3) == REFERENCE["alpha_nominal"]["comve"]
    assert round(report["agreement"]["gwet_ac1"]["value"], 3) == REFERENCE["gwet_ac1"]["comve"]
    assert round(report["accuracy_summary"]["pooled_accuracy"], 3) == REFERENCE["loo_accuracy"]["comve"]
    assert round(report["accuracy_gold_summary"]["pooled_accuracy"], 3) == REFERENCE["gold_accuracy"]["comve"]
    # the sample sizes the dashboard states: all 2,000 sentences, all 10,000 labels
    assert (report["agreement"]["alpha_nominal"]["n_units"], report["agreement"]["alpha_nominal"]["n_labels"]) == (
        2000,
        10_000,
    )
    assert (report["agreement"]["gwet_ac1"]["n_units"], report["agreement"]["gwet_ac1"]["n_labels"]) == (2000, 10_000)
    # the study's 60 stays the cut-off on its own data
    assert report["accuracy_summary"]["min_scored_for_power"] == 60


def test_on_comve_straight_lining_flags_the_always_plausible_workers_the_guide_describes(comve, tgcsr):
    s = straight_lining(comve)
    report = full_report(comve, sweeps=(), per_worker=False, agreement=False).to_dict()
    gold = {row["worker"]: row["accuracy"] for row in report["accuracy_gold"]}
    flagged = s.worker_ids[s.flagged].tolist()
    assert set(s.value[s.flagged].tolist()) == {1.0} and (s.share[s.flagged] >= 0.9).all()
    # none of them is careful: all agree with gold far less than the crowd's pooled 0.874
    assert max(gold[w] for w in flagged) < 0.6
    lo, hi = (f"{x * 100:.0f}" for x in (min(gold[w] for w in flagged), max(gold[w] for w in flagged)))
    guide = (REPO / "templates" / "audits" / "guide.html").read_text()
    assert f"this rule flags {len(flagged)} of the\n    {comve.n_workers} workers" in guide
    assert f"matched the gold\n    labels on {lo}–{hi} % of them" in guide
    # TG-CSR's six trained annotators: nobody straight-lines
    assert not any(straight_lining(m).flagged.any() for m in tgcsr.values())


def test_agreement_names_and_reading_bands():
    m = LabelMatrix.from_triples(list("abcabc"), [1, 1, 1, 2, 2, 2], [1, 2, 2, 3, 3, 4])
    keys = [
        k
        for k, v in agreement_coefficients(m, levels=("nominal", "ordinal", "interval", "ratio")).items()
        if isinstance(v, dict) and "value" in v
    ]
    assert set(keys) == set(AGREEMENT)  # every coefficient the engine computes has a human name
    assert (
        agreement_name("alpha_nominal") == "Krippendorff's α (nominal)" and agreement_name("gwet_ac1") == "Gwet's AC1"
    )
    assert [agreement_reading(x) for x in (1.0, 0.8, 0.7999, 0.667, 0.6669, 0.0, -0.2, None)] == [
        "reliable",
        "reliable",
        "tentative",
        "tentative",
        "not reliable",
        "not reliable",
        "not reliable",
        None,
    ]
