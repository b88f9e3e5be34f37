"""The researcher's Prolific workflow in headless Chromium, against the stand-in (``fake_prolific``) on a
real port with its hooks delivered to the live server: from the channels page a researcher previews a
study's cost, creates the draft, publishes it; participants (Django's test client, through the study URL)
label, a quality rule blocks a spammer whose submission is held; the researcher reads the evidence,
rejects it with the drafted message and category, and pays a bonus with a double click (paid once).
Without a token the channels page says what to set. Screenshots (1280×800 and a phone's 390×844) of the
channels page, the publish form with its preview and the publication page with a held submission go to
``tmp_path``."""

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import override_settings

from annotation.channels.models import ProlificBonus, ProlificSubmission, Publication
from annotation.channels.services import prolific
from annotation.models import Label
from annotation.services.rules import rule_create
from tests.channels.test_prolific_end_to_end import participant
from tests.helpers import PHONE, label_one, page_problems, sign_in, sim_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"viewport": {"width": 1280, "height": 800}}
LPP = 4


def text_of(page, selector: str) -> str:
    return " ".join(page.inner_text(selector).split())


def shoot(pages, url: str, path_of) -> None:
    """Open ``url`` on every (name, page) and save a full-page screenshot at ``path_of(name)``."""
    for name, page in pages:
        page.goto(url)
        page.screenshot(path=path_of(name), full_page=True)


