"""Acting on workers (``annotation.services.quality``): exclude from the audit and include again, block and
unblock, exclude and re-collect, flag, undo; each logged once, with who, when, why and the numbers.

The audit after an exclusion equals the offline audit of the label export without the excluded
worker's rows, quick and full; a blocked worker gets no prompt on any channel and loses the one they
hold; a re-collection frees their slots for other workers and never shows them a prompt twice; a
refused action changes nothing."""

import csv
import dataclasses
import io
import math
import random
import re
import threading

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from annotation import selectors, services
from annotation.channels import services as channel_services
from annotation.channels.models import MTurkWorkerBlock
from annotation.exporting import export_chunks
from annotation.models import Label, Lease, Participation, Slot, WorkerAction
from annotation.services.quality import (
    RECOLLECT_UNDO_NOTE,
    WorkerActionRefused,
    action_undo,
    worker_act,
)
from annotation.services.rules import rule_create
from audits import services as audit_services
from audits.conf import audit_setting
from audits.engine.label_files import read_labels
from audits.engine.noise import NOISE_KEYS
from audits.engine.report import full_report
from audits.selectors import campaign_totals, latest_snapshot, quick_audit_data
from tests.api.conftest import row_counts
from tests.channels.conftest import fake_mturk, fast_botocore_backoff, mturk  # noqa: F401 (fixtures)
from tests.channels.workers import OPTIONS, open_task
from tests.helpers import db_thread, label_one, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]
WHY = "Answers 1 to everything."


def _sim_worker(name):
    return services.worker_get_or_create(channel="sim", external_id=name)


def _crowd(campaign, workers, *, seed, spammer=None):
    """Each worker in turn asks for work and labels: ``spammer`` always 1, the others near the gold."""
    rng = random.Random(seed)
    open_workers = list(workers)
    while open_workers:
        worker = rng.choice(open_workers)
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        if not isinstance(lease, Lease):
            open_workers.remove(worker)
            continue
        gold = lease.prompt.gold
        value = 1 if worker == spammer else (gold if rng.random() < 0.8 else 1 - gold)
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")


def _export_rows(campaign) -> list[dict]:
    return list(csv.DictReader(io.StringIO("".join(export_chunks(campaign=campaign, fmt="csv")))))


def _offline_matrix(campaign, rows, tmp_path):
    """The engine reading the export (a labels file) with the given rows only."""
    path = tmp_path / f"labels-{len(rows)}.csv"
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return read_labels(path, binarize=campaign.label_schema.binarization)


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _assert_audits_equal_offline(campaign, matrix):
    """The live quick and full snapshots equal the engine's audit of ``matrix``."""
    audit_services.audit_refresh(campaign_id=campaign.pk)  # rebuilds the statistics if they need it
    full = audit_services.audit_full(campaign_id=campaign.pk)
    quick = latest_snapshot(campaign=campaign).data
    offline = full_report(matrix, ddof=audit_setting("DDOF"), sweeps=("min", "max"), k=campaign.k).to_dict()
    for key in NOISE_KEYS:
        assert _same(quick[key], offline[key]), (key, quick[key], offline[key])
        assert _same(full.data[key], offline[key]), (key, full.data[key], offline[key])
    for key in ("n_workers", "n_prompts", "n_labels"):
        assert quick[key] == full.data[key] == offline[key], key
    assert full.watermark == quick["watermark"] == matrix.n_labels
    live_accuracy = {row["worker"]: row["accuracy"] for row in full.data["accuracy"]}
    assert live_accuracy == pytest.approx({row["worker"]: row["accuracy"] for row in offline["accuracy"]})
    agreement = {key: value["value"] for key, value in offline["agreement"].items() if isinstance(value, dict)}
    assert agreement and {key: full.data["agreement"][key]["value"] for key in agreement} == pytest.approx(agreement)


