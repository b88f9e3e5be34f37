"""Control prompts (issue 12, "Control items"): imported or marked with a gold, served to every worker at
the campaign's rate and as their first prompts, at most once each, outside every prompt's k; workers
cannot tell them from other prompts; their labels are stored and exported but never audited, and they
measure each worker (``worker_control_results``). The guarantees hold with controls on, under
concurrency too (SQLite and PostgreSQL)."""

import random
import re
from collections import Counter
from datetime import timedelta
from unittest import mock

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation import selectors, services
from annotation.exporting import export_rows
from annotation.importing import PromptFileError
from annotation.models import Campaign, Label, Lease, Participation, Prompt, Slot
from annotation.selectors import campaign_progress, invariant_violations, worker_control_results, worker_outlook
from annotation.services import assignment, controls
from annotation.services.controls import control_settings_check, prompts_control_set
from audits.models import AuditStatsShard, WorkerAuditStats
from audits.selectors import campaign_label_matrix, stats_from_labels
from audits.services import stats_fold, stats_rebuild
from tests.annotation.test_concurrency import (
    assert_acks_match_labels,
    assert_guarantees,
    crowd,
    drain,
    merge,
    run_clients,
)
from tests.clock import later
from tests.helpers import assert_error, import_counts, jsonl, label_all, messages_of, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def add_controls(campaign, n: int, *, prefix: str = "c", gold=1) -> list[Prompt]:
    """``n`` control prompts (``c0``, ``c1``, …), imported with the file's ``control`` column."""
    rows = [{"id": f"{prefix}{i}", "text": f"Control statement {i}.", "gold": gold, "control": True} for i in range(n)]
    services.prompts_import(campaign=campaign, data=jsonl(*rows), filename=f"{prefix}-controls.jsonl")
    return list(
        Prompt.objects.filter(campaign=campaign, is_control=True, external_id__startswith=prefix).order_by("pk")
    )


def serve(campaign, **settings) -> Campaign:
    """Set the campaign's control settings through the service that saves the campaign form."""
    return services.campaign_update(campaign=campaign, **settings)


def acquire(campaign, worker) -> Lease:
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    assert isinstance(lease, Lease), lease
    return lease


def submit(lease, value=1) -> Label:
    ack = services.label_submit(lease_id=lease.pk, worker=lease.worker, value=value, client_token=f"t{lease.pk}")
    return Label.objects.get(pk=ack.label_id)


def always(rate: float = 0.0):
    """Every draw of the control rate comes out as ``rate`` (0.0: a control is due whenever a rate is set)."""
    return mock.patch.object(controls, "random", mock.Mock(random=mock.Mock(return_value=rate)))


# --- importing ------------------------------------------------------------------------------------------


def test_the_control_column_makes_controls_without_slots(make_campaign):
    campaign = make_campaign(0, k=2, launch=False)
    csv = b"id,text,gold,control\na,one,1,true\nb,two,0,1\nc,three,1,false\nd,four,0,0\ne,five,1,\nf,six,0,TRUE\n"
    services.prompts_import(campaign=campaign, data=csv, filename="p.csv")
    services.prompts_import(
        campaign=campaign,
        data=jsonl(
            {"id": "g", "text": "seven", "gold": 1, "control": True},
            {"id": "h", "text": "eight", "gold": 1, "control": 1},
            {"id": "i", "text": "nine", "gold": 1, "control": False},
            {"id": "j", "text": "ten", "control": None},
            {"id": "k", "text": "eleven", "gold": 0},
        ),
        filename="p.jsonl",
    )
    flags = dict(Prompt.objects.filter(campaign=campaign).values_list("external_id", "is_control"))
    assert {i for i, control in flags.items() if control} == {"a", "b", "f", "g", "h"}
    slots = Counter(Slot.objects.filter(campaign=campaign).values_list("prompt__external_id", flat=True))
    assert slots == {i: 2 for i, control in flags.items() if not control}
    assert invariant_violations(campaign=campaign) == []


