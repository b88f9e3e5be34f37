"""The Prolific stand-in enforces what it claims (a test double that lies proves nothing). No database."""

import base64
import hashlib
import hmac
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from tests.channels.fake_prolific import FakeProlific, FakeRefusal

HEX24 = re.compile(r"[0-9a-f]{24}")
URL = "https://chorus.test/p/?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
REASON = "Your answers did not follow the instructions given on the first page of the task. " * 2


def draft(**overrides):
    body = {
        "name": "Label some sentences",
        "internal_name": "chorus-task-1",
        "description": "Read sentences and label them.",
        "external_study_url": URL,
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {"code": "DONE", "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]},
        ],
        "total_available_places": 3,
        "estimated_completion_time": 10,
        "reward": 150,
        "device_compatibility": ["desktop"],
        "filters": [],
    }
    body.update(overrides)
    return body


class Api:
    def __init__(self, fake: FakeProlific, token="test-token"):
        self.fake = fake
        self.session = requests.Session()
        self.session.trust_env = False  # never through a proxy: the fake is on the loopback
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def __call__(self, method, path, **kwargs):
        return self.session.request(method, self.fake.url + path, timeout=5, **kwargs)

    def ok(self, method, path, status=200, **kwargs):
        response = self(method, path, **kwargs)
        assert response.status_code == status, (response.status_code, response.text)
        return response.json() if response.content else None

    def study(self, publish=True, **overrides):
        study = self.ok("POST", "studies/", 201, json=draft(**overrides))
        if publish:
            study = self.ok("POST", f"studies/{study['id']}/transition/", json={"action": "PUBLISH"})
        return study

    def status(self, study_id):
        return self.ok("GET", f"studies/{study_id}/")["status"]


def error_detail(response, status):
    assert response.status_code == status, (response.status_code, response.text)
    error = response.json()["error"]
    assert set(error) == {"status", "title", "error_code", "detail", "additional_information"}
    assert error["status"] == status
    return error["detail"]


@pytest.fixture
def fake():
    fake = FakeProlific(page_cap=3, allow_insecure_targets=True, retry_delay=0.005, retry_cap=0.01).start()
    yield fake
    fake.stop()


@pytest.fixture
def api(fake):
    return Api(fake)


class Receiver:
    """A tiny webhook target: records each request, answers the queued statuses, then 200."""

    def __init__(self):
        self.received: list[tuple] = []  # (headers, raw body)
        self.statuses: list[int] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.arrived:
                    receiver.received.append((self.headers, body))  # case-insensitive
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.arrived.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/prolific/"

    def wait(self, n, timeout=3.0):
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.received) >= n, timeout=timeout), self.received
        return self.received


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def verify(headers, body, secret):
    """What a careful receiver does: the raw bytes first, then Prolific's re-serialised JSON."""
    timestamp = headers["X-Prolific-Request-Timestamp"]
    assert abs(time.time() - int(timestamp)) < 300
    for message in (body, json.dumps(json.loads(body)).encode()):
        digest = hmac.new(secret.encode(), timestamp.encode() + message, hashlib.sha256).digest()
        if hmac.compare_digest(base64.b64encode(digest).decode(), headers["X-Prolific-Request-Signature"]):
            return True
    return False


def subscribe(api, fake, target, event_type="submission.status.change"):
    secret = api.ok("POST", "hooks/secrets/", 201, json={"workspace_id": fake.workspace_id})
    response = api(
        "POST",
        "hooks/subscriptions/",
        json={"event_type": event_type, "target_url": target, "workspace_id": fake.workspace_id},
    )
    assert response.status_code == 201, response.text
    sub = response.json()
    api.ok("POST", f"hooks/subscriptions/{sub['id']}/", json={"secret": response.headers["X-Hook-Secret"]})
    return sub, secret["value"]


# --- transport -------------------------------------------------------------------------------------------
def test_token_error_shape_trailing_slash_and_account(fake, api):
    for token in (None, "wrong"):
        detail = error_detail(Api(fake, token=token)("GET", "users/me/"), 401)
        assert isinstance(detail, str)
    bearer = requests.get(fake.url + "users/me/", headers={"Authorization": "Bearer test-token"}, timeout=5)
    error_detail(bearer, 401)
    me = api.ok("GET", "users/me")  # no trailing slash
    assert me["currency_code"] == "GBP" and {"id", "email", "name", "balance", "available_balance"} <= set(me)
    workspaces = api.ok("GET", "workspaces/")
    assert [w["id"] for w in workspaces["results"]] == [fake.workspace_id] and workspaces["meta"]["count"] == 1
    assert "_links" in workspaces
    error_detail(api("GET", "studies/0123456789abcdef01234567/"), 404)
    error_detail(api("GET", "no-such-thing/"), 404)
    error_detail(api("PUT", "studies/"), 405)
    assert fake.calls[0] == ("GET", "/api/v1/users/me/", 401)
    assert ("GET", "/api/v1/users/me/", 200) in fake.calls


