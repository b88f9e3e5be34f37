"""The contract of a publishing channel backend.

A channel is a plug-in that talks to somewhere workers are (MTurk, a test outbox, ...). It never
decides who labels what: every worker, whatever the channel, gets prompts from the one assignment
engine (``annotation.services.lease_acquire`` / ``label_submit``). A channel only publishes
*HITs* (MTurk's word for a unit of published work, used for every channel) that bring workers to
Chorus's task page, reports what the workers submitted, and pays them.

Backends are configured in ``settings.CHORUS_CHANNELS`` and loaded by
``annotation.channels.registry.get_channel(alias)``::

    CHORUS_CHANNELS = {
        "mturk": {"BACKEND": "annotation.channels.mturk.MTurkChannel", "OPTIONS": {"sandbox": True}},
    }

Rules every backend follows:

* methods return the dataclasses below and raise ``ChannelError`` subclasses, never ``None`` for a
  failure: ``ChannelTransientError`` (try again later: throttling that outlasted the retries, timeouts,
  the service's own faults) or ``ChannelPermanentError`` (the request is wrong; retrying is useless);
* every call that creates a HIT, adds capacity or pays takes a ``token`` derived from a Chorus row,
  and repeating a call with the same token is recognised, not repeated (``already=True`` /
  ``created=False`` in the result);
* approving or rejecting twice is recognised too (``already=True``);
* no call is made inside a database transaction (the caller's duty; the services respect it).
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.core.exceptions import ImproperlyConfigured


class ChannelError(Exception):
    """A channel call failed. ``operation`` names the remote call, ``code`` the remote error code."""

    def __init__(self, message: str, *, operation: str = "", code: str = ""):
        super().__init__(message)
        self.message = message
        self.operation = operation
        self.code = code


class ChannelTransientError(ChannelError):
    """Worth retrying later (the call may or may not have happened: retry with the same token)."""


class ChannelPermanentError(ChannelError):
    """The remote side refused the request; retrying it unchanged will fail again."""


# --- What Chorus asks for -------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSpec:
    """What every HIT of a publication shares (MTurk: the HIT type and the block-list qualification).

    ``reward`` is in US dollars per assignment; durations are in seconds. ``locales`` are ISO country
    codes (``"US"``) or country-subdivision pairs (``"US-NY"``) workers must be in; ``min_approval_rate``
    is a percentage and ``min_approved`` a count of approved assignments; ``None`` means no requirement.
    """

    title: str
    description: str
    keywords: str
    reward: Decimal
    assignment_duration: int
    auto_approval_delay: int
    locales: tuple[str, ...] = ()
    min_approval_rate: int | None = None
    min_approved: int | None = None


@dataclass(frozen=True)
class HITSpec:
    """One HIT to publish and the token that makes publishing it idempotent."""

    token: str
    max_assignments: int
    lifetime: int
    external_url: str
    frame_height: int = 0
    first_attempt_at: datetime | None = None  # set when a previous attempt may have created it


# --- What the channel answers ---------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedGroup:
    group_id: str
    block_id: str


@dataclass(frozen=True)
class PublishedHIT:
    hit_id: str
    max_assignments: int
    expires_at: datetime
    created: bool  # False: an earlier call with the same token had created it


@dataclass(frozen=True)
class Submission:
    """A worker's submitted work as the channel reports it. ``status`` is submitted, approved or rejected."""

    submission_id: str
    hit_id: str
    worker_ref: str
    status: str
    submitted_at: datetime | None = None
    answer: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ReviewResult:
    submission_id: str
    status: str  # approved or rejected
    already: bool  # True: it was already in that state (a retry, or an earlier run)


@dataclass(frozen=True)
class BonusResult:
    token: str
    already: bool