def test_the_audit_without_an_excluded_worker_equals_the_offline_audit_of_the_export_without_their_rows(
    make_campaign, researcher, tmp_path
):
    campaign = make_campaign(12, k=3)
    workers = [_sim_worker(f"w{i}") for i in range(6)]
    spammer = workers[0]
    _crowd(campaign, workers, seed=3, spammer=spammer)
    rows = _export_rows(campaign)
    _assert_audits_equal_offline(campaign, _offline_matrix(campaign, rows, tmp_path))

    action = worker_act(kind="exclude", campaign=campaign, worker=spammer, by=researcher, reason=WHY)

    assert action.logged and action.kind == "exclude" and action.by == researcher
    stored = Label.objects.filter(campaign=campaign, worker=spammer)
    assert stored.exists() and stored.count() == Label.objects.counted().filter(worker=spammer).count()
    exported = _export_rows(campaign)
    assert len(exported) == len(rows)  # the labels stay in the export, marked
    assert {row["worker"] for row in exported if row["excluded"] == "True"} == {spammer.public_id}
    assert all(row["excluded"] == "False" for row in exported if row["worker"] != spammer.public_id)
    kept = [row for row in exported if row["worker"] != spammer.public_id]
    _assert_audits_equal_offline(campaign, _offline_matrix(campaign, kept, tmp_path))
    assert latest_snapshot(campaign=campaign).data["n_workers"] == 5

    worker_act(
        kind="include", campaign=campaign, worker=spammer, by=researcher, reason="Checked by hand: they are right."
    )
    assert {row["excluded"] for row in _export_rows(campaign)} == {"False"}
    _assert_audits_equal_offline(campaign, _offline_matrix(campaign, rows, tmp_path))


def test_labels_an_excluded_worker_gives_later_stay_out_of_the_statistics(make_campaign, researcher):
    campaign = make_campaign(8, k=3)
    excluded, other = _sim_worker("x"), _sim_worker("o")
    label_one(campaign, excluded)
    label_one(campaign, other)
    worker_act(kind="exclude", campaign=campaign, worker=excluded, by=researcher, reason=WHY)
    audit_services.audit_refresh(campaign_id=campaign.pk)  # the rebuild without them
    for _ in range(3):
        label_one(campaign, excluded)  # the fold leaves these out of the statistics
    label_one(campaign, other, value=0)
    assert audit_services.stats_fold(campaign_id=campaign.pk) == 4
    totals = campaign_totals(campaign_id=campaign.pk)
    assert totals.n_labels == 2 == Label.objects.audited().filter(campaign=campaign).count()  # the other's two
    incremental = quick_audit_data(campaign=campaign, totals=totals)
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    rebuilt_totals = campaign_totals(campaign_id=campaign.pk)
    assert dataclasses.astuple(rebuilt_totals)[:6] == dataclasses.astuple(totals)[:6]
    rebuilt = quick_audit_data(campaign=campaign, totals=rebuilt_totals)
    for key in (*NOISE_KEYS, "n_workers", "n_labels", "watermark", "progress"):
        assert incremental[key] == rebuilt[key], key
    assert Participation.objects.get(campaign=campaign, worker=excluded).n_labels == 4  # they still count for k


def test_an_excluded_workers_label_still_completes_its_prompt(make_campaign, researcher):
    """Progress counts prompts with all their labels, whoever gave them (as a rebuild does): exclusion
    takes a worker out of the numbers, not out of k."""
    campaign = make_campaign(1, k=2)
    excluded, other = _sim_worker("x"), _sim_worker("o")
    label_one(campaign, other)
    lease = services.lease_acquire(campaign=campaign, worker=excluded)  # an exclusion ends no lease
    worker_act(kind="exclude", campaign=campaign, worker=excluded, by=researcher, reason=WHY)
    audit_services.audit_refresh(campaign_id=campaign.pk)
    services.label_submit(lease_id=lease.pk, worker=excluded, value=1, client_token="last")
    audit_services.stats_fold(campaign_id=campaign.pk)
    totals = campaign_totals(campaign_id=campaign.pk)
    assert (totals.n_labels, totals.prompts_complete) == (1, 1)
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    assert dataclasses.astuple(campaign_totals(campaign_id=campaign.pk))[:6] == dataclasses.astuple(totals)[:6]


