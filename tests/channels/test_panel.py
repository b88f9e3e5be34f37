"""Link-based panels (Prolific and similar) end to end: participant id from the URL, the usual labeling
form, the completion code at the end (quota reached or nothing left) for a participant who labeled
something, and "no work for you, please return the study" (or the panel's no-work code or URL) for one
who found nothing to label."""

import re

import pytest
from django.db import OperationalError
from django.test import Client

from annotation import services as core
from annotation.channels import services
from annotation.channels.errors import PanelRefused
from annotation.channels.models import PanelSession, Publication
from annotation.models import Label, Lease, Worker
from annotation.selectors import invariant_violations

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def make_panel(campaign, researcher, **options):
    options.setdefault("completion_code", "C0DE1234")
    return services.publication_create_panel(campaign=campaign, user=researcher, **options).panel


def arrive(client, panel, pid, study="STUDY1", session="SESS1"):
    return client.get(f"/channels/panel/{panel.slug}/", {"PROLIFIC_PID": pid, "STUDY_ID": study, "SESSION_ID": session})


def label_until_done(client, response, value="1", limit=50):
    """Follow the participant flow, labeling every prompt shown; returns the final page and the count."""
    n = 0
    for _ in range(limit):
        while response.status_code == 302 and response["Location"].startswith("/"):
            response = client.get(response["Location"])
        if b'class="label-form"' not in response.content:
            return response, n
        page = response.content.decode()
        action = re.search(r'<form method="post" action="([^"]+)" class="label-form"', page).group(1)
        token = re.search(r'name="client_token" value="([^"]+)"', page).group(1)
        response = client.post(action, {"value": value, "client_token": token})
        assert response.status_code == 302, response.content[:500]
        n += 1
    raise AssertionError("the flow did not end")


def test_quota_then_completion_code(make_campaign, researcher):
    campaign = make_campaign(10, k=2)
    panel = make_panel(campaign, researcher, quota_per_session=3)
    client = Client()
    page, n = label_until_done(client, arrive(client, panel, "5f1a2b3c4d5e6f7a8b9c0d1e"))
    body = page.content.decode()
    assert n == 3 and page.status_code == 200
    assert "C0DE1234" in body and 'You labeled <strong class="done-count">3</strong>' in body
    session = PanelSession.objects.get()
    assert session.n_labels == 3 and session.completed_at is not None and session.session_ref == "SESS1"
    labels = Label.objects.filter(campaign=campaign)
    assert labels.count() == 3 and {label.worker.public_id for label in labels} == {"prolific:5f1a2b3c4d5e6f7a8b9c0d1e"}
    # coming back in the same session gives the code again, never more prompts
    assert client.get(f"/channels/panel/{panel.slug}/next/").status_code == 302
    assert b"C0DE1234" in client.get(f"/channels/panel/{panel.slug}/done/").content
    assert Label.objects.count() == 3


def test_nothing_left_ends_with_the_code_for_work_done_and_every_prompt_has_k_distinct_workers(
    make_campaign, make_worker, researcher
):
    campaign = make_campaign(3, k=2)
    panel = make_panel(campaign, researcher, completion_url="https://app.prolific.com/submissions/complete?cc=C0DE1234")
    native = make_worker()
    lease = core.lease_acquire(campaign=campaign, worker=native)
    core.label_submit(lease_id=lease.pk, worker=native, value=0, client_token="n1")
    counts, pages = [], []
    for pid in ["PARTICIPANT1", "PARTICIPANT2", "PARTICIPANT3"]:
        client = Client()
        page, n = label_until_done(client, arrive(client, panel, pid, session=f"S-{pid}"))
        counts.append(n)
        pages.append(page)
    assert counts == [3, 2, 0]
    for page in pages[:2]:  # some work, then nothing left: the completion code for that work
        assert page.status_code == 200 and b"C0DE1234" in page.content
        assert b'href="https://app.prolific.com/submissions/complete?cc=C0DE1234"' in page.content
    # the third participant finds nothing left: no completion code for work not done
    assert pages[2].status_code == 200 and b"C0DE1234" not in pages[2].content
    assert (
        b"Sorry, there is no work for you" in pages[2].content
        and b"<strong>return</strong> the study" in pages[2].content
    )
    assert PanelSession.objects.filter(completed_at__isnull=True).get().worker.external_id == "PARTICIPANT3"
    assert invariant_violations(campaign=campaign, complete=True) == []
    assert Label.objects.filter(campaign=campaign).count() == 6