# --- studies -----------------------------------------------------------------------------------------------
BAD_FIELDS = [
    ("name", ""),
    ("description", 7),
    ("external_study_url", "https://chorus.test/p/?PROLIFIC_PID={{%PROLIFIC_PID%}}"),
    ("external_study_url", "not a url"),
    ("prolific_id_option", "maybe"),
    ("completion_codes", []),
    ("completion_codes", [{"code": "X", "code_type": "DONE", "actions": [{"action": "MANUALLY_REVIEW"}]}]),
    ("completion_codes", [{"code": "X", "code_type": "COMPLETED", "actions": [{"action": "PAY_DOUBLE"}]}]),
    ("completion_codes", [{"code": "X", "code_type": "COMPLETED", "actor": "robot", "actions": []}]),
    ("total_available_places", 0),
    ("total_available_places", "3"),
    ("estimated_completion_time", 0),
    ("reward", 1.5),
    ("reward", True),
    ("device_compatibility", ["desktop", "fridge"]),
    ("filters", [{"filter_id": "participant_group_blocklist", "selected_values": ["0123456789abcdef01234567"]}]),
    ("filters", [{"selected_values": ["x"]}]),
    ("maximum_allowed_time", 24 * 60),
]


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
def test_study_create_names_the_bad_field(api, field, value):
    detail = error_detail(api("POST", "studies/", json=draft(**{field: value})), 400)
    assert list(detail) == [field] and isinstance(detail[field], list)


@pytest.mark.parametrize("field", ["name", "description", "external_study_url", "reward", "completion_codes"])
def test_study_create_requires_fields(api, field):
    body = draft()
    del body[field]
    assert field in error_detail(api("POST", "studies/", json=body), 400)


def test_study_create_and_legacy_code(api):
    study = api.study(publish=False)
    assert HEX24.fullmatch(study["id"]) and study["status"] == "UNPUBLISHED" and study["places_taken"] == 0
    assert study["reward"] == 150 and study["currency_code"] == "GBP" and study["total_cost"] > 450
    assert study["maximum_allowed_time"] < 24 * 60 and study["internal_name"] == "chorus-task-1"
    body = draft(completion_code="OLD1", completion_option="code")
    del body["completion_codes"]
    legacy = api.ok("POST", "studies/", 201, json=body)
    assert legacy["completion_codes"] == [
        {"code": "OLD1", "code_type": "COMPLETED", "actor": "participant", "actions": [{"action": "MANUALLY_REVIEW"}]}
    ]
    assert [s["id"] for s in api.ok("GET", "studies/")["results"]] == [study["id"], legacy["id"]]


def test_study_state_machine(api):
    study = api.study(publish=False)
    sid = study["id"]

    def transition(action, status=200):
        return api(path=f"studies/{sid}/transition/", method="POST", json={"action": action}), status

    for action in ("PAUSE", "START", "STOP", "LAUNCH"):
        response, _ = transition(action)
        assert "action" in error_detail(response, 400)
    assert api.ok("POST", f"studies/{sid}/transition/", json={"action": "PUBLISH"})["status"] == "ACTIVE"
    error_detail(transition("PUBLISH")[0], 400)
    error_detail(transition("START")[0], 400)  # already active
    assert api.ok("POST", f"studies/{sid}/transition/", json={"action": "PAUSE"})["status"] == "PAUSED"
    error_detail(transition("PAUSE")[0], 400)
    assert api.ok("POST", f"studies/{sid}/transition/", json={"action": "START"})["status"] == "ACTIVE"
    assert api.ok("POST", f"studies/{sid}/transition/", json={"action": "STOP"})["status"] == "COMPLETED"
    for action in ("START", "PAUSE", "STOP", "PUBLISH"):
        error_detail(transition(action)[0], 400)
    error_detail(api("DELETE", f"studies/{sid}/"), 400)  # only drafts
    doomed = api.study(publish=False)["id"]
    assert api("DELETE", f"studies/{doomed}").status_code == 200
    error_detail(api("GET", f"studies/{doomed}/"), 404)


def test_stop_with_work_to_review_then_completed(fake, api):
    sid = api.study()["id"]
    sub, _ = fake.arrive(sid)
    assert api.ok("POST", f"studies/{sid}/transition/", json={"action": "STOP"})["status"] == "AWAITING REVIEW"
    with pytest.raises(FakeRefusal):
        fake.arrive(sid)
    fake.complete(sub, "DONE")
    assert api.status(sid) == "AWAITING REVIEW"
    api.ok("POST", f"submissions/{sub}/transition/", json={"action": "APPROVE"})
    assert api.status(sid) == "COMPLETED"
    detail = error_detail(api("PATCH", f"studies/{sid}/", json={"total_available_places": 9}), 400)
    assert "total_available_places" in detail  # STOP is final