def test_acting_twice_logs_once(make_campaign, researcher):
    campaign = make_campaign(4, k=2)
    worker = _sim_worker("twice")
    label_one(campaign, worker)
    for kind in ("flag", "exclude", "block", "recollect"):
        first = worker_act(kind=kind, campaign=campaign, worker=worker, by=researcher, reason=f"{kind} once")
        again = worker_act(kind=kind, campaign=campaign, worker=worker, by=researcher, reason=f"{kind} twice")
        assert first.logged and not again.logged and again.pk == first.pk, kind
    assert list(WorkerAction.objects.order_by("pk").values_list("kind", flat=True)) == [
        "flag",
        "exclude",
        "block",
        "recollect",
    ]
    # excluding them again answers the action that excluded them last: the re-collection
    assert (
        worker_act(kind="exclude", campaign=campaign, worker=worker, by=researcher, reason="again").kind == "recollect"
    )
    include = worker_act(kind="include", campaign=campaign, worker=worker, by=researcher, reason="back")
    assert (
        include.logged and not worker_act(kind="include", campaign=campaign, worker=worker, reason="back again").logged
    )
    assert WorkerAction.objects.count() == 5


def test_refusals_change_nothing(make_campaign, researcher):
    campaign, elsewhere = make_campaign(2, k=2), make_campaign(2, k=2, title="Elsewhere")
    inside, outside = _sim_worker("in"), _sim_worker("out")
    label_one(campaign, inside)
    label_one(elsewhere, outside)
    other_rule = rule_create(
        campaign=elsewhere, by=researcher, metric="straight_lining", threshold=0.9, min_labels=5, action="exclude"
    )
    before = row_counts()
    for kind, kwargs, field in (
        ("exclude", {"worker": outside, "reason": WHY}, "worker"),
        ("recollect", {"worker": outside, "reason": WHY}, "worker"),
        ("block", {"worker": inside, "reason": "   "}, "reason"),
        ("exclude", {"worker": inside, "reason": "x" * 301}, "reason"),
        ("exclude", {"worker": inside, "reason": WHY, "rule": other_rule}, "rule"),
        ("ban", {"worker": inside, "reason": WHY}, "kind"),
    ):
        with pytest.raises(ValidationError) as refused:
            worker_act(kind=kind, campaign=campaign, by=researcher, **kwargs)
        assert list(refused.value.message_dict) == [field]
    with pytest.raises(WorkerActionRefused, match="is not excluded") as refused:
        worker_act(kind="include", campaign=campaign, worker=inside, by=researcher, reason="never was")
    assert refused.value.code == "not_excluded"
    with pytest.raises(WorkerActionRefused, match="is not blocked"):
        worker_act(kind="unblock", campaign=campaign, worker=inside, by=researcher, reason="never was")
    assert row_counts() == before
    assert Participation.objects.get(campaign=campaign, worker=inside).excluded_at is None


def test_a_blocked_worker_gets_no_prompt_and_loses_the_one_they_hold(make_campaign, make_user, researcher):
    campaign = make_campaign(3, k=1)
    user = make_user()
    worker, other = services.worker_for_user(user=user), _sim_worker("other")
    label_one(campaign, worker)
    held = services.lease_acquire(campaign=campaign, worker=worker)

    worker_act(kind="block", campaign=campaign, worker=worker, by=researcher, reason=WHY)

    held.refresh_from_db()
    assert held.status == Lease.Status.RELEASED
    assert not Slot.objects.filter(lease=held).exists()  # the slot is free for others
    with pytest.raises(services.LabelRefused, match="stopped giving you prompts") as refused:
        services.label_submit(lease_id=held.pk, worker=worker, value=1, client_token="late")
    assert refused.value.code == "blocked"  # not "you gave this prompt back"
    refusal = services.lease_acquire(campaign=campaign, worker=worker)
    assert isinstance(refusal, services.NothingLeft) and refusal.code == "blocked"
    assert selectors.worker_outlook(campaign=campaign, worker=worker).code == "blocked"
    page = signed_in(user).get(f"/w/{campaign.slug}/next/")
    assert page.status_code == 200 and "stopped giving you prompts" in page.content.decode()
    front = signed_in(user).get(f"/w/{campaign.slug}/")
    assert "stopped giving you prompts" in front.content.decode() and "Continue labeling" not in front.content.decode()
    assert held.prompt_id in {label_one(campaign, other).prompt_id for _ in range(2)}  # freed for somebody else
    assert Slot.objects.filter(campaign=campaign, filled=False).count() == 0
    assert selectors.invariant_violations(campaign=campaign, complete=True) == []

    worker_act(kind="unblock", campaign=campaign, worker=worker, by=researcher, reason="Talked to them.")
    assert selectors.worker_outlook(campaign=campaign, worker=worker).code == "full"