@pytest.mark.parametrize(
    "data, filename, errors",
    [
        (
            b"id,text,gold,control\na,one,1,true\nb,two,,true\n",
            "p.csv",
            [(3, "id 'b' is a control but has no gold: a control needs a gold label")],
        ),
        (
            jsonl({"id": "a", "text": "one", "control": True}),
            "p.jsonl",
            [(1, "id 'a' is a control but has no gold: a control needs a gold label")],
        ),
        (
            b"id,text,gold,control\na,one,1,yes\nb,two,1,2\n",
            "p.csv",
            [
                (2, "bad control value: 'yes'; use true or false (or 1 or 0)"),
                (3, "bad control value: '2'; use true or false (or 1 or 0)"),
            ],
        ),
        (
            jsonl(
                {"id": "a", "text": "one", "gold": 1, "control": 2},
                {"id": "b", "text": "two", "gold": 1, "control": [1]},
            ),
            "p.jsonl",
            [
                (1, "bad control value: 2; use true or false (or 1 or 0)"),
                (2, "bad control value: [1]; use true or false (or 1 or 0)"),
            ],
        ),
    ],
)
def test_a_control_without_gold_or_a_bad_control_value_imports_nothing(binary_draft, data, filename, errors):
    before = import_counts()
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=binary_draft, data=data, filename=filename)
    assert refused.value.errors == errors
    assert import_counts() == before


def test_the_api_and_the_upload_page_refuse_a_control_without_gold(binary_draft, researcher, researcher_client):
    before = import_counts()
    api = APIClient()
    api.force_authenticate(researcher)
    rows = [{"id": "ok", "text": "fine", "gold": 1, "control": True}, {"id": "bad", "text": "no gold", "control": True}]
    error = assert_error(
        api.post(f"/api/v1/campaigns/{binary_draft.slug}/prompts/", rows, format="json"), 400, "bad_prompt_file"
    )
    assert error["fields"]["lines"] == {"2": ["id 'bad' is a control but has no gold: a control needs a gold label"]}
    upload = researcher_client.post(
        reverse("campaign_import", args=[binary_draft.slug]),
        {"file": SimpleUploadedFile("p.csv", b"id,text,control\nx,no gold,1\n")},
    )
    assert upload.status_code == 400
    assert "Line 2: id &#x27;x&#x27; is a control but has no gold" in upload.content.decode()
    assert import_counts() == before


# --- serving ----------------------------------------------------------------------------------------------


def test_each_worker_s_first_prompts_are_controls_then_normal_prompts(make_campaign, make_worker):
    campaign = make_campaign(4, k=2)
    control_ids = {c.pk for c in add_controls(campaign, 3)}
    campaign = serve(campaign, control_first=2)
    for worker in (make_worker(), make_worker()):
        first = [submit(acquire(campaign, worker)) for _ in range(2)]
        assert {label.prompt_id for label in first} <= control_ids
        assert all(label.is_control and label.slot_id is None and label.lease.slot_id is None for label in first)
        # No control rate: once qualified, only normal prompts, each filling a slot.
        rest = [submit(acquire(campaign, worker)) for _ in range(4)]
        assert all(not label.is_control and label.slot_id is not None for label in rest)
        assert isinstance(services.lease_acquire(campaign=campaign, worker=worker), services.NothingLeft)
    assert invariant_violations(campaign=campaign, complete=True) == []
    assert sorted(Prompt.objects.filter(pk__in=control_ids).values_list("n_labels", flat=True)) in (
        [0, 2, 2],
        [1, 1, 2],
    )


def test_a_worker_gets_each_control_once_then_normal_prompts(make_campaign, make_worker):
    campaign = serve(make_campaign(5, k=1), control_rate=0.5)
    control_ids = {c.pk for c in add_controls(campaign, 3)}
    worker = make_worker()
    with always():
        labels = [submit(acquire(campaign, worker)) for _ in range(8)]
    assert [label.is_control for label in labels] == [True] * 3 + [False] * 5  # due every time, while any is left
    assert {label.prompt_id for label in labels[:3]} == control_ids
    assert isinstance(services.lease_acquire(campaign=campaign, worker=worker), services.NothingLeft)
    assert invariant_violations(campaign=campaign, complete=True) == []


