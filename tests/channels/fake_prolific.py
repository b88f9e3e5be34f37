"""A stateful stand-in of Prolific's REST API for the test suite, written from
``docs/prolific-api.md`` (section numbers below refer to it).

A threaded ``http.server`` on a free loopback port serves ``/api/v1/`` (JSON in and out, trailing slash
optional). It enforces what Prolific enforces and a client must cope with:

* auth: ``Authorization: Token <token>`` on every ``/api/v1`` call, else 401; errors always in shape 1 of
  §1.1 (``{"error": {"status", "title", "error_code", "detail", "additional_information"}}``) with ``detail``
  a ``{field: [messages]}`` dict on 400; 404 for unknown ids and paths, 405 for a wrong method;
* study drafts are validated field by field (required fields, types, enums, the three URL placeholders,
  completion codes or the legacy ``completion_code``, filters and the participant groups they name);
* the study state machine of §2.2 (``POST /studies/{id}/transition/``, invalid transitions are 400):
  PUBLISH (UNPUBLISHED -> ACTIVE), PAUSE (ACTIVE -> PAUSED), START (PAUSED -> ACTIVE), STOP (final:
  AWAITING REVIEW, or COMPLETED when nothing is left to review); a study whose places are all taken goes
  to AWAITING REVIEW, and to COMPLETED once nothing is pending; a full AWAITING REVIEW study auto-pauses
  when a submission is rejected or an AWAITING REVIEW submission is returned; a return or time-out of a
  submission in progress reopens its place (back to ACTIVE);
* after publishing, PATCH may only change ``internal_name`` and ``total_available_places``, places only
  increase (a new total, not an increment), raising them on AWAITING REVIEW/COMPLETED reopens the study
  (ACTIVE), and a stopped study cannot grow; only drafts can be deleted;
* arrivals (Python API and ``POST /_sim/arrive``) are refused unless the study is ACTIVE with a free place,
  the participant passes its participant-group block/allow-list filters (membership read at arrival) and
  has never had a submission in it; REJECTED, RETURNED and TIMED-OUT free the place;
* completion codes: participant codes only, applied with their actions (MANUALLY_REVIEW, AUTOMATICALLY_APPROVE,
  REQUEST_RETURN, ADD_TO/REMOVE_FROM_PARTICIPANT_GROUP, FIXED_SCREENOUT, DYNAMIC_PAYMENT); researcher codes
  only through the COMPLETE transition;
* submission transitions: only AWAITING REVIEW can be approved or rejected; REJECT needs a message of at
  least 100 characters and a category from the enum; a repeated request is ignored (200, current state);
  anything else from a final state is 400; bulk approve answers 200 with a JSON string;
* bonuses: two steps; CSV rows ``<participant or submission id>,<major units, <= 2 decimals, > 0>``, no
  header, each submission once, ids outside the study are a 400 naming them; amounts in minor units;
  paying is 202 and credits ``bonus_payments`` at once; paying the same bulk bonus twice is 400;
* hooks (§8): one secret per workspace (a new one replaces the old), a subscription needs a secret, an
  https public target (unless ``allow_insecure_targets``) and the ``X-Hook-Secret`` confirmation before
  anything is delivered; deliveries are POSTed from a background thread with the four headers, signed
  ``base64(HMAC_SHA256(secret, timestamp + body))`` over ``json.dumps(payload)`` with the workspace's
  secret at send time, retried on non-2xx or connection errors (12 attempts, short doubling delays), each
  attempt recorded in ``deliveries`` and each event in the subscription's events log;
* two pagination styles (§1.3): offset (``limit``/``offset``, ``_links`` and ``meta.count``) and page
  (``page``/``page_size`` on ``GET /submissions/``); ``page_cap`` caps any page size.

Fault injection: ``inject(method, path_regex, kind, times)`` with kind ``"429"`` or ``"500"`` (answered before
anything happens) or ``"lost"`` (the call takes effect, then 500); deliveries can be duplicated
(``duplicate_next``), held and released in reverse order (``hold_deliveries``/``release_deliveries``) or fail
with a connection error (``fail_target``). ``wait_deliveries()`` waits until nothing is queued or in flight.

Simplifications (not modelled): time (reservations last no time, nothing times out by itself, no 21-day
auto-approval), demographic filters (every participant passes filters other than the group lists),
concurrency limits, Taskflow ``access_details``, date filters of ``GET /submissions/`` (400), the
UNREJECT/UNRETURN/START/RETURN/SCREEN_OUT submission transitions (400), projects beyond one.
"""

import base64
import hashlib
import hmac
import http.client
import ipaddress
import json
import re
import secrets
import threading
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

# --- enums of the protocol -------------------------------------------------------------------------------
PROLIFIC_ID_OPTIONS = {"question", "url_parameters", "not_required"}
DEVICES = {"desktop", "tablet", "mobile"}
PERIPHERALS = {"audio", "camera", "download", "microphone"}
CODE_TYPES = {
    "COMPLETED",
    "FAILED_ATTENTION_CHECK",
    "FOLLOW_UP_STUDY",
    "GIVE_BONUS",
    "INCOMPATIBLE_DEVICE",
    "NO_CONSENT",
    "OTHER",
    "FIXED_SCREENOUT",
}
CODE_ACTIONS = {
    "AUTOMATICALLY_APPROVE",
    "MANUALLY_REVIEW",
    "ADD_TO_PARTICIPANT_GROUP",
    "REMOVE_FROM_PARTICIPANT_GROUP",
    "REQUEST_RETURN",
    "DYNAMIC_PAYMENT",
    "FIXED_SCREENOUT",
}
GROUP_ACTIONS = {"ADD_TO_PARTICIPANT_GROUP", "REMOVE_FROM_PARTICIPANT_GROUP"}
REJECTION_CATEGORIES = {
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
}
SUBMISSION_ACTIONS = {"APPROVE", "REJECT", "COMPLETE", "RETURN", "SCREEN_OUT", "START", "UNREJECT", "UNRETURN"}
SUBMISSION_STATUSES = [
    "RESERVED",
    "ACTIVE",
    "TIMED-OUT",
    "AWAITING REVIEW",
    "APPROVED",
    "RETURNED",
    "REJECTED",
    "SCREENED OUT",
    "PARTIALLY APPROVED",
]
FINAL_SUBMISSION = {"APPROVED", "REJECTED", "RETURNED", "TIMED-OUT", "SCREENED OUT", "PARTIALLY APPROVED"}
PENDING_SUBMISSION = {"RESERVED", "ACTIVE", "AWAITING REVIEW"}
PLACE_FREEING = {"REJECTED", "RETURNED", "TIMED-OUT"}
PLACEHOLDERS = ("{{%PROLIFIC_PID%}}", "{{%STUDY_ID%}}", "{{%SESSION_ID%}}")
EVENT_TYPES = {
    "submission.status.change": "A submission's status changed.",
    "study.status.change": "A study's status changed.",
    "study.progress.change": "A study's places taken changed.",
    "study.has_high_return_rate": "A study has a high return rate.",
    "participant.submission.created": "A participant started a submission.",
}
# the fields a draft may set (create or PATCH); the rest of the study object is read-only
STUDY_FIELDS = {
    "name",
    "internal_name",
    "description",
    "external_study_url",
    "prolific_id_option",
    "completion_codes",
    "completion_code",
    "completion_option",
    "total_available_places",
    "estimated_completion_time",
    "maximum_allowed_time",
    "reward",
    "device_compatibility",
    "peripheral_requirements",
    "filters",
    "filter_set_id",
    "filter_set_version",
    "submissions_config",
    "project",
    "study_labels",
    "content_warnings",
    "content_warning_details",
    "naivety_distribution_rate",
}
REQUIRED_STUDY_FIELDS = (
    "name",
    "description",
    "external_study_url",
    "prolific_id_option",
    "total_available_places",
    "estimated_completion_time",
    "reward",
)
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
}
MAX_ATTEMPTS = 12  # one delivery and 11 retries (§8.2)
FEE_RATE = Decimal(1) / Decimal(3)  # service fee about 33 % (§6)
VAT_RATE = Decimal("0.2")  # VAT on the fee


class FakeRefusal(Exception):
    """What Prolific's participant side would refuse (arriving at a paused or full study, a bad code...)."""


class ApiError(Exception):
    def __init__(self, status: int, detail, *, headers: dict | None = None):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.headers = status, detail, headers or {}


def _bad(field: str, message: str, status: int = 400):
    raise ApiError(status, {field: [message]})


def _not_found(what: str, ident: str):
    raise ApiError(404, f"{what} {ident} does not exist.")