def test_a_blocked_mturk_worker_gets_the_block_list_qualification(
    make_campaign,
    researcher,
    mturk,  # noqa: F811 (a fixture)
    django_capture_on_commit_callbacks,
):
    campaign = make_campaign(6, k=2)
    publication = channel_services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
    channel_services.publication_publish(publication_id=publication.pk)
    page = open_task(mturk, mturk.accept(mturk.visible_hits("AWSPAM")[0], "AWSPAM"))
    assert b'class="label-form"' in page.content  # they joined the campaign and hold a prompt
    worker = Participation.objects.get(campaign=campaign, worker__external_id="AWSPAM").worker

    with django_capture_on_commit_callbacks() as callbacks:
        worker_act(kind="block", campaign=campaign, worker=worker, by=researcher, reason=WHY)
    assert len(callbacks) == 1  # mturk_block_worker_task, after commit
    block = publication.blocks.get()
    assert block.worker == worker
    channel_services.mturk_block_push(block_id=block.pk)
    assert mturk.visible_hits("AWSPAM") == [] and mturk.visible_hits("AWOTHER") != []
    assert not Lease.objects.filter(worker=worker, status=Lease.Status.ACTIVE).exists()

    # Unblocked: the qualification is lifted after commit, and the row goes.
    with django_capture_on_commit_callbacks() as callbacks:
        worker_act(kind="unblock", campaign=campaign, worker=worker, by=researcher, reason="A mistake.")
    assert len(callbacks) == 1  # mturk_unblock_worker_task
    assert mturk.visible_hits("AWSPAM") == []  # not before the task runs
    assert channel_services.mturk_block_lift(block_id=block.pk) is True
    assert mturk.visible_hits("AWSPAM") != [] and not publication.blocks.exists()
    assert channel_services.mturk_block_lift(block_id=block.pk) is False  # a second run: nothing to lift

    # Blocked again before the lift went out: the block wins, nothing is lifted.
    worker_act(kind="block", campaign=campaign, worker=worker, by=researcher, reason=WHY)
    channel_services.mturk_block_push(block_id=publication.blocks.get().pk)
    worker_act(kind="unblock", campaign=campaign, worker=worker, by=researcher, reason="A mistake.")
    worker_act(kind="block", campaign=campaign, worker=worker, by=researcher, reason=WHY)
    block = publication.blocks.get()
    assert block.status == MTurkWorkerBlock.Status.PENDING
    assert channel_services.mturk_block_lift(block_id=block.pk) is False
    channel_services.mturk_block_push(block_id=block.pk)
    assert mturk.visible_hits("AWSPAM") == []

    # A lift whose task never ran is done by reconciliation.
    worker_act(kind="unblock", campaign=campaign, worker=worker, by=researcher, reason="A mistake.")
    report = channel_services.mturk_reconcile(publication_id=publication.pk)
    assert report.blocks_lifted == 1 and mturk.visible_hits("AWSPAM") != []


def test_an_mturk_block_re_set_while_its_lift_is_on_the_wire_is_pushed_again(
    make_campaign,
    researcher,
    mturk,  # noqa: F811 (a fixture)
    monkeypatch,
):
    campaign = make_campaign(6, k=2)
    publication = channel_services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
    channel_services.publication_publish(publication_id=publication.pk)
    open_task(mturk, mturk.accept(mturk.visible_hits("AWSPAM")[0], "AWSPAM"))
    worker = Participation.objects.get(campaign=campaign, worker__external_id="AWSPAM").worker
    worker_act(kind="block", campaign=campaign, worker=worker, by=researcher, reason=WHY)
    block = publication.blocks.get()
    channel_services.mturk_block_push(block_id=block.pk)
    worker_act(kind="unblock", campaign=campaign, worker=worker, by=researcher, reason="A mistake.")

    from annotation.channels.mturk import MTurkChannel

    lift = MTurkChannel.unblock_worker

    def lift_while_blocked_again(self, **kwargs):
        # The researcher blocks again, and that block is pushed, while MTurk is being asked to lift.
        worker_act(kind="block", campaign=campaign, worker=worker, by=researcher, reason=WHY)
        channel_services.mturk_block_push(block_id=block.pk)
        lift(self, **kwargs)

    monkeypatch.setattr(MTurkChannel, "unblock_worker", lift_while_blocked_again)
    assert channel_services.mturk_block_lift(block_id=block.pk) is True
    assert mturk.visible_hits("AWSPAM") == []  # pushed again after the lift
    assert publication.blocks.get().status == MTurkWorkerBlock.Status.DONE


