"""A campaign's workers beside their audit: each worker's standing (labels, excluded, blocked, flagged in
the log) with the numbers and flags the live audit gives them (``audits.hook.worker_audit_table``: what
the dashboard's workers table shows), filtered by flag and by status, and sorted by a column; for the
workers pages and the workers API.

Not re-exported by ``annotation.selectors``: it reads the audit through its door, and the audit reads
``annotation.selectors``, so re-exporting it would make a cycle of imports.
"""

from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from annotation.models import Campaign, Participation
from annotation.selectors.workers import campaign_worker_by_pk, campaign_workers
from audits.hook import worker_audit_table

#: The audit's flags on a worker (``audits.selectors.tables.worker_table``), by kind, as the pages name
#: them. Its "excluded" flag is left out: the worker's status says so.
FLAG_KINDS = {
    "straight_lining": "straight-lining",
    "control_accuracy": "control accuracy",
    "too_fast": "too fast",
    "outlier": "outlier",
    "underpowered": "underpowered",
}
#: A worker's standing in the campaign; "active": neither excluded from the audit nor blocked.
STATUSES = {
    "active": "active",
    "excluded": "excluded from the audit",
    "blocked": "blocked",
    "flagged": "flagged in the log",
}


def _number(name: str, size: bool = False):
    def key(participation):
        value = participation.audit.get(name)
        return abs(value) if size and value is not None else value

    return key


#: The columns a list of workers sorts by (``-`` first: descending); a worker without the number goes
#: last either way. Bias sorts by its size, whichever its sign.
SORTS = {
    "worker": lambda participation: participation.worker.public_id,
    "labels": lambda participation: participation.n_labels,
    "flags": lambda participation: len(participation.audit_flags),
    "top_share": _number("top_share"),
    "control_accuracy": _number("control_accuracy"),
    "speed_ratio": _number("speed_ratio"),
    "bias": _number("bias", size=True),
    "accuracy": _number("accuracy"),
}
DEFAULT_SORT = "-labels"


@dataclass(frozen=True)
class AuditedWorkers:
    # Each with ``audit`` (its row of the audit's table, {} if none) and ``audit_flags`` (kind, text, name).
    rows: list[Participation]
    computed_at: datetime | None  # the quick snapshot the numbers are from; None before the first


def _check(field: str, value: str, choices) -> None:
    if value and value not in choices:
        raise ValidationError({field: f"{value!r} is not one of: {', '.join(choices)}."})


def _sort_check(sort: str) -> tuple[str, bool]:
    name, descending = sort.removeprefix("-"), sort.startswith("-")
    if name not in SORTS:
        raise ValidationError({"sort": f"{sort!r} is not a column: one of {', '.join(SORTS)}, with - for descending."})
    return name, descending


def _attach(participations, table: dict) -> None:
    for participation in participations:
        participation.audit = table.get(participation.worker.public_id) or {}
        flags = participation.audit.get("flags") or []
        participation.audit_flags = [{**f, "name": FLAG_KINDS[f["kind"]]} for f in flags if f["kind"] in FLAG_KINDS]


def _standing(campaign: Campaign, status: str) -> QuerySet[Participation]:
    workers = campaign_workers(campaign=campaign)
    return {
        "": workers,
        "active": workers.filter(excluded_at__isnull=True, blocked_at__isnull=True),
        "excluded": workers.filter(excluded_at__isnull=False),
        "blocked": workers.filter(blocked_at__isnull=False),
        "flagged": workers.filter(flagged=True),
    }[status]


def workers_filtered(*, campaign: Campaign, flag: str = "", status: str = "") -> tuple[QuerySet[Participation], dict]:
    """The campaign's workers (``campaign_workers``) with this status and this audit flag (either
    empty: any), as a queryset (for a cursor's pagination), and the audit's table by public id (the rows
    a page of them gets with :func:`audit_attach`). An unknown flag or status is refused naming it."""
    _check("flag", flag, FLAG_KINDS)
    _check("status", status, STATUSES)
    audit = worker_audit_table(campaign=campaign)
    workers = _standing(campaign, status)
    if flag:
        marked = {public for public, row in audit["workers"].items() if any(f["kind"] == flag for f in row["flags"])}
        ids = [
            pk
            for pk, channel, external_id in workers.values_list("pk", "worker__channel", "worker__external_id")
            if f"{channel}:{external_id}" in marked
        ]
        workers = workers.filter(pk__in=ids)
    return workers, audit


def audit_attach(participations, audit: dict) -> list[Participation]:
    """The participations, each given its row of the audit's table (``audit``, {} when the audit has
    not seen the worker) and its flags (``audit_flags``)."""
    participations = list(participations)
    _attach(participations, audit["workers"])
    return participations


def workers_audited(
    *, campaign: Campaign, flag: str = "", status: str = "", sort: str = DEFAULT_SORT
) -> AuditedWorkers:
    """Every worker of the campaign with this status and flag, each with their audit row and flags,
    sorted by a column of :data:`SORTS` (ties: most labels first, then in the order they came). O(workers):
    the audit's table is read whole, as the dashboard reads it. Unknown values are refused naming the
    field."""
    name, descending = _sort_check(sort)
    workers, audit = workers_filtered(campaign=campaign, flag=flag, status=status)
    rows = audit_attach(workers, audit)
    key = SORTS[name]
    known = [row for row in rows if key(row) is not None]
    known.sort(key=key, reverse=descending)  # stable: the ties keep campaign_workers' order
    return AuditedWorkers(rows=known + [row for row in rows if key(row) is None], computed_at=audit["computed_at"])


def worker_audited(*, campaign: Campaign, worker_id: int) -> tuple[Participation, datetime | None] | None:
    """One worker of the campaign (by ``Worker.pk``) with their audit row and flags, and when the audit
    computed them; None when they do not take part in the campaign."""
    participation = campaign_worker_by_pk(campaign=campaign, worker_id=worker_id)
    if participation is None:
        return None
    audit = worker_audit_table(campaign=campaign)
    _attach([participation], audit["workers"])
    return participation, audit["computed_at"]