def _oid() -> str:
    return secrets.token_hex(12)  # 24 hex characters, like an ObjectId


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _costs(amount: int) -> dict:
    fees = int((amount * FEE_RATE).to_integral_value())
    vat = int((fees * VAT_RATE).to_integral_value())
    return {"amount": amount, "fees": fees, "vat": vat, "total_amount": amount + fees + vat}


def _public(record: dict) -> dict:
    """The API view of a stored record: keys starting with ``_`` are the fake's own bookkeeping."""
    return {k: v for k, v in record.items() if not k.startswith("_")}


def _truthy(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "t", "y"):
        return True
    if lowered in ("0", "false", "no", "f", "n"):
        return False
    raise ValueError(value)


def _error_body(status: int, detail) -> dict:
    return {
        "error": {
            "status": status,
            "title": TITLES.get(status, "Error"),
            "error_code": status * 100,
            "detail": detail,
            "additional_information": "/api/v1/errors/",
        }
    }


# --- routing: (path regex under /api/v1/ with a trailing slash, {method: handler name}) -------------------
_ID = r"(?P<id>[^/]+)"
ROUTES = [
    (r"users/me/", {"GET": "get_me"}),
    (r"workspaces/", {"GET": "list_workspaces"}),
    (rf"workspaces/{_ID}/", {"GET": "get_workspace"}),
    (rf"workspaces/{_ID}/projects/", {"GET": "list_projects"}),
    (r"studies/", {"GET": "list_studies", "POST": "create_study"}),
    (rf"studies/{_ID}/", {"GET": "get_study", "PATCH": "patch_study", "DELETE": "delete_study"}),
    (rf"studies/{_ID}/transition/", {"POST": "transition_study"}),
    (rf"studies/{_ID}/submissions/", {"GET": "list_study_submissions"}),
    (rf"studies/{_ID}/submissions/counts/", {"GET": "count_submissions"}),
    (r"submissions/", {"GET": "list_submissions"}),
    (r"submissions/bulk-approve/", {"POST": "bulk_approve"}),
    (r"submissions/bonus-payments/", {"POST": "create_bonus"}),
    (rf"submissions/{_ID}/", {"GET": "get_submission"}),
    (rf"submissions/{_ID}/transition/", {"POST": "transition_submission"}),
    (rf"submissions/{_ID}/request-return/", {"POST": "request_return"}),
    (rf"bulk-bonus-payments/{_ID}/pay/", {"POST": "pay_bonus"}),
    (r"participant-groups/", {"GET": "list_groups", "POST": "create_group"}),
    (rf"participant-groups/{_ID}/", {"GET": "get_group", "PATCH": "patch_group", "DELETE": "delete_group"}),
    (
        rf"participant-groups/{_ID}/participants/",
        {"GET": "list_members", "POST": "add_members", "DELETE": "remove_members"},
    ),
    (r"messages/", {"GET": "list_messages", "POST": "send_message"}),
    (r"messages/bulk/", {"POST": "send_bulk_message"}),
    (r"messages/participant-group/", {"POST": "send_group_message"}),
    (r"hooks/event-types/", {"GET": "list_event_types"}),
    (r"hooks/secrets/", {"GET": "list_secrets", "POST": "create_secret"}),
    (r"hooks/subscriptions/", {"GET": "list_subscriptions", "POST": "create_subscription"}),
    (
        rf"hooks/subscriptions/{_ID}/",
        {
            "GET": "get_subscription",
            "POST": "confirm_subscription",
            "PATCH": "patch_subscription",
            "DELETE": "delete_subscription",
        },
    ),
    (rf"hooks/subscriptions/{_ID}/events/", {"GET": "list_events"}),
]
ROUTES = [(re.compile(pattern), methods) for pattern, methods in ROUTES]