def test_a_blocked_panel_participant_is_asked_to_return_the_study(make_campaign, researcher):
    from django.test import Client

    campaign = make_campaign(6, k=2)
    panel = channel_services.publication_create_panel(campaign=campaign, user=researcher, completion_code="C0DE").panel
    client = Client()
    entry = client.get(f"/channels/panel/{panel.slug}/", {"PROLIFIC_PID": "p-spam", "STUDY_ID": "s1"})
    task = client.get(client.get(entry["Location"])["Location"])
    page = task.content.decode()
    action = re.search(r'<form method="post" action="([^"]+)" class="label-form"', page).group(1)
    token = re.search(r'name="client_token" value="([^"]+)"', page).group(1)
    assert client.post(action, {"value": "1", "client_token": token}).status_code == 302  # one label this session
    worker = Participation.objects.get(campaign=campaign).worker
    worker_act(kind="block", campaign=campaign, worker=worker, by=researcher, reason=WHY)
    done = client.get(client.get(f"/channels/panel/{panel.slug}/next/")["Location"])
    body = done.content.decode()
    assert done.status_code == 200 and "<strong>return</strong> the study" in body
    assert "stopped giving you prompts" in body and "C0DE" not in body


def test_recollecting_frees_the_slots_for_other_workers_and_never_shows_a_prompt_twice(make_campaign, researcher):
    campaign = make_campaign(4, k=2)
    spammer = _sim_worker("spam")
    given = [label_one(campaign, spammer).pk for _ in range(3)]
    held = services.lease_acquire(campaign=campaign, worker=spammer)
    numbers = {"top_share": 1.0, "n_labels": 3}

    action = worker_act(kind="recollect", campaign=campaign, worker=spammer, by=researcher, reason=WHY, numbers=numbers)

    assert action.numbers == {**numbers, "labels_voided": 3}
    labels = Label.objects.filter(pk__in=given)
    assert labels.count() == 3 and all(label.voided_at and label.slot_id is None for label in labels)  # rows kept, void
    assert {label.void_reason for label in labels} == {f"Re-collected: {WHY}"}
    assert Lease.objects.filter(worker=spammer, status=Lease.Status.SUBMITTED).count() == 3  # leases kept
    held.refresh_from_db()
    assert held.status == Lease.Status.RELEASED
    standing = Participation.objects.get(campaign=campaign, worker=spammer)
    assert standing.excluded_at and standing.blocked_at and standing.n_labels == 0

    action_undo(action=action, by=researcher)  # includes and unblocks; the voids stay
    assert Label.objects.filter(pk__in=given, voided_at__isnull=True).count() == 0
    again = services.lease_acquire(campaign=campaign, worker=spammer)  # open slots, all on prompts they had
    assert isinstance(again, services.NothingLeft) and again.code == "nothing_left"  # never twice
    others = [_sim_worker(f"o{i}") for i in range(3)]
    _crowd(campaign, others, seed=5)
    assert Slot.objects.filter(campaign=campaign, filled=False).count() == 0  # fresh labels everywhere
    assert not Label.objects.counted().filter(worker=spammer).exists()
    assert selectors.invariant_violations(campaign=campaign, acknowledged=given, complete=True) == []