class BaseChannel:
    """Subclasses implement the publishing calls; ``open``/``close`` are optional hooks.

    ``OPTIONS`` of the configured alias arrive as keyword arguments; names not in ``option_names``
    are refused with ``ImproperlyConfigured`` naming the alias.
    """

    option_names: frozenset[str] = frozenset()
    #: ``Worker.channel`` of the workers this backend brings (at most 20 characters).
    worker_channel: str = ""

    def __init__(self, *, alias: str, **options):
        unknown = set(options) - set(self.option_names)
        if unknown:
            raise ImproperlyConfigured(
                f"CHORUS_CHANNELS[{alias!r}]: unknown OPTIONS {', '.join(sorted(unknown))} for "
                f"{type(self).__name__} (accepted: {', '.join(sorted(self.option_names)) or 'none'})."
            )
        self.alias = alias
        self.options = options

    def __repr__(self) -> str:  # never the options: they may hold secrets
        return f"<{type(self).__name__} {self.alias!r}>"

    # Optional hooks
    def open(self) -> None:
        """Acquire resources (a client, a connection); called lazily by backends that need one."""

    def close(self) -> None:
        """Release what ``open`` acquired. Safe to call more than once."""

    def setup_problems(self) -> list[str]:
        """What the deployment still has to set for this backend to work (credentials and the like), each
        naming the setting or environment variable; empty when nothing is missing. Never a secret's value.
        The channels page shows them before its forms."""
        return []

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, *exc_info):
        self.close()

    # Worker-facing helpers
    def is_preview(self, params) -> bool:
        """Whether a task-page request is a preview (no real prompt may be shown)."""
        return False

    def submit_origins(self) -> tuple[str, ...]:
        """Origins the task page may post a finished assignment back to."""
        return ()

    def frame_ancestors(self) -> tuple[str, ...]:
        """Origins allowed to frame the task page."""
        return ()

    # The contract
    def _required(self, duty: str):
        raise NotImplementedError(f"{type(self).__name__} must implement {duty}")

    def prepare(self, *, group: GroupSpec, token: str) -> PreparedGroup:
        """Create (or find again, same ``token``) what the publication's HITs share."""
        self._required("prepare()")

    def publish(self, *, prepared: PreparedGroup, hit: HITSpec) -> PublishedHIT:
        """Publish one HIT; a repeated ``hit.token`` returns the existing HIT with ``created=False``."""
        self._required("publish()")

    def withdraw(self, *, hit_id: str) -> None:
        """Stop showing the HIT to workers now (MTurk: expire the HIT). Work in progress may still arrive."""
        self._required("withdraw()")

    def extend(self, *, hit_id: str, expires_at: datetime) -> None:
        """Keep the HIT visible until ``expires_at``."""
        self._required("extend()")

    def add_assignments(self, *, hit_id: str, count: int, token: str, expected_total: int) -> bool:
        """Let ``count`` more workers take the HIT; returns False when ``token`` was already used."""
        self._required("add_assignments()")

    def sync_submissions(self, *, hit_id: str) -> Iterator[Submission]:
        """Every submitted, approved or rejected piece of work on the HIT, all pages."""
        self._required("sync_submissions()")

    def approve(self, *, submission_id: str, feedback: str = "") -> ReviewResult:
        self._required("approve()")

    def reject(self, *, submission_id: str, feedback: str) -> ReviewResult:
        self._required("reject()")

    def pay_bonus(
        self, *, worker_ref: str, submission_id: str, amount: Decimal, reason: str, token: str
    ) -> BonusResult:
        self._required("pay_bonus()")

    def block_worker(self, *, block_id: str, worker_ref: str) -> None:
        """Stop showing the publication's HITs to this worker (they have nothing left, or are blocked)."""
        self._required("block_worker()")

    def unblock_worker(self, *, block_id: str, worker_ref: str) -> None:
        """Show the publication's HITs to this worker again (the researcher lifted their block).
        Idempotent: lifting a block that is not there succeeds."""
        self._required("unblock_worker()")