class FakeProlific:
    def __init__(
        self,
        *,
        tokens=("test-token",),
        page_cap: int = 100,
        allow_insecure_targets: bool = False,
        retry_delay: float = 0.2,
        retry_cap: float = 2.0,
        transport=None,
    ):
        """``retry_delay`` is the first delivery retry delay (it doubles, up to ``retry_cap``); ``transport``,
        if given, replaces the HTTP POST of deliveries: ``transport(url, body: bytes, headers: dict) -> int``
        (the status; an exception counts as a connection error)."""
        self.lock = threading.RLock()
        self.tokens = set(tokens)
        self.page_cap = page_cap
        self.allow_insecure_targets = allow_insecure_targets
        self.retry_delay, self.retry_cap, self.transport = retry_delay, retry_cap, transport
        self.user = {
            "id": _oid(),
            "email": "researcher@chorus.test",
            "name": "Chorus Researcher",
            "currency_code": "GBP",
            "balance": 10_000_000,
            "available_balance": 10_000_000,
        }
        self.workspace_id = _oid()
        self.project_id = _oid()
        self.workspaces = {
            self.workspace_id: {
                "id": self.workspace_id,
                "title": "Chorus workspace",
                "description": "",
                "owner": self.user["id"],
                "users": [{"id": self.user["id"], "name": self.user["name"], "roles": ["WORKSPACE_ADMIN"]}],
                "projects": [{"id": self.project_id}],
                "naivety_distribution_rate": None,
            }
        }
        self.projects = {
            self.project_id: {"id": self.project_id, "title": "Chorus project", "workspace": self.workspace_id}
        }
        self.studies: dict[str, dict] = {}
        self.submissions: dict[str, dict] = {}
        self.groups: dict[str, dict] = {}
        self.bulk_bonuses: dict[str, dict] = {}
        self.messages: list[dict] = []
        self.hook_secrets: dict[str, dict] = {}  # workspace id -> current secret
        self.subscriptions: dict[str, dict] = {}
        self.events: dict[str, dict] = {}  # event id -> events-log entry (one per event and subscription)
        self.calls: list[tuple[str, str, int]] = []
        self.deliveries: list[dict] = []
        self.faults: list[list] = []  # [method, compiled regex, kind, remaining]
        # delivery queue: jobs {event_id, subscription_id, body, attempt, due}; sent in order by one thread
        self._queue: list[dict] = []
        self._held: list[dict] | None = None
        self._in_flight = 0
        self._duplicate = 0
        self._fail_target = 0
        self._last_event_time = 0.0
        self._cv = threading.Condition(self.lock)
        self._stopping = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.fake = self
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
        self.dispatcher = threading.Thread(target=self._dispatch_loop, daemon=True)

    # --- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> "FakeProlific":
        self.thread.start()
        self.dispatcher.start()
        return self

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self.server.shutdown()
        self.server.server_close()
        self.dispatcher.join(timeout=5)

    @property
    def root(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/"

    @property
    def url(self) -> str:
        return self.root + "api/v1/"

    def inject(self, method: str, path_regex: str, kind: str, times: int = 1) -> None:
        """Fail the next ``times`` calls whose method matches (``"*"`` for any) and whose path (without the
        query, with a trailing slash) ``re.search``-matches ``path_regex``."""
        assert kind in ("429", "500", "lost"), kind
        with self.lock:
            self.faults.append([method.upper(), re.compile(path_regex), kind, times])

    # --- bookkeeping helpers -----------------------------------------------------------------------------
    def _study(self, study_id) -> dict:
        study = self.studies.get(study_id) if isinstance(study_id, str) else None
        if study is None:
            _not_found("Study", str(study_id))
        return study

    def _submission(self, submission_id) -> dict:
        sub = self.submissions.get(submission_id) if isinstance(submission_id, str) else None
        if sub is None:
            _not_found("Submission", str(submission_id))
        return sub

    def _group(self, group_id) -> dict:
        group = self.groups.get(group_id) if isinstance(group_id, str) else None
        if group is None:
            _not_found("Participant group", str(group_id))
        return group

    def group_members(self, group_id: str) -> list[str]:
        with self.lock:
            return list(self.groups[group_id]["_members"])

    def _study_submissions(self, study) -> list[dict]:
        return [s for s in self.submissions.values() if s["study_id"] == study["id"]]

    def _places_taken(self, study) -> int:
        return sum(s["status"] not in PLACE_FREEING for s in self._study_submissions(study))

    def _study_view(self, study) -> dict:
        return _public(study)

    def _price(self, study) -> None:
        if not study["_explicit_max_time"]:  # Prolific computes one when none is given (always < 24 h)
            study["maximum_allowed_time"] = min(study["estimated_completion_time"] * 3 + 2, 24 * 60 - 1)
        reward, places, minutes = study["reward"], study["total_available_places"], study["estimated_completion_time"]
        study["total_cost"] = _costs(reward * places)["total_amount"]
        per_hour = round(reward * 60 / minutes)
        study["estimated_reward_per_hour"] = per_hour
        study["average_reward_per_hour"] = per_hour
        study["is_underpaying"] = per_hour < 600  # Prolific's minimum is about £6/h

    # --- events -----------------------------------------------------------------------------------------
    def _set_study_status(self, study, status: str) -> None:
        if study["status"] == status:
            return
        study["status"] = status
        self._emit(
            "study.status.change",
            study["id"],
            {"resource_id": study["id"], "event_type": "study.status.change", "metadata": {}, "status": status},
        )

    def _set_submission_status(self, sub, status: str) -> None:
        if sub["status"] == status:
            return
        sub["status"] = status
        if status in FINAL_SUBMISSION | {"AWAITING REVIEW"} and sub["completed_at"] is None:
            sub["completed_at"] = _now_iso()
        self._emit(
            "submission.status.change",
            sub["id"],
            {
                "resource_id": sub["id"],
                "event_type": "submission.status.change",
                "participant_id": sub["participant_id"],
                "status": status,
            },
        )

    def _settle(self, study, *, auto_pause: bool = False) -> None:
        """Apply §2.2's automatic rules after places or submissions changed. ``auto_pause``: the change was
        a rejection or the return of an AWAITING REVIEW submission."""
        taken = self._places_taken(study)
        if taken != study["places_taken"]:
            study["places_taken"] = taken
            self._emit(
                "study.progress.change",
                study["id"],
                {"resource_id": study["id"], "event_type": "study.progress.change"},
            )
        full = taken >= study["total_available_places"]
        pending = any(s["status"] in PENDING_SUBMISSION for s in self._study_submissions(study))
        done = "AWAITING REVIEW" if pending else "COMPLETED"
        if study["status"] == "ACTIVE" and full:
            self._set_study_status(study, done)
        elif study["status"] in ("AWAITING REVIEW", "COMPLETED") and not study["_stopped"] and not full:
            self._set_study_status(study, "PAUSED" if auto_pause else "ACTIVE")
        elif study["status"] == "AWAITING REVIEW" and (study["_stopped"] or full) and not pending:
            self._set_study_status(study, "COMPLETED")

    def _emit(self, event_type: str, resource_id: str, payload: dict) -> None:
        now = max(time.time(), self._last_event_time + 1e-6)
        self._last_event_time = now
        for sub in self.subscriptions.values():
            if not (sub["is_enabled"] and sub["_confirmed"] and sub["event_type"] == event_type):
                continue
            event_id = str(uuid.uuid4())
            self.events[event_id] = {
                "id": event_id,
                "datetime_created": _now_iso(),
                "datetime_updated": _now_iso(),
                "event_type": event_type,
                "resource_id": resource_id,
                "status": "PENDING",
                "target_url": sub["target_url"],
                "_subscription": sub["id"],
            }
            copies = 1
            if self._duplicate > 0:
                self._duplicate -= 1
                copies = 2
            for _ in range(copies):
                job = {
                    "event_id": event_id,
                    "subscription_id": sub["id"],
                    "body": payload,
                    "event_time": now,
                    "attempt": 1,
                    "due": 0.0,
                }
                if self._held is not None:
                    self._held.append(job)
                else:
                    self._queue.append(job)
        self._cv.notify_all()

    # --- delivery fault injection and synchronisation ------------------------------------------------------
    def duplicate_next(self, n: int = 1) -> None:
        with self.lock:
            self._duplicate += n

    def hold_deliveries(self) -> None:
        with self.lock:
            if self._held is None:
                self._held = []

    def release_deliveries(self, reverse: bool = False) -> None:
        with self._cv:
            held, self._held = self._held or [], None
            self._queue.extend(reversed(held) if reverse else held)
            self._cv.notify_all()

    def fail_target(self, times: int) -> None:
        with self.lock:
            self._fail_target += times

    def wait_deliveries(self, timeout: float = 30.0) -> bool:
        """Wait until no delivery is queued (held ones aside) or in flight; False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._queue and not self._in_flight, timeout=timeout)

    def _dispatch_loop(self) -> None:
        while True:
            with self._cv:
                while True:
                    if self._stopping:
                        return
                    now = time.monotonic()
                    ready = [j for j in self._queue if j["due"] <= now]
                    if ready:
                        job = ready[0]
                        self._queue.remove(job)
                        break
                    wait = min((j["due"] for j in self._queue), default=now + 1.0) - now
                    self._cv.wait(timeout=max(wait, 0.001))
                sub = self.subscriptions.get(job["subscription_id"])
                if sub is None or not sub["is_enabled"]:
                    self._finish_event(job, "FAILED")
                    self._cv.notify_all()
                    continue
                self._in_flight += 1
                target = sub["target_url"]
                secret = self.hook_secrets.get(sub["workspace_id"], {}).get("value", "")
                injected = self._fail_target > 0
                if injected:
                    self._fail_target -= 1
            body = json.dumps(job["body"]).encode()
            timestamp = str(int(time.time()))
            signature = base64.b64encode(
                hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
            ).decode()
            headers = {
                "Content-Type": "application/json",
                "X-Prolific-Request-Signature": signature,
                "X-Prolific-Request-Timestamp": timestamp,
                "X-Event-ID": job["event_id"],
                "X-Timestamp": str(int(job["event_time"])),
            }
            status, error = None, None
            if injected:
                error = "injected connection error"
            else:
                try:
                    status = self._post(target, body, headers)
                except Exception as exc:  # any failure to deliver counts as a connection error
                    error = f"{type(exc).__name__}: {exc}"
            with self._cv:
                self._in_flight -= 1
                record = {
                    "event_id": job["event_id"],
                    "event_type": job["body"]["event_type"],
                    "body": job["body"],
                    "target_url": target,
                    "attempt": job["attempt"],
                    "subscription_id": job["subscription_id"],
                    "headers": headers,
                }
                record.update({"status": status} if error is None else {"error": error})
                self.deliveries.append(record)
                if status is not None and 200 <= status < 300:
                    self._finish_event(job, "SUCCEEDED")
                elif job["attempt"] >= MAX_ATTEMPTS:
                    self._finish_event(job, "FAILED")
                else:
                    delay = min(self.retry_delay * 2 ** (job["attempt"] - 1), self.retry_cap)
                    self._queue.append({**job, "attempt": job["attempt"] + 1, "due": time.monotonic() + delay})
                self._cv.notify_all()

    def _finish_event(self, job, status: str) -> None:
        event = self.events.get(job["event_id"])
        if event is not None and event["status"] != "SUCCEEDED":
            event["status"], event["datetime_updated"] = status, _now_iso()

    def _post(self, url: str, body: bytes, headers: dict) -> int:
        if self.transport is not None:
            return int(self.transport(url, body, dict(headers)))
        # http.client rather than urllib, which would rewrite the header names' case (X-event-id)
        parts = urlsplit(url)
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = connection_class(parts.hostname, parts.port, timeout=3)
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request("POST", path, body=body, headers={**headers, "Content-Length": str(len(body))})
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    # --- request handling ---------------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers, raw_body: bytes):
        """One /api/v1 call -> (status, JSON-able body or None, extra headers)."""
        parts = urlsplit(raw_path)
        path = parts.path if parts.path.endswith("/") else parts.path + "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        with self.lock:
            fault = None
            for entry in self.faults:
                if entry[3] > 0 and entry[0] in ("*", method) and entry[1].search(path):
                    entry[3] -= 1
                    fault = entry[2]
                    break
            if fault in ("429", "500"):
                status = int(fault)
                self.calls.append((method, path, status))
                detail = "Request was throttled." if status == 429 else "Internal server error (injected)."
                return status, _error_body(status, detail), {}
            try:
                status, body, extra = self._route(method, path[len("/api/v1/") :], query, headers, raw_body)
            except ApiError as exc:
                status, body, extra = exc.status, _error_body(exc.status, exc.detail), exc.headers
            if fault == "lost":
                status, body, extra = 500, _error_body(500, "Internal server error (injected)."), {}
            self.calls.append((method, path, status))
            return status, body, extra

    def _route(self, method, sub_path, query, headers, raw_body):
        auth = headers.get("Authorization") or ""
        scheme, _, token = auth.partition(" ")
        if scheme != "Token" or token.strip() not in self.tokens:
            raise ApiError(401, "Authentication credentials were not provided or are invalid.")
        for pattern, methods in ROUTES:
            match = pattern.fullmatch(sub_path)
            if match is None:
                continue
            if method not in methods:
                raise ApiError(405, f'Method "{method}" not allowed.')
            body = {}
            if raw_body.strip():
                try:
                    body = json.loads(raw_body)
                except ValueError:
                    raise ApiError(400, {"non_field_errors": ["The body is not valid JSON."]}) from None
            if method in ("POST", "PATCH") and not isinstance(body, dict):
                raise ApiError(400, {"non_field_errors": ["The body must be a JSON object."]})
            result = getattr(self, "api_" + methods[method])(query, body, **match.groupdict())
            if len(result) == 2:
                return (*result, {})
            return result
        raise ApiError(404, "Not found.")

    # --- pagination -----------------------------------------------------------------------------------------
    def _int_param(self, query, name, default, minimum):
        try:
            value = int(query.get(name, default))
        except ValueError:
            _bad(name, "A valid integer is required.")
        if value < minimum:
            _bad(name, f"Ensure this value is greater than or equal to {minimum}.")
        return value

    def _link(self, path, query, **params):
        return self.url + path + "?" + urlencode({**query, **params})

    def _offset_page(self, items, query, path):
        limit = min(self._int_param(query, "limit", 20, 1), self.page_cap)
        offset = self._int_param(query, "offset", 0, 0)
        count = len(items)
        last = max((count - 1) // limit * limit, 0)
        return {
            "results": items[offset : offset + limit],
            "_links": {
                "self": {"href": self._link(path, query, limit=limit, offset=offset), "title": "Current"},
                "next": {
                    "href": self._link(path, query, limit=limit, offset=offset + limit)
                    if offset + limit < count
                    else None,
                    "title": "Next",
                },
                "previous": {
                    "href": self._link(path, query, limit=limit, offset=max(offset - limit, 0)) if offset else None,
                    "title": "Previous",
                },
                "last": {"href": self._link(path, query, limit=limit, offset=last), "title": "Last"},
            },
            "meta": {"count": count},
        }

    def _page_page(self, items, query, path):
        size = min(self._int_param(query, "page_size", 20, 1), self.page_cap)
        page = self._int_param(query, "page", 1, 1)
        count = len(items)
        pages = max((count + size - 1) // size, 1)
        start = (page - 1) * size
        return {
            "results": items[start : start + size],
            "_links": {
                "self": {"href": self._link(path, query, page=page, page_size=size), "title": "Current"},
                "next": {
                    "href": self._link(path, query, page=page + 1, page_size=size) if page < pages else None,
                    "title": "Next",
                },
                "previous": {
                    "href": self._link(path, query, page=page - 1, page_size=size) if page > 1 else None,
                    "title": "Previous",
                },
                "last": {"href": self._link(path, query, page=pages, page_size=size), "title": "Last"},
            },
            "meta": {"count": count},
        }

    # --- account and workspaces ---------------------------------------------------------------------------------
    def api_get_me(self, query, body):
        return 200, dict(self.user)

    def api_list_workspaces(self, query, body):
        return 200, self._offset_page(list(self.workspaces.values()), query, "workspaces/")

    def api_get_workspace(self, query, body, id):
        if id not in self.workspaces:
            _not_found("Workspace", id)
        return 200, self.workspaces[id]

    def api_list_projects(self, query, body, id):
        if id not in self.workspaces:
            _not_found("Workspace", id)
        items = [p for p in self.projects.values() if p["workspace"] == id]
        return 200, self._offset_page(items, query, f"workspaces/{id}/projects/")

    # --- studies ---------------------------------------------------------------------------------------------
    def _validate_study(self, data: dict) -> list[dict]:
        """Field errors of a draft (``data`` is the whole draft after the change). Returns the normalised
        completion codes."""
        errors: dict[str, list[str]] = {}

        def err(field, message):
            errors.setdefault(field, []).append(message)

        for field in REQUIRED_STUDY_FIELDS:
            if field not in data or data[field] is None:
                err(field, "This field is required.")
        for field in ("name", "description"):
            if field in data and (not isinstance(data[field], str) or not data[field].strip()):
                err(field, "Must be a non-empty string.")
        if "internal_name" in data and data["internal_name"] is not None and not isinstance(data["internal_name"], str):
            err("internal_name", "Must be a string.")
        url = data.get("external_study_url")
        if url is not None:
            if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
                err("external_study_url", "Enter a valid URL.")
            else:
                missing = [p for p in PLACEHOLDERS if p not in url]
                if missing:
                    err("external_study_url", f"The URL must contain {', '.join(missing)}.")
        if "prolific_id_option" in data and data["prolific_id_option"] not in PROLIFIC_ID_OPTIONS:
            err("prolific_id_option", f"Must be one of {sorted(PROLIFIC_ID_OPTIONS)}.")
        for field in ("total_available_places", "estimated_completion_time", "reward"):
            if field in data and data[field] is not None and (not _is_int(data[field]) or data[field] < 1):
                err(field, "Must be an integer greater than or equal to 1.")
        mat = data.get("maximum_allowed_time")
        if mat is not None:
            ect = data.get("estimated_completion_time")
            if not _is_int(mat) or mat < 1 or mat >= 24 * 60:
                err("maximum_allowed_time", "Must be an integer number of minutes, less than 24 hours.")
            elif _is_int(ect) and mat < ect:
                err("maximum_allowed_time", "Must not be less than estimated_completion_time.")
        for field, allowed in (("device_compatibility", DEVICES), ("peripheral_requirements", PERIPHERALS)):
            value = data.get(field)
            if value is not None and (
                not isinstance(value, list) or not all(isinstance(v, str) and v in allowed for v in value)
            ):
                err(field, f"Must be a list of values from {sorted(allowed)}.")
        if "completion_option" in data and data["completion_option"] not in (None, "code", "url"):
            err("completion_option", "Must be one of ['code', 'url'].")
        if "project" in data and data["project"] is not None and data["project"] not in self.projects:
            err("project", f"Project {data['project']} does not exist.")
        if "submissions_config" in data and not isinstance(data["submissions_config"], dict | None):
            err("submissions_config", "Must be an object.")
        self._validate_filters(data.get("filters"), err)
        codes = self._validate_codes(data, err)
        if errors:
            raise ApiError(400, errors)
        return codes

    def _validate_filters(self, filters, err) -> None:
        if filters is None:
            return
        if not isinstance(filters, list):
            err("filters", "Must be a list.")
            return
        for i, f in enumerate(filters):
            if not isinstance(f, dict) or not isinstance(f.get("filter_id"), str) or not f["filter_id"]:
                err("filters", f"Item {i}: filter_id is required.")
                continue
            has_values, has_range = "selected_values" in f, "selected_range" in f
            if has_values == has_range:
                err("filters", f"Item {i}: give exactly one of selected_values and selected_range.")
            elif has_values and (
                not isinstance(f["selected_values"], list) or not all(isinstance(v, str) for v in f["selected_values"])
            ):
                err("filters", f"Item {i}: selected_values must be a list of strings.")
            elif has_range and (
                not isinstance(f["selected_range"], dict) or not set(f["selected_range"]) <= {"lower", "upper"}
            ):
                err("filters", f"Item {i}: selected_range must be an object with lower and/or upper.")
            elif f["filter_id"] in ("participant_group_blocklist", "participant_group_allowlist") and has_values:
                unknown = [g for g in f["selected_values"] if g not in self.groups]
                if unknown:
                    err("filters", f"Item {i}: unknown participant groups {', '.join(unknown)}.")

    def _validate_codes(self, data, err) -> list[dict]:
        codes = data.get("completion_codes")
        if codes is None:
            legacy = data.get("completion_code")
            if legacy is None:
                err("completion_codes", "This field is required.")
                return []
            if not isinstance(legacy, str) or not legacy.strip():
                err("completion_code", "Must be a non-empty string.")
                return []
            # the retired single code becomes one participant COMPLETED code reviewed by hand (§3)
            return [
                {
                    "code": legacy,
                    "code_type": "COMPLETED",
                    "actor": "participant",
                    "actions": [{"action": "MANUALLY_REVIEW"}],
                }
            ]
        if not isinstance(codes, list) or not codes:
            err("completion_codes", "Must be a non-empty list.")
            return []
        seen, out = set(), []
        for i, c in enumerate(codes):
            if not isinstance(c, dict):
                err("completion_codes", f"Item {i}: must be an object.")
                continue
            code = c.get("code")
            if not isinstance(code, str) or not code.strip():
                err("completion_codes", f"Item {i}: code must be a non-empty string.")
            elif code in seen:
                err("completion_codes", f"Item {i}: code {code} is repeated.")
            seen.add(code)
            if c.get("code_type") not in CODE_TYPES:
                err("completion_codes", f"Item {i}: code_type must be one of {sorted(CODE_TYPES)}.")
            actor = c.get("actor", "participant")
            if actor not in ("participant", "researcher"):
                err("completion_codes", f"Item {i}: actor must be participant or researcher.")
            actions = c.get("actions")
            if not isinstance(actions, list) or not actions:
                err("completion_codes", f"Item {i}: actions must be a non-empty list.")
                actions = []
            for j, a in enumerate(actions):
                if not isinstance(a, dict) or a.get("action") not in CODE_ACTIONS:
                    err("completion_codes", f"Item {i}, action {j}: action must be one of {sorted(CODE_ACTIONS)}.")
                elif a["action"] in GROUP_ACTIONS and a.get("participant_group") not in self.groups:
                    err("completion_codes", f"Item {i}, action {j}: unknown participant_group.")
            out.append({**c, "actor": actor})
        return out

    def api_create_study(self, query, body):
        data = {k: v for k, v in body.items() if k in STUDY_FIELDS}
        codes = self._validate_study(data)
        study_id = _oid()
        study = {
            "id": study_id,
            "name": data["name"],
            "internal_name": data.get("internal_name") or "",
            "description": data["description"],
            "date_created": _now_iso(),
            "status": "UNPUBLISHED",
            "study_type": "SINGLE",
            "total_available_places": data["total_available_places"],
            "places_taken": 0,
            "number_of_submissions": 0,
            "external_study_url": data["external_study_url"],
            "prolific_id_option": data["prolific_id_option"],
            "completion_codes": codes,
            "completion_code": data.get("completion_code"),
            "completion_option": data.get("completion_option", "code"),
            "estimated_completion_time": data["estimated_completion_time"],
            "maximum_allowed_time": data.get("maximum_allowed_time"),
            "published_at": None,
            "started_publishing_at": None,
            "publish_at": None,
            "reward": data["reward"],
            "currency_code": "GBP",
            "presentment_currency_code": "GBP",
            "filters": data.get("filters") or [],
            "eligibility_requirements": [],
            "device_compatibility": data.get("device_compatibility") or ["desktop", "tablet", "mobile"],
            "peripheral_requirements": data.get("peripheral_requirements") or [],
            "researcher": {
                "id": self.user["id"],
                "name": self.user["name"],
                "email": self.user["email"],
                "country": "GB",
                "institution": {"name": "Chorus", "logo": None, "link": ""},
            },
            "is_pilot": False,
            "submissions_config": data.get("submissions_config")
            or {"max_submissions_per_participant": 1, "max_concurrent_submissions": -1},
            "can_auto_review": False,
            "project": data.get("project") or self.project_id,
            "workspace": self.workspace_id,
            "study_labels": data.get("study_labels") or [],
            "_stopped": False,
            "_reserved": 0,  # minor units reserved from available_balance
            "_explicit_max_time": data.get("maximum_allowed_time") is not None,
        }
        for extra in ("content_warnings", "content_warning_details", "naivety_distribution_rate"):
            if extra in data:
                study[extra] = data[extra]
        self._set_completion_url(study)
        self._price(study)
        self.studies[study_id] = study
        return 201, self._study_view(study)

    @staticmethod
    def _set_completion_url(study) -> None:
        first = next((c["code"] for c in study["completion_codes"] if c["actor"] == "participant"), None)
        study["completion_url"] = f"https://app.prolific.com/submissions/complete?cc={first}" if first else None

    def api_list_studies(self, query, body):
        items = [self._study_view(s) for s in self.studies.values()]
        return 200, self._offset_page(items, query, "studies/")

    def api_get_study(self, query, body, id):
        return 200, self._study_view(self._study(id))

    def api_patch_study(self, query, body, id):
        study = self._study(id)
        if study["status"] == "UNPUBLISHED":
            readonly = sorted(k for k in body if k not in STUDY_FIELDS)
            if readonly:
                raise ApiError(400, {k: ["This field cannot be changed."] for k in readonly})
            merged = {k: study.get(k) for k in STUDY_FIELDS if k in study} | body
            if not study["_explicit_max_time"] and "maximum_allowed_time" not in body:
                merged.pop("maximum_allowed_time")
            if "completion_codes" not in body and "completion_code" in body:
                merged.pop("completion_codes", None)
            codes = self._validate_study(merged)
            study.update(body)
            study["completion_codes"] = codes
            if "maximum_allowed_time" in body:
                study["_explicit_max_time"] = body["maximum_allowed_time"] is not None
            self._set_completion_url(study)
            self._price(study)
            return 200, self._study_view(study)
        refused = sorted(k for k in body if k not in ("internal_name", "total_available_places"))
        if refused:
            raise ApiError(400, {k: ["This field cannot be changed once the study is published."] for k in refused})
        if "internal_name" in body and not isinstance(body["internal_name"], str):
            _bad("internal_name", "Must be a string.")
        if "total_available_places" in body:
            places = body["total_available_places"]
            if not _is_int(places) or places < 1:
                _bad("total_available_places", "Must be an integer greater than or equal to 1.")
            if places < study["total_available_places"]:
                _bad("total_available_places", "The number of places can only be increased.")
            if places > study["total_available_places"]:
                if study["_stopped"]:
                    _bad("total_available_places", "A stopped study cannot be given more places.")
                extra = _costs(study["reward"] * (places - study["total_available_places"]))["total_amount"]
                if extra > self.user["available_balance"]:
                    _bad("total_available_places", "Insufficient funds.")
                self.user["available_balance"] -= extra
                study["_reserved"] += extra
                study["total_available_places"] = places
        if "internal_name" in body:
            study["internal_name"] = body["internal_name"]
        self._price(study)
        self._settle(study)
        return 200, self._study_view(study)

    def api_delete_study(self, query, body, id):
        study = self._study(id)
        if study["status"] != "UNPUBLISHED":
            _bad("status", "Only a draft study can be deleted.")
        del self.studies[id]
        return 200, "Deleted"

    def api_transition_study(self, query, body, id):
        study = self._study(id)
        action, status = body.get("action"), study["status"]
        if action not in ("PUBLISH", "PAUSE", "START", "STOP"):
            _bad("action", "Must be one of PUBLISH, PAUSE, START, STOP.")
        if action == "PUBLISH":
            if status != "UNPUBLISHED":
                _bad("action", f"A study in status {status} cannot be published.")
            if study["total_cost"] > self.user["available_balance"]:
                _bad("action", "Insufficient funds to publish this study.")
            self.user["available_balance"] -= study["total_cost"]
            study["_reserved"] = study["total_cost"]
            study["started_publishing_at"] = study["published_at"] = _now_iso()
            study["status"] = "PUBLISHING"  # processed at once: no event for the transient status
            self._set_study_status(study, "ACTIVE")
        elif action == "PAUSE":
            if status != "ACTIVE":
                _bad("action", f"A study in status {status} cannot be paused.")
            self._set_study_status(study, "PAUSED")
        elif action == "START":
            if status != "PAUSED":
                _bad("action", f"A study in status {status} cannot be started.")
            self._set_study_status(study, "ACTIVE")
        else:  # STOP
            if status in ("UNPUBLISHED", "PUBLISHING", "COMPLETED") or study["_stopped"]:
                _bad("action", f"A study in status {status} cannot be stopped.")
            study["_stopped"] = True
            unused = max(study["total_available_places"] - study["places_taken"], 0)
            refund = min(_costs(study["reward"] * unused)["total_amount"], study["_reserved"])
            self.user["available_balance"] += refund
            study["_reserved"] -= refund
            pending = any(s["status"] in PENDING_SUBMISSION for s in self._study_submissions(study))
            self._set_study_status(study, "AWAITING REVIEW" if pending else "COMPLETED")
        self._settle(study)
        return 200, self._study_view(study)

    # --- submissions -----------------------------------------------------------------------------------------
    def _submission_view(self, sub) -> dict:
        return _public(sub)

    def api_list_study_submissions(self, query, body, id):
        study = self._study(id)
        items = [self._submission_view(s) for s in self._study_submissions(study)]
        return 200, self._offset_page(items, query, f"studies/{id}/submissions/")

    def api_count_submissions(self, query, body, id):
        study = self._study(id)
        counts = dict.fromkeys(SUBMISSION_STATUSES, 0)
        for s in self._study_submissions(study):
            counts[s["status"]] += 1
        counts["TOTAL"] = sum(counts.values())
        return 200, counts

    def api_list_submissions(self, query, body):
        items = list(self.submissions.values())
        if "study" in query:
            items = [s for s in items if s["study_id"] == query["study"]]
        if "status" in query:
            wanted = query["status"].strip().upper().replace("_", " ")
            wanted = {"TIMED OUT": "TIMED-OUT"}.get(wanted, wanted)
            if wanted not in SUBMISSION_STATUSES:
                _bad("status", f"Unknown status {query['status']}.")
            items = [s for s in items if s["status"] == wanted]
        flags = {
            "completed": {"AWAITING REVIEW", "APPROVED", "REJECTED", "PARTIALLY APPROVED", "SCREENED OUT"},
            "returned": {"RETURNED"},
            "awaiting_review": {"AWAITING REVIEW"},
            "approved": {"APPROVED"},
            "active": {"ACTIVE", "RESERVED"},
            "timeout": {"TIMED-OUT"},
        }
        for name, statuses in flags.items():
            if name in query:
                try:
                    on = _truthy(query[name])
                except ValueError:
                    _bad(name, "Must be a boolean.")
                items = [s for s in items if (s["status"] in statuses) == on]
        for name in query:
            if name not in {"study", "status", "page", "page_size", *flags}:
                _bad(name, "This filter is not modelled by the stand-in.")
        return 200, self._page_page([self._submission_view(s) for s in items], query, "submissions/")

    def api_get_submission(self, query, body, id):
        return 200, self._submission_view(self._submission(id))

    def api_request_return(self, query, body, id):
        sub = self._submission(id)
        reasons = body.get("request_return_reasons")
        if not isinstance(reasons, list) or not reasons or not all(isinstance(r, str) for r in reasons):
            _bad("request_return_reasons", "Must be a non-empty list of strings.")
        if sub["status"] not in ("ACTIVE", "AWAITING REVIEW"):
            _bad("status", f"A return cannot be requested for a submission in status {sub['status']}.")
        sub["return_requested"] = True
        return 200, {k: sub[k] for k in ("id", "status", "participant", "return_requested")}

    def api_transition_submission(self, query, body, id):
        sub = self._submission(id)
        study = self.studies[sub["study_id"]]
        action = body.get("action")
        if action not in SUBMISSION_ACTIONS:
            _bad("action", f"Must be one of {sorted(SUBMISSION_ACTIONS)}.")
        if action == "APPROVE":
            if sub["status"] == "APPROVED":
                return 200, self._submission_view(sub)  # idempotent: the repeat is ignored
            if sub["status"] != "AWAITING REVIEW":
                _bad("action", f"Only AWAITING REVIEW submissions can be approved, not {sub['status']}.")
            self._set_submission_status(sub, "APPROVED")
            self._settle(study)
        elif action == "REJECT":
            message, category = body.get("message"), body.get("rejection_category")
            errors = {}
            if not isinstance(message, str) or len(message) < 100:
                errors["message"] = ["A rejection message of at least 100 characters is required."]
            if category not in REJECTION_CATEGORIES:
                errors["rejection_category"] = [f"Must be one of {sorted(REJECTION_CATEGORIES)}."]
            if errors:
                raise ApiError(400, errors)
            if sub["status"] == "REJECTED":
                return 200, self._submission_view(sub)
            if sub["status"] != "AWAITING REVIEW":
                _bad("action", f"Only AWAITING REVIEW submissions can be rejected, not {sub['status']}.")
            was_full_review = study["status"] == "AWAITING REVIEW"
            sub["rejection"] = {"message": message, "rejection_category": category}
            self._set_submission_status(sub, "REJECTED")
            self._settle(study, auto_pause=was_full_review)
        elif action == "COMPLETE":
            code = self._code(study, body.get("completion_code"), field="completion_code")
            if code["actor"] != "researcher":
                _bad("completion_code", "Only a code whose actor is researcher can be applied by the COMPLETE action.")
            if sub["status"] in FINAL_SUBMISSION and sub["entered_code"] == code["code"]:
                return 200, self._submission_view(sub)
            if sub["status"] not in ("ACTIVE", "RESERVED", "AWAITING REVIEW"):
                _bad("action", f"A submission in status {sub['status']} cannot be completed.")
            data = body.get("completion_code_data")
            if any(a["action"] == "DYNAMIC_PAYMENT" for a in code["actions"]):
                pct = data.get("percentage_of_reward") if isinstance(data, dict) else None
                if not _is_int(pct) or not 8 <= pct <= 99:
                    _bad("completion_code_data", "percentage_of_reward must be an integer from 8 to 99.")
            self._apply_code(sub, study, code, data)
        else:
            _bad("action", f"The {action} transition is not modelled by the stand-in.")
        return 200, self._submission_view(sub)

    def api_bulk_approve(self, query, body):
        if "submission_ids" in body:
            ids = body["submission_ids"]
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
                _bad("submission_ids", "Must be a non-empty list of submission ids.")
            unknown = [i for i in ids if i not in self.submissions]
            if unknown:
                _bad("submission_ids", f"Unknown submissions: {', '.join(unknown)}.")
            subs = [self.submissions[i] for i in ids]
        elif "study_id" in body or "participant_ids" in body:
            study = self.studies.get(body.get("study_id")) if isinstance(body.get("study_id"), str) else None
            if study is None:
                _bad("study_id", "A valid study_id is required with participant_ids.")
            pids = body.get("participant_ids")
            if not isinstance(pids, list) or not pids or not all(isinstance(p, str) for p in pids):
                _bad("participant_ids", "Must be a non-empty list of participant ids.")
            by_pid = {s["participant_id"]: s for s in self._study_submissions(study)}
            unknown = [p for p in pids if p not in by_pid]
            if unknown:
                _bad("participant_ids", f"Not in the study: {', '.join(unknown)}.")
            subs = [by_pid[p] for p in pids]
        else:
            _bad("submission_ids", "Give submission_ids, or study_id and participant_ids.")
        # Prolific approves asynchronously and quietly skips what cannot be approved; the stand-in does it now
        touched = []
        for sub in subs:
            if sub["status"] == "AWAITING REVIEW":
                self._set_submission_status(sub, "APPROVED")
                touched.append(sub["study_id"])
        for study_id in dict.fromkeys(touched):
            self._settle(self.studies[study_id])
        return 200, "The request to bulk approve has been made successfully."

    # --- participant groups --------------------------------------------------------------------------------
    def _group_view(self, group) -> dict:
        return {**_public(group), "participant_count": len(group["_members"])}

    def _participant_ids(self, body) -> list[str]:
        ids = body.get("participant_ids")
        if not isinstance(ids, list) or not all(isinstance(p, str) and p for p in ids):
            _bad("participant_ids", "Must be a list of participant ids.")
        return ids

    def _members_view(self, group) -> dict:
        return {
            "results": [{"participant_id": p, "datetime_created": t} for p, t in group["_members"].items()],
            "meta": {"count": len(group["_members"])},
        }

    def api_create_group(self, query, body):
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            _bad("name", "This field is required.")
        workspace_id = body.get("workspace_id")
        if body.get("project_id") is not None:
            if body["project_id"] not in self.projects:
                _bad("project_id", "Unknown project.")
            workspace_id = self.projects[body["project_id"]]["workspace"]
        if workspace_id is None:
            _bad("workspace_id", "Give workspace_id or project_id.")
        if workspace_id not in self.workspaces:
            _bad("workspace_id", "Unknown workspace.")
        ids = self._participant_ids(body) if "participant_ids" in body else []
        group_id = _oid()
        now = _now_iso()
        self.groups[group_id] = {
            "id": group_id,
            "name": name,
            "description": body.get("description") or "",
            "workspace_id": workspace_id,
            "project_id": body.get("project_id"),
            "feeder_studies": [],
            "is_deleted": False,
            "_members": dict.fromkeys(ids, now),
        }
        return 201, self._group_view(self.groups[group_id])

    def api_list_groups(self, query, body):
        items = [
            self._group_view(g) for g in self.groups.values() if query.get("workspace_id") in (None, g["workspace_id"])
        ]
        return 200, self._offset_page(items, query, "participant-groups/")

    def api_get_group(self, query, body, id):
        return 200, self._group_view(self._group(id))

    def api_patch_group(self, query, body, id):
        group = self._group(id)
        for field in ("name", "description"):
            if field in body:
                if not isinstance(body[field], str):
                    _bad(field, "Must be a string.")
                group[field] = body[field]
        return 200, self._group_view(group)

    def api_delete_group(self, query, body, id):
        self._group(id)
        del self.groups[id]
        return 204, None

    def api_list_members(self, query, body, id):
        return 200, self._members_view(self._group(id))

    def api_add_members(self, query, body, id):
        group = self._group(id)
        now = _now_iso()
        for pid in self._participant_ids(body):
            group["_members"].setdefault(pid, now)
        return 200, self._members_view(group)

    def api_remove_members(self, query, body, id):
        group = self._group(id)
        for pid in self._participant_ids(body):
            group["_members"].pop(pid, None)
        return 200, self._members_view(group)

    # --- bonuses -----------------------------------------------------------------------------------------
    def api_create_bonus(self, query, body):
        study_id = body.get("study_id")
        study = self.studies.get(study_id) if isinstance(study_id, str) else None
        if study is None:
            _bad("study_id", f"Study {study_id} does not exist.")
        csv = body.get("csv_bonuses")
        if not isinstance(csv, str) or not csv.strip():
            _bad("csv_bonuses", "This field is required.")
        subs = self._study_submissions(study)
        by_id = {s["id"]: s for s in subs} | {s["participant_id"]: s for s in subs}
        rows, unknown, seen = [], [], set()
        for n, line in enumerate(csv.strip().splitlines(), start=1):
            fields = [f.strip() for f in line.split(",")]
            if len(fields) != 2 or not fields[0]:
                _bad("csv_bonuses", f"Row {n}: expected '<id>,<amount>'.")
            ident, amount = fields
            if not re.fullmatch(r"\d+(\.\d{1,2})?", amount) or Decimal(amount) <= 0:
                _bad("csv_bonuses", f"Row {n}: the amount must be positive with at most 2 decimals.")
            sub = by_id.get(ident)
            if sub is None:
                unknown.append(ident)
                continue
            if sub["id"] in seen:
                _bad("csv_bonuses", f"Row {n}: {ident} appears more than once.")
            seen.add(sub["id"])
            rows.append((sub["id"], int(Decimal(amount) * 100)))
        if unknown:
            _bad("csv_bonuses", f"Not participants of the study: {', '.join(unknown)}.")
        bonus_id = _oid()
        costs = _costs(sum(amount for _, amount in rows))
        self.bulk_bonuses[bonus_id] = {
            "id": bonus_id,
            "study": study["id"],
            **costs,
            "_rows": rows,
            "_paid": False,
            "_csv": csv,
        }
        return 201, _public(self.bulk_bonuses[bonus_id])

    def api_pay_bonus(self, query, body, id):
        bonus = self.bulk_bonuses.get(id)
        if bonus is None:
            _not_found("Bulk bonus payment", id)
        if bonus["_paid"]:
            _bad("id", "This bonus payment has already been paid.")
        if bonus["total_amount"] > self.user["available_balance"]:
            _bad("id", "Insufficient funds.")
        bonus["_paid"] = True
        self.user["balance"] -= bonus["total_amount"]
        self.user["available_balance"] -= bonus["total_amount"]
        for submission_id, amount in bonus["_rows"]:
            self.submissions[submission_id]["bonus_payments"].append(amount)
        return 202, {"id": id, "status": "PAID"}

    # --- messages --------------------------------------------------------------------------------------------
    def _message_text(self, body, required_study=True):
        text = body.get("body")
        if not isinstance(text, str) or not text.strip():
            _bad("body", "This field is required.")
        study_id = body.get("study_id")
        if required_study or study_id is not None:
            if not isinstance(study_id, str) or study_id not in self.studies:
                _bad("study_id", "A valid study_id is required.")
        return text, study_id

    def _store_message(self, recipient, text, study_id):
        self.messages.append(
            {
                "id": _oid(),
                "sender_id": self.user["id"],
                "recipient_id": recipient,
                "body": text,
                "datetime_created": _now_iso(),
                "type": "message",
                "channel_id": _oid(),
                "data": {"study_id": study_id, "category": None},
            }
        )

    def api_send_message(self, query, body):
        recipient = body.get("recipient_id")
        if not isinstance(recipient, str) or not recipient:
            _bad("recipient_id", "This field is required.")
        text, study_id = self._message_text(body)
        self._store_message(recipient, text, study_id)
        return 204, None

    def api_send_bulk_message(self, query, body):
        ids = body.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            _bad("ids", "Must be a non-empty list of participant ids.")
        text, study_id = self._message_text(body)
        for recipient in ids:
            self._store_message(recipient, text, study_id)
        return 204, None

    def api_send_group_message(self, query, body):
        group = (
            self.groups.get(body.get("participant_group_id"))
            if isinstance(body.get("participant_group_id"), str)
            else None
        )
        if group is None:
            _bad("participant_group_id", "A valid participant_group_id is required.")
        text, study_id = self._message_text(body, required_study=False)
        for recipient in group["_members"]:
            self._store_message(recipient, text, study_id)
        return 204, None

    def api_list_messages(self, query, body):
        if "user_id" not in query and "created_after" not in query:
            _bad("user_id", "Give user_id or created_after.")
        items = self.messages
        if "user_id" in query:
            items = [m for m in items if query["user_id"] in (m["recipient_id"], m["sender_id"])]
        if "created_after" in query:
            items = [m for m in items if m["datetime_created"] > query["created_after"]]
        return 200, {"results": items}

    # --- hooks -----------------------------------------------------------------------------------------------
    def api_list_event_types(self, query, body):
        return 200, {"results": [{"event_type": k, "description": v} for k, v in EVENT_TYPES.items()]}

    def _workspace_field(self, value, field="workspace_id"):
        if not isinstance(value, str) or value not in self.workspaces:
            _bad(field, f"Workspace {value} does not exist.")
        return value

    def api_create_secret(self, query, body):
        workspace_id = self._workspace_field(body.get("workspace_id"))
        secret = {
            "id": _oid(),
            "value": base64.b64encode(secrets.token_bytes(48)).decode(),
            "workspace_id": workspace_id,
        }
        self.hook_secrets[workspace_id] = secret
        return 201, dict(secret)

    def api_list_secrets(self, query, body):
        items = [dict(s) for w, s in self.hook_secrets.items() if query.get("workspace_id") in (None, w)]
        return 200, {"results": items}

    def _check_target(self, url) -> None:
        if not isinstance(url, str):
            _bad("target_url", "Enter a valid URL.")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            _bad("target_url", "Enter a valid URL.")
        if self.allow_insecure_targets:
            return
        if parts.scheme != "https":
            _bad("target_url", "The target URL must use https.")
        host = parts.hostname.lower()
        if host == "localhost" or host.endswith(".localhost"):
            _bad("target_url", "The target URL must be publicly reachable.")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return
        if not address.is_global:
            _bad("target_url", "The target URL must be publicly reachable.")

    def _subscription_view(self, sub) -> dict:
        return _public(sub)

    def _subscription(self, sub_id) -> dict:
        if sub_id not in self.subscriptions:
            _not_found("Subscription", sub_id)
        return self.subscriptions[sub_id]

    def api_create_subscription(self, query, body):
        if body.get("event_type") not in EVENT_TYPES:
            _bad("event_type", f"Must be one of {sorted(EVENT_TYPES)}.")
        self._check_target(body.get("target_url"))
        workspace_id = self._workspace_field(body.get("workspace_id"))
        if workspace_id not in self.hook_secrets:
            _bad("workspace_id", "Create a hook secret for this workspace first (POST /api/v1/hooks/secrets/).")
        if "is_enabled" in body and not isinstance(body["is_enabled"], bool):
            _bad("is_enabled", "Must be a boolean.")
        sub_id = _oid()
        confirm = secrets.token_hex(32)
        self.subscriptions[sub_id] = {
            "id": sub_id,
            "event_type": body["event_type"],
            "target_url": body["target_url"],
            "workspace_id": workspace_id,
            "is_enabled": False,
            "_confirmed": False,
            "_confirm_secret": confirm,
        }
        return 201, self._subscription_view(self.subscriptions[sub_id]), {"X-Hook-Secret": confirm}

    def api_confirm_subscription(self, query, body, id):
        sub = self._subscription(id)
        if body.get("secret") != sub["_confirm_secret"]:
            _bad("secret", "The secret does not match this subscription's X-Hook-Secret.")
        if not sub["_confirmed"]:
            sub["_confirmed"], sub["is_enabled"] = True, True
        return 200, self._subscription_view(sub)

    def api_list_subscriptions(self, query, body):
        items = list(self.subscriptions.values())
        if "workspace_id" in query:
            items = [s for s in items if s["workspace_id"] == query["workspace_id"]]
        if "is_enabled" in query:
            try:
                on = _truthy(query["is_enabled"])
            except ValueError:
                _bad("is_enabled", "Must be a boolean.")
            items = [s for s in items if s["is_enabled"] == on]
        return 200, self._offset_page([self._subscription_view(s) for s in items], query, "hooks/subscriptions/")

    def api_get_subscription(self, query, body, id):
        return 200, self._subscription_view(self._subscription(id))

    def api_patch_subscription(self, query, body, id):
        sub = self._subscription(id)
        unknown = sorted(set(body) - {"event_type", "target_url", "is_enabled"})
        if unknown:
            raise ApiError(400, {k: ["This field cannot be changed."] for k in unknown})
        if "event_type" in body and body["event_type"] not in EVENT_TYPES:
            _bad("event_type", f"Must be one of {sorted(EVENT_TYPES)}.")
        if "target_url" in body:
            self._check_target(body["target_url"])
        if "is_enabled" in body:
            if not isinstance(body["is_enabled"], bool):
                _bad("is_enabled", "Must be a boolean.")
            if body["is_enabled"] and not sub["_confirmed"]:
                _bad("is_enabled", "Confirm the subscription with its X-Hook-Secret first.")
        sub.update(body)
        return 200, self._subscription_view(sub)

    def api_delete_subscription(self, query, body, id):
        self._subscription(id)
        del self.subscriptions[id]
        return 204, None

    def api_list_events(self, query, body, id):
        self._subscription(id)
        items = [_public(e) for e in self.events.values() if e["_subscription"] == id]
        if "status" in query:
            items = [e for e in items if e["status"] == query["status"].upper()]
        return 200, self._offset_page(items, query, f"hooks/subscriptions/{id}/events/")

    # --- the participant side -----------------------------------------------------------------------------
    @staticmethod
    def _code(study, code, field="code") -> dict:
        for c in study["completion_codes"]:
            if c["code"] == code:
                return c
        raise ApiError(400, {field: [f"Unknown completion code {code!r} for this study."]})

    def _eligible(self, study, participant_id) -> str | None:
        for f in study["filters"]:
            groups = f.get("selected_values") or []
            if f["filter_id"] == "participant_group_blocklist":
                if any(participant_id in self.groups.get(g, {}).get("_members", {}) for g in groups):
                    return "the participant is in a blocked participant group"
            elif f["filter_id"] == "participant_group_allowlist":
                if not any(participant_id in self.groups.get(g, {}).get("_members", {}) for g in groups):
                    return "the participant is in none of the allowed participant groups"
        return None

    def arrive(self, study_id: str, participant_id: str | None = None) -> tuple[str, str]:
        with self.lock:
            study = self.studies.get(study_id)
            if study is None:
                raise FakeRefusal(f"no study {study_id}")
            participant_id = participant_id or _oid()
            if study["status"] != "ACTIVE":
                raise FakeRefusal(f"the study is {study['status']}, not ACTIVE")
            if self._places_taken(study) >= study["total_available_places"]:
                raise FakeRefusal("no place available")
            reason = self._eligible(study, participant_id)
            if reason:
                raise FakeRefusal(reason)
            if any(s["participant_id"] == participant_id for s in self._study_submissions(study)):
                raise FakeRefusal("the participant already has a submission in this study")
            sub_id = _oid()
            sub = {
                "id": sub_id,
                "study_id": study_id,
                "participant": participant_id,
                "participant_id": participant_id,
                "status": "RESERVED",
                "started_at": _now_iso(),
                "completed_at": None,
                "entered_code": None,
                "study_code": None,
                "is_complete": False,
                "time_taken": None,
                "reward": study["reward"],
                "has_siblings": False,
                "return_requested": False,
                "star_awarded": False,
                "bonus_payments": [],
                "strata": {},
                "ip": "127.0.0.1",
                "parent_study_id": None,
                "_started": time.monotonic(),
            }
            self.submissions[sub_id] = sub
            self._set_submission_status(sub, "ACTIVE")  # the participant starts at once
            study["number_of_submissions"] = len(self._study_submissions(study))
            self._settle(study)
            url = study["external_study_url"]
            for placeholder, value in zip(PLACEHOLDERS, (participant_id, study_id, sub_id)):
                url = url.replace(placeholder, value)
            return sub_id, url

    def _apply_code(self, sub, study, code, data=None) -> None:
        sub["entered_code"] = sub["study_code"] = code["code"]
        sub["time_taken"] = round(time.monotonic() - sub["_started"])
        status = None
        for action in code["actions"]:
            kind = action["action"]
            if kind in GROUP_ACTIONS:
                members = self.groups[action["participant_group"]]["_members"]
                if kind == "ADD_TO_PARTICIPANT_GROUP":
                    members.setdefault(sub["participant_id"], _now_iso())
                else:
                    members.pop(sub["participant_id"], None)
            elif kind == "AUTOMATICALLY_APPROVE":
                status = "APPROVED"
            elif kind == "FIXED_SCREENOUT":
                status = "SCREENED OUT"
            elif kind == "DYNAMIC_PAYMENT" and data:
                status = "PARTIALLY APPROVED"
            elif kind == "REQUEST_RETURN":
                sub["return_requested"] = True
            elif kind in ("MANUALLY_REVIEW", "DYNAMIC_PAYMENT"):
                status = status or "AWAITING REVIEW"
        if status is None and not sub["return_requested"]:
            status = "AWAITING REVIEW"
        if status is not None:
            sub["is_complete"] = True
            if sub["status"] == "RESERVED":
                self._set_submission_status(sub, "ACTIVE")
            self._set_submission_status(sub, status)
        self._settle(study)

    def complete(self, submission_id: str, code: str) -> str:
        """The participant lands on ``.../submissions/complete?cc=CODE``; returns the submission's status."""
        with self.lock:
            sub = self.submissions.get(submission_id)
            if sub is None:
                raise FakeRefusal(f"no submission {submission_id}")
            if sub["status"] not in ("RESERVED", "ACTIVE"):
                raise FakeRefusal(f"the submission is {sub['status']}, not in progress")
            study = self.studies[sub["study_id"]]
            try:
                found = self._code(study, code)
            except ApiError:
                raise FakeRefusal(f"unknown completion code {code!r}") from None
            if found["actor"] != "participant":
                raise FakeRefusal(f"the code {code!r} can only be applied by the researcher")
            self._apply_code(sub, study, found)
            return sub["status"]

    def _leave(self, submission_id: str, status: str, allowed: set[str]) -> None:
        with self.lock:
            sub = self.submissions.get(submission_id)
            if sub is None:
                raise FakeRefusal(f"no submission {submission_id}")
            if sub["status"] not in allowed:
                raise FakeRefusal(f"the submission is {sub['status']}")
            study = self.studies[sub["study_id"]]
            was_review = sub["status"] == "AWAITING REVIEW" and study["status"] == "AWAITING REVIEW"
            self._set_submission_status(sub, status)
            self._settle(study, auto_pause=was_review)

    def return_(self, submission_id: str) -> None:
        self._leave(submission_id, "RETURNED", {"RESERVED", "ACTIVE", "AWAITING REVIEW"})

    def timeout(self, submission_id: str) -> None:
        self._leave(submission_id, "TIMED-OUT", {"RESERVED", "ACTIVE"})

    def simulate(self, action: str, body: dict, query: dict) -> tuple[int, dict]:
        """``POST /_sim/<action>``: the participant side over HTTP (no auth)."""
        try:
            if action == "arrive":
                sub_id, url = self.arrive(body.get("study_id"), body.get("participant_id"))
                return 201, {"submission_id": sub_id, "url": url}
            sub_id = body.get("submission_id") or query.get("submission_id")
            if action == "complete":
                status = self.complete(sub_id, body.get("code") or query.get("cc"))
                return 200, {"submission_id": sub_id, "status": status}
            if action == "return":
                self.return_(sub_id)
            elif action == "timeout":
                self.timeout(sub_id)
            else:
                return 404, _error_body(404, f"Unknown simulation {action}.")
            with self.lock:
                return 200, {"submission_id": sub_id, "status": self.submissions[sub_id]["status"]}
        except FakeRefusal as exc:
            return 409, _error_body(409, str(exc))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body, headers: dict | None = None):
        payload = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _dispatch(self):
        fake: FakeProlific = self.server.fake
        raw_body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = urlsplit(self.path)
        if parts.path.startswith("/_sim/") and self.command == "POST":
            try:
                body = json.loads(raw_body) if raw_body.strip() else {}
            except ValueError:
                return self._send(400, _error_body(400, "The body is not valid JSON."))
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            return self._send(*fake.simulate(parts.path.strip("/").split("/")[-1], body, query))
        if not parts.path.startswith("/api/v1/") and parts.path != "/api/v1":
            return self._send(404, _error_body(404, "Not found."))
        self._send(*fake.handle(self.command, self.path, self.headers, raw_body))

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _dispatch