def test_controls_come_at_about_the_campaign_s_rate(make_campaign, make_worker):
    campaign = serve(make_campaign(150, k=1), control_rate=0.2)
    add_controls(campaign, 60)
    worker = make_worker()
    with mock.patch.object(controls, "random", random.Random(12)):
        labels = [submit(acquire(campaign, worker)) for _ in range(100)]
    n_controls = sum(label.is_control for label in labels)
    assert 10 <= n_controls <= 30, n_controls  # 20 expected; the binomial's sd is 4
    with mock.patch.object(controls, "random", random.Random(12)):
        assert [controls._control_due(campaign, 10) for _ in range(100)].count(True) == n_controls


def test_a_campaign_that_serves_no_controls_pays_no_query_for_them(make_campaign, make_worker):
    plain = make_campaign(3, k=2, title="Plain")
    with_controls = make_campaign(3, k=2, title="Controls")
    add_controls(with_controls, 2)
    queries = []
    for campaign in (plain, with_controls):
        # The slot search starts at a random point of Slot.rand and takes a second query when no open
        # slot lies above it: a start of 0 finds one at once for both campaigns, so only controls differ.
        with mock.patch.object(assignment, "random", mock.Mock(random=lambda: 0.0)):
            with CaptureQueriesContext(connection) as captured:
                acquire(campaign, make_worker())
        queries.append(len(captured))
    assert queries[0] == queries[1]
    worker = make_worker()
    assert label_all(with_controls, worker) == 3
    assert not Label.objects.filter(campaign=with_controls, is_control=True).exists()


def test_no_control_is_served_when_the_campaign_has_nothing_else_for_the_worker(make_campaign, make_worker):
    campaign = make_campaign(1, k=1)
    add_controls(campaign, 3)
    submit(acquire(campaign, make_worker()))  # the one normal prompt is full
    campaign = serve(campaign, control_first=5)
    late = make_worker()
    answer = services.lease_acquire(campaign=campaign, worker=late)
    assert isinstance(answer, services.NothingLeft) and answer.code == "nothing_left"
    assert worker_outlook(campaign=campaign, worker=late).code == "full"
    assert not Lease.objects.filter(worker=late).exists()


def test_a_control_lease_that_expires_or_is_skipped_frees_nothing_and_never_comes_back(make_campaign, make_worker):
    campaign = make_campaign(3, k=1)
    add_controls(campaign, 2)
    campaign = serve(campaign, control_first=2)
    worker = make_worker()
    slots_before = list(Slot.objects.filter(campaign=campaign).order_by("pk").values())
    first = acquire(campaign, worker)
    assert first.prompt.is_control and first.slot_id is None
    assert services.lease_heartbeat(lease_id=first.pk, worker=worker).expires_at > first.expires_at
    with later(campaign.lease_seconds + 5):
        second = acquire(campaign, worker)
        assert second.prompt.is_control and second.prompt_id != first.prompt_id
        services.lease_release(lease_id=second.pk, worker=worker)
        third = acquire(campaign, worker)
    assert not third.prompt.is_control  # both controls were leased to this worker: never again
    assert list(Slot.objects.filter(campaign=campaign).exclude(pk=third.slot_id).order_by("pk").values()) == [
        row for row in slots_before if row["id"] != third.slot_id
    ]
    assert invariant_violations(campaign=campaign) == []


def test_controls_count_toward_the_cap_and_the_worker_s_progress_but_not_the_campaign_s(make_campaign, make_worker):
    campaign = make_campaign(5, k=2)
    add_controls(campaign, 2)
    campaign = serve(campaign, control_first=2, max_labels_per_worker=3)
    worker = make_worker()
    label_all(campaign, worker)
    assert selectors.worker_label_count(campaign_id=campaign.pk, worker_id=worker.pk) == 3
    assert Label.objects.filter(worker=worker, is_control=True).count() == 2
    refusal = services.lease_acquire(campaign=campaign, worker=worker)
    assert refusal.code == "cap_reached"
    progress = campaign_progress(campaign=campaign)
    assert (progress.n_prompts, progress.labels, progress.labels_wanted, progress.prompts_complete) == (5, 1, 10, 0)


