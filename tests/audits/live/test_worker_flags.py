"""The workers table's flags on the demo's own design (60 prompts, k = 5, the simulated crowd's
personalities): the two same-answer workers are flagged, in words, live and in the full report;
careful workers are not; the underpowered cut-off fits a 60-prompt campaign.

Regression test for issue 10: with the fixed cut-off of 60 scored prompts every demo worker was
"underpowered" and the same-answer spammers (mean label 1.000, half right against gold) were not
flagged at all."""

from unittest import mock

import pytest

from audits import selectors

pytestmark = [pytest.mark.django_db]


def test_same_answer_workers_are_flagged_and_careful_ones_are_not(demo):
    campaign, personalities = demo
    assert campaign.labels.count() == 300 and campaign.k == 5
    rows = {row["worker"]: row for row in selectors.dashboard_data(campaign=campaign)["workers"]}
    assert set(rows) == set(personalities)
    by_kind = {}
    for worker, personality in personalities.items():
        by_kind.setdefault(personality.name, []).append(rows[worker])

    spammers = by_kind["same-answer"]
    assert len(spammers) == 2
    for row in spammers:
        assert row["labels"] == 20 and row["mean"] == 1.0
        assert row["straight_lining"] is True
        assert row["flags"][0]["kind"] == "straight_lining"
        text = row["flags"][0]["text"]
        assert text.startswith("straight-lining: answers 1 (Plausible) to 100 % of 20 prompts (the other workers: "), (
            text
        )
        # gold exists: accuracy against it is shown next to the agreement with the others
        assert row["accuracy_gold"] == pytest.approx(0.5, abs=0.2) and row["n_scored_gold"] == 20
        assert row["accuracy"] is not None
    # what the outlier test alone made of them: one of the two agrees with the others often enough to pass
    assert [row["outlier"] for row in spammers].count(False) >= 1

    for name in ("careful", "steady"):
        for row in by_kind[name]:
            assert not row["straight_lining"] and not row["outlier"] and not row["underpowered"], row
            assert row["flags"] == [] and row["accuracy_gold"] > 0.8
    for row in by_kind["drive-by"]:  # 6 labels: too few for a narrow interval, and too few to judge a habit
        assert row["labels"] == 6 and row["underpowered"] and not row["straight_lining"]
        assert row["flags"][-1] == {
            "kind": "underpowered",
            "text": f"underpowered: {row['n_scored']} scored prompts, fewer than 15",
        }
    assert sum(row["straight_lining"] for row in rows.values()) == 2


def test_the_cutoff_fits_the_campaign_and_the_report_agrees_with_the_live_flags(demo):
    campaign, personalities = demo
    data = selectors.dashboard_data(campaign=campaign)
    summary = data["full"]["accuracy_summary"]
    assert summary["min_scored_for_power"] == 15 and "underpowered" not in summary  # the list stays in the report
    assert data["full"]["accuracy_gold_summary"]["min_scored_for_power"] == 15
    regular = [row for row in data["workers"] if personalities[row["worker"]].name != "drive-by"]
    assert not any(row["underpowered"] for row in regular)  # under the old fixed 60: all of them
    report = selectors.latest_snapshot(campaign=campaign, kind="full").data
    live = sorted(row["worker"] for row in data["workers"] if row["straight_lining"])
    assert sorted(e["worker"] for e in report["straight_lining"]["workers"]) == live
    reasons = {row["worker"]: row["flags"][0]["text"] for row in data["workers"] if row["straight_lining"]}
    for entry in report["straight_lining"]["workers"]:  # the report's words lack only the schema's answer names
        assert reasons[entry["worker"]] == "straight-lining: " + entry["reason"].replace(
            "answers 1 ", "answers 1 (Plausible) "
        )


def test_the_straight_lining_flags_are_taken_with_the_quick_snapshot_not_with_each_feed(demo):
    campaign, _ = demo
    stored = selectors.latest_snapshot(campaign=campaign).data["straight_lining"]
    assert len(stored["workers"]) == 2 and stored["rule"]["min_share"] == 0.9
    with mock.patch.object(selectors.stats, "straight_lining_binary", side_effect=AssertionError("recomputed")):
        rows = selectors.dashboard_data(campaign=campaign)["workers"]
    assert sorted(row["worker"] for row in rows if row["straight_lining"]) == sorted(
        e["worker"] for e in stored["workers"]
    )