def fits_phone(page) -> bool:
    """No wider than the phone's 390 px (a mobile page's innerWidth grows with a too-wide page)."""
    return page.evaluate("document.documentElement.scrollWidth") <= PHONE["viewport"]["width"]


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_researcher_publishes_reviews_and_pays_on_prolific(
    live_server, new_page, make_campaign, researcher, prolific_settings, tmp_path
):
    fake = prolific_settings
    campaign = make_campaign(22, k=2)  # 44 slots
    # A measured pace for the preview (at least 20 labels): 20 labels taking 30 s each, so 24 open slots
    # are left, 6 places of 4 labels.
    for w in range(5):
        early = sim_worker(f"early{w}")
        for i in range(4):
            label_one(campaign, early, value=i % 2)
    for label in Label.objects.filter(campaign=campaign):
        Label.objects.filter(pk=label.pk).update(leased_at=label.created_at - timedelta(seconds=30))
    rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=LPP, action="block"
    )

    page = new_page(**DESKTOP)
    phone = new_page(**PHONE)
    problems = page_problems(page)
    sign_in(page, live_server.url, "researcher")
    sign_in(phone, live_server.url, "researcher")
    both = [("desktop", page), ("phone", phone)]

    # --- the channels page, then the form: a preview first, then the draft
    channels_url = f"{live_server.url}/channels/campaigns/{campaign.slug}/"
    shoot(both, channels_url, lambda name: tmp_path / f"channels-{name}.png")
    assert fits_phone(phone)
    page.click("a.button:has-text('Publish on Prolific')")
    page.wait_for_url(f"{live_server.url}/channels/campaigns/{campaign.slug}/prolific/")
    assert "sized to the 24 labels" in text_of(page, "main")
    page.fill("#id_title", "Is this statement true?")
    page.fill("#id_description", "Read short statements and say whether each is true.")
    page.fill("#id_reward", "0.80")
    page.fill("#id_labels_per_participant", str(LPP))
    page.fill("#id_estimated_minutes", "3")
    assert page.locator("button:has-text('Create the draft study')").count() == 0  # a preview comes first
    page.click("button:has-text('Preview cost')")
    page.wait_for_selector("table.prolific-plan")
    assert text_of(page, ".plan-places") == "6"
    assert text_of(page, ".plan-total") == "6.72"  # 4.80 of rewards + 1.92 of fee and VAT
    assert text_of(page, ".plan-hourly").startswith("24.00 per hour (30.0 s per label, median")
    assert text_of(page, ".plan-hourly-estimated").startswith("16.00 per hour")  # 0.80 for 3 minutes
    assert page.locator(".prolific-underpaying").count() == 0
    assert page.input_value("#id_title") == "Is this statement true?"  # the form kept what was typed
    page.screenshot(path=tmp_path / "publish-preview-desktop.png", full_page=True)
    # The phone's form, with the same preview.
    phone.goto(f"{live_server.url}/channels/campaigns/{campaign.slug}/prolific/")
    phone.fill("#id_description", "Read short statements and say whether each is true.")
    phone.fill("#id_reward", "0.80")
    phone.fill("#id_labels_per_participant", str(LPP))
    phone.fill("#id_estimated_minutes", "3")
    phone.click("button:has-text('Preview cost')")
    phone.wait_for_selector("table.prolific-plan")
    phone.screenshot(path=tmp_path / "publish-preview-phone.png", full_page=True)
    phone_fits_form = fits_phone(phone)

    page.click("button:has-text('Create the draft study')")
    page.wait_for_url(f"{live_server.url}/channels/publications/*/")
    publication = Publication.objects.get(campaign=campaign, kind=Publication.Kind.PROLIFIC)
    assert publication.status == Publication.Status.DRAFT
    study_id = publication.prolific.study_id
    assert study_id in fake.studies and fake.studies[study_id]["status"] == "UNPUBLISHED"
    assert fake.studies[study_id]["total_available_places"] == 6
    assert "The draft study is ready" in text_of(page, "body")
    assert text_of(page, ".study-id") == study_id
    assert text_of(page, ".study-status") == "UNPUBLISHED"
    assert text_of(page, ".study-places") == "0 / 6"
    page.click("button.prolific-publish:has-text('Publish the study')")
    page.wait_for_selector("text=Publishing the study on Prolific.")
    assert text_of(page, ".study-status") == "ACTIVE"
    assert page.locator("button.prolific-publish").count() == 0
    assert fake.studies[study_id]["status"] == "ACTIVE"
    publication.refresh_from_db()
    assert publication.status == Publication.Status.PUBLISHED

    # --- participants: three honest (0, 1, 0, 1) and a spammer (always 1) whom the rule blocks
    pids = ["HONEST1", "HONEST2", "SPAM1", "HONEST3"]
    submissions = {}
    for pid in pids:
        answers = (lambda n: 1) if pid.startswith("SPAM") else (lambda n: n % 2)
        submissions[pid], given = participant(fake, study_id, pid, answers)
        assert given == LPP, (pid, given)
        assert fake.wait_deliveries(timeout=60)
    prolific.prolific_sync(publication_id=publication.pk)  # what beat does; the hooks did the rest already
    spam = ProlificSubmission.objects.get(participant_id="SPAM1")
    assert (spam.status, spam.verdict) == ("AWAITING REVIEW", "held")

    # --- the held submission: evidence, then a rejection with the drafted category and message
    detail_url = f"{live_server.url}/channels/publications/{publication.pk}/"
    shoot(both, detail_url, lambda name: tmp_path / f"publication-held-{name}.png")
    phone_fits_detail = fits_phone(phone)
    row = page.locator(f"tr[data-review='{spam.submission_id}']")  # the review forms, under the submission
    assert text_of(page, f"tr[data-submission='{spam.submission_id}'] .submission-verdict").startswith("Held")
    row.locator("details.evidence summary").click()
    evidence = " ".join(row.locator("details.evidence").inner_text().split())
    assert "Evidence for SPAM1 (blocked)" in evidence and "block by rule “Straight-lining" in evidence
    assert f"{LPP} labels stored" in evidence
    category, message = prolific.prolific_rejection_draft(publication=publication, worker=spam.worker)
    assert row.locator("select[name=category]").input_value() == category
    assert row.locator("textarea[name=message]").input_value() == message
    page.screenshot(path=tmp_path / "publication-evidence-desktop.png", full_page=True)
    row.locator("button:has-text('Reject')").click()
    page.wait_for_selector(f"text=Submission {spam.submission_id}: rejected.")
    assert fake.submissions[spam.submission_id]["status"] == "REJECTED"
    assert fake.submissions[spam.submission_id]["rejection"] == {"message": message, "rejection_category": category}
    spam.refresh_from_db()
    assert (spam.status, spam.verdict, spam.reviewed_by) == ("REJECTED", "rejected", researcher)
    assert text_of(page, f"tr[data-submission='{spam.submission_id}'] .submission-verdict") == "Rejected by researcher"

    # --- a bonus with a double click: recorded once, paid once. A quick double click makes Chromium send one
    # request (the second submission replaces the first before it leaves); the double payment to fear is a
    # second click while the first answer is slow, so the first answer is held back: both requests reach
    # Chorus, with the same form key.
    posts, held = [], []

    def slow_first_answer(route):
        posts.append(route.request.url)
        if len(posts) == 1:
            held.append(route.fetch(max_redirects=0))  # Chorus gets the request; the browser never its answer
        else:
            route.continue_()

    page.route("**/prolific-bonuses/", slow_first_answer)
    form = page.locator("form.bonus-form")
    form.locator("input[name=worker]").fill("prolific:HONEST1")
    form.locator("input[name=amount]").fill("0.50")
    form.locator("input[name=reason]").fill("Careful work")
    pay = form.locator("button:has-text('Pay bonus')")
    pay.scroll_into_view_if_needed()
    box = pay.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)  # the mouse, not the locator: a locator would wait for the first answer
    page.wait_for_timeout(300)
    page.mouse.click(x, y)
    page.wait_for_selector("text=This bonus was already granted; it is paid once.")
    page.unroute("**/prolific-bonuses/")
    assert len(posts) == 2 and held[0].status == 302, posts
    assert wait_for(lambda: ProlificBonus.objects.filter(status=ProlificBonus.Status.PAID).exists())
    bonus = ProlificBonus.objects.get()  # one row for both requests
    assert (bonus.worker.external_id, bonus.amount) == ("HONEST1", Decimal("0.50"))
    assert fake.submissions[submissions["HONEST1"]]["bonus_payments"] == [50]
    page.reload()
    assert page.locator("table.prolific-bonuses tr.bonus").count() == 1
    assert "Paid" in text_of(page, "table.prolific-bonuses tr.bonus")
    assert page.locator(f"tr[data-review='{spam.submission_id}']").count() == 0  # decided: no forms left
    assert problems == [], problems
    assert phone_fits_form and phone_fits_detail


def test_without_a_token_the_channels_page_says_what_to_set(live_server, page, make_campaign, researcher, tmp_path):
    campaign = make_campaign(4)
    problems = page_problems(page, http=True)
    with override_settings(CHORUS_PROLIFIC_TOKEN=""):
        sign_in(page, live_server.url, "researcher")
        page.goto(f"{live_server.url}/channels/campaigns/{campaign.slug}/")
        notice = text_of(page, ".prolific-not-configured")
        assert "Prolific is not configured" in notice and "CHORUS_PROLIFIC_TOKEN" in notice
        assert page.locator("text=Publish on Prolific").count() == 0
        page.screenshot(path=tmp_path / "channels-no-token.png", full_page=True)
        page.goto(f"{live_server.url}/channels/campaigns/{campaign.slug}/prolific/")  # the form sends back
        page.wait_for_url(f"{live_server.url}/channels/campaigns/{campaign.slug}/")
    assert problems == [], problems
