"""Amazon Mechanical Turk through boto3.

Design: a pool of generic HITs, not one HIT per prompt
-------------------------------------------------------
A publication creates a pool of identical HITs (one HIT type) whose ExternalQuestion opens Chorus's
task page; each assignment is worth one label. When a worker opens an assignment, Chorus picks the
prompt with the same engine as for native and panel workers (``lease_acquire``) and records the label
with ``label_submit`` before the page posts the assignment back to MTurk. So exactly-k and
never-twice hold across every channel with one assignment logic: MTurk only decides how many
assignments exist, never which prompt a worker sees. (One HIT per prompt with MaxAssignments = k
would make MTurk a second assignment engine, fighting the native one for the same k slots.)

* The pool holds as many assignments as the campaign still needs labels when it is published
  (or fewer, if the researcher says so), in HITs of ``assignments_per_hit`` (default 9: HITs with 10 or
  more assignments pay MTurk 40% commission instead of 20%). A worker can take each HIT once, so a
  worker gives at most one label per HIT of the pool.
* A worker with nothing left (every prompt they may see is full, or the campaign's per-worker cap)
  is told to return the HIT and gets the publication's block-list qualification; every HIT requires
  that qualification ``DoesNotExist``, so MTurk stops showing them the HITs.
* The preview (``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``) shows the instructions, never a prompt.
* Reconciliation (``mturk_reconcile``) approves assignments whose label Chorus holds, rejects
  assignments submitted without one and replaces the lost assignment on the same HIT
  (``CreateAdditionalAssignmentsForHIT``), keeps HITs alive while labels are needed and expires them
  once the campaign is full, closed or withdrawn.

Settings: ``CHORUS_CHANNELS["mturk"]["OPTIONS"]`` (``sandbox``, ``endpoint_url`` to point at a test
server, ``max_attempts`` for botocore's standard retry mode, timeouts, ``submit_origins``,
``frame_ancestors``, ``page_size``). The region is pinned to us-east-1, MTurk's only region.
Credentials come from the environment: ``CHORUS_MTURK_ACCESS_KEY_ID`` and
``CHORUS_MTURK_SECRET_ACCESS_KEY`` when set, otherwise boto3's default chain (``AWS_ACCESS_KEY_ID``,
``AWS_PROFILE``, an instance role...). They are never stored in settings, logged or repr'd.
"""

import os
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from django.core.exceptions import ImproperlyConfigured

from annotation.channels.base import (
    BaseChannel,
    BonusResult,
    ChannelPermanentError,
    ChannelTransientError,
    GroupSpec,
    HITSpec,
    PreparedGroup,
    PublishedHIT,
    ReviewResult,
    Submission,
)

REGION = "us-east-1"
SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
SANDBOX_SUBMIT_ORIGIN = "https://workersandbox.mturk.com"
PRODUCTION_SUBMIT_ORIGIN = "https://www.mturk.com"
FRAME_ANCESTORS = ("https://worker.mturk.com", "https://workersandbox.mturk.com")
PREVIEW_ASSIGNMENT_ID = "ASSIGNMENT_ID_NOT_AVAILABLE"

# MTurk's system qualification types (the same ids in the sandbox).
LOCALE_QUALIFICATION = "00000000000000000071"
APPROVAL_RATE_QUALIFICATION = "000000000000000000L0"
NUMBER_APPROVED_QUALIFICATION = "00000000000000000040"

EXTERNAL_QUESTION_NS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd"
)
TOKEN_LIFETIME = timedelta(hours=23)  # MTurk forgets a UniqueRequestToken after 24 h
THROTTLING_CODES = {"ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded"}
_HIT_ID = re.compile(r"\b[A-Z0-9]{20,40}\b")


def _utc(value) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def external_question(url: str, frame_height: int = 0) -> str:
    """The ExternalQuestion XML for ``url`` (escaped: an ``&`` in the URL must become ``&amp;``)."""
    return (
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}">'
        f"<ExternalURL>{escape(url)}</ExternalURL><FrameHeight>{int(frame_height)}</FrameHeight>"
        "</ExternalQuestion>"
    )