def test_the_task_page_counts_controls_left_like_any_prompt(make_campaign, make_worker):
    """ "About N left" goes down by one on each page, controls included: it does not give a control away."""
    campaign = make_campaign(4, k=1)
    add_controls(campaign, 2)
    campaign = serve(campaign, control_first=2)
    worker = make_worker()
    left = []
    for _ in range(6):
        lease = acquire(campaign, worker)
        left.append(selectors.worker_progress(campaign=campaign, worker=worker, labeled=lease.worker_labels).left)
        submit(lease)
    assert left == [6, 5, 4, 3, 2, 1]


# --- labels, the audit, the export, worker quality -------------------------------------------------------


def test_control_labels_fill_no_slot_and_stay_out_of_the_audit_but_not_the_export(make_campaign, make_worker):
    campaign = make_campaign(3, k=2)
    add_controls(campaign, 2)
    campaign = serve(campaign, control_first=1)
    workers = [make_worker(), make_worker()]
    for worker in workers:
        label_all(campaign, worker)
    labels = Label.objects.filter(campaign=campaign)
    assert labels.filter(is_control=True).count() == 2 and labels.filter(is_control=False).count() == 6
    assert invariant_violations(campaign=campaign, complete=True) == []

    # The statistics, folded from the labels and rebuilt from them, hold the six audited labels only.
    assert stats_fold(campaign_id=campaign.pk) == 8
    assert sum(AuditStatsShard.objects.filter(campaign=campaign).values_list("n_labels", flat=True)) == 6
    assert sorted(WorkerAuditStats.objects.filter(campaign=campaign).values_list("n_labels", flat=True)) == [3, 3]
    assert stats_from_labels(campaign=campaign).n_labels == 6
    stats_rebuild(campaign_id=campaign.pk)
    assert sum(AuditStatsShard.objects.filter(campaign=campaign).values_list("n_labels", flat=True)) == 6
    assert sum(AuditStatsShard.objects.filter(campaign=campaign).values_list("prompts_complete", flat=True)) == 3
    matrix, watermark = campaign_label_matrix(campaign=campaign)
    assert watermark == 6 and sorted(matrix.prompt_ids) == ["p0", "p1", "p2"]

    rows = list(export_rows(campaign=campaign))
    assert len(rows) == 8
    assert {row["prompt"] for row in rows if row["control"] is True} <= {"c0", "c1"}
    assert sum(row["control"] is True for row in rows) == 2 and all(isinstance(row["control"], bool) for row in rows)

    control_label = labels.filter(is_control=True).first()
    services.label_void(label_id=control_label.pk, reason="returned")
    assert invariant_violations(campaign=campaign, complete=True) == []


