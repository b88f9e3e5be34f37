"""A stateful fake of MTurk's requester API for the test suite (moto has no MTurk).

A threaded ``http.server`` on a free loopback port speaks MTurk's JSON protocol
(``X-Amz-Target: MTurkRequesterServiceV20170117.<Operation>``, ``application/x-amz-json-1.1``), so a
real boto3 client pointed at it with ``endpoint_url`` (dummy credentials) exercises botocore's
serialisation, error parsing and retries. It enforces what MTurk enforces and Chorus relies on:

* one assignment per worker per HIT, at most MaxAssignments at a time; returned or abandoned
  assignments are open to another worker again;
* approving or rejecting anything but a Submitted assignment is a RequestError (so approving twice is);
* a repeated UniqueRequestToken is a RequestError naming the earlier result (HITs, extra assignments,
  bonuses);
* HITs whose requirements a worker fails (``DoesNotExist`` on a block list, locale, approval rate,
  approved count) are invisible to that worker and cannot be accepted;
* a HIT created with fewer than 10 assignments cannot reach 10;
* list operations paginate with NextToken (``page_cap`` makes pages small);
* faults can be injected per operation: ``throttle`` (HTTP 400 ``ThrottlingException``, which botocore's
  standard retry mode retries without the call having happened) and ``lost_response`` (the call happens,
  then HTTP 500 ``ServiceFault``: the client retries a call that already took effect).

The worker side is a Python API (``visible_hits``, ``accept``, ``return_assignment``, ``task_path``)
plus the HTTP endpoint ``POST /mturk/externalSubmit`` that the task page's form posts to.
"""

import base64
import json
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import escape

TARGET_PREFIX = "MTurkRequesterServiceV20170117."
SYSTEM_QUALIFICATIONS = {"00000000000000000071", "000000000000000000L0", "00000000000000000040"}
PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"


class MTurkError(Exception):
    def __init__(self, message, *, type_="RequestError", turk_code="", status=400):
        super().__init__(message)
        self.message, self.type_, self.turk_code, self.status = message, type_, turk_code, status


class FakeRefusal(Exception):
    """What the MTurk website would refuse a worker (accepting a hidden or full HIT...)."""


def _id(prefix="") -> str:
    return (prefix + uuid.uuid4().hex.upper())[:30].ljust(30, "0")


