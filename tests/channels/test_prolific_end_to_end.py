"""Prolific end to end against the stand-in (``fake_prolific``) on a real port, its hooks delivered to
Chorus's live server: a researcher publishes through the API, 30 participants arrive through the study
URL and label on Chorus's pages, a quality rule blocks two spammers, one participant returns half-way;
at the end every prompt has exactly k labels, the honest are approved, the spammers held and then
rejected by the researcher, places never outgrew the slots, the blocked are in the exclusion group,
and a bonus is paid once under injected faults."""

import re

import pytest
from django.test import Client

from annotation.channels.models import ProlificAccount, ProlificBonus, ProlificSubmission, Publication
from annotation.channels.services import prolific
from annotation.models import Label, Participation, Prompt
from annotation.selectors import invariant_violations
from annotation.services.rules import rule_create

pytestmark = [pytest.mark.django_db(transaction=True)]

HONEST, SPAMMERS, RETURNER = 27, ("SPAM01", "SPAM02"), "RETURN1"
LPP = 4


def api(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def participant(fake, study_id: str, pid: str, answers, *, stop_after: int | None = None):
    """Arrive through the study URL, label on Chorus's pages (answers: a function of the label's index),
    reach the completion redirect and land on Prolific's completion page. Returns the submission id
    and how many labels were given."""
    submission_id, url = fake.arrive(study_id, pid)
    client = Client()
    path = url.split("://", 1)[1].split("/", 1)[1]
    response = client.get("/" + path)
    n = 0
    while True:
        while response.status_code == 302 and response["Location"].startswith("/"):
            response = client.get(response["Location"])
        if response.status_code == 302:  # off to Prolific: the completion redirect
            code = re.search(r"cc=([A-Z0-9]+)", response["Location"]).group(1)
            fake.complete(submission_id, code)
            return submission_id, n
        page = response.content.decode()
        if 'class="label-form"' not in page:
            return submission_id, n  # the no-work page: asked to return the study
        if stop_after is not None and n == stop_after:
            fake.return_(submission_id)
            return submission_id, n
        action = re.search(r'<form method="post" action="([^"]+)" class="label-form"', page).group(1)
        token = re.search(r'name="client_token" value="([^"]+)"', page).group(1)
        response = client.post(action, {"value": str(answers(n)), "client_token": token})
        assert response.status_code == 302, page[:300]
        n += 1


def test_a_study_run_from_chorus(make_campaign, researcher, prolific_settings, eager_celery):
    fake = prolific_settings
    campaign = make_campaign(40, k=3, lease_seconds=600)
    rule_create(campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=4, action="block")
    client = api(researcher)

    # --- publish: a draft first (with the places the slots need), then on confirmation
    body = {
        "channel": "prolific",
        "title": "Is this statement true?",
        "description": "Read short statements and say whether each is true.",
        "reward": "0.80",
        "labels_per_participant": LPP,
        "estimated_minutes": 3,
    }
    response = client.post(f"/api/v1/campaigns/{campaign.slug}/publications/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    draft = response.json()
    assert draft["status"] == "draft" and draft["external_id"] in fake.studies
    study = fake.studies[draft["external_id"]]
    assert study["status"] == "UNPUBLISHED" and study["total_available_places"] == 30  # 120 slots / 4
    assert study["reward"] == 80 and "{{%SESSION_ID%}}" in study["external_study_url"]
    group_id = study["filters"][-1]["selected_values"][0]
    assert study["filters"][-1]["filter_id"] == "participant_group_blocklist"
    assert ProlificAccount.objects.get().hooks == ProlificAccount.Hooks.SUBSCRIBED
    response = client.post(f"/api/v1/publications/{draft['id']}/publish/")
    assert response.status_code == 200 and response.json()["status"] == "published"
    assert fake.studies[draft["external_id"]]["status"] == "ACTIVE"
    publication = Publication.objects.get(pk=draft["id"])

    # --- participants: two spammers (always 1), one who returns half-way, the honest (0, 1, 0, 1 …)
    honest_ids = [f"HONEST{i:02d}" for i in range(HONEST)]
    order = honest_ids[:3] + [SPAMMERS[0]] + honest_ids[3:6] + [RETURNER, SPAMMERS[1]] + honest_ids[6:]
    given = {}
    places_seen = []
    for pid in order:
        if pid == RETURNER:
            given[pid] = participant(fake, study["id"], pid, lambda n: n % 2, stop_after=2)
        elif pid in SPAMMERS:
            given[pid] = participant(fake, study["id"], pid, lambda n: 1)
        else:
            given[pid] = participant(fake, study["id"], pid, lambda n: n % 2)
        assert fake.wait_deliveries(timeout=60)
        places_seen.append(fake.studies[study["id"]]["total_available_places"])
    # Newcomers take the places that reopened (the returner's) until Prolific has none left to offer.
    late = 0
    while True:
        sub = fake.studies[study["id"]]
        if sub["status"] != "ACTIVE" or sub["places_taken"] >= sub["total_available_places"]:
            break
        late += 1
        given[f"LATE{late}"] = participant(fake, study["id"], f"LATE{late}", lambda n: n % 2)
        assert fake.wait_deliveries(timeout=60)
        places_seen.append(fake.studies[study["id"]]["total_available_places"])
        assert late < 5, "places kept opening"
    assert late >= 1
    prolific.prolific_sync(publication_id=publication.pk)  # what beat does; hooks did the rest already

    # --- every prompt has exactly k labels from distinct workers; the returner's slots went to others
    assert invariant_violations(campaign=campaign, complete=True) == []
    counts = Label.objects.counted().filter(campaign=campaign).values_list("prompt_id", flat=True)
    assert sorted(set(counts)) == sorted(Prompt.objects.filter(campaign=campaign).values_list("pk", flat=True))
    assert all(list(counts).count(p) == 3 for p in set(counts))
    assert given[RETURNER][1] == 2
    returned = ProlificSubmission.objects.get(participant_id=RETURNER)
    assert returned.status == "RETURNED" and returned.leases_ended

    # --- places never exceeded what the slots needed: at most one place per 4 open slots at any time
    assert max(places_seen) <= 30 + 1  # the returner's 2 unlabeled slots needed one more place

    # --- the spammers are blocked (rule), in the exclusion group, held; the honest are approved
    for pid in SPAMMERS:
        assert Participation.objects.get(campaign=campaign, worker__external_id=pid).blocked_at is not None
    assert set(fake.group_members(group_id)) >= set(SPAMMERS)
    verdicts = {s.participant_id: (s.status, s.verdict) for s in ProlificSubmission.objects.all()}
    for pid in SPAMMERS:
        assert verdicts[pid] == ("AWAITING REVIEW", "held"), verdicts[pid]
    approved = [pid for pid, (status, verdict) in verdicts.items() if verdict == "approved"]
    honest = [pid for pid in given if pid.startswith(("HONEST", "LATE"))]
    assert sorted(approved) == sorted(honest)
    assert all(
        fake.submissions[s.submission_id]["status"] == "APPROVED"
        for s in ProlificSubmission.objects.filter(verdict="approved")
    )

    # --- the researcher sees the evidence and rejects the spammers, with a category and the drafted message
    listing = client.get(f"/api/v1/publications/{publication.pk}/submissions/").json()
    held = [row for row in listing if row["verdict"] == "held"]
    assert {row["participant_id"] for row in held} == set(SPAMMERS)
    assert held[0]["evidence"]["standing"] == "blocked" and held[0]["evidence"]["actions"][0]["rule"]
    short = client.post(
        f"/api/v1/publications/{publication.pk}/submissions/{held[0]['submission_id']}/review/",
        {"decision": "reject", "category": "LOW_EFFORT", "message": "Too short."},
        content_type="application/json",
    )
    assert short.status_code == 400 and "message" in short.json()["error"]["fields"]
    for row in held:
        worker = ProlificSubmission.objects.get(submission_id=row["submission_id"]).worker
        category, message = prolific.prolific_rejection_draft(publication=publication, worker=worker)
        assert len(message) >= 100
        response = client.post(
            f"/api/v1/publications/{publication.pk}/submissions/{row['submission_id']}/review/",
            {"decision": "reject", "category": category, "message": message},
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
        assert fake.submissions[row["submission_id"]]["status"] == "REJECTED"

    # --- a bonus whose pay answer is lost, then retried with the same key: paid once
    fake.inject("POST", r"/bulk-bonus-payments/.+/pay/$", "lost")
    # An eager task that fails is left failed here (as a worker would leave it, to retry later):
    eager_celery.conf.task_eager_propagates = False
    target = approved[0]
    headers = {"HTTP_IDEMPOTENCY_KEY": "bonus-1"}
    bonus_body = {"worker": f"prolific:{target}", "amount": "0.50", "reason": "Careful work"}
    first = client.post(
        f"/api/v1/publications/{publication.pk}/bonuses/", bonus_body, content_type="application/json", **headers
    )
    assert first.status_code == 201, first.content
    again = client.post(
        f"/api/v1/publications/{publication.pk}/bonuses/", bonus_body, content_type="application/json", **headers
    )
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    prolific.prolific_sync(publication_id=publication.pk)  # reconciliation checks the lost pay
    bonus = ProlificBonus.objects.get()
    assert bonus.status == ProlificBonus.Status.PAID
    paid = fake.submissions[bonus.submission_id]["bonus_payments"]
    assert paid == [50]

    # --- the campaign is complete: the study was stopped
    assert fake.studies[study["id"]]["status"] in ("AWAITING REVIEW", "COMPLETED")
    assert invariant_violations(campaign=campaign) == []
