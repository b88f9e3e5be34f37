"""Issue 10: bad input a newcomer meets is refused with a clear message, and nothing is written.

Each refusal is checked at the service, then through the web pages (upload form, campaign form, task
page) and the ``import_prompts`` command; tests/api/test_bad_input.py checks the REST API. Bad prompt
files are one table, tests/helpers.py's ``BAD_PROMPT_FILES``: every case at the service (test_import.py)
and through the API (tests/api/test_malformed_inputs.py), ``THROUGH_EVERY_ENTRY_POINT`` also here.
"""

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation import services
from annotation.models import Campaign, Label, Lease, Prompt, Slot
from tests.helpers import (
    BAD_PROMPT_FILES,
    BINARIZATION,
    THROUGH_EVERY_ENTRY_POINT,
    campaign_fields,
    import_counts,
    jsonl,
)

pytestmark = pytest.mark.django_db

# The brief's map: "1" and "01" are one value, and a dict silently kept the later.
TWO_SPELLINGS = {"1": 1, "01": 0, "4": 1}
TWO_SPELLINGS_MESSAGE = "'1' and '01' are both 1: give each value once."


def assert_lease_untouched(lease):
    """A refused label leaves the lease, its slot and the counters as they were."""
    lease.refresh_from_db()
    assert lease.status == Lease.Status.ACTIVE
    assert not Slot.objects.filter(pk=lease.slot_id, filled=True).exists()
    assert not Label.objects.exists() and not Prompt.objects.filter(n_labels__gt=0).exists()


# --- 1. true and false are yes/no answers, not ratings ------------------------------------------------


@pytest.mark.parametrize("value", [True, False])
def test_a_rating_refuses_true_and_false(rating, make_worker, value):
    worker = make_worker()
    lease = services.lease_acquire(campaign=rating, worker=worker)
    with pytest.raises(services.LabelRefused) as refused:
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token="t1")
    assert refused.value.code == "bad_value"
    assert refused.value.message == (
        f"The label must be one of 1, 2, 3, 4; got {json.dumps(value)}, which is not a rating."
    )
    assert_lease_untouched(lease)


def test_a_per_option_rating_refuses_true_as_one_rating(per_option, make_worker):
    worker = make_worker()
    lease = services.lease_acquire(campaign=per_option, worker=worker)
    with pytest.raises(
        services.LabelRefused, match="The rating of option 1 must be one of 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10; got true"
    ):
        services.label_submit(lease_id=lease.pk, worker=worker, value=[True, 3], client_token="t1")
    assert_lease_untouched(lease)


def test_a_binary_schema_takes_true_and_false_as_1_and_0(make_campaign, make_worker):
    campaign = make_campaign(2, k=1)
    worker = make_worker()
    for value in (True, False):
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{value}")
    assert sorted(Label.objects.values_list("value", flat=True)) == [0, 1]


@pytest.mark.parametrize("value", ["²", "--1", "1" * 5000])
def test_the_task_page_refuses_digits_int_cannot_read(client, make_user, make_campaign, value):
    """str.isdigit() takes "²" and lstrip("-") takes "--1", then int() raised: a 500 instead of the message."""
    campaign = make_campaign(1, k=1)
    client.force_login(make_user())
    task_url = client.get(reverse("worker_next", args=[campaign.slug])).url
    response = client.post(task_url, {"value": value, "client_token": "tok-1"})
    assert response.status_code == 400
    assert response.context["error"].startswith("The label must be one of 0, 1; got ")
    assert len(response.context["error"]) < 100
    assert_lease_untouched(Lease.objects.get())


# --- 2., 3., 5. prompt files: through the upload form and the command ---------------------------------


@pytest.mark.parametrize("case", THROUGH_EVERY_ENTRY_POINT)
def test_the_upload_form_refuses_a_bad_file_naming_each_line(request, researcher_client, case):
    bad = BAD_PROMPT_FILES[case]
    campaign = request.getfixturevalue(bad.campaign)
    before = import_counts()
    response = researcher_client.post(
        reverse("campaign_import", args=[campaign.slug]), {"file": SimpleUploadedFile(bad.filename, bad.data)}
    )
    assert response.status_code == 400
    assert response.context["import_errors"] == bad.errors
    for line, message in bad.errors:
        assert f"Line {line}: {message}".encode() in response.content.replace(b"&#x27;", b"'")
    assert import_counts() == before