def test_published_study_fields_locked_and_places_only_grow(api):
    draft_id = api.study(publish=False)["id"]
    assert api.ok("PATCH", f"studies/{draft_id}/", json={"reward": 120, "name": "N"})["reward"] == 120
    assert "reward" in error_detail(api("PATCH", f"studies/{draft_id}/", json={"reward": 0}), 400)
    assert "status" in error_detail(api("PATCH", f"studies/{draft_id}/", json={"status": "ACTIVE"}), 400)
    sid = api.study()["id"]
    for field, value in (("reward", 200), ("name", "other"), ("description", "other")):
        assert list(error_detail(api("PATCH", f"studies/{sid}/", json={field: value}), 400)) == [field]
    detail = error_detail(api("PATCH", f"studies/{sid}/", json={"total_available_places": 2}), 400)
    assert "total_available_places" in detail
    study = api.ok("PATCH", f"studies/{sid}/", json={"total_available_places": 5, "internal_name": "x"})
    assert (study["total_available_places"], study["internal_name"], study["status"]) == (5, "x", "ACTIVE")
    assert api.ok("PATCH", f"studies/{sid}", json={"total_available_places": 5})["total_available_places"] == 5


def test_full_study_awaits_review_reopens_and_auto_pauses(fake, api):
    sid = api.study(total_available_places=1)["id"]
    first, _ = fake.arrive(sid)
    assert api.status(sid) == "AWAITING REVIEW"  # every place taken
    with pytest.raises(FakeRefusal, match="not ACTIVE"):
        fake.arrive(sid)
    fake.complete(first, "DONE")
    api.ok("PATCH", f"studies/{sid}/", json={"total_available_places": 2})
    assert api.status(sid) == "ACTIVE"  # raising places reopens it
    second, _ = fake.arrive(sid)
    assert api.status(sid) == "AWAITING REVIEW"
    fake.timeout(second)  # a time-out in progress frees the place: recruiting again
    assert api.status(sid) == "ACTIVE"
    third, _ = fake.arrive(sid)
    fake.complete(third, "DONE")
    assert api.ok("GET", f"studies/{sid}/")["places_taken"] == 2
    api.ok(
        "POST",
        f"submissions/{first}/transition/",
        json={"action": "REJECT", "message": REASON, "rejection_category": "FAILED_INSTRUCTIONS"},
    )
    study = api.ok("GET", f"studies/{sid}/")
    assert (study["status"], study["places_taken"]) == ("PAUSED", 1)  # auto-pause on rejection
    assert api.ok("POST", f"studies/{sid}/transition/", json={"action": "START"})["status"] == "ACTIVE"
    fourth, _ = fake.arrive(sid)
    fake.complete(fourth, "DONE")
    fake.return_(fourth)  # returning an AWAITING REVIEW submission of a full study also pauses it
    assert api.status(sid) == "PAUSED"
    counts = api.ok("GET", f"studies/{sid}/submissions/counts/")
    assert (counts["REJECTED"], counts["TIMED-OUT"], counts["RETURNED"], counts["AWAITING REVIEW"]) == (1, 1, 1, 1)
    assert counts["TOTAL"] == 4


# --- participants -------------------------------------------------------------------------------------------
def test_arrival_url_and_refusals(fake, api):
    blocked = api.ok("POST", "participant-groups/", 201, json={"name": "done", "workspace_id": fake.workspace_id})
    sid = api.study(
        total_available_places=2,
        filters=[{"filter_id": "participant_group_blocklist", "selected_values": [blocked["id"]]}],
    )["id"]
    sub, url = fake.arrive(sid, "a" * 24)
    assert url == f"https://chorus.test/p/?PROLIFIC_PID={'a' * 24}&STUDY_ID={sid}&SESSION_ID={sub}"
    submission = api.ok("GET", f"submissions/{sub}/")
    assert (submission["status"], submission["participant"], submission["study_id"]) == ("ACTIVE", "a" * 24, sid)
    assert submission["bonus_payments"] == [] and submission["return_requested"] is False
    with pytest.raises(FakeRefusal, match="already"):
        fake.arrive(sid, "a" * 24)
    fake.return_(sub)
    with pytest.raises(FakeRefusal, match="already"):  # even after returning
        fake.arrive(sid, "a" * 24)
    api.ok("POST", f"participant-groups/{blocked['id']}/participants/", json={"participant_ids": ["b" * 24]})
    with pytest.raises(FakeRefusal, match="blocked"):  # membership read at arrival
        fake.arrive(sid, "b" * 24)
    api.ok("POST", f"studies/{sid}/transition/", json={"action": "PAUSE"})
    with pytest.raises(FakeRefusal, match="PAUSED"):
        fake.arrive(sid)
    api.ok("POST", f"studies/{sid}/transition/", json={"action": "START"})
    generated, _ = fake.arrive(sid)
    assert HEX24.fullmatch(fake.submissions[generated]["participant_id"])
    fake.arrive(sid)
    with pytest.raises(FakeRefusal):  # full
        fake.arrive(sid)
    with pytest.raises(FakeRefusal):
        fake.arrive("0123456789abcdef01234567")