class FakeMTurk:
    def __init__(self, *, page_cap: int = 100, balance: str = "10000.00"):
        self.lock = threading.RLock()
        self.offset = 0.0
        self.page_cap = page_cap
        self.balance = balance
        self.hit_types: dict[str, dict] = {}
        self.hits: dict[str, dict] = {}
        self.assignments: dict[str, dict] = {}
        self.qualification_types: dict[str, dict] = {}
        self.worker_quals: dict[tuple[str, str], int] = {}
        self.workers: dict[str, dict] = {}
        self.tokens: dict[tuple[str, str], str] = {}
        self.bonuses: list[dict] = []
        self.calls: list[tuple[str, dict]] = []  # every request that reached an operation (after faults)
        self.attempts: Counter = Counter()  # every request received, per operation
        self.effects: Counter = Counter()  # ("approve", assignment id) etc.: state changes actually made
        self.faults: dict[str, list[str]] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.fake = self
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- lifecycle ----------------------------------------------------------------------------------
    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.offset += seconds

    def inject(self, operation: str, kind: str, times: int = 1) -> None:
        assert kind in ("throttle", "lost_response"), kind
        with self.lock:
            self.faults.setdefault(operation, []).extend([kind] * times)

    def set_worker(self, worker_id: str, *, locale: str = "US", approval_rate: int = 99, approved: int = 5000) -> None:
        with self.lock:
            self.workers[worker_id] = {"locale": locale, "approval_rate": approval_rate, "approved": approved}

    # --- state helpers ------------------------------------------------------------------------------
    def _tick(self):
        now = self.now()
        for a in self.assignments.values():
            if a["status"] == "Accepted" and now > a["deadline"]:
                a["status"] = "Abandoned"
            elif a["status"] == "Submitted" and now > a["auto_approval_time"]:
                a["status"], a["approval_time"] = "Approved", a["auto_approval_time"]
                self.effects[("auto_approve", a["id"])] += 1

    def _counts(self, hit):
        mine = [self.assignments[a] for a in hit["assignments"]]
        pending = sum(a["status"] == "Accepted" for a in mine)
        completed = sum(a["status"] in ("Submitted", "Approved", "Rejected") for a in mine)
        return pending, hit["max"] - pending - completed, completed

    def _hit_view(self, hit):
        pending, available, completed = self._counts(hit)
        hit_type = self.hit_types[hit["type"]]
        expired = self.now() >= hit["expiration"]
        status = "Assignable" if not expired and available > 0 else ("Unassignable" if not expired else "Reviewable")
        return {
            "HITId": hit["id"],
            "HITTypeId": hit["type"],
            "HITGroupId": hit["type"],
            "CreationTime": hit["created"],
            "Title": hit_type["Title"],
            "Description": hit_type["Description"],
            "Question": hit["question"],
            "Keywords": hit_type.get("Keywords", ""),
            "HITStatus": status,
            "MaxAssignments": hit["max"],
            "Reward": hit_type["Reward"],
            "AutoApprovalDelayInSeconds": hit_type["AutoApprovalDelayInSeconds"],
            "Expiration": hit["expiration"],
            "AssignmentDurationInSeconds": hit_type["AssignmentDurationInSeconds"],
            "RequesterAnnotation": hit.get("annotation", ""),
            "QualificationRequirements": hit_type.get("QualificationRequirements", []),
            "HITReviewStatus": "NotReviewed",
            "NumberOfAssignmentsPending": pending,
            "NumberOfAssignmentsAvailable": available,
            "NumberOfAssignmentsCompleted": completed,
        }

    def _assignment_view(self, a):
        view = {
            "AssignmentId": a["id"],
            "WorkerId": a["worker"],
            "HITId": a["hit"],
            "AssignmentStatus": a["status"],
            "AcceptTime": a["accept_time"],
            "Deadline": a["deadline"],
            "AutoApprovalTime": a["auto_approval_time"],
        }
        for key, name in (
            ("submit_time", "SubmitTime"),
            ("approval_time", "ApprovalTime"),
            ("rejection_time", "RejectionTime"),
            ("answer", "Answer"),
            ("feedback", "RequesterFeedback"),
        ):
            if a.get(key) is not None:
                view[name] = a[key]
        return view

    def _page(self, items, params, key):
        size = min(int(params.get("MaxResults", 100)), self.page_cap)
        start = int(base64.b64decode(params["NextToken"]).decode()) if params.get("NextToken") else 0
        page = items[start : start + size]
        out = {key: page, "NumResults": len(page)}
        if start + size < len(items):
            out["NextToken"] = base64.b64encode(str(start + size).encode()).decode()
        return out

    def _hit(self, hit_id):
        if hit_id not in self.hits:
            raise MTurkError(f"Hit {hit_id} does not exist. (1234567890)")
        return self.hits[hit_id]

    def _assignment(self, assignment_id):
        if assignment_id not in self.assignments:
            raise MTurkError(f"Assignment {assignment_id} does not exist. (1234567890)")
        return self.assignments[assignment_id]

    def _token(self, kind, token, ref):
        if not token:
            return
        if len(token) > 64:
            raise MTurkError("UniqueRequestToken must be at most 64 characters.", turk_code="AWS.ParameterOutOfRange")
        key = (kind, token)
        if key in self.tokens:
            code = "AWS.MechanicalTurk.HitAlreadyExists" if kind == "hit" else "AWS.MechanicalTurk.DuplicateRequest"
            raise MTurkError(
                f"There is already a {kind} created with this UniqueRequestToken: {self.tokens[key]} "
                "(request 1234567890)",
                turk_code=code,
            )
        self.tokens[key] = ref

    # --- the requester API (one method per operation) -------------------------------------------------
    def op_GetAccountBalance(self, p):
        return {"AvailableBalance": self.balance}

    def op_CreateQualificationType(self, p):
        if any(q["Name"] == p["Name"] for q in self.qualification_types.values()):
            raise MTurkError(
                "You have already created a QualificationType with this name. A QualificationType's name "
                "must be unique among all of the QualificationTypes created by the same user. (1234567890)"
            )
        qid = _id("Q")
        self.qualification_types[qid] = {
            "QualificationTypeId": qid,
            "Name": p["Name"],
            "Description": p.get("Description", ""),
            "Keywords": p.get("Keywords", ""),
            "QualificationTypeStatus": p["QualificationTypeStatus"],
            "CreationTime": self.now(),
            "IsRequestable": False,
            "AutoGranted": False,
        }
        return {"QualificationType": self.qualification_types[qid]}

    def op_ListQualificationTypes(self, p):
        query = p.get("Query", "")
        items = [q for q in self.qualification_types.values() if query in q["Name"]]
        return self._page(items, p, "QualificationTypes")

    def op_AssociateQualificationWithWorker(self, p):
        if p["QualificationTypeId"] not in self.qualification_types:
            raise MTurkError(f"QualificationType {p['QualificationTypeId']} does not exist. (1234567890)")
        self.worker_quals[(p["QualificationTypeId"], p["WorkerId"])] = p.get("IntegerValue", 1)
        self.effects[("associate", p["QualificationTypeId"], p["WorkerId"])] += 1
        return {}

    def op_DisassociateQualificationFromWorker(self, p):
        key = (p["QualificationTypeId"], p["WorkerId"])
        if key not in self.worker_quals:
            raise MTurkError(f"Worker {p['WorkerId']} does not have QualificationType {key[0]}. (1234567890)")
        del self.worker_quals[key]
        self.effects[("disassociate", *key)] += 1
        return {}

    def op_ListWorkersWithQualificationType(self, p):
        items = [
            {"QualificationTypeId": qid, "WorkerId": worker, "IntegerValue": value, "Status": "Granted"}
            for (qid, worker), value in self.worker_quals.items()
            if qid == p["QualificationTypeId"]
        ]
        return self._page(items, p, "Qualifications")

    def op_CreateHITType(self, p):
        for requirement in p.get("QualificationRequirements", []):
            qid = requirement["QualificationTypeId"]
            if qid not in SYSTEM_QUALIFICATIONS and qid not in self.qualification_types:
                raise MTurkError(f"QualificationType {qid} does not exist. (1234567890)")
        float(p["Reward"])
        key = json.dumps(p, sort_keys=True)
        for type_id, hit_type in self.hit_types.items():
            if hit_type["_key"] == key:
                return {"HITTypeId": type_id}
        type_id = _id("T")
        self.hit_types[type_id] = {**p, "_key": key}
        return {"HITTypeId": type_id}

    def op_CreateHITWithHITType(self, p):
        if p["HITTypeId"] not in self.hit_types:
            raise MTurkError(f"HITType {p['HITTypeId']} does not exist. (1234567890)")
        if not 1 <= int(p.get("MaxAssignments", 1)) <= 1_000_000:
            raise MTurkError("MaxAssignments is out of range.", turk_code="AWS.ParameterOutOfRange")
        root = ElementTree.fromstring(p["Question"])
        url = next(el.text for el in root.iter() if el.tag.endswith("ExternalURL"))
        hit_id = _id("H")
        self._token("hit", p.get("UniqueRequestToken"), hit_id)
        self.hits[hit_id] = {
            "id": hit_id,
            "type": p["HITTypeId"],
            "max": int(p.get("MaxAssignments", 1)),
            "initial_max": int(p.get("MaxAssignments", 1)),
            "question": p["Question"],
            "url": url,
            "annotation": p.get("RequesterAnnotation", ""),
            "created": self.now(),
            "expiration": self.now() + int(p["LifetimeInSeconds"]),
            "assignments": [],
        }
        return {"HIT": self._hit_view(self.hits[hit_id])}

    def op_GetHIT(self, p):
        return {"HIT": self._hit_view(self._hit(p["HITId"]))}

    def op_ListHITs(self, p):
        return self._page([self._hit_view(h) for h in self.hits.values()], p, "HITs")

    def op_UpdateExpirationForHIT(self, p):
        hit = self._hit(p["HITId"])
        expire_at = float(p["ExpireAt"])
        hit["expiration"] = expire_at if expire_at > self.now() else self.now()  # a past time expires it now
        return {}

    def op_CreateAdditionalAssignmentsForHIT(self, p):
        hit = self._hit(p["HITId"])
        n = int(p["NumberOfAdditionalAssignments"])
        if hit["initial_max"] < 10 <= hit["max"] + n:
            raise MTurkError(
                "HITs created with fewer than 10 assignments cannot be extended to 10 or more. (1234567890)",
                turk_code="AWS.MechanicalTurk.InvalidMaximumAssignmentsIncrease",
            )
        self._token("extension", p.get("UniqueRequestToken"), hit["id"])
        hit["max"] += n
        self.effects[("extend_assignments", hit["id"])] += n
        return {}

    def op_ListAssignmentsForHIT(self, p):
        hit = self._hit(p["HITId"])
        statuses = set(p.get("AssignmentStatuses") or ["Submitted", "Approved", "Rejected"])
        items = [
            self._assignment_view(self.assignments[a])
            for a in hit["assignments"]
            if self.assignments[a]["status"] in statuses
        ]
        return self._page(items, p, "Assignments")

    def op_GetAssignment(self, p):
        a = self._assignment(p["AssignmentId"])
        if a["status"] not in ("Submitted", "Approved", "Rejected"):
            raise MTurkError(f"Assignment {a['id']} does not exist. (1234567890)")
        return {"Assignment": self._assignment_view(a), "HIT": self._hit_view(self.hits[a["hit"]])}

    def op_ApproveAssignment(self, p):
        a = self._assignment(p["AssignmentId"])
        override = p.get("OverrideRejection") and a["status"] == "Rejected"
        if a["status"] != "Submitted" and not override:
            raise MTurkError("This operation can be called with a status of: Submitted (1234567890)")
        a["status"], a["approval_time"], a["feedback"] = "Approved", self.now(), p.get("RequesterFeedback")
        self.effects[("approve", a["id"])] += 1
        return {}

    def op_RejectAssignment(self, p):
        a = self._assignment(p["AssignmentId"])
        if a["status"] != "Submitted":
            raise MTurkError("This operation can be called with a status of: Submitted (1234567890)")
        a["status"], a["rejection_time"], a["feedback"] = "Rejected", self.now(), p["RequesterFeedback"]
        self.effects[("reject", a["id"])] += 1
        return {}

    def op_SendBonus(self, p):
        a = self._assignment(p["AssignmentId"])
        if a["worker"] != p["WorkerId"] or a["status"] not in ("Submitted", "Approved"):
            raise MTurkError("The bonus cannot be paid for this assignment. (1234567890)")
        self._token("bonus", p.get("UniqueRequestToken"), a["id"])
        self.bonuses.append(
            {
                "WorkerId": p["WorkerId"],
                "BonusAmount": p["BonusAmount"],
                "AssignmentId": a["id"],
                "Reason": p["Reason"],
                "GrantTime": self.now(),
                "token": p.get("UniqueRequestToken"),
            }
        )
        return {}

    def op_ListBonusPayments(self, p):
        items = [
            {k: v for k, v in b.items() if k != "token"}
            for b in self.bonuses
            if b["AssignmentId"] == p.get("AssignmentId")
            or self.assignments[b["AssignmentId"]]["hit"] == p.get("HITId")
        ]
        return self._page(items, p, "BonusPayments")

    def handle(self, operation: str, params: dict):
        with self.lock:
            self.attempts[operation] += 1
            faults = self.faults.get(operation) or []
            fault = faults.pop(0) if faults else None
            if fault == "throttle":
                raise MTurkError("Rate exceeded", type_="ThrottlingException")
            method = getattr(self, f"op_{operation}", None)
            if method is None:
                raise MTurkError(f"The fake does not implement {operation}", type_="UnknownOperationException")
            self._tick()
            self.calls.append((operation, params))
            result = method(params)
            if fault == "lost_response":
                raise MTurkError(
                    "Amazon Mechanical Turk is temporarily unable to process your request.",
                    type_="ServiceFault",
                    status=500,
                )
            return result

    # --- the worker side ----------------------------------------------------------------------------
    def _qualified(self, hit, worker_id) -> bool:
        profile = self.workers.get(worker_id, {"locale": "US", "approval_rate": 99, "approved": 5000})
        for r in self.hit_types[hit["type"]].get("QualificationRequirements", []):
            qid, comparator = r["QualificationTypeId"], r["Comparator"]
            if qid == "00000000000000000071":
                allowed = {v["Country"] for v in r.get("LocaleValues", [])}
                ok = (
                    profile["locale"] in allowed
                    if comparator in ("In", "EqualTo")
                    else profile["locale"] not in allowed
                )
            elif qid in ("000000000000000000L0", "00000000000000000040"):
                have = profile["approval_rate"] if qid.endswith("L0") else profile["approved"]
                ok = have >= r["IntegerValues"][0]
            else:
                has = (qid, worker_id) in self.worker_quals
                ok = not has if comparator == "DoesNotExist" else has
            if not ok:
                return False
        return True

    def _holds(self, hit, worker_id) -> bool:
        return any(
            self.assignments[a]["worker"] == worker_id
            and self.assignments[a]["status"] not in ("Returned", "Abandoned")
            for a in hit["assignments"]
        )

    def visible_hits(self, worker_id: str) -> list[str]:
        """HITs this worker can find and accept now, oldest first."""
        with self.lock:
            self._tick()
            return [
                h["id"]
                for h in self.hits.values()
                if self.now() < h["expiration"]
                and self._counts(h)[1] > 0
                and self._qualified(h, worker_id)
                and not self._holds(h, worker_id)
            ]

    def accept(self, hit_id: str, worker_id: str) -> str:
        with self.lock:
            self._tick()
            hit = self.hits[hit_id]
            if self.now() >= hit["expiration"]:
                raise FakeRefusal("expired")
            if not self._qualified(hit, worker_id):
                raise FakeRefusal("not qualified")
            if self._holds(hit, worker_id):
                raise FakeRefusal("one assignment per worker per HIT")
            if self._counts(hit)[1] <= 0:
                raise FakeRefusal("no assignment available")
            hit_type = self.hit_types[hit["type"]]
            aid = _id("A")
            now = self.now()
            self.assignments[aid] = {
                "id": aid,
                "hit": hit_id,
                "worker": worker_id,
                "status": "Accepted",
                "accept_time": now,
                "deadline": now + hit_type["AssignmentDurationInSeconds"],
                "auto_approval_time": now
                + hit_type["AssignmentDurationInSeconds"]
                + hit_type["AutoApprovalDelayInSeconds"],
            }
            hit["assignments"].append(aid)
            return aid

    def return_assignment(self, assignment_id: str) -> None:
        with self.lock:
            a = self.assignments[assignment_id]
            assert a["status"] == "Accepted", a["status"]
            a["status"] = "Returned"

    def external_submit(self, fields: dict) -> None:
        with self.lock:
            self._tick()
            aid = fields.get("assignmentId", "")
            a = self.assignments.get(aid)
            if a is None or a["status"] != "Accepted":
                raise MTurkError(f"Assignment {aid} cannot be submitted", status=400)
            hit_type = self.hit_types[self.hits[a["hit"]]["type"]]
            a["status"], a["submit_time"] = "Submitted", self.now()
            a["auto_approval_time"] = self.now() + hit_type["AutoApprovalDelayInSeconds"]
            answers = "".join(
                f"<Answer><QuestionIdentifier>{escape(k)}</QuestionIdentifier><FreeText>{escape(v)}</FreeText></Answer>"
                for k, v in fields.items()
                if k != "assignmentId"
            )
            a["answer"] = (
                '<QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/'
                f'2005-10-01/QuestionFormAnswers.xsd">{answers}</QuestionFormAnswers>'
            )

    def task_path(self, assignment_id: str) -> str:
        """The path and query MTurk's iframe opens for an accepted assignment (host stripped)."""
        a = self.assignments[assignment_id]
        return self._with_params(
            self.hits[a["hit"]]["url"],
            assignmentId=assignment_id,
            hitId=a["hit"],
            workerId=a["worker"],
            turkSubmitTo=self.url,
        )

    def preview_path(self, hit_id: str) -> str:
        return self._with_params(self.hits[hit_id]["url"], assignmentId=PREVIEW, hitId=hit_id)

    @staticmethod
    def _with_params(url: str, **params) -> str:
        parts = urlsplit(url)
        query = parts.query + ("&" if parts.query else "") + urlencode(params)
        return f"{parts.path}?{query}"

    def status_of(self, assignment_id: str) -> str:
        with self.lock:
            self._tick()
            return self.assignments[assignment_id]["status"]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        fake: FakeMTurk = self.server.fake
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.rstrip("/").endswith("/mturk/externalSubmit"):
            fields = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            try:
                fake.external_submit(fields)
            except MTurkError as exc:
                return self._send(exc.status, exc.message.encode(), "text/plain")
            return self._send(200, b"<html><body>HIT submitted</body></html>", "text/html")
        target = self.headers.get("X-Amz-Target", "")
        if not target.startswith(TARGET_PREFIX) or "x-amz-json-1.1" not in self.headers.get("Content-Type", ""):
            return self._send(400, b'{"__type": "UnknownOperationException"}', "application/x-amz-json-1.1")
        try:
            result = fake.handle(target[len(TARGET_PREFIX) :], json.loads(body or b"{}"))
        except MTurkError as exc:
            error = {"__type": exc.type_, "Message": exc.message}
            if exc.turk_code:
                error["TurkErrorCode"] = exc.turk_code
            return self._send(exc.status, json.dumps(error).encode(), "application/x-amz-json-1.1")
        return self._send(200, json.dumps(result).encode(), "application/x-amz-json-1.1")
