"""A channel that keeps everything in memory and records every call in ``outbox`` (like Django's
locmem e-mail backend). For tests and local development: publishing "succeeds" without a network,
and tests can look at what would have been sent.

It keeps the same promises as a real backend (tokens dedupe, a second approval is recognised), and
offers a worker-side helper, ``submit(hit_id, worker_ref)``, to simulate submitted work.
"""

import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from annotation.channels.base import (
    BaseChannel,
    BonusResult,
    ChannelPermanentError,
    GroupSpec,
    HITSpec,
    PreparedGroup,
    PublishedHIT,
    ReviewResult,
    Submission,
)


@dataclass(frozen=True)
class ChannelCall:
    alias: str
    method: str
    kwargs: dict


#: Every call of every LocMemChannel, in order. Tests clear it with ``reset()``.
outbox: list[ChannelCall] = []
_state: dict[str, dict] = {}
_ids = itertools.count(1)
_lock = threading.RLock()


def reset() -> None:
    with _lock:
        outbox.clear()
        _state.clear()


@dataclass
class _HIT:
    hit_id: str
    max_assignments: int
    expires_at: datetime
    submissions: list = field(default_factory=list)


class LocMemChannel(BaseChannel):
    option_names = frozenset({"worker_channel", "submit_origins", "frame_ancestors"})

    def __init__(self, *, alias: str, **options):
        super().__init__(alias=alias, **options)
        self.worker_channel = options.get("worker_channel", "locmem")

    def _record(self, method: str, **kwargs) -> dict:
        with _lock:
            outbox.append(ChannelCall(self.alias, method, kwargs))
            return _state.setdefault(
                self.alias, {"tokens": {}, "hits": {}, "reviews": {}, "bonuses": {}, "blocked": set(), "groups": {}}
            )

    def is_preview(self, params) -> bool:
        return params.get("assignmentId", "") in ("", "ASSIGNMENT_ID_NOT_AVAILABLE")

    def submit_origins(self) -> tuple[str, ...]:
        return tuple(self.options.get("submit_origins", ("https://locmem.invalid",)))

    def frame_ancestors(self) -> tuple[str, ...]:
        return tuple(self.options.get("frame_ancestors", ()))

    def prepare(self, *, group: GroupSpec, token: str) -> PreparedGroup:
        state = self._record("prepare", group=group, token=token)
        with _lock:
            if token not in state["groups"]:
                n = next(_ids)
                state["groups"][token] = PreparedGroup(group_id=f"GROUP{n}", block_id=f"BLOCK{n}")
            return state["groups"][token]

    def publish(self, *, prepared: PreparedGroup, hit: HITSpec) -> PublishedHIT:
        state = self._record("publish", prepared=prepared, hit=hit)
        with _lock:
            if hit.token in state["tokens"]:
                existing = state["hits"][state["tokens"][hit.token]]
                return PublishedHIT(existing.hit_id, existing.max_assignments, existing.expires_at, created=False)
            hit_id = f"HIT{next(_ids)}"
            expires = datetime.now(UTC) + timedelta(seconds=hit.lifetime)
            state["hits"][hit_id] = _HIT(hit_id, hit.max_assignments, expires)
            state["tokens"][hit.token] = hit_id
            return PublishedHIT(hit_id, hit.max_assignments, expires, created=True)

    def _hit(self, state, hit_id) -> _HIT:
        try:
            return state["hits"][hit_id]
        except KeyError:
            raise ChannelPermanentError(f"No HIT {hit_id}", operation="lookup", code="not_found") from None

    def withdraw(self, *, hit_id: str) -> None:
        state = self._record("withdraw", hit_id=hit_id)
        with _lock:
            self._hit(state, hit_id).expires_at = datetime.now(UTC) - timedelta(seconds=1)

    def extend(self, *, hit_id: str, expires_at: datetime) -> None:
        state = self._record("extend", hit_id=hit_id, expires_at=expires_at)
        with _lock:
            self._hit(state, hit_id).expires_at = expires_at

    def add_assignments(self, *, hit_id: str, count: int, token: str, expected_total: int) -> bool:
        state = self._record("add_assignments", hit_id=hit_id, count=count, token=token, expected_total=expected_total)
        with _lock:
            if token in state["tokens"]:
                return False
            state["tokens"][token] = hit_id
            self._hit(state, hit_id).max_assignments += count
            return True

    def sync_submissions(self, *, hit_id: str) -> Iterator[Submission]:
        state = self._record("sync_submissions", hit_id=hit_id)
        with _lock:
            hit = self._hit(state, hit_id)
            subs = [
                Submission(
                    s.submission_id,
                    hit_id,
                    s.worker_ref,
                    state["reviews"].get(s.submission_id, "submitted"),
                    s.submitted_at,
                    s.answer,
                )
                for s in hit.submissions
            ]
        return iter(subs)

    def _review(self, method: str, target: str, submission_id: str, **kwargs) -> ReviewResult:
        state = self._record(method, submission_id=submission_id, **kwargs)
        with _lock:
            if not any(s.submission_id == submission_id for h in state["hits"].values() for s in h.submissions):
                raise ChannelPermanentError(f"No submission {submission_id}", operation=method, code="not_found")
            current = state["reviews"].get(submission_id, "submitted")
            if current == target:
                return ReviewResult(submission_id, target, already=True)
            if current != "submitted":
                raise ChannelPermanentError(f"{submission_id} is {current}", operation=method, code="RequestError")
            state["reviews"][submission_id] = target
            return ReviewResult(submission_id, target, already=False)

    def approve(self, *, submission_id: str, feedback: str = "") -> ReviewResult:
        return self._review("approve", "approved", submission_id, feedback=feedback)

    def reject(self, *, submission_id: str, feedback: str) -> ReviewResult:
        return self._review("reject", "rejected", submission_id, feedback=feedback)

    def pay_bonus(
        self, *, worker_ref: str, submission_id: str, amount: Decimal, reason: str, token: str
    ) -> BonusResult:
        state = self._record(
            "pay_bonus", worker_ref=worker_ref, submission_id=submission_id, amount=amount, reason=reason, token=token
        )
        with _lock:
            if token in state["bonuses"]:
                return BonusResult(token, already=True)
            state["bonuses"][token] = (worker_ref, submission_id, Decimal(amount), reason)
            return BonusResult(token, already=False)

    def block_worker(self, *, block_id: str, worker_ref: str) -> None:
        state = self._record("block_worker", block_id=block_id, worker_ref=worker_ref)
        with _lock:
            state["blocked"].add((block_id, worker_ref))

    def unblock_worker(self, *, block_id: str, worker_ref: str) -> None:
        state = self._record("unblock_worker", block_id=block_id, worker_ref=worker_ref)
        with _lock:
            state["blocked"].discard((block_id, worker_ref))

    # --- the worker side, for tests -----------------------------------------------------------------

    def submit(self, hit_id: str, worker_ref: str, submission_id: str | None = None, answer: dict | None = None) -> str:
        """Simulate a worker submitting work on ``hit_id``; returns the submission id."""
        with _lock:
            state = _state.setdefault(
                self.alias, {"tokens": {}, "hits": {}, "reviews": {}, "bonuses": {}, "blocked": set(), "groups": {}}
            )
            hit = self._hit(state, hit_id)
            if any(s.worker_ref == worker_ref for s in hit.submissions):
                raise ChannelPermanentError("One submission per worker per HIT", operation="submit", code="duplicate")
            if len(hit.submissions) >= hit.max_assignments:
                raise ChannelPermanentError("The HIT is full", operation="submit", code="full")
            submission = Submission(
                submission_id or f"SUB{next(_ids)}",
                hit_id,
                worker_ref,
                "submitted",
                datetime.now(UTC),
                answer or {},
            )
            hit.submissions.append(submission)
            return submission.submission_id

    def state(self) -> dict:
        with _lock:
            return _state.get(self.alias, {})