def test_completion_codes_and_their_actions(fake, api):
    group = api.ok("POST", "participant-groups/", 201, json={"name": "g", "workspace_id": fake.workspace_id})
    codes = [
        {"code": "REVIEW", "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]},
        {
            "code": "AUTO",
            "code_type": "COMPLETED",
            "actor": "participant",
            "actions": [
                {"action": "AUTOMATICALLY_APPROVE"},
                {"action": "ADD_TO_PARTICIPANT_GROUP", "participant_group": group["id"]},
            ],
        },
        {"code": "NOCONSENT", "code_type": "NO_CONSENT", "actions": [{"action": "REQUEST_RETURN"}]},
        {"code": "SCREEN", "code_type": "OTHER", "actor": "researcher", "actions": [{"action": "MANUALLY_REVIEW"}]},
    ]
    sid = api.study(completion_codes=codes, total_available_places=10)["id"]
    subs = {name: fake.arrive(sid, name * 24)[0] for name in "abcd"}
    with pytest.raises(FakeRefusal, match="unknown"):
        fake.complete(subs["a"], "NOPE")
    with pytest.raises(FakeRefusal, match="researcher"):
        fake.complete(subs["a"], "SCREEN")
    assert fake.complete(subs["a"], "REVIEW") == "AWAITING REVIEW"
    with pytest.raises(FakeRefusal):
        fake.complete(subs["a"], "REVIEW")  # no longer in progress
    assert fake.complete(subs["b"], "AUTO") == "APPROVED"
    assert fake.group_members(group["id"]) == ["b" * 24]
    members = api.ok("GET", f"participant-groups/{group['id']}/participants/")["results"]
    assert [m["participant_id"] for m in members] == ["b" * 24]
    assert fake.complete(subs["c"], "NOCONSENT") == "ACTIVE"
    assert api.ok("GET", f"submissions/{subs['c']}/")["return_requested"] is True
    fake.return_(subs["c"])
    assert api.ok("GET", f"submissions/{subs['c']}/")["status"] == "RETURNED"
    detail = error_detail(
        api("POST", f"submissions/{subs['d']}/transition/", json={"action": "COMPLETE", "completion_code": "REVIEW"}),
        400,
    )
    assert "completion_code" in detail  # a participant code is not the researcher's to apply
    done = api.ok(
        "POST", f"submissions/{subs['d']}/transition/", json={"action": "COMPLETE", "completion_code": "SCREEN"}
    )
    assert (done["status"], done["entered_code"]) == ("AWAITING REVIEW", "SCREEN")
    assert api.ok("GET", f"submissions/{subs['a']}/")["entered_code"] == "REVIEW"


# --- reviewing ------------------------------------------------------------------------------------------------
def test_reject_rules_and_idempotent_approve(fake, api):
    sid = api.study()["id"]
    a, b = (fake.arrive(sid)[0] for _ in range(2))

    def transition(sub, **body):
        return api("POST", f"submissions/{sub}/transition/", json=body)

    assert "action" in error_detail(transition(a, action="APPROVE"), 400)  # still ACTIVE
    fake.complete(a, "DONE")
    fake.complete(b, "DONE")
    short = transition(b, action="REJECT", message="Too short.", rejection_category="LOW_EFFORT")
    assert list(error_detail(short, 400)) == ["message"]
    unknown = transition(b, action="REJECT", message=REASON, rejection_category="RUDE")
    assert list(error_detail(unknown, 400)) == ["rejection_category"]
    assert "action" in error_detail(transition(b, action="DANCE"), 400)
    first = transition(a, action="APPROVE")
    again = transition(a, action="APPROVE")
    assert first.status_code == again.status_code == 200 and again.json()["status"] == "APPROVED"
    assert [d for d in fake.submissions.values() if d["status"] == "APPROVED"] == [fake.submissions[a]]
    assert "action" in error_detail(
        transition(a, action="REJECT", message=REASON, rejection_category="LOW_EFFORT"), 400
    )
    rejected = transition(b, action="REJECT", message=REASON, rejection_category="LOW_EFFORT")
    assert rejected.status_code == 200 and rejected.json()["status"] == "REJECTED"
    repeat = transition(b, action="REJECT", message=REASON, rejection_category="LOW_EFFORT")
    assert repeat.status_code == 200 and repeat.json()["status"] == "REJECTED"
    assert "action" in error_detail(transition(b, action="APPROVE"), 400)


def test_bulk_approve_both_forms(fake, api):
    sid = api.study(total_available_places=5)["id"]
    subs = [fake.arrive(sid, str(i) * 24)[0] for i in range(4)]
    for sub in subs[:3]:
        fake.complete(sub, "DONE")
    assert api.ok("POST", "submissions/bulk-approve/", json={"submission_ids": subs[:2] + subs[3:]}) == (
        "The request to bulk approve has been made successfully."
    )
    assert [fake.submissions[s]["status"] for s in subs] == ["APPROVED", "APPROVED", "AWAITING REVIEW", "ACTIVE"]
    api.ok("POST", "submissions/bulk-approve/", json={"study_id": sid, "participant_ids": ["2" * 24]})
    assert fake.submissions[subs[2]]["status"] == "APPROVED"
    unknown = api("POST", "submissions/bulk-approve/", json={"submission_ids": ["f" * 24]})
    assert "submission_ids" in error_detail(unknown, 400)
    missing = api("POST", "submissions/bulk-approve/", json={"study_id": sid, "participant_ids": ["9" * 24]})
    assert "participant_ids" in error_detail(missing, 400)


# --- bonuses --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "csv",
    [
        "participant_id,amount\n{a},1.00",  # a header row
        "{a},1.005",  # three decimals
        "{a},0",
        "{a},-1.00",
        "{a},1.00,extra",
        "{a},1.00\n{a},2.00",  # twice
        "{a},1.00\n{sub_a},2.00",  # the same submission by participant and submission id
    ],
)
def test_bonus_csv_validation(fake, api, csv):
    sid = api.study()["id"]
    sub_a, _ = fake.arrive(sid, "a" * 24)
    rows = csv.format(a="a" * 24, sub_a=sub_a)
    response = api("POST", "submissions/bonus-payments/", json={"study_id": sid, "csv_bonuses": rows})
    assert "csv_bonuses" in error_detail(response, 400)
    assert fake.bulk_bonuses == {}