def test_undo_logs_the_inverse_action_once(make_campaign, researcher):
    campaign = make_campaign(4, k=2)
    worker = _sim_worker("w")
    label_one(campaign, worker)
    rule = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=1, action="exclude"
    )
    automatic = worker_act(
        kind="exclude",
        campaign=campaign,
        worker=worker,
        rule=rule,
        reason="answers 1 to 100 % of 1 label",
        numbers={"top_share": 1.0, "rule_count": 1},
    )

    undone = action_undo(action=automatic, by=researcher)

    assert undone.logged and undone.undone_by == researcher and undone.undone_at is not None
    include = WorkerAction.objects.get(kind="include")
    assert (include.by, include.rule, include.numbers) == (researcher, None, {"undoes": automatic.pk})
    assert include.reason.startswith("Undo of “Excluded from the audit”") and "answers 1" in include.reason
    assert Participation.objects.get(worker=worker).excluded_at is None
    assert not action_undo(action=automatic, by=researcher).logged  # twice: nothing new
    assert WorkerAction.objects.count() == 2
    with pytest.raises(WorkerActionRefused) as refused:
        action_undo(action=include, by=researcher)
    assert refused.value.code == "not_undoable"

    # An exclusion superseded by later ones is only marked undone: the latest decides the standing.
    first = worker_act(kind="exclude", campaign=campaign, worker=worker, rule=rule, reason="again")
    worker_act(kind="include", campaign=campaign, worker=worker, by=researcher, reason="no")
    worker_act(kind="exclude", campaign=campaign, worker=worker, by=researcher, reason="yes after all")
    action_undo(action=first, by=researcher)
    assert Participation.objects.get(worker=worker).excluded_at is not None
    assert WorkerAction.objects.filter(kind="include").count() == 2

    flag = worker_act(kind="flag", campaign=campaign, worker=worker, rule=rule, reason="looks odd")
    action_undo(action=flag, by=researcher)
    assert WorkerAction.objects.filter(kind__in=["include", "unblock"]).count() == 2  # a flag has no inverse
    assert worker_act(kind="flag", campaign=campaign, worker=worker, rule=rule, reason="looks odd").pk != flag.pk

    recollect = worker_act(kind="recollect", campaign=campaign, worker=worker, rule=rule, reason="spam")
    action_undo(action=recollect, by=researcher)
    assert [a.kind for a in WorkerAction.objects.filter(numbers__undoes=recollect.pk).order_by("pk")] == [
        "include",
        "unblock",
    ]
    assert "stay void" in RECOLLECT_UNDO_NOTE


def test_the_workers_page_acts_logs_and_undoes(client, make_campaign, researcher, make_user):
    campaign = make_campaign(4, k=2)
    worker = _sim_worker("page")
    label_one(campaign, worker)
    rule = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.5, min_labels=1, action="block"
    )
    automatic = worker_act(
        kind="block",
        campaign=campaign,
        worker=worker,
        rule=rule,
        reason="answers 1 to 100 % of 1 label",
        numbers={"top_share": 1.0, "bias_ci": [0.25, 0.75], "rule_count": 1},
    )
    client.force_login(researcher)
    url = f"/campaigns/{campaign.slug}/workers/"
    assert f'href="{url}"' in client.get(f"/campaigns/{campaign.slug}/").content.decode()
    page = client.get(url).content.decode()
    assert "sim:page" in page and "worker-state blocked" in page  # the chip; "since" in its title
    assert "by the rule" in page and "answers 1 to 100 % of 1 label" in page
    assert "top share: 1" in page and "bias ci: [0.25, 0.75]" in page
    assert f'action="{url}actions/{automatic.pk}/undo/"' in page

    done = client.post(f"{url}act/", {"worker": "sim:page", "action": "exclude", "reason": "Too fast."})
    assert done.status_code == 302
    assert WorkerAction.objects.filter(kind="exclude", by=researcher, reason="Too fast.").exists()
    # re-collecting asks first, and does nothing until confirmed
    ask = client.post(f"{url}act/", {"worker": "sim:page", "action": "recollect", "reason": "Spam."})
    assert ask.status_code == 200 and "cannot be undone" in ask.content.decode()
    assert not WorkerAction.objects.filter(kind="recollect").exists()
    client.post(f"{url}act/", {"worker": "sim:page", "action": "recollect", "reason": "Spam.", "confirm": "1"})
    assert WorkerAction.objects.get(kind="recollect").numbers == {"labels_voided": 1}

    assert client.post(f"{url}actions/{automatic.pk}/undo/").status_code == 302
    automatic.refresh_from_db()
    assert automatic.undone_by == researcher
    log = client.get(url).content.decode()
    assert "Undone" in log and f"by {researcher.username}" in log

    stranger = signed_in(make_user())
    before = row_counts()
    for data, field in (
        ({"worker": "sim:nobody", "action": "exclude", "reason": WHY}, "worker"),
        ({"worker": "sim:page", "action": "erase", "reason": WHY}, "action"),
        ({"worker": "sim:page", "action": "flag", "reason": ""}, "reason"),
    ):
        refused = client.post(f"{url}act/", data)
        assert refused.status_code == 400 and f"{field}:" in refused.content.decode(), field
    assert row_counts() == before
    assert stranger.get(url).status_code == 404
    assert stranger.post(f"{url}act/", {"worker": "sim:page", "action": "flag", "reason": WHY}).status_code == 404
    assert stranger.post(f"{url}actions/{automatic.pk}/undo/").status_code == 404
    assert row_counts() == before