def test_worker_control_results_compare_scaled_values(researcher, make_campaign, make_worker):
    # Binary: the raw value is the scaled value.
    binary = make_campaign(2, k=1)
    add_controls(binary, 2, gold=1)
    add_controls(binary, 1, prefix="z", gold=0)
    binary = serve(binary, control_first=3)
    right, wrong = make_worker(), make_worker()
    for worker, answer in ((right, lambda prompt: prompt.gold), (wrong, lambda prompt: 1 - prompt.gold)):
        for _ in range(3):
            lease = acquire(binary, worker)
            submit(lease, answer(lease.prompt))
    assert worker_control_results(campaign=binary) == {right.pk: (3, 3), wrong.pk: (3, 0)}
    # A void control label is not an answer; an excluded worker is still measured.
    services.label_void(label_id=Label.objects.filter(worker=wrong, is_control=True).first().pk, reason="returned")
    Participation.objects.filter(campaign=binary, worker=right).update(excluded_at=timezone.now())
    assert worker_control_results(campaign=binary) == {right.pk: (3, 3), wrong.pk: (2, 0)}

    # A 1–5 rating mapped 1, 2 → 0 and 4, 5 → 1: a 4 is right where the gold is 5; the middle point 3,
    # which the map leaves out, is right only where the gold is 3 itself.
    rating = services.campaign_create(
        owner=researcher,
        title="Five",
        schema="rating",
        scale_min=1,
        scale_max=5,
        k=1,
        binarization={"1": 0, "2": 0, "4": 1, "5": 1},
    )
    services.prompts_import(campaign=rating, data=jsonl({"id": "r", "text": "normal"}), filename="r.jsonl")
    services.prompts_import(
        campaign=rating,
        data=jsonl(
            {"id": "five", "text": "gold 5", "gold": 5, "control": True},
            {"id": "three", "text": "gold 3", "gold": 3, "control": True},
        ),
        filename="c.jsonl",
    )
    rating = serve(services.campaign_transition(campaign=rating, action="launch"), control_first=2)
    answers = {"close": {"five": 4, "three": 3}, "off": {"five": 3, "three": 4}}
    raters = {name: make_worker() for name in answers}
    for name, worker in raters.items():
        for _ in range(2):
            lease = acquire(rating, worker)
            submit(lease, answers[name][lease.prompt.external_id])
    assert worker_control_results(campaign=rating) == {raters["close"].pk: (2, 2), raters["off"].pk: (2, 0)}


def test_a_per_option_control_is_right_when_every_option_is(per_option, make_worker):
    services.prompts_import(
        campaign=per_option,
        data=jsonl({"id": "oc", "text": "control", "options": ["a", "b"], "gold": [10, 0], "control": True}),
        filename="c.jsonl",
    )
    campaign = serve(per_option, control_first=1)
    answers = [[10, 0], [10, 10], [0, 0]]
    workers = [make_worker() for _ in answers]
    for worker, answer in zip(workers, answers):
        lease = acquire(campaign, worker)
        assert lease.prompt.external_id == "oc"
        submit(lease, answer)
    assert worker_control_results(campaign=campaign) == {
        workers[0].pk: (1, 1),
        workers[1].pk: (1, 0),
        workers[2].pk: (1, 0),
    }


# --- workers cannot tell ----------------------------------------------------------------------------------


def _task_page(user, campaign) -> tuple[Lease, str]:
    """The task page ``user`` is sent to, with what belongs to them and their lease alone blanked out:
    the lease's id, the prompt's text, their name, the form's tokens."""
    client = signed_in(user)
    task_url = client.get(reverse("worker_next", args=[campaign.slug])).url
    lease = Lease.objects.get(pk=int(re.search(r"/task/(\d+)/", task_url).group(1)))
    page = client.get(task_url).content.decode()
    page = re.sub(r'name="(csrfmiddlewaretoken|client_token)" value="[^"]+"', r'name="\1" value="…"', page)
    for text in (f"/task/{lease.pk}/", lease.prompt.text, user.get_username()):
        assert text in page
        page = page.replace(text, "…")
    return lease, page


def test_a_control_and_a_normal_prompt_look_the_same_to_workers(make_campaign, make_user):
    campaign = make_campaign(3, k=2)
    add_controls(campaign, 1)
    campaign = serve(campaign, control_rate=0.5)
    pages, answers = [], []
    for due in (0.0, 0.99):  # a control, then a normal prompt, each to a worker who has labeled nothing yet
        with always(due):
            pages.append(_task_page(make_user(), campaign))
            api = APIClient()
            api.force_authenticate(make_user())
            answers.append(api.post(f"/api/v1/campaigns/{campaign.slug}/next-task/").json())
    (control, control_page), (normal, normal_page) = pages
    assert control.prompt.is_control and not normal.prompt.is_control
    assert control_page == normal_page

    shapes = [
        {
            **answer,
            "lease": {
                **answer["lease"],
                "id": "…",
                "expires_at": "…",
                "prompt": {**answer["lease"]["prompt"], "id": "…", "text": "…"},
            },
        }
        for answer in answers
    ]
    assert shapes[0] == shapes[1]
    assert [answer["lease"]["prompt"]["id"].startswith("c") for answer in answers] == [True, False]