def test_two_step_bonus_paid_once(fake, api):
    sid = api.study()["id"]
    other = api.study()["id"]
    sub_a, _ = fake.arrive(sid, "a" * 24)
    sub_b, _ = fake.arrive(sid, "b" * 24)
    stranger, _ = fake.arrive(other, "c" * 24)
    outsiders = api(
        "POST",
        "submissions/bonus-payments/",
        json={"study_id": sid, "csv_bonuses": f"{'a' * 24},1\n{'c' * 24},1\n{stranger},1"},
    )
    message = error_detail(outsiders, 400)["csv_bonuses"][0]
    assert "c" * 24 in message and stranger in message and "a" * 24 not in message
    rows = f"{'a' * 24},4.25\n{sub_b},1.5\n"  # a participant id and a submission id; a trailing newline
    bonus = api.ok("POST", "submissions/bonus-payments/", 201, json={"study_id": sid, "csv_bonuses": rows})
    assert (bonus["study"], bonus["amount"]) == (sid, 575)
    assert bonus["total_amount"] == bonus["amount"] + bonus["fees"] + bonus["vat"] and bonus["fees"] > 0
    assert api.ok("GET", f"submissions/{sub_a}/")["bonus_payments"] == []  # not paid yet
    assert api(method="POST", path=f"bulk-bonus-payments/{bonus['id']}/pay/").status_code == 202
    assert api.ok("GET", f"submissions/{sub_a}/")["bonus_payments"] == [425]
    assert api.ok("GET", f"submissions/{sub_b}/")["bonus_payments"] == [150]
    assert "id" in error_detail(api("POST", f"bulk-bonus-payments/{bonus['id']}/pay/"), 400)
    assert fake.submissions[sub_a]["bonus_payments"] == [425]  # paid once
    error_detail(api("POST", f"bulk-bonus-payments/{'0' * 24}/pay/"), 404)


