"""A corpus of malformed input: each gets a clear error with the stable error shape, and the
database is left exactly as it was (row counts of every table compared before and after)."""

import csv
import io
import json

import pytest

from annotation import services
from annotation.importing import MAX_ERRORS_SHOWN
from annotation.models import Label
from tests.helpers import BAD_PROMPT_FILES, NESTED, assert_error, label_all, upload_prompts

# Both databases: PostgreSQL refuses some values SQLite stores (NUL characters, out-of-range integers).
pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


@pytest.mark.parametrize("case", list(BAD_PROMPT_FILES))
def test_a_bad_prompt_file_is_refused_naming_each_line_and_imports_nothing(request, case, researcher, api, unchanged):
    bad = BAD_PROMPT_FILES[case]
    campaign = request.getfixturevalue(bad.campaign)
    unchanged()
    error = assert_error(upload_prompts(api(researcher), campaign, bad.data, bad.filename), 400, "bad_prompt_file")
    lines = {}
    for line, message in bad.errors[:MAX_ERRORS_SHOWN]:
        lines.setdefault(str(line), []).append(message)
    assert error["fields"] == {"lines": lines}
    assert len(error["message"]) < 5000


BODIES = {
    # name: (content type, raw body, status, code)
    "nested JSON (a JSON bomb)": ("application/json", NESTED, 400, "parse_error"),
    "a million numbers": ("application/json", json.dumps([1] * 1_000_000).encode(), 400, "invalid"),
    "an object, not a list": ("application/json", b'{"id": "1", "text": "a"}', 400, "invalid"),
    "an empty list": ("application/json", b"[]", 400, "invalid"),
    "a bare string": ("application/json", b'"id,text"', 400, "invalid"),
    "NaN": ("application/json", b'[{"id": "1", "text": "a", "gold": NaN}]', 400, "parse_error"),
    "a number too long to parse": ("application/json", b"[" + b"9" * 5000 + b"]", 400, "parse_error"),
    "invalid UTF-8": ("application/json", b'[{"id": "1", "text": "\xff\xfe"}]', 400, "parse_error"),
    "broken multipart": ("multipart/form-data; boundary=xyz", b"--xyz\r\nnonsense", 400, "invalid"),
    "multipart without a boundary": ("multipart/form-data", b"whatever", 400, "parse_error"),
    "plain text": ("text/plain", b"id,text\n1,a\n", 415, "unsupported_media_type"),
    "an empty file": (
        "multipart/form-data; boundary=b",
        b'--b\r\nContent-Disposition: form-data; name="file"; '
        b'filename="p.csv"\r\nContent-Type: text/csv\r\n\r\n\r\n--b--\r\n',
        400,
        "invalid",
    ),
}


@pytest.mark.parametrize("case", list(BODIES))
def test_a_malformed_import_request_is_refused(case, make_campaign, researcher, api, unchanged):
    content_type, body, status, code = BODIES[case]
    campaign = make_campaign(0, launch=False)
    unchanged()
    response = api(researcher).generic(
        "POST", f"/api/v1/campaigns/{campaign.slug}/prompts/", body, content_type=content_type
    )
    assert_error(response, status, code)


SUBMISSIONS = {
    "nested JSON": (NESTED, 400, "parse_error"),
    "a huge list": (json.dumps({"value": [1] * 100_000, "client_token": "t"}).encode(), 400, "invalid"),
    "a huge string": (json.dumps({"value": "1" * 1_000_000, "client_token": "t"}).encode(), 400, "invalid"),
    "an object as value": (b'{"value": {"a": 1}, "client_token": "t"}', 400, "invalid"),
    "a nested list as value": (b'{"value": [[1]], "client_token": "t"}', 400, "invalid"),
    "null value": (b'{"value": null, "client_token": "t"}', 400, "invalid"),
    "a word as value": (b'{"value": "yes", "client_token": "t"}', 409, "bad_value"),
    "out of range": (b'{"value": 1e400, "client_token": "t"}', 400, "invalid"),
    "a list for a binary schema": (b'{"value": [1], "client_token": "t"}', 409, "bad_value"),
    "token of the wrong type": (b'{"value": 1, "client_token": {"a": 1}}', 400, "invalid"),
    "empty token": (b'{"value": 1, "client_token": ""}', 400, "invalid"),
    "not an object": (b"[1, 2]", 400, "invalid"),
    "truncated JSON": (b'{"value": 1, "client_', 400, "parse_error"),
}


