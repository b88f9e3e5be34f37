"""The workers page beside the audit (issue 21): each worker's numbers and flags, filtered by flag and
status and sorted by a column (``annotation.selectors.worker_audit``); acting on several workers at once,
all or nothing (``quality.workers_act``), and unflagging; a worker's own page with their labels."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotation import selectors, services
from annotation.models import Activity, Participation, WorkerAction
from annotation.selectors import worker_audit
from annotation.services.quality import WorkerActionRefused, worker_act, workers_act
from audits import services as audit_services
from tests.api.conftest import row_counts
from tests.clock import paced
from tests.helpers import GOLD, label_all, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]
WHY = "Answers 1 to everything."


def _sim(name):
    return services.worker_get_or_create(channel="sim", external_id=name)


@pytest.fixture
def crowd(make_campaign):
    """30 prompts, k = 3: two careful workers and a spammer who answers 1 to all 30, then the quick audit."""
    campaign = make_campaign(30, k=3)
    careful = [_sim("careful-a"), _sim("careful-b")]
    spammer = _sim("spammer")
    with paced() as clock:  # one pace for all: no speed flag from this machine's timing
        for worker in careful:
            label_all(campaign, worker, GOLD, clock=clock)
        label_all(campaign, spammer, value=1, clock=clock)
    audit_services.audit_refresh(campaign_id=campaign.pk)
    return campaign, careful, spammer


def test_the_audit_flags_the_spammer_and_the_filters_find_them(crowd):
    campaign, careful, spammer = crowd
    rows = worker_audit.workers_audited(campaign=campaign).rows
    by_id = {row.worker.public_id: row for row in rows}
    assert [f["kind"] for f in by_id["sim:spammer"].audit_flags] == ["straight_lining"]
    assert by_id["sim:spammer"].audit["top_share"] == 1.0
    assert by_id["sim:careful-a"].audit_flags == []

    flagged = worker_audit.workers_audited(campaign=campaign, flag="straight_lining").rows
    assert [row.worker for row in flagged] == [spammer]
    worker_act(kind="block", campaign=campaign, worker=careful[0], by=None, reason=WHY)
    assert [row.worker for row in worker_audit.workers_audited(campaign=campaign, status="blocked").rows] == [
        careful[0]
    ]
    assert {row.worker for row in worker_audit.workers_audited(campaign=campaign, status="active").rows} == {
        careful[1],
        spammer,
    }
    assert worker_audit.workers_audited(campaign=campaign, status="flagged").rows == []
    worker_act(kind="flag", campaign=campaign, worker=careful[1], by=None, reason=WHY)
    assert [row.worker for row in worker_audit.workers_audited(campaign=campaign, status="flagged").rows] == [
        careful[1]
    ]

    by_share = worker_audit.workers_audited(campaign=campaign, sort="-top_share").rows
    assert by_share[0].worker == spammer
    ascending = worker_audit.workers_audited(campaign=campaign, sort="top_share").rows
    assert ascending[-1].worker == spammer

    for field, value in (("flag", "lazy"), ("status", "gone"), ("sort", "-colour")):
        with pytest.raises(ValidationError) as refused:
            worker_audit.workers_audited(campaign=campaign, **{field: value})
        assert field in refused.value.message_dict


def test_a_worker_the_audit_has_not_seen_has_no_numbers(make_campaign):
    campaign = make_campaign(5)
    newcomer = _sim("new")
    services.lease_acquire(campaign=campaign, worker=newcomer)
    (row,) = worker_audit.workers_audited(campaign=campaign, sort="-bias").rows
    assert row.worker == newcomer and row.audit == {} and row.audit_flags == []


def test_acting_on_several_workers_is_all_or_nothing(crowd, researcher):
    campaign, careful, spammer = crowd
    other = services.worker_get_or_create(channel="sim", external_id="elsewhere")  # in no campaign
    before = row_counts()
    with pytest.raises(ValidationError) as refused:
        workers_act(kind="block", campaign=campaign, workers=[spammer, careful[0], other], by=researcher, reason=WHY)
    assert "sim:elsewhere is not a worker of this campaign" in str(refused.value.message_dict["worker"])
    assert row_counts() == before
    assert not Participation.objects.filter(campaign=campaign, blocked_at__isnull=False).exists()

    # One worker the action means nothing for (never excluded) refuses them all.
    worker_act(kind="exclude", campaign=campaign, worker=spammer, by=researcher, reason=WHY)
    before = row_counts()
    with pytest.raises(WorkerActionRefused) as refused:
        workers_act(kind="include", campaign=campaign, workers=[spammer, careful[1]], by=researcher, reason=WHY)
    assert "sim:careful-b is not excluded" in refused.value.message
    assert row_counts() == before
    assert Participation.objects.get(campaign=campaign, worker=spammer).excluded_at is not None

    with pytest.raises(ValidationError) as refused:
        workers_act(kind="recollect", campaign=campaign, workers=[spammer], by=researcher, reason=WHY)
    assert "kind" in refused.value.message_dict
    with pytest.raises(ValidationError) as refused:
        workers_act(kind="block", campaign=campaign, workers=[spammer], by=researcher, reason="  ")
    assert "reason" in refused.value.message_dict
    with pytest.raises(ValidationError) as refused:
        workers_act(kind="block", campaign=campaign, workers=[], by=researcher, reason=WHY)
    assert "workers" in refused.value.message_dict

    activity = Activity.objects.filter(campaign=campaign).count()
    actions = workers_act(kind="block", campaign=campaign, workers=[spammer, careful[0]], by=researcher, reason=WHY)
    assert sorted(a.worker_id for a in actions) == sorted([spammer.pk, careful[0].pk])
    assert all(a.logged and a.kind == "block" and a.by == researcher and a.reason == WHY for a in actions)
    blocked = Participation.objects.filter(campaign=campaign, blocked_at__isnull=False)
    assert set(blocked.values_list("worker_id", flat=True)) == {spammer.pk, careful[0].pk}
    assert Activity.objects.filter(campaign=campaign).count() == activity + 2
    # Again: each already so, nothing written.
    again = workers_act(kind="block", campaign=campaign, workers=[spammer, careful[0]], by=researcher, reason=WHY)
    assert [a.logged for a in again] == [False, False]
    assert WorkerAction.objects.filter(campaign=campaign, kind="block").count() == 2


def test_unflag_undoes_every_standing_flag_and_is_logged(crowd, researcher):
    campaign, careful, spammer = crowd
    with pytest.raises(WorkerActionRefused) as refused:
        worker_act(kind="unflag", campaign=campaign, worker=spammer, by=researcher, reason=WHY)
    assert refused.value.code == "not_flagged"
    first = worker_act(kind="flag", campaign=campaign, worker=spammer, by=researcher, reason=WHY)
    workers_act(kind="flag", campaign=campaign, workers=[careful[0]], by=researcher, reason=WHY)
    flagged = worker_audit.workers_audited(campaign=campaign, status="flagged").rows
    assert {row.worker for row in flagged} == {careful[0], spammer}
    actions = workers_act(kind="unflag", campaign=campaign, workers=[spammer, careful[0]], by=researcher, reason="Fine")
    assert {a.pk for a in actions} >= {first.pk} and all(a.logged and a.undone_by == researcher for a in actions)
    assert not WorkerAction.objects.filter(campaign=campaign, kind="flag", undone_at__isnull=True).exists()
    logged = Activity.objects.filter(campaign=campaign, verb="worker.unflag")
    assert logged.count() == 2 and all(entry.detail["reason"] == "Fine" for entry in logged)
    again = worker_act(kind="unflag", campaign=campaign, worker=spammer, by=researcher, reason="Fine")
    assert not again.logged and again.pk == first.pk
    assert worker_audit.workers_audited(campaign=campaign, status="flagged").rows == []


def test_the_workers_page_filters_sorts_and_acts_in_bulk(crowd, researcher_client, researcher):
    campaign, careful, spammer = crowd
    url = reverse("worker_actions", args=[campaign.slug])
    page = researcher_client.get(url, {"flag": "straight_lining"})
    assert page.status_code == 200
    assert [p.worker for p in page.context["workers"]] == [spammer]
    html = page.content.decode()
    assert "straight-lining" in html and reverse("campaign_worker", args=[campaign.slug, spammer.pk]) in html
    assert 'aria-label="Act on sim:spammer"' in html

    page = researcher_client.get(url, {"sort": "-top_share"})
    assert page.context["workers"][0].worker == spammer
    assert researcher_client.get(url, {"sort": "colour"}).context["filters"].errors["sort"]

    bulk = reverse("workers_act", args=[campaign.slug])
    refused = researcher_client.post(
        bulk, {"workers": ["sim:spammer", "sim:nobody"], "action": "block", "reason": WHY, "query": "flag=x"}
    )
    assert refused.status_code == 400
    assert "sim:nobody: not a worker of this campaign. Nobody was acted on." in refused.content.decode()
    assert not Participation.objects.filter(campaign=campaign, blocked_at__isnull=False).exists()

    done = researcher_client.post(
        bulk,
        {
            "workers": ["sim:spammer", "sim:careful-a"],
            "action": "block",
            "reason": WHY,
            "query": "flag=straight_lining",
        },
    )
    assert done.status_code == 302 and done.url == f"{url}?flag=straight_lining#workers"
    assert set(
        Participation.objects.filter(campaign=campaign, blocked_at__isnull=False).values_list("worker_id", flat=True)
    ) == {spammer.pk, careful[0].pk}


def test_a_viewer_reads_the_pages_without_forms(crowd, make_user):
    campaign, _, spammer = crowd
    viewer = make_user("viewer")
    campaign.collaborators.add(viewer, through_defaults={"role": "viewer"})
    client = signed_in(viewer)
    for url in (
        reverse("worker_actions", args=[campaign.slug]),
        reverse("campaign_worker", args=[campaign.slug, spammer.pk]),
    ):
        page = client.get(url)
        assert page.status_code == 200
        assert 'name="reason"' not in page.content.decode()
    refused = client.post(
        reverse("workers_act", args=[campaign.slug]), {"workers": ["sim:spammer"], "action": "block", "reason": WHY}
    )
    assert refused.status_code == 403


def test_the_worker_page_lists_their_labels_with_gold(crowd, researcher_client, researcher):
    campaign, careful, spammer = crowd
    label = selectors.worker_labels(campaign=campaign, worker=spammer).last()
    services.label_void(label_id=label.pk, reason="Returned on MTurk")
    worker_act(kind="flag", campaign=campaign, worker=spammer, by=researcher, reason=WHY)
    url = reverse("campaign_worker", args=[campaign.slug, spammer.pk])
    page = researcher_client.get(url)
    assert page.status_code == 200
    labels = page.context["labels"]
    assert labels.paginator.count == 30 and len(labels) == 30
    assert {lab.correct for lab in labels} == {True, False}  # gold alternates 0 and 1; the spammer says 1
    assert [lab.pk for lab in labels if lab.voided_at] == [label.pk]
    html = page.content.decode()
    assert "straight-lining" in html and "Flagged" in html and WHY in html
    assert "Most frequent answer (scaled): 1, 100 % of theirs." in html

    # An action from the worker's page comes back to it; a refused one shows it again, naming the field.
    acted = researcher_client.post(
        reverse("worker_act", args=[campaign.slug]),
        {"worker": "sim:spammer", "action": "unflag", "reason": "Looked again", "back": "worker"},
    )
    assert acted.status_code == 302 and acted.url == f"{url}#history"
    refused = researcher_client.post(
        reverse("worker_act", args=[campaign.slug]),
        {"worker": "sim:spammer", "action": "include", "reason": "", "back": "worker"},
    )
    assert refused.status_code == 400 and "reason: This field is required." in refused.content.decode()
    assert refused.templates[0].name == "annotation/campaign_worker.html"

    other = services.worker_get_or_create(channel="sim", external_id="elsewhere")
    assert researcher_client.get(reverse("campaign_worker", args=[campaign.slug, other.pk])).status_code == 404