# --- groups and messages ---------------------------------------------------------------------------------------
def test_participant_groups_are_sets(fake, api):
    body = {"name": "g", "workspace_id": fake.workspace_id, "participant_ids": ["p1"]}
    group = api.ok("POST", "participant-groups/", 201, json=body)
    path = f"participant-groups/{group['id']}/participants/"
    for _ in range(2):
        results = api.ok("POST", path, json={"participant_ids": ["p1", "p2"]})["results"]
    assert [r["participant_id"] for r in results] == ["p1", "p2"] and all(r["datetime_created"] for r in results)
    assert [r["participant_id"] for r in api.ok("DELETE", path, json={"participant_ids": ["p1", "p9"]})["results"]] == [
        "p2"
    ]
    assert api.ok("GET", f"participant-groups/{group['id']}/")["participant_count"] == 1
    listed = api.ok("GET", f"participant-groups/?workspace_id={fake.workspace_id}")
    assert [g["id"] for g in listed["results"]] == [group["id"]]
    assert "participant_ids" in error_detail(api("POST", path, json={"participant_ids": "p3"}), 400)
    assert "name" in error_detail(api("POST", "participant-groups/", json={"workspace_id": fake.workspace_id}), 400)


def test_messages(fake, api):
    sid = api.study()["id"]
    response = api("POST", "messages/", json={"recipient_id": "a" * 24, "body": "Thanks!", "study_id": sid})
    assert response.status_code == 204 and response.content == b""
    assert [(m["recipient_id"], m["body"]) for m in fake.messages] == [("a" * 24, "Thanks!")]
    assert "study_id" in error_detail(api("POST", "messages/", json={"recipient_id": "a" * 24, "body": "x"}), 400)


# --- hooks ------------------------------------------------------------------------------------------------------
def test_hook_targets_must_be_public_https(api):
    strict = FakeProlific().start()
    try:
        client = Api(strict)
        client.ok("POST", "hooks/secrets/", 201, json={"workspace_id": strict.workspace_id})
        for target in (
            "http://hooks.example.com/p/",
            "https://localhost/p/",
            "https://127.0.0.1/p/",
            "https://10.1.2.3/p/",
            "https://192.168.0.4/p/",
            "https://[::1]/p/",
        ):
            body = {"event_type": "study.status.change", "target_url": target, "workspace_id": strict.workspace_id}
            assert list(error_detail(client("POST", "hooks/subscriptions/", json=body), 400)) == ["target_url"]
        body = {"event_type": "study.status.change", "target_url": "https://hooks.example.com/p/"}
        assert client("POST", "hooks/subscriptions/", json={**body, "workspace_id": strict.workspace_id}).ok
    finally:
        strict.stop()


def test_hook_handshake_and_signed_deliveries(fake, api, receiver):
    types = {t["event_type"] for t in api.ok("GET", "hooks/event-types/")["results"]}
    assert {"submission.status.change", "study.status.change"} <= types
    body = {"event_type": "submission.status.change", "target_url": receiver.url, "workspace_id": fake.workspace_id}
    assert "workspace_id" in error_detail(api("POST", "hooks/subscriptions/", json=body), 400)  # no secret yet
    secret = api.ok("POST", "hooks/secrets/", 201, json={"workspace_id": fake.workspace_id})
    assert secret["workspace_id"] == fake.workspace_id and secret["value"]
    created = api("POST", "hooks/subscriptions/", json=body)
    assert created.status_code == 201 and created.headers["X-Hook-Secret"]
    sub = created.json()
    assert (sub["is_enabled"], sub["target_url"], sub["event_type"]) == (False, receiver.url, body["event_type"])
    sid = api.study()["id"]
    early, _ = fake.arrive(sid)  # before the confirmation: nothing is delivered
    assert "secret" in error_detail(api("POST", f"hooks/subscriptions/{sub['id']}/", json={"secret": "nope"}), 400)
    confirmed = api.ok("POST", f"hooks/subscriptions/{sub['id']}/", json={"secret": created.headers["X-Hook-Secret"]})
    assert confirmed["is_enabled"] is True
    assert fake.wait_deliveries() and fake.deliveries == [] and receiver.received == []

    fake.complete(early, "DONE")
    headers, raw = receiver.wait(1)[0]
    assert json.loads(raw) == {
        "resource_id": early,
        "event_type": "submission.status.change",
        "participant_id": fake.submissions[early]["participant_id"],
        "status": "AWAITING REVIEW",
    }
    assert raw == json.dumps(json.loads(raw)).encode()  # default separators: both receiver styles verify
    assert headers["Content-Type"] == "application/json" and headers["X-Event-ID"] and headers["X-Timestamp"]
    assert verify(headers, raw, secret["value"])
    assert not verify(headers, raw, "another secret")

    new_secret = api.ok("POST", "hooks/secrets/", 201, json={"workspace_id": fake.workspace_id})  # replaces
    assert api.ok("GET", "hooks/secrets/")["results"] == [new_secret]
    api.ok("POST", f"submissions/{early}/transition/", json={"action": "APPROVE"})
    headers, raw = receiver.wait(2)[1]
    assert json.loads(raw)["status"] == "APPROVED" and verify(headers, raw, new_secret["value"])
    assert fake.wait_deliveries()
    events = api.ok("GET", f"hooks/subscriptions/{sub['id']}/events/")
    assert [e["status"] for e in events["results"]] == ["SUCCEEDED", "SUCCEEDED"]
    assert [s["id"] for s in api.ok("GET", "hooks/subscriptions/?is_enabled=true")["results"]] == [sub["id"]]

    api.ok("PATCH", f"hooks/subscriptions/{sub['id']}/", json={"is_enabled": False})
    fake.arrive(sid)
    assert api("DELETE", f"hooks/subscriptions/{sub['id']}/").status_code == 204
    assert fake.wait_deliveries() and len(receiver.received) == 2
    error_detail(api("GET", f"hooks/subscriptions/{sub['id']}/"), 404)