@pytest.mark.parametrize("case", list(SUBMISSIONS))
def test_a_malformed_label_is_refused_and_stores_nothing(case, make_campaign, make_user, api, unchanged):
    body, status, code = SUBMISSIONS[case]
    campaign, client = make_campaign(2), api(make_user())
    lease_id = client.post(f"/api/v1/campaigns/{campaign.slug}/next-task/").json()["lease"]["id"]
    unchanged()
    response = client.generic("POST", f"/api/v1/leases/{lease_id}/submit/", body, content_type="application/json")
    error = assert_error(response, status, code)
    assert len(json.dumps(error)) < 5000


CAMPAIGNS = {
    "nested JSON": (NESTED, "parse_error"),
    "k as a word": (b'{"title": "x", "k": "five"}', "invalid"),
    "k as a list": (b'{"title": "x", "k": [5]}', "invalid"),
    "title as an object": (b'{"title": {"a": 1}}', "invalid"),
    "a huge title": (json.dumps({"title": "x" * 100_000}).encode(), "invalid"),
    "binarization as a string": (b'{"title": "x", "schema": "rating", "binarization": "1=0"}', "invalid"),
    "scale bounds of the wrong type": (b'{"title": "x", "schema": "rating", "scale_min": "low"}', "invalid"),
    "a number overflowing the column": (b'{"title": "x", "max_labels_per_worker": 99999999999999999999}', "invalid"),
}


@pytest.mark.parametrize("case", list(CAMPAIGNS))
def test_a_malformed_campaign_is_refused(case, researcher, api, unchanged):
    body, code = CAMPAIGNS[case]
    unchanged()
    response = api(researcher).generic("POST", "/api/v1/campaigns/", body, content_type="application/json")
    assert_error(response, 400, code)


def test_a_username_with_a_nul_character_is_refused(make_campaign, researcher, api, unchanged):
    campaign = make_campaign(1)
    unchanged()
    client = api(researcher)
    assert_error(client.delete(f"/api/v1/campaigns/{campaign.slug}/collaborators/a%00b/"), 400, "invalid")
    assert_error(
        client.post(f"/api/v1/campaigns/{campaign.slug}/collaborators/", {"username": "a\x00b"}, format="json"),
        400,
        "invalid",
    )


FORMULAS = ["=cmd|' /C calc'!A0", "+SUM(1,2)", "-2+3", "@IMPORTXML(x)", "\t=1+1", '=HYPERLINK("http://x")']


def test_formula_cells_are_defused_in_the_csv_export(make_campaign, make_worker, researcher, api):
    campaign = make_campaign(0, launch=False, k=1)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "text", "group"])
    for n, formula in enumerate(FORMULAS):
        writer.writerow([f"f{n}", f"{formula} statement", formula])
    writer.writerow(["plain", "-1", "-1"])  # a plain negative number is data, not a formula
    assert upload_prompts(api(researcher), campaign, out.getvalue().encode(), "evil.csv").status_code == 201
    services.campaign_transition(campaign=campaign, action="launch")
    label_all(campaign, make_worker())
    assert Label.objects.count() == len(FORMULAS) + 1

    response = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/labels.csv")
    rows = {row["prompt"]: row for row in csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))}
    for n, formula in enumerate(FORMULAS):
        # The importer strips surrounding whitespace, so "\t=1+1" arrives as "=1+1".
        stored = formula.strip()
        assert rows[f"f{n}"]["group"] == "'" + stored
        assert rows[f"f{n}"]["prompt_text"] == "'" + stored + " statement"
    assert rows["plain"]["group"] == "-1" and rows["plain"]["prompt_text"] == "-1"