def test_redirect_on_completion(make_campaign, researcher):
    campaign = make_campaign(1, k=1)
    url = "https://app.prolific.com/submissions/complete?cc=XYZ"
    panel = make_panel(campaign, researcher, completion_url=url, redirect_on_completion=True, quota_per_session=1)
    client = Client()
    response = arrive(client, panel, "P1")
    response = client.get(response["Location"])  # next -> task
    response = client.get(response["Location"])
    token = re.search(r'name="client_token" value="([^"]+)"', response.content.decode()).group(1)
    response = client.post(response.wsgi_request.path, {"value": "1", "client_token": token})
    assert response["Location"] == f"/channels/panel/{panel.slug}/done/"  # the quota reached: straight to the end
    response = client.get(response["Location"])
    assert response.status_code == 302 and response["Location"] == url


def test_a_saved_label_whose_next_claim_fails_leads_to_next(make_campaign, researcher, monkeypatch):
    """The label's POST claims the next prompt itself; if the database refuses that claim, the label is
    still saved and counted, and the participant goes to next, which tries again (not a 500)."""
    campaign = make_campaign(3, k=1)
    panel = make_panel(campaign, researcher)
    client = Client()
    page = client.get(client.get(arrive(client, panel, "P1")["Location"])["Location"])
    token = re.search(r'name="client_token" value="([^"]+)"', page.content.decode()).group(1)

    def busy(*args):  # inside the claim's transaction
        raise OperationalError("database is locked")

    monkeypatch.setattr("annotation.services.assignment._lease_under_lock", busy)
    response = client.post(page.wsgi_request.path, {"value": "1", "client_token": token})
    assert response.status_code == 302 and response["Location"] == f"/channels/panel/{panel.slug}/next/"
    assert Label.objects.count() == 1 and PanelSession.objects.get().n_labels == 1


def test_the_done_page_is_not_a_shortcut(make_campaign, researcher):
    campaign = make_campaign(5, k=1)
    panel = make_panel(campaign, researcher, quota_per_session=2)
    client = Client()
    arrive(client, panel, "P1")
    response = client.get(f"/channels/panel/{panel.slug}/done/")
    assert response.status_code == 302 and "/task/" in response["Location"]
    assert PanelSession.objects.get().completed_at is None


@pytest.mark.parametrize(
    "params, message",
    [
        ({"STUDY_ID": "STUDY1"}, b"PROLIFIC_PID parameter is missing"),
        ({"PROLIFIC_PID": "bad id <script>", "STUDY_ID": "STUDY1"}, b"participant id in this link is not valid"),
        ({"PROLIFIC_PID": "P1", "STUDY_ID": "OTHER"}, b"belongs to another study"),
    ],
)
def test_bad_links_are_refused_and_create_nothing(make_campaign, researcher, params, message):
    panel = make_panel(make_campaign(3), researcher, expected_study_id="STUDY1")
    workers = Worker.objects.count()
    response = Client().get(f"/channels/panel/{panel.slug}/", params)
    assert response.status_code == 400 and message in response.content
    assert Worker.objects.count() == workers and PanelSession.objects.count() == 0


def test_configurable_parameter_names_and_panel_name(make_campaign, researcher):
    campaign = make_campaign(3, k=1)
    panel = make_panel(
        campaign,
        researcher,
        panel_name="cint",
        participant_param="rid",
        study_param="",
        session_param="sid",
        quota_per_session=1,
    )
    client = Client()
    response = client.get(f"/channels/panel/{panel.slug}/", {"rid": "R-77", "sid": "X"})
    page, n = label_until_done(client, response)
    assert n == 1 and Label.objects.get().worker.public_id == "cint:R-77"


def test_without_a_session_or_once_withdrawn(make_campaign, researcher):
    campaign = make_campaign(3)
    panel = make_panel(campaign, researcher)
    assert Client().get(f"/channels/panel/{panel.slug}/next/").status_code == 403
    services.publication_withdraw(publication=panel.publication)
    response = arrive(Client(), panel, "P1")
    assert response.status_code == 400 and b"closed" in response.content


def test_a_paused_campaign_gives_no_code_for_no_work(make_campaign, researcher):
    campaign = make_campaign(3)
    panel = make_panel(campaign, researcher)
    client = Client()
    arrive(client, panel, "P1")
    core.campaign_transition(campaign=campaign, action="pause")
    response = client.get(f"/channels/panel/{panel.slug}/done/")
    assert response.status_code == 200 and b"C0DE1234" not in response.content
    assert b"This campaign is paused." in response.content and b"no work for you" in response.content
    assert PanelSession.objects.get().completed_at is None