def test_study_status_deliveries(fake, api, receiver):
    subscribe(api, fake, receiver.url, "study.status.change")
    sid = api.study()["id"]
    api.ok("POST", f"studies/{sid}/transition/", json={"action": "PAUSE"})
    bodies = [json.loads(raw) for _, raw in receiver.wait(2)]
    assert bodies == [
        {"resource_id": sid, "event_type": "study.status.change", "metadata": {}, "status": status}
        for status in ("ACTIVE", "PAUSED")
    ]


def test_retries_keep_the_event_id(fake, api, receiver):
    _, secret = subscribe(api, fake, receiver.url)
    receiver.statuses = [500, 503]
    fake.fail_target(1)
    sid = api.study()["id"]
    sub, _ = fake.arrive(sid)
    received = receiver.wait(3)
    assert fake.wait_deliveries()
    assert len({h["X-Event-ID"] for h, _ in received}) == 1 and all(verify(h, b, secret) for h, b in received)
    attempts = [(d["attempt"], d.get("status"), "error" in d) for d in fake.deliveries]
    assert attempts == [(1, None, True), (2, 500, False), (3, 503, False), (4, 200, False)]
    assert {d["event_id"] for d in fake.deliveries} == {received[0][0]["X-Event-ID"]}
    assert fake.deliveries[0]["body"]["resource_id"] == sub and fake.deliveries[0]["target_url"] == receiver.url


def test_retries_give_up_after_twelve_attempts(fake, api, receiver):
    sub, _ = subscribe(api, fake, receiver.url)
    fake.fail_target(12)
    fake.arrive(api.study()["id"])
    assert fake.wait_deliveries()
    assert [d["attempt"] for d in fake.deliveries] == list(range(1, 13)) and receiver.received == []
    assert api.ok("GET", f"hooks/subscriptions/{sub['id']}/events/?status=FAILED")["meta"]["count"] == 1


def test_duplicate_and_out_of_order_deliveries(fake, api, receiver):
    subscribe(api, fake, receiver.url)
    sid = api.study(total_available_places=5)["id"]
    fake.duplicate_next()
    fake.arrive(sid)
    received = receiver.wait(2)
    assert received[0][0]["X-Event-ID"] == received[1][0]["X-Event-ID"]
    fake.hold_deliveries()
    sub, _ = fake.arrive(sid)
    fake.complete(sub, "DONE")
    api.ok("POST", f"submissions/{sub}/transition/", json={"action": "APPROVE"})
    assert fake.wait_deliveries() and len(receiver.received) == 2  # held
    fake.release_deliveries(reverse=True)
    statuses = [json.loads(raw)["status"] for _, raw in receiver.wait(5)[2:]]
    assert statuses == ["APPROVED", "AWAITING REVIEW", "ACTIVE"]
    assert len({h["X-Event-ID"] for h, _ in receiver.received}) == 4


def test_delivery_never_blocks_the_api(fake, api):
    gate = threading.Event()

    def slow(url, body, headers):
        gate.wait(2)
        return 200

    fake.transport = slow
    subscribe(api, fake, "https://hooks.example.com/p/")
    sid = api.study()["id"]
    start = time.monotonic()
    fake.arrive(sid)
    api.ok("GET", f"studies/{sid}/")
    assert time.monotonic() - start < 0.5
    gate.set()
    assert fake.wait_deliveries() and fake.deliveries[0]["status"] == 200


