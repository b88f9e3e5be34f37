"""Helpers shared by the test modules: prompt files, labeling through the services or the pages, signing
in with a test client or a browser, a page's messages, the API's error shape, and the table of bad prompt
files. Fixtures are in tests/conftest.py."""

import io
import itertools
import json
import threading
from dataclasses import dataclass

import pandas as pd
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation import services
from annotation.models import ImportBatch, Label, Lease, Participation, Prompt, Slot
from annotation.models.prompts import MAX_OPTIONS

# tests/conftest.py's make_user password.
PASSWORD = "pw-for-tests-123"
# A phone-sized browser context for Playwright's new_page().
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 3}
BINARIZATION = {"1": 0, "2": 0, "3": 1, "4": 1}
_sim_seq = itertools.count(1)
# label_all's value for "each prompt's gold": a careful worker.
GOLD = object()


def signed_in(user=None) -> Client:
    """A fresh test client (own cookies), signed in as ``user`` if given."""
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def share_session(context, client: Client, base_url: str) -> None:
    """Give a Playwright browser ``context`` (or a page's) the session of the signed-in test ``client``."""
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base_url}])


def page_problems(page, *, http: bool = False) -> list[str]:
    """A list that fills with ``page``'s console errors and uncaught exceptions (and, with ``http``, its
    4xx/5xx responses other than the favicon) as they happen: a page that works leaves it empty."""
    problems: list[str] = []
    page.on(
        "console", lambda m: m.type == "error" and "Failed to load resource" not in m.text and problems.append(m.text)
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    if http:
        page.on(
            "response",
            lambda r: r.status >= 400 and not r.url.endswith("/favicon.ico") and problems.append(f"{r.status} {r.url}"),
        )
    return problems


def prompts_jsonl(n: int, *, prefix: str = "p", gold: bool = True) -> bytes:
    """A JSONL file of ``n`` binary prompts, ids ``p0``, ``p1``, … (gold alternating 0, 1)."""
    lines = []
    for i in range(n):
        row = {"id": f"{prefix}{i}", "text": f"Statement number {i} about everyday life."}
        if gold:
            row["gold"] = i % 2
        lines.append(json.dumps(row))
    return ("\n".join(lines) + "\n").encode()


def import_counts() -> tuple[int, int, int, int]:
    """How many prompts, slots, import batches and labels are stored: a refused import changes none."""
    return Prompt.objects.count(), Slot.objects.count(), ImportBatch.objects.count(), Label.objects.count()


def jsonl(*rows) -> bytes:
    """A JSONL file of ``rows``: objects are dumped (keeping non-ASCII as is), strings written as they are."""
    return "".join(
        (row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n" for row in rows
    ).encode()


# --- labeling -----------------------------------------------------------------------------------------


def db_thread(target, errors: list) -> threading.Thread:
    """``target`` started in a thread of its own, on a database connection of its own (closed when it
    ends). What it raises goes into ``errors``, which the test asserts empty: an exception in a thread
    fails no test by itself."""

    def run():
        try:
            target()
        except Exception as exc:  # reported through errors
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def sim_worker(prefix: str = "s"):
    """A new simulated crowd worker (channel ``sim``, no Django user: hashing a password per worker would
    dominate tests that need hundreds)."""
    return services.worker_get_or_create(channel="sim", external_id=f"{prefix}{next(_sim_seq)}")


def label_one(campaign, worker, value=1) -> Label:
    """The worker labels the prompt lease_acquire gives them (through the services)."""
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    assert isinstance(lease, Lease), lease
    ack = services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")
    return Label.objects.get(pk=ack.label_id)


def label_all(campaign, worker, value=1, *, clock=None) -> int:
    """The worker labels everything the campaign has for them (through the services); returns how many.

    ``value``: every label's, or ``GOLD`` for each prompt's gold. With a ``clock`` (``tests.clock.paced``), each
    label comes ``clock.pace`` seconds after its lease."""
    n = 0
    while not isinstance(lease := services.lease_acquire(campaign=campaign, worker=worker), services.NothingLeft):
        if clock is not None:
            clock.advance(clock.pace)
        answer = lease.prompt.gold if value is GOLD else value
        services.label_submit(lease_id=lease.pk, worker=worker, value=answer, client_token=f"t{lease.pk}")
        n += 1
    return n


# The campaigns the worker loop's query-count tests run on (worker_loop_campaign).
WORKER_LOOP_KINDS = ("plain", "controls", "adaptive")


def on_this_database(counts: list[int], *, labels: tuple[int, ...]) -> list[int]:
    """Query counts per request, pinned as SQLite makes them, as this test's database makes them. A
    submit's last writes (the label, its lease's status, the label's mark for the live audit) are three
    statements on SQLite and one on PostgreSQL (``annotation.services.assignment._label_insert``): the
    requests at the indices ``labels``, each of which stores a label, make two fewer there."""
    if connection.vendor != "postgresql":
        return counts
    return [n - 2 if i in labels else n for i, n in enumerate(counts)]


def worker_loop_campaign(make_campaign, kind: str, worker):
    """A launched binary campaign of three prompts (k = 3) that ``worker`` already joined (its Participation
    exists, as for every request but a worker's first), for counting the queries of the worker loop:

    * ``plain``;
    * ``controls``: two control prompts more, and each worker's first label is on one (control_first = 1);
    * ``adaptive``: k = 3 to k_max = 5, each prompt already labeled by two other workers, so that the next
      label on a prompt fills its last open slot and the stop rule decides whether it gets one more.
    """
    if kind == "adaptive":
        campaign = make_campaign(3, k=3, k_max=5, stop_confidence=0.95)
        for _ in range(2):
            label_all(campaign, sim_worker())
    else:
        campaign = make_campaign(3, k=3)
    if kind == "controls":
        rows = [{"id": f"c{i}", "text": f"Control {i}.", "gold": 1, "control": True} for i in range(2)]
        services.prompts_import(campaign=campaign, data=jsonl(*rows), filename="controls.jsonl")
        campaign = services.campaign_update(campaign=campaign, control_first=1)
    Participation.objects.create(campaign=campaign, worker=worker)
    return campaign


class CountedRequests:
    """Requests of a query-count test, each one's queries appended to ``counts``, which the test compares
    whole at the end (so that a failure shows every request that changed): on ``client``, or on a new
    client per request from ``new_client`` (MTurk's frame sends no cookie). ``options`` go with each
    request (the API's ``format="json"``)."""

    def __init__(self, client=None, *, new_client=None, **options):
        self.client, self.new_client, self.options, self.counts = client, new_client, options, []

    def __call__(self, method: str, path: str, body=None, status: int = 200):
        client = self.new_client() if self.new_client else self.client
        with CaptureQueriesContext(connection) as queries:
            response = getattr(client, method)(path, body, **self.options)
        self.counts.append(len(queries))
        assert response.status_code == status, response.content[:300]
        return response


def label_on_page(client, campaign, value="1"):
    """The signed-in ``client`` asks for a prompt and labels it on its task page; the POST's response."""
    task_url = client.get(reverse("worker_next", args=[campaign.slug])).url
    token = client.get(task_url).context["client_token"]
    return client.post(task_url, {"value": value, "client_token": token})


# --- in a browser (Playwright pages) -----------------------------------------------------------------


def fill_sign_in(page, username: str) -> None:
    """On a sign-in page: the account's name, the tests' password, "Sign in"."""
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("main >> button:has-text('Sign in')")


def sign_in(page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    fill_sign_in(page, username)
    page.wait_for_url(f"{base_url}/")


def fill_sign_up(page, username: str) -> None:
    """On the sign-up page: a new account's name, a password twice, "Create account"."""
    page.fill("input[name=username]", username)
    page.fill("input[name=password1]", "browser-pass-phrase")
    page.fill("input[name=password2]", "browser-pass-phrase")
    page.click("button:has-text('Create account')")


def no_horizontal_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


# --- answers ------------------------------------------------------------------------------------------


def messages_of(response) -> list[str]:
    """The Django messages a rendered page carried."""
    return [str(m) for m in response.context["messages"]] if response.context else []


def assert_error(response, status, code):
    """The API's error shape, ``{"error": {"code", "message", "fields"?}}``, with this status and code."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def campaign_fields(**overrides):
    """The campaign form's fields, binary by default."""
    fields = {
        "title": "Plausible or not",
        "instructions": "Is it **plausible**?",
        "schema": "binary",
        "positive_text": "Plausible",
        "negative_text": "Implausible",
        "scale_min": 1,
        "scale_max": 4,
        "binarization": "",
        "k": 3,
        "lease_seconds": 300,
        "max_labels_per_worker": "",
        "policy": "random",
    }
    fields.update(overrides)
    return fields


# --- bad prompt files ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BadFile:
    """A prompt file that must be refused whole, and the (line, message) errors naming why."""

    campaign: str  # the fixture (tests/conftest.py) of the campaign it is imported into
    filename: str
    data: bytes
    errors: list[tuple[int, str]]


NESTED = ("[" * 100_000 + "]" * 100_000).encode()

# Every refusal of a whole file, named. The service, the API and (for THROUGH_EVERY_ENTRY_POINT) the
# upload form and the import_prompts command are each checked on them.
BAD_PROMPT_FILES = {
    "missing column": BadFile(
        "binary_draft", "p.csv", b"id,body\n1,hello\n", [(1, "missing column 'text' in the header")]
    ),
    "missing id field": BadFile("binary_draft", "p.jsonl", b'{"text": "hello"}\n', [(1, "missing field 'id'")]),
    "empty text": BadFile(
        "binary_draft",
        "p.csv",
        b"id,text,gold\nx1,fine,1\nx2,,0\nx3,  ,1\n",
        [(3, "empty text for id 'x2'"), (4, "empty text for id 'x3'")],
    ),
    "text is a number": BadFile("binary_draft", "p.jsonl", b'{"id": "1", "text": 5}\n', [(1, "empty text for id '1'")]),
    "duplicate id in the file": BadFile(
        "binary_draft",
        "p.jsonl",
        jsonl({"id": "a", "text": "one"}, {"id": "b", "text": "two"}, {"id": "a", "text": "three"}),
        [(3, "duplicate id 'a' (first on line 1)")],
    ),
    "id already in the campaign": BadFile(
        "binary_draft", "p.csv", b"id,text\nnew,fresh\np1,again\n", [(3, "id 'p1' is already in this campaign")]
    ),
    "a huge id": BadFile(
        "binary_draft",
        "p.jsonl",
        json.dumps({"id": "i" * 1000, "text": "t"}).encode(),
        [(1, "id longer than 200 characters")],
    ),
    "binary gold out of the schema": BadFile(
        "binary_draft",
        "p.csv",
        b"id,text,gold\nx1,fine,1\nx2,odd,2\n",
        [(3, "bad gold value: The label must be one of 0, 1; got 2.")],
    ),
    "binary gold not a number": BadFile(
        "binary_draft",
        "p.jsonl",
        jsonl({"id": "x1", "text": "t", "gold": "yes"}),
        [(1, "bad gold value: The label must be one of 0, 1; got 'yes'.")],
    ),
    "binary gold a word in CSV": BadFile(
        "binary_draft",
        "p.csv",
        b"id,text,gold\n1,hello,yes\n",
        [(2, "bad gold value: The label must be one of 0, 1; got 'yes'.")],
    ),
    "one good row, one bad": BadFile(
        "binary_draft",
        "p.csv",
        b"id,text,gold\n1,fine,1\n2,bad,7\n",
        [(3, "bad gold value: The label must be one of 0, 1; got 7.")],
    ),
    "rating gold out of the scale": BadFile(
        "rating",
        "p.csv",
        b"id,text,gold\nx1,fine,4\nx2,too high,7\n",
        [(3, "bad gold value: The label must be one of 1, 2, 3, 4; got 7.")],
    ),
    "per-option gold of the wrong length": BadFile(
        "per_option",
        "p.jsonl",
        jsonl({"id": "x1", "text": "t", "options": ["a", "b", "c"], "gold": [1, 2]}),
        [(1, "bad gold value: Rate each of the 3 options: expected a list of 3 ratings.")],
    ),
    "per-option prompt without options": BadFile(
        "per_option",
        "p.jsonl",
        jsonl({"id": "x1", "text": "t"}),
        [(1, "a per-option schema needs an 'options' column with the answer options")],
    ),
    "options of the wrong type": BadFile(
        "binary_draft",
        "p.jsonl",
        b'{"id": "1", "text": "a", "options": {"x": 1}}\n',
        [(1, "bad options: options must be a list or a |-separated string")],
    ),
    "nested JSON in a CSV cell": BadFile(
        "binary_draft",
        "p.csv",
        b'id,text,options\n1,a,"' + b"[" * 100_000 + b'"\n',
        [(2, "bad options: nested too deeply: line 1 column 1 (char 0)")],
    ),
    "bad encoding": BadFile(
        "binary_draft",
        "p.csv",
        "id,text\nx1,fine\nx2,café\n".encode("latin-1"),
        [(3, "the file is not UTF-8 (byte 0xe9); save it as UTF-8")],
    ),
    "latin-1": BadFile(
        "binary_draft",
        "p.csv",
        "id,text\n1,café crème\n".encode("latin-1"),
        [(2, "the file is not UTF-8 (byte 0xe9); save it as UTF-8")],
    ),
    "UTF-16": BadFile(
        "binary_draft",
        "p.csv",
        "id,text\n1,hello\n".encode("utf-16"),
        [(1, "the file is not UTF-8 (byte 0xff); save it as UTF-8")],
    ),
    "UTF-16 JSONL": BadFile(
        "binary_draft",
        "p.jsonl",
        '{"id": "1", "text": "hello"}\n'.encode("utf-16"),
        [(1, "the file is not UTF-8 (byte 0xff); save it as UTF-8")],
    ),
    "NUL bytes": BadFile("binary_draft", "p.csv", b"id,text\n1,a\x00b\n", [(2, "the file contains NUL bytes")]),
    "an escaped NUL in JSONL": BadFile(
        "binary_draft",
        "p.jsonl",
        b'{"id": "1", "text": "a\\u0000b"}\n',
        [(1, "the line contains a NUL character (\\u0000)")],
    ),
    "JSONL bad line": BadFile(
        "binary_draft",
        "p.jsonl",
        jsonl({"id": "x1", "text": "ok"}, '{"id": "x2", "text": "no end"', "[1, 2]", {"id": "x4"}),
        [
            (2, "not valid JSON (Expecting ',' delimiter at column 30)"),
            (3, "each line must be a JSON object"),
            (4, "missing field 'text'"),
        ],
    ),
    "not JSON": BadFile(
        "binary_draft",
        "p.jsonl",
        b'{"id": 1, "text": "a"\n',
        [(1, "not valid JSON (Expecting ',' delimiter at column 22)")],
    ),
    "a JSON list per line": BadFile(
        "binary_draft", "p.jsonl", b'["1", "a"]\n', [(1, "each line must be a JSON object")]
    ),
    "deeply nested line": BadFile(
        "binary_draft",
        "p.jsonl",
        b'{"id": "1", "text": ' + NESTED + b"}\n",
        [(1, "not valid JSON (nested too deeply at column 1)")],
    ),
    "more cells than columns": BadFile(
        "binary_draft", "p.csv", b"id,text\nx1,one,two\n", [(2, "more cells than header columns")]
    ),
    "empty file": BadFile("binary_draft", "p.jsonl", b"\n\n", [(0, "the file holds no prompts")]),
    "header only": BadFile("binary_draft", "p.csv", b"id,text\n", [(0, "the file holds no prompts")]),
    "broken CSV quoting": BadFile(
        "binary_draft", "p.csv", b'id,text\n1,"never closed\n2,fine\n', [(2, "broken CSV: unexpected end of data")]
    ),
    "text after a closing quote": BadFile(
        "binary_draft", "p.csv", b'id,text\n1,"abc"d\n', [(2, "broken CSV: ',' expected after '\"'")]
    ),
    # DictReader.line_num lags behind on csv.Error: the bad record's line, not the one before.
    "a stray quote": BadFile(
        "binary_draft",
        "p.csv",
        b'id,text\nx1,fine\nx2,"bad"quote\nx3,fine\n',
        [(3, "broken CSV: ',' expected after '\"'")],
    ),
    "an unterminated quote": BadFile(
        "binary_draft", "p.csv", b'id,text\nx1,fine\nx2,"never closed\n', [(3, "broken CSV: unexpected end of data")]
    ),
    # The csv module finds an unclosed quote only at the end of the file; the line to fix is where it opens.
    "an unclosed quote before more lines": BadFile(
        "binary_draft",
        "p.csv",
        b'id,text\nx1,fine\nx2,"never closed\nx3,fine\nx4,fine\n',
        [(3, "broken CSV: unexpected end of data")],
    ),
    "a huge CSV cell": BadFile(
        "binary_draft",
        "p.csv",
        b"id,text\n1," + b"x" * 200_000 + b"\n",
        [(2, "broken CSV: field larger than field limit (131072)")],
    ),
    # Issue 10: ids, groups and options are text; anything but a string or a whole number was stored as
    # its Python spelling ("{'a': 1}", "True", "1.5").
    "ids that are not text": BadFile(
        "binary_draft",
        "p.jsonl",
        jsonl(
            {"id": {"a": 1}, "text": "t"},
            {"id": [1], "text": "t"},
            {"id": True, "text": "t"},
            {"id": 1.5, "text": "t"},
            {"id": None, "text": "t"},
            {"id": 7, "text": "fine"},
        ),
        [
            (1, "the id must be a string or a whole number, not an object"),
            (2, "the id must be a string or a whole number, not a list"),
            (3, "the id must be a string or a whole number, not true or false"),
            (4, "the id must be a string or a whole number, not a decimal number"),
            (5, "empty id"),
        ],
    ),
    "a group that is not text": BadFile(
        "binary_draft",
        "p.jsonl",
        jsonl({"id": "x1", "text": "t", "group": {"theme": "x"}}),
        [(1, "the group must be a string or a whole number, not an object")],
    ),
    "options that are not text": BadFile(
        "per_option",
        "p.jsonl",
        jsonl({"id": "x1", "text": "t", "options": ["a", {"b": 1}]}, {"id": "x2", "text": "t", "options": ["a", None]}),
        [
            (1, "bad options: option 2 must be a string or a whole number, not an object"),
            (2, "an answer option is empty"),
        ],
    ),
    # The live audit codes option n of a prompt as one integer below the next prompt's (OPTION_BASE).
    "more options than a prompt may have": BadFile(
        "per_option",
        "p.jsonl",
        jsonl(
            {"id": "x1", "text": "t", "options": [f"o{n}" for n in range(MAX_OPTIONS)]},
            {"id": "x2", "text": "t", "options": [f"o{n}" for n in range(MAX_OPTIONS + 1)]},
        ),
        [(2, f"id 'x2' has {MAX_OPTIONS + 1:,} answer options; a prompt has at most {MAX_OPTIONS:,}")],
    ),
    "a repeated column": BadFile(
        "binary_draft",
        "p.csv",
        b"id,text,text\nx1,one,two\n",
        [(1, "column 'text' appears more than once in the header")],
    ),
    "a repeated gold column": BadFile(
        "binary_draft",
        "p.csv",
        b"id,text,gold,gold\nx1,t,1,2\n",
        [(1, "column 'gold' appears more than once in the header")],
    ),
    "repeated columns, named in order": BadFile(
        "binary_draft",
        "p.csv",
        b"text,id,gold,id,text\n",
        [(1, "column 'id', 'text' appears more than once in the header")],
    ),
    "rating gold true": BadFile(
        "rating",
        "p.jsonl",
        jsonl({"id": "x1", "text": "t", "gold": True}),
        [(1, "bad gold value: The label must be one of 1, 2, 3, 4; got true, which is not a rating.")],
    ),
    "per-option gold false": BadFile(
        "per_option",
        "p.jsonl",
        jsonl({"id": "x1", "text": "t", "options": ["a", "b"], "gold": [0, False]}),
        [
            (
                1,
                "bad gold value: The rating of option 2 must be one of 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10; got false, "
                "which is not a rating.",
            )
        ],
    ),
    "gold digits int() refuses": BadFile(
        "binary_draft",
        "p.csv",
        "id,text,gold\nx1,t,\u00b9\n".encode(),
        [(2, "bad gold value: The label must be one of 0, 1; got '\u00b9'.")],
    ),
    "an integer too long to read": BadFile(
        "binary_draft",
        "p.jsonl",
        b'{"id": ' + b"9" * 5000 + b', "text": "t"}\n',
        [
            (
                1,
                "not valid JSON (Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits; "
                "use sys.set_int_max_str_digits() to increase the limit)",
            )
        ],
    ),
    # str.splitlines() broke lines at U+2028, U+0085, form feeds ...: numbers after them were wrong.
    "line numbers after U+2028, U+2029, U+0085 and a form feed": BadFile(
        "binary_draft",
        "p.jsonl",
        jsonl({"id": "x1", "text": "a\u2028b\u2029c\u0085d"}, '{"id": "x2", "text": "no end"\f', {"id": "x3"}),
        [(2, "not valid JSON (Expecting ',' delimiter at column 30)"), (3, "missing field 'text'")],
    ),
    "CRLF line numbers": BadFile(
        "binary_draft", "p.jsonl", b'{"id": "x1", "text": "t"}\r\n\r\n{"id": "x2"}\r\n', [(3, "missing field 'text'")]
    ),
    "a multi-line CSV record is named by its first line": BadFile(
        "binary_draft",
        "p.csv",
        b'id,text,gold\nx1,"two\nlines",1\n\nx2,"three\nlines\nhere",7\nx3,fine,9\n',
        [
            (5, "bad gold value: The label must be one of 0, 1; got 7."),
            (8, "bad gold value: The label must be one of 0, 1; got 9."),
        ],
    ),
}

# The cases the upload form and the import_prompts command are checked on: each entry point shows every
# error with its line, whatever the rule.
THROUGH_EVERY_ENTRY_POINT = (
    "ids that are not text",
    "a repeated column",
    "rating gold true",
    "line numbers after U+2028, U+2029, U+0085 and a form feed",
    "more options than a prompt may have",
)


def upload_prompts(client, campaign, data: bytes, filename: str):
    """Import a prompt file through the API's multipart upload."""
    file = io.BytesIO(data)
    file.name = filename
    return client.post(f"/api/v1/campaigns/{campaign.slug}/prompts/", {"file": file}, format="multipart")


def csv_export_typed(text: str) -> pd.DataFrame:
    """A CSV labels export read by pandas and typed as the Parquet export's columns are (empty cells:
    missing), with the CSV's formula defusing undone: the Parquet export is compared with it."""
    frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    # CSV defuses a formula-like cell for spreadsheets (a leading '); Parquet, data for programs, does not.
    frame = frame.replace(r"^'(?=[=+\-@\t\r])", "", regex=True)
    for column in ("created_at", "leased_at"):
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[us, UTC]")
    for column in ("control", "excluded"):
        frame[column] = frame[column].map({"True": True, "False": False}).astype(bool)
    frame["time_spent_s"] = frame["time_spent_s"].astype("float64")
    frame["label_id"] = frame["label_id"].astype("int64")
    frame["final_k"] = pd.to_numeric(frame["final_k"].replace("", None))
    frame["gold"] = frame["gold"].replace("", None)
    return frame