def test_panel_participants_get_controls_like_anybody(make_campaign, researcher):
    from tests.channels.test_panel import arrive, label_until_done, make_panel

    campaign = make_campaign(3, k=1)
    add_controls(campaign, 2)
    campaign = serve(campaign, control_first=1)
    panel = make_panel(campaign, researcher, quota_per_session=3)
    client = signed_in()
    page, n = label_until_done(client, arrive(client, panel, "PARTICIPANT1"))
    assert n == 3 and b"C0DE1234" in page.content
    labels = list(Label.objects.filter(campaign=campaign, worker__channel="prolific").order_by("pk"))
    assert [label.is_control for label in labels] == [True, False, False]
    assert Participation.objects.get(campaign=campaign, worker=labels[0].worker).n_labels == 3
    assert invariant_violations(campaign=campaign) == []


# --- marking prompts as controls --------------------------------------------------------------------------


def test_marking_and_unmarking_controls(make_campaign, make_worker):
    campaign = make_campaign(4, k=3)
    result = prompts_control_set(campaign=campaign, external_ids=["p0", "p1", "p0", " "], control=True)
    assert (result.changed, result.unchanged) == (["p0", "p1"], [])
    assert set(Prompt.objects.filter(is_control=True).values_list("external_id", flat=True)) == {"p0", "p1"}
    assert not Slot.objects.filter(prompt__external_id__in=["p0", "p1"]).exists()
    assert invariant_violations(campaign=campaign) == []

    result = prompts_control_set(campaign=campaign, external_ids=["p1", "p0"], control=False)
    assert (result.changed, result.unchanged) == (["p1", "p0"], [])
    assert Slot.objects.filter(prompt__external_id="p1").count() == 3
    assert prompts_control_set(campaign=campaign, external_ids=["p2", "p3"], control=False).unchanged == ["p2", "p3"]
    assert invariant_violations(campaign=campaign) == []


def test_marking_refuses_every_id_at_fault_and_changes_nothing(make_campaign, make_worker):
    campaign = make_campaign(0, k=2, launch=False)
    services.prompts_import(
        campaign=campaign, data=jsonl({"id": "seen", "text": "leased", "gold": 0}), filename="s.jsonl"
    )
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    services.lease_release(lease_id=acquire(campaign, make_worker()).pk, worker=Lease.objects.get().worker)
    services.prompts_import(
        campaign=campaign,
        data=jsonl(
            {"id": "gold", "text": "has gold", "gold": 1},
            {"id": "none", "text": "no gold"},
            {"id": "ctl", "text": "a control", "gold": 1, "control": True},
        ),
        filename="p.jsonl",
    )
    prompts_before = list(Prompt.objects.order_by("pk").values())
    slots_before = list(Slot.objects.order_by("pk").values_list("pk", flat=True))
    with pytest.raises(ValidationError) as refused:
        prompts_control_set(campaign=campaign, external_ids=["gold", "none", "seen", "missing"], control=True)
    assert refused.value.message_dict == {
        "external_ids": [
            "'none' has no gold: a control needs a gold label to be scored against.",
            "'seen' was already shown to a worker: only a prompt no worker has seen can become a control.",
            "'missing' is not a prompt of this campaign.",
        ]
    }
    Lease.objects.create(
        campaign=campaign,
        prompt=Prompt.objects.get(external_id="ctl"),
        worker=make_worker(),
        created_at=timezone.now(),
        expires_at=timezone.now() + timedelta(minutes=1),
    )
    with pytest.raises(ValidationError) as refused:
        prompts_control_set(campaign=campaign, external_ids=["ctl"], control=False)
    assert refused.value.message_dict == {
        "external_ids": [
            "'ctl' was already shown to a worker: only a prompt no worker has seen can stop being a control."
        ]
    }
    with pytest.raises(ValidationError) as refused:
        prompts_control_set(campaign=campaign, external_ids=[], control=True)
    assert list(refused.value.message_dict) == ["external_ids"]
    assert list(Prompt.objects.order_by("pk").values()) == prompts_before
    assert list(Slot.objects.order_by("pk").values_list("pk", flat=True)) == slots_before

    closed = services.campaign_transition(campaign=campaign, action="close")
    with pytest.raises(services.CampaignStateError):
        prompts_control_set(campaign=closed, external_ids=["gold"], control=True)