@pytest.mark.parametrize("case", THROUGH_EVERY_ENTRY_POINT)
def test_import_prompts_refuses_a_bad_file_naming_each_line(request, tmp_path, case):
    bad = BAD_PROMPT_FILES[case]
    campaign = request.getfixturevalue(bad.campaign)
    path = tmp_path / bad.filename
    path.write_bytes(bad.data)
    before = import_counts()
    with pytest.raises(CommandError) as refused:
        call_command("import_prompts", campaign.slug, str(path))
    for line, message in bad.errors:
        assert f"  line {line}: {message}" in str(refused.value).splitlines()
    assert import_counts() == before


TEXT_WITH_SEPARATORS = "first\u2028second\u2029third\u0085fourth"


@pytest.mark.parametrize(
    "filename, data",
    [
        ("p.jsonl", jsonl({"id": "u1", "text": TEXT_WITH_SEPARATORS}, {"id": 2, "text": "two"})),
        ("p.csv", f"id,text\nu1,{TEXT_WITH_SEPARATORS}\n2,two\n".encode()),
    ],
    ids=["jsonl", "csv"],
)
def test_text_with_unicode_line_separators_imports_intact(researcher_client, make_campaign, tmp_path, filename, data):
    """Through both entry points: the upload form into one campaign, the command into another."""
    by_form, by_command = make_campaign(0, launch=False), make_campaign(0, launch=False)
    response = researcher_client.post(
        reverse("campaign_import", args=[by_form.slug]),
        {"file": SimpleUploadedFile(filename, data), "confirm": "import"},  # as the preview page posts a large file
    )
    assert response.status_code == 302
    path = tmp_path / filename
    path.write_bytes(data)
    call_command("import_prompts", by_command.slug, str(path))
    for campaign in (by_form, by_command):
        assert dict(campaign.prompts.values_list("external_id", "text")) == {"u1": TEXT_WITH_SEPARATORS, "2": "two"}


# --- 4. a binarization map gives each value once ------------------------------------------------------


def test_campaign_create_refuses_two_spellings_of_one_value(researcher):
    with pytest.raises(ValidationError) as refused:
        services.campaign_create(owner=researcher, title="x", schema="rating", binarization=TWO_SPELLINGS)
    assert refused.value.message_dict == {"binarization": [TWO_SPELLINGS_MESSAGE]}
    assert not Campaign.objects.exists()


def test_campaign_update_refuses_two_spellings_of_one_value(rating):
    with pytest.raises(ValidationError, match="'1' and '01' are both 1"):
        services.campaign_update(campaign=rating, binarization=TWO_SPELLINGS)
    rating.refresh_from_db()
    assert rating.binarization == BINARIZATION


@pytest.mark.parametrize(
    "typed, message",
    [
        ("1=1, 01=0, 4=1", TWO_SPELLINGS_MESSAGE),
        ("1=0, 2=0, 1=1", "'1' is given twice: give each value once."),
        ("-3=0, -03=1", "'-3' and '-03' are both -3: give each value once."),
        ("²=1", "'²=1' is not of the form value=0 or value=1."),  # int("²") raised: a 500
        ("--1=1", "'--1=1' is not of the form value=0 or value=1."),
    ],
)
def test_the_campaign_form_refuses_a_value_given_twice(researcher_client, typed, message):
    fields = campaign_fields(
        title="Rated",
        instructions="",
        schema="rating",
        positive_text="True",
        negative_text="False",
        scale_min=-4,
        scale_max=4,
        binarization=typed,
    )
    response = researcher_client.post(reverse("campaign_create"), fields)
    assert response.status_code == 200
    # First: Campaign.clean(), which never saw a parsed map, adds "Rating scales need a binarization" after it.
    assert response.context["form"].errors["binarization"][0] == message
    assert not Campaign.objects.exists()


def test_the_campaign_form_stores_a_map_typed_with_leading_zeros_canonically(researcher_client):
    fields = campaign_fields(
        title="Rated",
        instructions="",
        schema="rating",
        positive_text="True",
        negative_text="False",
        binarization="01=0, 2=0, 03=1, 4=1",
    )
    assert researcher_client.post(reverse("campaign_create"), fields).status_code == 302
    assert Campaign.objects.get().binarization == BINARIZATION