def test_work_done_before_a_pause_gets_the_completion_code(make_campaign, researcher):
    """No dead end: a participant whose campaign is paused under them still gets the code for their labels."""
    campaign = make_campaign(5, k=1)
    panel = make_panel(campaign, researcher, quota_per_session=4)
    client = Client()
    response = client.get(arrive(client, panel, "P1")["Location"])  # next -> task
    page = client.get(response["Location"])
    token = re.search(r'name="client_token" value="([^"]+)"', page.content.decode()).group(1)
    # The label's POST leads to the next prompt's page: that prompt is on their screen when the pause comes.
    on_screen = client.post(page.wsgi_request.path, {"value": "1", "client_token": token})["Location"]
    assert "/task/" in on_screen
    core.campaign_transition(campaign=campaign, action="pause")
    page, n = label_until_done(client, client.get(on_screen))
    assert n == 1 and page.status_code == 200  # the prompt on their screen may still be labeled, then the end
    assert b"C0DE1234" in page.content and b"This campaign is paused." in page.content
    assert b'<strong class="done-count">2</strong>' in page.content
    assert PanelSession.objects.get().completed_at is not None


def test_the_no_work_code_or_url_of_the_panel(make_campaign, make_worker, researcher):
    campaign = make_campaign(1, k=1)
    worker = make_worker()
    lease = core.lease_acquire(campaign=campaign, worker=worker)
    core.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="full")  # nothing left
    panel = make_panel(campaign, researcher, no_work_code="NOWORK42")
    client = Client()
    page, n = label_until_done(client, arrive(client, panel, "P1"))
    assert n == 0 and b'<strong class="no-work-code">NOWORK42</strong>' in page.content
    assert b"C0DE1234" not in page.content and b"There is nothing left for you to label" in page.content

    services.publication_withdraw(publication=panel.publication)
    url = "https://app.prolific.com/submissions/complete?cc=NOWORK42"
    panel = make_panel(campaign, researcher, panel_name="cint", no_work_url=url)
    client = Client()
    response = client.get(arrive(client, panel, "P2")["Location"])
    assert response.status_code == 302 and response["Location"] == f"/channels/panel/{panel.slug}/done/"
    response = client.get(response["Location"])
    assert response.status_code == 302 and response["Location"] == url
    assert PanelSession.objects.filter(completed_at__isnull=False).count() == 0


def test_panel_refusals(make_campaign, researcher):
    campaign = make_campaign(3)
    for options, code in [
        ({"panel_name": "mturk"}, "bad_panel_name"),
        ({"panel_name": "Prolific!"}, "bad_panel_name"),
        ({"completion_code": ""}, "no_completion"),
        ({"completion_url": "javascript:alert(1)"}, "bad_completion_url"),
        ({"no_work_url": "javascript:alert(1)"}, "bad_no_work_url"),
        ({"redirect_on_completion": True}, "bad_completion_url"),
        ({"participant_param": "a b"}, "bad_param"),
        ({"quota_per_session": 0}, "bad_quota"),
    ]:
        with pytest.raises(PanelRefused) as refused:
            make_panel(campaign, researcher, **options)
        assert refused.value.code == code
    assert Publication.objects.count() == 0
    make_panel(campaign, researcher)
    with pytest.raises(PanelRefused) as refused:
        make_panel(campaign, researcher)
    assert refused.value.code == "already_published"


def test_the_researcher_creates_the_link_and_sees_progress(client, make_campaign, researcher):
    campaign = make_campaign(3)
    client.force_login(researcher)
    response = client.post(
        f"/channels/campaigns/{campaign.slug}/panel/",
        {
            "panel_name": "prolific",
            "participant_param": "PROLIFIC_PID",
            "study_param": "STUDY_ID",
            "session_param": "SESSION_ID",
            "completion_code": "ABC",
            "quota_per_session": 2,
            "no_work_code": "NOPE",
            "no_work_url": "app.prolific.com/submissions/complete?cc=NOPE",
        },
    )
    publication = Publication.objects.get()
    assert (publication.panel.no_work_code, publication.panel.no_work_url) == (
        "NOPE",
        "https://app.prolific.com/submissions/complete?cc=NOPE",
    )
    assert response.status_code == 302 and response["Location"] == f"/channels/publications/{publication.pk}/"
    page = client.get(response["Location"])
    assert (
        f"/channels/panel/{publication.panel.slug}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&amp;STUDY_ID="
        in page.content.decode()
    )
    assert page.context["progress"].sessions == 0
    assert b"NOPE" in page.content  # the no-work code, beside the completion code
    assert client.post(f"/channels/campaigns/{campaign.slug}/panel/", {"panel_name": "x"}).status_code == 400
    assert Lease.objects.count() == 0