def test_the_campaign_page_marks_controls(make_campaign, researcher_client, make_user):
    campaign = make_campaign(3, k=2)
    url = reverse("controls_mark", args=[campaign.slug])
    detail = researcher_client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
    assert 'id="controls"' in detail and "Controls are not served" in detail and "No control prompts yet." in detail

    response = researcher_client.post(url, {"external_ids": "p0\n p1 \n", "control": "1"})
    assert response.status_code == 302 and response["Location"].endswith("#controls")
    page = researcher_client.get(response["Location"])
    assert "2 prompts made controls." in messages_of(page)
    assert "<code>p0</code>" in page.content.decode() and "<code>p1</code>" in page.content.decode()

    refused = researcher_client.post(url, {"external_ids": "p2\nnope", "control": "1"})
    body = refused.content.decode()
    assert refused.status_code == 400 and "Nothing was changed" in body
    assert "&#x27;nope&#x27; is not a prompt of this campaign." in body
    assert not Prompt.objects.filter(external_id="p2", is_control=True).exists()

    assert signed_in(make_user()).post(url, {"external_ids": "p2", "control": "1"}).status_code == 404
    assert not Prompt.objects.filter(external_id="p2", is_control=True).exists()


def test_the_api_lists_and_marks_controls(make_campaign, researcher, make_user):
    campaign = make_campaign(3, k=2)
    url = f"/api/v1/campaigns/{campaign.slug}/controls/"
    api = APIClient()
    api.force_authenticate(researcher)
    assert api.get(url).json() == {"controls": []}
    response = api.post(url, {"external_ids": ["p1", "p0"]}, format="json")
    assert response.status_code == 200 and response.json() == {"changed": ["p1", "p0"], "unchanged": []}
    assert api.get(url).json() == {"controls": ["p0", "p1"]}
    error = assert_error(api.post(url, {"external_ids": ["p2", "x"], "control": True}, format="json"), 400, "invalid")
    assert error["fields"] == {"external_ids": ["'x' is not a prompt of this campaign."]}
    assert "external_ids" in assert_error(api.post(url, {"external_ids": []}, format="json"), 400, "invalid")["fields"]
    stranger = APIClient()
    stranger.force_authenticate(make_user())
    assert_error(stranger.post(url, {"external_ids": ["p2"]}, format="json"), 404, "not_found")
    assert_error(stranger.get(url), 404, "not_found")
    assert not Prompt.objects.filter(external_id="p2", is_control=True).exists()


# --- the control settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"control_rate": 0}, "control_rate"),
        ({"control_rate": 1}, "control_rate"),
        ({"control_rate": -0.1}, "control_rate"),
        ({"control_rate": 1.5}, "control_rate"),
        ({"control_rate": "often"}, "control_rate"),
        ({"control_first": -1}, "control_first"),
        ({"control_first": 1.5}, "control_first"),
    ],
)
def test_bad_control_settings_are_refused_naming_the_field(
    make_campaign, researcher, researcher_client, payload, field
):
    from tests.helpers import campaign_fields

    campaign = make_campaign(2, k=2)
    api = APIClient()
    api.force_authenticate(researcher)
    error = assert_error(api.patch(f"/api/v1/campaigns/{campaign.slug}/", payload, format="json"), 400, "invalid")
    assert list(error["fields"]) == [field]
    assert_error(api.post("/api/v1/campaigns/", {"title": "New", **payload}, format="json"), 400, "invalid")
    form = researcher_client.post(
        reverse("campaign_edit", args=[campaign.slug]), campaign_fields(k=2, stop_confidence=0.95, **payload)
    )
    assert form.status_code == 200 and list(form.context["form"].errors) == [field]
    campaign.refresh_from_db()
    assert (campaign.control_rate, campaign.control_first) == (None, 0)
    assert Campaign.objects.count() == 1


