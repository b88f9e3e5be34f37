"""A new researcher's two dead ends, in headless Chromium on a desktop and a phone: a prompt file is
previewed before it is imported, and a wrong one is taken back whole before launch (then imported
again); a campaign is started from another, as a new draft with its prompts."""

import pytest

from annotation import services
from annotation.models import Campaign
from tests.helpers import PHONE, jsonl, no_horizontal_scroll, page_problems, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"viewport": {"width": 1280, "height": 800}}
FILE = {
    "name": "prompts.jsonl",
    "mimeType": "application/json",
    "buffer": jsonl(
        {"id": "a", "text": "Water is wet.", "gold": 1, "group": "nature"},
        {"id": "b", "text": "Stones float.", "gold": 0, "control": True},
        {"id": "c", "text": "Birds fly.", "group": "nature"},
    ),
}


def _upload_and_import(page):
    page.set_input_files("input[name=file]", FILE)
    page.click("button:has-text('Upload')")
    preview = " ".join(page.inner_text(".import-preview").split())
    assert "Prompts 3 With a gold label 2 Controls 1 Groups 1" in preview
    assert "Water is wet." in preview and "Birds fly." in preview
    assert no_horizontal_scroll(page)
    page.click("button:has-text('Import these 3 prompts')")
    assert page.inner_text(".message-success") == "Imported 3 prompts from prompts.jsonl."


@pytest.mark.parametrize("device", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_preview_import_remove_import_again_then_copy(live_server, new_page, researcher, device):
    campaign = services.campaign_create(owner=researcher, title="First try", k=2)
    page = new_page(**device)
    problems = page_problems(page, http=True)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/")

    _upload_and_import(page)
    assert campaign.prompts.count() == 3
    page.click("a:has-text('Remove this import')")
    assert "Remove the import of “prompts.jsonl”?" in page.inner_text("h1")
    page.click("button:has-text('Remove these 3 prompts')")
    assert page.inner_text(".message-success") == "Removed the import of prompts.jsonl (3 prompts)."
    assert not campaign.prompts.exists() and page.locator("a:has-text('Remove this import')").count() == 0
    _upload_and_import(page)  # the same file, once more
    assert campaign.prompts.count() == 3
    assert no_horizontal_scroll(page)

    page.click("summary:has-text('New campaign from this one')")
    page.fill(".copy-campaign input[name=title]", "Second try")
    page.click("button:has-text('Create the copy')")
    assert page.inner_text(".message-success") == "A new draft, copied from “First try” with its 3 prompts."
    copy = Campaign.objects.get(title="Second try")
    assert page.url.endswith(f"/campaigns/{copy.slug}/")
    assert "Second try" in page.inner_text("h1") and "Draft" in page.inner_text("h1")
    assert "0 of 2 prompts complete" in " ".join(page.inner_text(".progress-text").split())
    assert "Copied from first-try" in page.inner_text("#activity")  # the control counts in no progress
    assert sorted(copy.prompts.values_list("external_id", flat=True)) == ["a", "b", "c"]
    assert no_horizontal_scroll(page)
    assert problems == []