@pytest.mark.django_db(transaction=True)
def test_a_worker_labeling_while_being_recollected_keeps_every_guarantee(make_campaign, researcher):
    """The worker's requests race the re-collection (threads, one connection each): every acknowledged
    label is stored, none of theirs counts afterwards, and nobody sees a prompt twice."""
    campaign = make_campaign(30, k=2)
    spammer, others = _sim_worker("racer"), [_sim_worker(f"r{i}") for i in range(3)]
    acknowledged, errors, started = [], [], threading.Event()

    def label_on():
        while True:
            lease = services.lease_acquire(campaign=campaign, worker=spammer)
            if not isinstance(lease, Lease):
                return
            try:
                ack = services.label_submit(lease_id=lease.pk, worker=spammer, value=1, client_token=f"r{lease.pk}")
            except services.LabelRefused:
                continue
            acknowledged.append(ack.label_id)
            started.set()

    thread = db_thread(label_on, errors)
    started.wait(30)
    action = worker_act(kind="recollect", campaign=campaign, worker=spammer, by=researcher, reason=WHY)
    thread.join(60)
    assert not errors, [str(e) for e in errors]
    assert not thread.is_alive()
    assert action.numbers["labels_voided"] == len(acknowledged) >= 1
    assert not Label.objects.counted().filter(worker=spammer).exists()
    _crowd(campaign, others, seed=9)
    assert selectors.invariant_violations(campaign=campaign, acknowledged=acknowledged, complete=True) == []


def test_only_actions_whose_standing_still_holds_offer_an_undo(make_campaign, researcher):
    from annotation.selectors import action_undoable, worker_actions_of

    campaign = make_campaign(4, k=2)
    worker = _sim_worker("undo")
    label_one(campaign, worker)
    block = worker_act(kind="block", campaign=campaign, worker=worker, by=researcher, reason=WHY)
    exclude = worker_act(kind="exclude", campaign=campaign, worker=worker, by=researcher, reason=WHY)
    flag = worker_act(kind="flag", campaign=campaign, worker=worker, by=researcher, reason=WHY)

    def undoable() -> dict[int, bool]:
        return {action.pk: action_undoable(action) for action in worker_actions_of(campaign=campaign)}

    assert undoable() == {block.pk: True, exclude.pk: True, flag.pk: True}  # an exclusion does not decide a block
    unblock = worker_act(kind="unblock", campaign=campaign, worker=worker, by=researcher, reason="Talked to them.")
    # The block's standing is decided by the unblock now: undoing it would change nothing.
    assert undoable() == {block.pk: False, exclude.pk: True, flag.pk: True, unblock.pk: False}
    recollect = worker_act(kind="recollect", campaign=campaign, worker=worker, by=researcher, reason=WHY)
    worker_act(kind="include", campaign=campaign, worker=worker, by=researcher, reason="Back in the audit.")
    assert undoable()[recollect.pk]  # it still blocks them
    worker_act(kind="unblock", campaign=campaign, worker=worker, by=researcher, reason="And unblocked.")
    assert not undoable()[recollect.pk]
    client = APIClient()
    client.force_authenticate(researcher)
    listed = client.get(f"/api/v1/campaigns/{campaign.slug}/worker-actions/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert {row["id"]: row["undoable"] for row in rows} == undoable()