def parse_answer(xml: str | None) -> dict:
    """The fields of a QuestionFormAnswers document (what the task page posted to MTurk)."""
    if not xml:
        return {}
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return {}
    fields = {}
    for answer in root.iter():
        if answer.tag.rsplit("}", 1)[-1] != "Answer":
            continue
        name = value = None
        for child in answer:
            tag = child.tag.rsplit("}", 1)[-1]
            if tag == "QuestionIdentifier":
                name = child.text or ""
            elif tag == "FreeText":
                value = child.text or ""
        if name is not None:
            fields[name] = value
    return fields


def locale_value(code: str) -> dict:
    country, _, subdivision = code.strip().upper().partition("-")
    return {"Country": country, "Subdivision": subdivision} if subdivision else {"Country": country}


def qualification_requirements(group: GroupSpec, block_id: str) -> list[dict]:
    """The HIT type's requirements: the block list first (blocked workers neither find, preview nor
    accept the HITs), then the researcher's locale and reputation requirements."""
    guard = "DiscoverPreviewAndAccept"
    requirements = [{"QualificationTypeId": block_id, "Comparator": "DoesNotExist", "ActionsGuarded": guard}]
    if group.locales:
        requirements.append(
            {
                "QualificationTypeId": LOCALE_QUALIFICATION,
                "Comparator": "In",
                "LocaleValues": [locale_value(code) for code in group.locales],
                "ActionsGuarded": guard,
            }
        )
    if group.min_approval_rate is not None:
        requirements.append(
            {
                "QualificationTypeId": APPROVAL_RATE_QUALIFICATION,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [int(group.min_approval_rate)],
                "ActionsGuarded": guard,
            }
        )
    if group.min_approved is not None:
        requirements.append(
            {
                "QualificationTypeId": NUMBER_APPROVED_QUALIFICATION,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [int(group.min_approved)],
                "ActionsGuarded": guard,
            }
        )
    return requirements


def money(amount: Decimal) -> str:
    return f"{Decimal(amount).quantize(Decimal('0.01'))}"


HALF_THE_CREDENTIALS = "Set both CHORUS_MTURK_ACCESS_KEY_ID and CHORUS_MTURK_SECRET_ACCESS_KEY, or neither."