def test_good_control_settings_are_saved(make_campaign, researcher, researcher_client):
    from tests.helpers import campaign_fields

    campaign = make_campaign(2, k=2)
    api = APIClient()
    api.force_authenticate(researcher)
    body = api.patch(f"/api/v1/campaigns/{campaign.slug}/", {"control_rate": 0.1, "control_first": 3}, format="json")
    assert body.status_code == 200 and (body.json()["control_rate"], body.json()["control_first"]) == (0.1, 3)
    response = researcher_client.post(
        reverse("campaign_edit", args=[campaign.slug]),
        campaign_fields(k=2, stop_confidence=0.95, control_rate="0.25", control_first=""),
    )
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert (campaign.control_rate, campaign.control_first) == (0.25, 0)
    page = researcher_client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
    assert "about 25 % of their prompts (rate 0.25)" in page
    control_settings_check(control_rate=None, control_first=0)


# --- the checker ------------------------------------------------------------------------------------------


def test_the_checker_names_control_rows_that_break_the_rules(make_campaign, make_worker):
    campaign = make_campaign(2, k=1)
    (control,) = add_controls(campaign, 1)
    campaign = serve(campaign, control_first=1)
    worker = make_worker()
    label = submit(acquire(campaign, worker))
    assert label.is_control and invariant_violations(campaign=campaign) == []

    # Written past the services: a void label (its constraint allows it without a slot) that says it is not
    # a control's, a slot on the control, a normal prompt's lease without its slot.
    services.label_void(label_id=label.pk, reason="returned")
    Label.objects.filter(pk=label.pk).update(is_control=False)
    Slot.objects.create(campaign=campaign, prompt=control, index=0, rand=0.5)
    normal = acquire(campaign, worker)
    Lease.objects.filter(pk=normal.pk).update(slot=None)
    name = f"prompt 'c0' of {campaign.slug}"
    assert invariant_violations(campaign=campaign) == [
        f"control {name} has 1 slots: a control has none",
        f"label {label.pk} on {name} is not a control label, but its prompt is a control",
        f"lease {normal.pk} on prompt {normal.prompt.external_id!r} of {campaign.slug} holds no slot",
    ]


# --- concurrency ------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_workers_with_controls_keep_every_guarantee(make_campaign):
    """Threads with their own connections label, abandon, skip, double-click, void and heartbeat in a
    campaign serving controls first and at a rate: exactly-k for the other prompts, never-twice for all,
    controls without slots, and a drain fills every prompt."""
    from tests.annotation import test_concurrency

    campaign = make_campaign(60, k=3)
    add_controls(campaign, 12)
    campaign = serve(campaign, control_rate=0.3, control_first=2)
    Campaign.objects.filter(pk=campaign.pk).update(lease_seconds=test_concurrency.LEASE_SECONDS)
    n_clients, per_client = 6, 2
    workers = crowd(n_clients * per_client)
    everyone = [w.pk for w in workers]
    specs = [
        dict(
            campaign_ids=[campaign.pk],
            own_worker_ids=everyone[i * per_client : (i + 1) * per_client],
            all_worker_ids=everyone,
            seed=100 + i,
        )
        for i in range(n_clients)
    ]
    acks, errors, counts = merge(run_clients(specs, cycles=60))
    assert errors == []
    assert counts["sqlite gave up waiting"] <= 0.01 * n_clients * 60
    for action in test_concurrency.ACTIONS:
        assert counts[action] > 0, f"no client did {action!r}: the run exercised less than it claims"
    controls_labeled = Label.objects.filter(campaign=campaign, is_control=True)
    assert controls_labeled.exists() and not controls_labeled.filter(slot__isnull=False).exists()
    assert_guarantees(campaign, complete=False)
    acks += drain(campaign, workers)
    assert_guarantees(campaign, complete=True)
    assert_acks_match_labels(acks)
    assert not Lease.objects.filter(campaign=campaign, prompt__is_control=True, slot__isnull=False).exists()