# --- faults and pagination ------------------------------------------------------------------------------------------
def test_injected_faults(fake, api):
    fake.inject("POST", r"/studies/$", "429")
    fake.inject("POST", r"/studies/$", "500")
    assert api("POST", "studies/", json=draft()).status_code == 429
    assert api("POST", "studies/", json=draft()).status_code == 500
    assert fake.studies == {}  # neither happened
    sid = api.study()["id"]
    sub, _ = fake.arrive(sid)
    bonus = api.ok("POST", "submissions/bonus-payments/", 201, json={"study_id": sid, "csv_bonuses": f"{sub},2"})
    fake.inject("POST", r"/bulk-bonus-payments/.+/pay/$", "lost")
    lost = api("POST", f"bulk-bonus-payments/{bonus['id']}/pay")  # no trailing slash: still matched
    error_detail(lost, 500)
    assert fake.submissions[sub]["bonus_payments"] == [200]  # it happened all the same
    assert "id" in error_detail(api("POST", f"bulk-bonus-payments/{bonus['id']}/pay/"), 400)
    assert [c for c in fake.calls if c[1].endswith("/pay/")] == [
        ("POST", f"/api/v1/bulk-bonus-payments/{bonus['id']}/pay/", 500),
        ("POST", f"/api/v1/bulk-bonus-payments/{bonus['id']}/pay/", 400),
    ]
    fake.inject("GET", r"/users/me/$", "429", times=2)
    assert [api("GET", "users/me/").status_code for _ in range(3)] == [429, 429, 200]


def test_both_pagination_styles(fake, api):
    sid = api.study(total_available_places=5)["id"]
    subs = [fake.arrive(sid)[0] for _ in range(5)]
    fake.complete(subs[0], "DONE")

    seen, url = [], fake.url + f"studies/{sid}/submissions/?limit=2"
    while url:
        page = api.session.get(url, timeout=5).json()
        assert page["meta"]["count"] == 5 and len(page["results"]) <= 2
        seen += [s["id"] for s in page["results"]]
        url = page["_links"]["next"]["href"]
    assert seen == subs
    capped = api.ok("GET", f"studies/{sid}/submissions/?limit=50")
    assert len(capped["results"]) == 3 and capped["_links"]["next"]["href"]  # page_cap=3

    seen, url = [], fake.url + f"submissions/?study={sid}&page_size=2"
    while url:
        page = api.session.get(url, timeout=5).json()
        seen += [s["id"] for s in page["results"]]
        url = page["_links"]["next"]["href"]
    assert seen == subs
    assert api.ok("GET", f"submissions/?study={sid}&page=2&page_size=2")["results"][0]["id"] == subs[2]
    review = api.ok("GET", f"submissions/?study={sid}&status=awaiting_review")
    assert [s["id"] for s in review["results"]] == [subs[0]] and review["_links"]["next"]["href"] is None
    assert api.ok("GET", f"submissions/?study={sid}&active=yes")["meta"]["count"] == 4
    assert "limit" in error_detail(api("GET", f"studies/{sid}/submissions/?limit=abc"), 400)


def test_participant_side_over_http(fake, api):
    sid = api.study(total_available_places=2)["id"]
    sim = requests.Session()
    sim.trust_env = False
    base = fake.url.replace("/api/v1/", "/_sim/")
    arrived = sim.post(base + "arrive", json={"study_id": sid, "participant_id": "p" * 24}, timeout=5)
    assert arrived.status_code == 201 and "PROLIFIC_PID=" + "p" * 24 in arrived.json()["url"]
    sub = arrived.json()["submission_id"]
    assert sim.post(base + "arrive", json={"study_id": sid, "participant_id": "p" * 24}, timeout=5).status_code == 409
    done = sim.post(base + "complete", json={"submission_id": sub, "code": "DONE"}, timeout=5)
    assert done.json()["status"] == "AWAITING REVIEW"
    other = sim.post(base + "arrive", json={"study_id": sid}, timeout=5).json()["submission_id"]
    assert sim.post(base + "timeout", json={"submission_id": other}, timeout=5).json()["status"] == "TIMED-OUT"
    third = sim.post(base + "arrive", json={"study_id": sid}, timeout=5).json()["submission_id"]
    assert sim.post(base + "return", json={"submission_id": third}, timeout=5).json()["status"] == "RETURNED"
    assert not any("_sim" in path for _, path, _ in fake.calls)


def test_allowlist_and_request_return(fake, api):
    group = api.ok("POST", "participant-groups/", 201, json={"name": "panel", "workspace_id": fake.workspace_id})
    api.ok("POST", f"participant-groups/{group['id']}/participants/", json={"participant_ids": ["m" * 24]})
    sid = api.study(filters=[{"filter_id": "participant_group_allowlist", "selected_values": [group["id"]]}])["id"]
    with pytest.raises(FakeRefusal, match="none of the allowed"):
        fake.arrive(sid, "x" * 24)
    sub, _ = fake.arrive(sid, "m" * 24)
    requested = api.ok("POST", f"submissions/{sub}/request-return/", json={"request_return_reasons": ["No data."]})
    assert requested["return_requested"] is True and requested["status"] == "ACTIVE"
    assert "request_return_reasons" in error_detail(api("POST", f"submissions/{sub}/request-return/", json={}), 400)