class MTurkChannel(BaseChannel):
    option_names = frozenset(
        {
            "sandbox",
            "endpoint_url",
            "region",
            "max_attempts",
            "connect_timeout",
            "read_timeout",
            "submit_origins",
            "frame_ancestors",
            "page_size",
        }
    )

    def __init__(self, *, alias: str, **options):
        super().__init__(alias=alias, **options)
        self.sandbox = bool(options.get("sandbox", True))
        region = options.get("region", REGION)
        if region != REGION:
            raise ImproperlyConfigured(f"CHORUS_CHANNELS[{alias!r}]: MTurk only runs in {REGION}, not {region!r}.")
        self.endpoint_url = options.get("endpoint_url") or (SANDBOX_ENDPOINT if self.sandbox else PRODUCTION_ENDPOINT)
        self.max_attempts = int(options.get("max_attempts", 8))
        self.connect_timeout = float(options.get("connect_timeout", 5))
        self.read_timeout = float(options.get("read_timeout", 30))
        self.page_size = int(options.get("page_size", 100))
        if not 1 <= self.page_size <= 100:
            raise ImproperlyConfigured(f"CHORUS_CHANNELS[{alias!r}]: page_size must be 1 to 100.")
        default_origin = SANDBOX_SUBMIT_ORIGIN if self.sandbox else PRODUCTION_SUBMIT_ORIGIN
        self._submit_origins = tuple(o.rstrip("/") for o in options.get("submit_origins") or (default_origin,))
        self._frame_ancestors = tuple(options.get("frame_ancestors") or FRAME_ANCESTORS)
        self.worker_channel = "mturk_sandbox" if self.sandbox else "mturk"
        self._client = None
        self._client_lock = threading.Lock()

    # --- the client ---------------------------------------------------------------------------------

    def open(self) -> None:
        if self._client is not None:
            return
        with self._client_lock:
            if self._client is not None:
                return
            import boto3  # noqa: PLC0415 (boto3 is heavy: loaded on the first call, not with the web process)
            from botocore.config import Config  # noqa: PLC0415 (as boto3)

            config = Config(
                region_name=REGION,
                retries={"mode": "standard", "total_max_attempts": self.max_attempts},
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
            )
            key_id = os.environ.get("CHORUS_MTURK_ACCESS_KEY_ID")
            secret = os.environ.get("CHORUS_MTURK_SECRET_ACCESS_KEY")
            if bool(key_id) != bool(secret):
                raise ImproperlyConfigured(HALF_THE_CREDENTIALS)
            session = boto3.session.Session(aws_access_key_id=key_id or None, aws_secret_access_key=secret or None)
            self._client = session.client("mturk", region_name=REGION, endpoint_url=self.endpoint_url, config=config)

    def setup_problems(self) -> list[str]:
        """Credentials: Chorus's own pair, else boto3's default chain, of which the environment and the
        shared credentials file are looked at here (an instance role cannot be seen without a call)."""
        key_id = os.environ.get("CHORUS_MTURK_ACCESS_KEY_ID")
        if bool(key_id) != bool(os.environ.get("CHORUS_MTURK_SECRET_ACCESS_KEY")):
            return [HALF_THE_CREDENTIALS]
        boto_chain = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE")
        shared_file = Path("~/.aws/credentials").expanduser()
        if key_id or any(os.environ.get(name) for name in boto_chain) or shared_file.exists():
            return []
        return [
            "No MTurk credentials found: set CHORUS_MTURK_ACCESS_KEY_ID and CHORUS_MTURK_SECRET_ACCESS_KEY "
            "(a requester's access key) in Chorus's environment, or configure boto3's own (AWS_PROFILE, "
            "~/.aws/credentials, an instance role)."
        ]

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    @property
    def client(self):
        self.open()
        return self._client

    def _call(self, operation: str, **params) -> dict:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415 (boto3 is heavy, see open())
        from botocore.exceptions import ConnectionError as BotoConnectionError  # noqa: PLC0415 (as above)

        try:
            return getattr(self.client, operation)(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "")
            message = error.get("Message", "") or str(exc)
            turk_code = exc.response.get("TurkErrorCode", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            kind = (
                ChannelTransientError
                if code in THROTTLING_CODES or code == "ServiceFault" or status >= 500
                else ChannelPermanentError
            )
            raise kind(f"MTurk {operation}: {code}: {message}", operation=operation, code=turk_code or code) from exc
        except BotoConnectionError as exc:
            raise ChannelTransientError(f"MTurk {operation}: {exc}", operation=operation, code="connection") from exc
        except BotoCoreError as exc:
            raise ChannelPermanentError(
                f"MTurk {operation}: {exc}", operation=operation, code=type(exc).__name__
            ) from exc

    def _pages(self, operation: str, key: str, **params) -> Iterator[dict]:
        token = None
        while True:
            page = self._call(operation, MaxResults=self.page_size, **params, **({"NextToken": token} if token else {}))
            yield from page.get(key, [])
            token = page.get("NextToken")
            if not token:
                return

    # --- worker-facing ------------------------------------------------------------------------------

    def is_preview(self, params) -> bool:
        return params.get("assignmentId", PREVIEW_ASSIGNMENT_ID) in ("", PREVIEW_ASSIGNMENT_ID)

    def submit_origins(self) -> tuple[str, ...]:
        return self._submit_origins

    def frame_ancestors(self) -> tuple[str, ...]:
        return self._frame_ancestors

    # --- publishing ---------------------------------------------------------------------------------

    def prepare(self, *, group: GroupSpec, token: str) -> PreparedGroup:
        """The block-list qualification type (named after the token: names are unique per requester, so
        a retry finds it again) and the HIT type (MTurk returns the same id for the same properties)."""
        name = f"Chorus: nothing left ({token})"
        try:
            block = self._call(
                "create_qualification_type",
                Name=name,
                Keywords="chorus",
                Description="Workers who have nothing left to label in one Chorus campaign.",
                QualificationTypeStatus="Active",
            )["QualificationType"]["QualificationTypeId"]
        except ChannelPermanentError:
            block = self._find_qualification_type(name)
            if block is None:
                raise
        hit_type = self._call(
            "create_hit_type",
            Title=group.title,
            Description=group.description,
            Keywords=group.keywords,
            Reward=money(group.reward),
            AssignmentDurationInSeconds=int(group.assignment_duration),
            AutoApprovalDelayInSeconds=int(group.auto_approval_delay),
            QualificationRequirements=qualification_requirements(group, block),
        )["HITTypeId"]
        return PreparedGroup(group_id=hit_type, block_id=block)

    def _find_qualification_type(self, name: str) -> str | None:
        for qt in self._pages(
            "list_qualification_types",
            "QualificationTypes",
            Query=name,
            MustBeRequestable=False,
            MustBeOwnedByCaller=True,
        ):
            if qt.get("Name") == name:
                return qt["QualificationTypeId"]
        return None

    def publish(self, *, prepared: PreparedGroup, hit: HITSpec) -> PublishedHIT:
        """CreateHITWithHITType with ``UniqueRequestToken`` = ``RequesterAnnotation`` = ``hit.token``.

        A repeated token is answered by MTurk with an error naming the HIT: the HIT is then read back and
        returned with ``created=False``. Past the token's 24 hours, the HITs are searched by annotation
        before creating, so a late retry cannot create a duplicate either.
        """
        if hit.first_attempt_at is not None and datetime.now(UTC) - hit.first_attempt_at > TOKEN_LIFETIME:
            found = self._find_hit(hit.token, candidates=())
            if found is not None:
                return found
        try:
            answer = self._call(
                "create_hit_with_hit_type",
                HITTypeId=prepared.group_id,
                MaxAssignments=hit.max_assignments,
                LifetimeInSeconds=hit.lifetime,
                Question=external_question(hit.external_url, hit.frame_height),
                RequesterAnnotation=hit.token,
                UniqueRequestToken=hit.token,
            )["HIT"]
        except ChannelPermanentError as exc:
            found = self._find_hit(
                hit.token, candidates=_HIT_ID.findall(exc.message), scan="lready" in exc.message + exc.code
            )
            if found is None:
                raise
            return found
        return self._published(answer, created=True)

    def _published(self, hit: dict, *, created: bool) -> PublishedHIT:
        return PublishedHIT(
            hit_id=hit["HITId"],
            max_assignments=hit["MaxAssignments"],
            expires_at=_utc(hit["Expiration"]),
            created=created,
        )

    def _find_hit(self, token: str, *, candidates, scan: bool = True) -> PublishedHIT | None:
        for hit_id in candidates:
            try:
                hit = self._call("get_hit", HITId=hit_id)["HIT"]
            except ChannelPermanentError:
                continue
            if hit.get("RequesterAnnotation") == token:
                return self._published(hit, created=False)
        if scan:
            for hit in self._pages("list_hits", "HITs"):
                if hit.get("RequesterAnnotation") == token:
                    return self._published(hit, created=False)
        return None

    def withdraw(self, *, hit_id: str) -> None:
        # A past ExpireAt expires the HIT at once (MTurk's documented way to stop a HIT).
        self._call("update_expiration_for_hit", HITId=hit_id, ExpireAt=datetime(2015, 1, 1, tzinfo=UTC))

    def extend(self, *, hit_id: str, expires_at: datetime) -> None:
        self._call("update_expiration_for_hit", HITId=hit_id, ExpireAt=expires_at)

    def add_assignments(self, *, hit_id: str, count: int, token: str, expected_total: int) -> bool:
        """CreateAdditionalAssignmentsForHIT with a token. Note MTurk's rule: a HIT created with fewer than
        10 assignments cannot reach 10 or more (the caller checks; MTurk would refuse)."""
        try:
            self._call(
                "create_additional_assignments_for_hit",
                HITId=hit_id,
                NumberOfAdditionalAssignments=count,
                UniqueRequestToken=token,
            )
        except ChannelPermanentError:
            hit = self._call("get_hit", HITId=hit_id)["HIT"]
            if hit["MaxAssignments"] >= expected_total:
                return False
            raise
        return True

    def sync_submissions(self, *, hit_id: str) -> Iterator[Submission]:
        for a in self._pages(
            "list_assignments_for_hit",
            "Assignments",
            HITId=hit_id,
            AssignmentStatuses=["Submitted", "Approved", "Rejected"],
        ):
            yield Submission(
                submission_id=a["AssignmentId"],
                hit_id=a["HITId"],
                worker_ref=a["WorkerId"],
                status=a["AssignmentStatus"].lower(),
                submitted_at=_utc(a.get("SubmitTime")),
                answer=parse_answer(a.get("Answer")),
            )

    def _review(self, operation: str, target: str, submission_id: str, **params) -> ReviewResult:
        """Approve or reject; MTurk answers a second call with RequestError, which is recognised by
        reading the assignment back: already in the target state means done, not an error."""
        try:
            self._call(operation, AssignmentId=submission_id, **params)
        except ChannelPermanentError:
            current = self._call("get_assignment", AssignmentId=submission_id)["Assignment"]["AssignmentStatus"]
            if current.lower() == target:
                return ReviewResult(submission_id=submission_id, status=target, already=True)
            raise
        return ReviewResult(submission_id=submission_id, status=target, already=False)

    def approve(self, *, submission_id: str, feedback: str = "") -> ReviewResult:
        params = {"RequesterFeedback": feedback[:1024]} if feedback else {}
        return self._review("approve_assignment", "approved", submission_id, **params)

    def reject(self, *, submission_id: str, feedback: str) -> ReviewResult:
        return self._review("reject_assignment", "rejected", submission_id, RequesterFeedback=feedback[:1024])

    def pay_bonus(
        self, *, worker_ref: str, submission_id: str, amount: Decimal, reason: str, token: str
    ) -> BonusResult:
        """SendBonus with ``token``; a repeated token is recognised by finding the bonus (same assignment,
        amount and reason — the caller puts the token in the reason) among the assignment's payments."""
        try:
            self._call(
                "send_bonus",
                WorkerId=worker_ref,
                BonusAmount=money(amount),
                AssignmentId=submission_id,
                Reason=reason,
                UniqueRequestToken=token,
            )
        except ChannelPermanentError:
            for paid in self._pages("list_bonus_payments", "BonusPayments", AssignmentId=submission_id):
                if paid.get("Reason") == reason and Decimal(paid.get("BonusAmount", "0")) == Decimal(money(amount)):
                    return BonusResult(token=token, already=True)
            raise
        return BonusResult(token=token, already=False)

    def block_worker(self, *, block_id: str, worker_ref: str) -> None:
        # Idempotent by nature: associating again only sets the same value.
        self._call(
            "associate_qualification_with_worker",
            QualificationTypeId=block_id,
            WorkerId=worker_ref,
            IntegerValue=1,
            SendNotification=False,
        )

    def unblock_worker(self, *, block_id: str, worker_ref: str) -> None:
        try:
            self._call(
                "disassociate_qualification_from_worker",
                QualificationTypeId=block_id,
                WorkerId=worker_ref,
                Reason="The requester lifted your block.",
            )
        except ChannelPermanentError:
            # MTurk refuses to take away what the worker does not have: after a lost response the retry
            # is refused, yet the block is lifted. Only a worker who still holds it is a failure.
            holders = self._pages(
                "list_workers_with_qualification_type", "Qualifications", QualificationTypeId=block_id
            )
            if any(holder.get("WorkerId") == worker_ref for holder in holders):
                raise

    def account_balance(self) -> Decimal:
        return Decimal(self._call("get_account_balance").get("AvailableBalance", "0"))
