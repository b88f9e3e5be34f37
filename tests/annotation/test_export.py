"""Label export: exact CSV and JSONL, per-option rows, formula neutralisation, pseudonyms."""

import json
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.test import override_settings

from annotation import services
from annotation.exporting import ExportOptionError, export_chunks, neutralise_cell, parse_pseudonymize, pseudonym

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

T0 = datetime(2026, 3, 1, 9, 0, 0, tzinfo=UTC)


def at(seconds: float):
    return mock.patch("django.utils.timezone.now", return_value=T0 + timedelta(seconds=seconds))


def label(campaign, worker, value, *, leased: float, submitted: float, token: str):
    with at(leased):
        lease = services.lease_acquire(campaign=campaign, worker=worker)
    with at(submitted):
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=token)
    return lease


def export(campaign, fmt, **options) -> str:
    return "".join(export_chunks(campaign=campaign, fmt=fmt, **options))


@pytest.fixture
def two_labels(researcher, make_user):
    """One binary prompt with a formula-like text, labeled by two workers."""
    campaign = services.campaign_create(owner=researcher, title="Export", k=2)
    data = json.dumps({"id": "s1", "text": '=HYPERLINK("http://x")', "gold": 1, "group": "-2"}).encode()
    services.prompts_import(campaign=campaign, data=data, filename="s.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    ann = services.worker_for_user(user=make_user("ann"))
    bob = services.worker_for_user(user=make_user("bob"))
    label(campaign, ann, 1, leased=0, submitted=4.25, token="a")
    label(campaign, bob, 0, leased=10, submitted=12, token="b")
    return campaign, ann, bob


def test_csv_export_is_exact(two_labels):
    campaign, ann, bob = two_labels
    ids = list(campaign.labels.order_by("id").values_list("id", flat=True))
    assert export(campaign, "csv") == (
        "worker,prompt,value,gold,group,created_at,leased_at,time_spent_s,campaign,label_id,prompt_text,control,excluded,"
        "final_k,k_rule\r\n"
        f"native:{ann.external_id},s1,1,1,-2,2026-03-01T09:00:04.250000+00:00,2026-03-01T09:00:00+00:00,4.25,"
        f'export,{ids[0]},"\'=HYPERLINK(""http://x"")",False,False,2,k=2\r\n'
        f"native:{bob.external_id},s1,0,1,-2,2026-03-01T09:00:12+00:00,2026-03-01T09:00:10+00:00,2.0,"
        f'export,{ids[1]},"\'=HYPERLINK(""http://x"")",False,False,2,k=2\r\n'
    )


def test_jsonl_export_is_exact_and_not_neutralised(two_labels):
    campaign, ann, bob = two_labels
    ids = list(campaign.labels.order_by("id").values_list("id", flat=True))
    rows = [json.loads(line) for line in export(campaign, "jsonl").splitlines()]
    assert rows == [
        {
            "worker": f"native:{ann.external_id}",
            "prompt": "s1",
            "value": 1,
            "gold": 1,
            "group": "-2",
            "created_at": "2026-03-01T09:00:04.250000+00:00",
            "leased_at": "2026-03-01T09:00:00+00:00",
            "time_spent_s": 4.25,
            "campaign": "export",
            "label_id": ids[0],
            "prompt_text": '=HYPERLINK("http://x")',
            "control": False,
            "excluded": False,
            "final_k": 2,
            "k_rule": "k=2",
        },
        {
            "worker": f"native:{bob.external_id}",
            "prompt": "s1",
            "value": 0,
            "gold": 1,
            "group": "-2",
            "created_at": "2026-03-01T09:00:12+00:00",
            "leased_at": "2026-03-01T09:00:10+00:00",
            "time_spent_s": 2.0,
            "campaign": "export",
            "label_id": ids[1],
            "prompt_text": '=HYPERLINK("http://x")',
            "control": False,
            "excluded": False,
            "final_k": 2,
            "k_rule": "k=2",
        },
    ]
    assert list(rows[0]) == [
        "worker",
        "prompt",
        "value",
        "gold",
        "group",
        "created_at",
        "leased_at",
        "time_spent_s",
        "campaign",
        "label_id",
        "prompt_text",
        "control",
        "excluded",
        "final_k",
        "k_rule",
    ]


def test_per_option_labels_export_one_row_per_option(researcher, make_user):
    campaign = services.campaign_create(
        owner=researcher,
        title="Opt",
        schema="option_rating",
        scale_min=1,
        scale_max=4,
        k=1,
        binarization={"1": 0, "2": 0, "3": 1, "4": 1},
    )
    data = json.dumps({"id": "q7", "text": "Which fit?", "options": ["red", "+green", "blue"], "gold": [1, 4, 2]})
    services.prompts_import(campaign=campaign, data=data.encode(), filename="q.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    worker = services.worker_for_user(user=make_user("cat"))
    label(campaign, worker, [2, 4, 1], leased=0, submitted=3, token="c")
    label_id = campaign.labels.get().pk
    common = f"2026-03-01T09:00:03+00:00,2026-03-01T09:00:00+00:00,3.0,opt,{label_id}"
    assert export(campaign, "csv").splitlines()[1:] == [
        f"native:{worker.external_id},q7#1,2,1,,{common},Which fit? — red,False,False,1,k=1",
        f"native:{worker.external_id},q7#2,4,4,,{common},Which fit? — +green,False,False,1,k=1",
        f"native:{worker.external_id},q7#3,1,2,,{common},Which fit? — blue,False,False,1,k=1",
    ]
    rows = [json.loads(line) for line in export(campaign, "jsonl").splitlines()]
    assert [(r["prompt"], r["value"], r["gold"]) for r in rows] == [("q7#1", 2, 1), ("q7#2", 4, 4), ("q7#3", 1, 2)]


@pytest.mark.parametrize(
    "cell, written",
    [
        ("=1+2", "'=1+2"),
        ("+SUM(A1)", "'+SUM(A1)"),
        ("-A1", "'-A1"),
        ("@cmd", "'@cmd"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-1", "-1"),
        ("+3.5", "+3.5"),
        ("-2e3", "-2e3"),
        (-1, "-1"),
        (None, ""),
        ("plain = text", "plain = text"),
        ("- bullet", "'- bullet"),
    ],
)
def test_formula_cells_are_neutralised_but_numbers_stay(cell, written):
    assert neutralise_cell(cell) == written


def test_pseudonymised_exports_hide_worker_ids_and_keep_them_apart(two_labels):
    campaign, ann, bob = two_labels
    first = export(campaign, "csv", pseudonymize=True)
    assert "native:" not in first
    workers = [line.split(",")[0] for line in first.splitlines()[1:]]
    assert workers == [pseudonym(f"native:{ann.external_id}"), pseudonym(f"native:{bob.external_id}")]
    assert workers[0] != workers[1] and all(w.startswith("w-") and len(w) == 22 for w in workers)
    assert export(campaign, "csv", pseudonymize=True) == first  # stable from one export to the next
    rows = [json.loads(line) for line in export(campaign, "jsonl", pseudonymize=True).splitlines()]
    assert [r["worker"] for r in rows] == workers
    with override_settings(SECRET_KEY="another-secret-key-for-this-test-only"):
        assert export(campaign, "csv", pseudonymize=True).splitlines()[1].split(",")[0] != workers[0]


def test_an_unknown_format_is_refused(two_labels):
    with pytest.raises(ValueError, match="Unknown export format 'xml'"):
        export(two_labels[0], "xml")


def test_an_empty_campaign_exports_a_header_only(make_campaign):
    campaign = make_campaign(2)
    assert export(campaign, "csv") == (
        "worker,prompt,value,gold,group,created_at,leased_at,time_spent_s,campaign,label_id,prompt_text,control,excluded,"
        "final_k,k_rule\r\n"
    )
    assert export(campaign, "jsonl") == ""


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", "TRUE", "Yes", "oN"])
def test_pseudonymize_flag_on(value):
    assert parse_pseudonymize(value) is True


@pytest.mark.parametrize("value", [None, "", "0", "false", "no", "off", "FALSE", "No", "OFF"])
def test_pseudonymize_flag_off(value):
    assert parse_pseudonymize(value) is False


@pytest.mark.parametrize("value", ["2", "t", "y", "f", "n", "ture", " 1", "1 ", "yes please", "<b>"])
def test_pseudonymize_flag_refuses_anything_else(value):
    with pytest.raises(ExportOptionError, match="pseudonymize must be 1, true, yes or on"):
        parse_pseudonymize(value)
