"""Chorus's guarantees (exactly-k, never twice, the counters, adaptive k's rule) checked on the stored
rows: ``invariant_violations``, for tests, benchmarks and the soak."""

from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from annotation.models import Campaign, ImportBatch, Label, Lease, Participation, Prompt, Slot, StopDecision
from annotation.models.workers import public_worker_id

#: At most this many rows are named per kind of violation; a last line says how many more there are.
VIOLATIONS_NAMED = 20


def invariant_violations(*, campaign: Campaign | None = None, acknowledged=(), complete: bool = False) -> list[str]:
    """Every way the stored rows break Chorus's guarantees, one line each; empty when they all hold.

    Over one campaign, or every campaign. Void labels do not count, but their rows and leases stay:

    * exactly-k: a prompt has k slots (adaptive k: between k and ``k_max``) and no more counted labels
      than that, each filling one of its slots, the one its lease holds; with ``complete`` (the caller
      knows every prompt must be full, e.g. after a drain), every slot filled, but a retired prompt's (it is
      owed no labels, and has no counted one: ``prompts_retired_set``). Exactly-k leaves controls
      out: a control prompt has no slots, its leases hold none and its labels fill none (and say so,
      ``Label.is_control``), while every other lease holds one of its own prompt's slots;
    * never twice: no (prompt, worker) twice among leases, nor among labels, void or not (so a prompt's
      counted labels come from distinct workers, and a void label's worker is never served the prompt
      again); a label is its own lease's worker's, on its lease's prompt, and came before the lease ran out;
    * the counters equal what they count (they are what keeps the hot path fast, so they are checked here
      rather than recomputed there): ``Prompt.n_labels`` and ``Participation.n_labels`` against the counted
      labels (controls' included), ``Slot.filled`` against the counted label filling the slot (a retired
      prompt's slots are all filled, that is closed, by no label), an unfilled
      slot's fill-first ``priority`` against its prompt's count, ``ImportBatch.n_prompts`` against the
      batch's prompts;
    * adaptive k, "its own final number": a prompt's slot count is k plus one per logged "extend"
      (``StopDecision``), so slots grew one at a time; a prompt with every slot filled has a logged "stop"
      or "at max" at that count; each logged decision is the stated rule's outcome for its posterior
      ("stop" once it reaches ``stop_confidence`` without a tie, "at max" only at ``k_max``, "extend" only
      below it and below the prompt's slot count, never below k); a fixed-k campaign logs none;
    * every label id in ``acknowledged`` is stored (void or not: a label is never deleted).

    A dozen aggregate queries, whatever the number of rows; at most ``VIOLATIONS_NAMED`` rows are named
    per kind. For tests, benchmarks and the soak.
    """
    scope = {} if campaign is None else {"campaign": campaign}
    # One function per family of guarantees, in this order, as Django's system checks are small
    # registered functions: each builds its own lines, and the order of the lines stays the report's.
    return [
        *_exactly_k_per_prompt(scope, complete=complete),
        *_never_twice(scope),
        *_slots_held(scope),
        *_counters(scope),
        *_adaptive_k(scope),
        *_import_counts(scope),
        *_acknowledged_stored(scope, acknowledged),
    ]


def _exactly_k_per_prompt(scope: dict, *, complete: bool) -> list[str]:
    """Exactly-k per prompt (its slots and counted labels against k, ``k_max``; none for a control), and
    ``Prompt.n_labels`` against its counted labels."""
    violations: list[str] = []
    counted = Label.objects.counted()
    per_prompt = Prompt.objects.filter(**scope).annotate(
        counted=_count_of(counted.filter(prompt=OuterRef("pk")), "prompt"),
        n_slots=_count_of(Slot.objects.filter(prompt=OuterRef("pk")), "prompt"),
        most=Coalesce("campaign__k_max", "campaign__k"),
    )
    off_k = Q(counted__gt=F("most")) | Q(n_slots__lt=F("campaign__k")) | Q(n_slots__gt=F("most"))
    if complete:
        off_k |= Q(counted__lt=F("n_slots"), retired_at__isnull=True)
    control_with_slots = Q(is_control=True, n_slots__gt=0)
    retired_with_labels = Q(retired_at__isnull=False, counted__gt=0)
    wrong = per_prompt.filter(
        ~Q(counted=F("n_labels")) | (Q(is_control=False) & off_k) | control_with_slots | retired_with_labels
    )
    _name(
        violations,
        wrong.order_by("pk").values(
            "external_id",
            "campaign__slug",
            "campaign__k",
            "campaign__k_max",
            "is_control",
            "n_labels",
            "counted",
            "n_slots",
            "retired_at",
        ),
        lambda row: _prompt_problems(row, complete=complete),
    )
    return violations


def _never_twice(scope: dict) -> list[str]:
    """Never twice: no (prompt, worker) twice among labels or leases; each label its own lease's worker's,
    on its lease's prompt, before the lease ran out."""
    violations: list[str] = []
    for model, what in ((Label, "labels (void ones included)"), (Lease, "leases")):
        twice = (
            model.objects.filter(**scope)
            .order_by()
            .values("prompt", "worker")
            .annotate(n=Count("pk"))
            .filter(n__gt=1)
            .values("n", "prompt__external_id", "prompt__campaign__slug", "worker__channel", "worker__external_id")
            .order_by("prompt", "worker")
        )
        _name(
            violations,
            twice,
            lambda row, what=what: [
                f"{_worker_name(row)} has {row['n']} {what} on {_prompt_name(row, 'prompt__')}: never twice"
            ],
        )

    labels = Label.objects.filter(**scope)
    _name(
        violations,
        labels.filter(
            ~Q(worker=F("lease__worker"))
            | ~Q(prompt=F("lease__prompt"))
            | ~Q(lease__status=Lease.Status.SUBMITTED)
            | Q(created_at__gte=F("lease__expires_at"))
        )
        .order_by("pk")
        .values(
            "pk",
            "worker",
            "prompt",
            "created_at",
            "lease",
            "lease__worker",
            "lease__prompt",
            "lease__status",
            "lease__expires_at",
        ),
        _label_lease_problems,
    )
    return violations


def _slots_held(scope: dict) -> list[str]:
    """Each counted label fills the slot its lease holds; control labels and leases hold no slot, every
    other lease one of its own prompt's."""
    violations: list[str] = []
    counted, labels = Label.objects.counted(), Label.objects.filter(**scope)
    _name(
        violations,
        counted.filter(**scope, is_control=False)
        .filter(
            ~Q(slot=F("lease__slot"))
            | ~Q(slot__lease=F("lease"))
            | Q(slot__filled=False)
            | ~Q(slot__prompt=F("prompt"))
        )
        .order_by("pk")
        .values("pk", "slot", "lease", "lease__slot", "slot__lease", "slot__filled"),
        lambda row: [
            (
                f"counted label {row['pk']} does not fill the slot its lease {row['lease']} holds: "
                f"its slot {row['slot']} (filled: {row['slot__filled']}, held by lease {row['slot__lease']}), "
                f"the lease's slot {row['lease__slot']}"
            )
        ],
    )

    _name(
        violations,
        labels.exclude(is_control=F("prompt__is_control"))
        .order_by("pk")
        .values("pk", "is_control", "prompt__external_id", "prompt__campaign__slug"),
        lambda row: [
            (
                f"label {row['pk']} on {_prompt_name(row, 'prompt__')} is "
                f"{'' if row['is_control'] else 'not '}a control label, "
                f"but its prompt is {'not ' if row['is_control'] else ''}a control"
            )
        ],
    )
    _name(
        violations,
        Lease.objects.filter(**scope)
        .filter(
            Q(prompt__is_control=True, slot__isnull=False)
            | (Q(prompt__is_control=False) & (Q(slot__isnull=True) | ~Q(slot__prompt=F("prompt"))))
        )
        .order_by("pk")
        .values(
            "pk",
            "slot",
            "slot__prompt__external_id",
            "prompt__is_control",
            "prompt__external_id",
            "prompt__campaign__slug",
        ),
        _lease_slot_problems,
    )
    return violations


def _counters(scope: dict) -> list[str]:
    """``Slot.filled``, open slots' fill-first priority and ``Participation.n_labels`` against what they
    count; every label's worker takes part in its campaign."""
    violations: list[str] = []
    counted, labels = Label.objects.counted(), Label.objects.filter(**scope)
    slots = Slot.objects.filter(**scope)
    _name(
        violations,
        slots.filter(filled=True, label__isnull=True, prompt__retired_at__isnull=True)
        .order_by("pk")
        .values("index", "prompt__external_id", "prompt__campaign__slug"),
        lambda row: [
            f"slot {row['index']} of {_prompt_name(row, 'prompt__')} is filled, but no counted label fills it"
        ],
    )
    _name(
        violations,
        slots.filter(filled=False, prompt__retired_at__isnull=False)
        .order_by("pk")
        .values("index", "prompt__external_id", "prompt__campaign__slug"),
        lambda row: [f"slot {row['index']} of retired {_prompt_name(row, 'prompt__')} is open: it could be served"],
    )
    _name(
        violations,
        slots.filter(filled=False)
        .exclude(priority=F("prompt__n_labels"))
        .order_by("pk")
        .values("index", "priority", "prompt__n_labels", "prompt__external_id", "prompt__campaign__slug"),
        lambda row: [
            (
                f"open slot {row['index']} of {_prompt_name(row, 'prompt__')} has fill-first priority "
                f"{row['priority']}, not the prompt's label count {row['prompt__n_labels']}"
            )
        ],
    )

    per_worker = Participation.objects.filter(**scope).annotate(
        counted=_count_of(counted.filter(campaign=OuterRef("campaign"), worker=OuterRef("worker")), "worker")
    )
    _name(
        violations,
        per_worker.exclude(counted=F("n_labels"))
        .order_by("pk")
        .values("n_labels", "counted", "campaign__slug", "worker__channel", "worker__external_id"),
        lambda row: [
            (
                f"{_worker_name(row)} in {row['campaign__slug']}: the counter says {row['n_labels']} labels, "
                f"{row['counted']} count"
            )
        ],
    )
    joined = Participation.objects.filter(campaign=OuterRef("campaign"), worker=OuterRef("worker"))
    _name(
        violations,
        labels.filter(~Exists(joined)).order_by("pk").values("pk"),
        lambda row: [f"label {row['pk']}: its worker has no participation in its campaign"],
    )
    return violations


def _import_counts(scope: dict) -> list[str]:
    """``ImportBatch.n_prompts`` against the batch's prompts."""
    violations: list[str] = []
    batches = ImportBatch.objects.filter(**scope).annotate(n=Count("prompts")).exclude(n=F("n_prompts"))
    _name(
        violations,
        batches.order_by("pk").values("filename", "n_prompts", "n", "campaign__slug"),
        lambda row: [
            f"import {row['filename']!r} of {row['campaign__slug']} says {row['n_prompts']} prompts, holds {row['n']}"
        ],
    )
    return violations


def _acknowledged_stored(scope: dict, acknowledged) -> list[str]:
    """Every acknowledged label id is stored (void or not: a label is never deleted)."""
    violations: list[str] = []
    labels = Label.objects.filter(**scope)
    ids = sorted(set(acknowledged))
    stored = set()
    for start in range(0, len(ids), 900):  # SQLite's bound-parameter limit
        stored.update(labels.filter(pk__in=ids[start : start + 900]).values_list("pk", flat=True))
    missing = [pk for pk in ids if pk not in stored]
    violations += [f"acknowledged label {pk} is not stored" for pk in missing[:VIOLATIONS_NAMED]]
    if len(missing) > VIOLATIONS_NAMED:
        violations.append(f"... and {len(missing) - VIOLATIONS_NAMED} more acknowledged labels not stored")
    return violations


def _adaptive_k(scope: dict) -> list[str]:
    """Adaptive k, "its own final number": slots against logged decisions, decisions against the rule."""
    violations: list[str] = []
    counted = Label.objects.counted()
    extend = StopDecision.Outcome.EXTEND
    decisions = StopDecision.objects.filter(prompt=OuterRef("pk"))
    per_prompt = Prompt.objects.filter(**scope, is_control=False, campaign__k_max__isnull=False).annotate(
        counted=_count_of(counted.filter(prompt=OuterRef("pk")), "prompt"),
        n_slots=_count_of(Slot.objects.filter(prompt=OuterRef("pk")), "prompt"),
        extends=_count_of(decisions.filter(outcome=extend), "prompt"),
        finals=_count_of(decisions.exclude(outcome=extend), "prompt"),
    )
    wrong = per_prompt.filter(~Q(n_slots=F("campaign__k") + F("extends")) | Q(counted=F("n_slots"), finals=0))
    _name(
        violations,
        wrong.order_by("pk").values("external_id", "campaign__slug", "campaign__k", "counted", "n_slots", "extends"),
        lambda row: (
            [
                (
                    f"{_prompt_name(row)} has {row['n_slots']} slots, but k = {row['campaign__k']} "
                    f'and {row["extends"]} logged "extend" decisions make {row["campaign__k"] + row["extends"]}'
                )
            ]
            if row["n_slots"] != row["campaign__k"] + row["extends"]
            else [f'{_prompt_name(row)} has all its {row["n_slots"]} slots filled and no logged "stop" or "at max"']
        ),
    )

    tie = Q(n_labels=F("n_positive") * 2)
    reached = Q(posterior__gte=F("campaign__stop_confidence")) & ~tie
    decided = StopDecision.objects.filter(**scope).annotate(
        prompt_slots=_count_of(Slot.objects.filter(prompt=OuterRef("prompt")), "prompt")
    )
    off_rule = (
        Q(campaign__k_max__isnull=True)
        | Q(n_positive__gt=F("n_labels"))
        | Q(n_labels__lt=F("campaign__k"))
        | (Q(outcome=extend) & (Q(n_labels__gte=F("campaign__k_max")) | Q(n_labels__gte=F("prompt_slots")) | reached))
        | (Q(outcome=StopDecision.Outcome.STOP) & ~reached)
        | (Q(outcome=StopDecision.Outcome.AT_MAX) & (~Q(n_labels=F("campaign__k_max")) | reached))
        | (~Q(outcome=extend) & ~Q(n_labels=F("prompt_slots")))
    )
    _name(
        violations,
        decided.filter(off_rule)
        .order_by("pk")
        .values(
            "outcome",
            "n_labels",
            "n_positive",
            "posterior",
            "prompt_slots",
            "prompt__external_id",
            "prompt__campaign__slug",
            "campaign__k",
            "campaign__k_max",
            "campaign__stop_confidence",
        ),
        _decision_problems,
    )
    return violations


def _decision_problems(row: dict) -> list[str]:
    name, k, k_max = _prompt_name(row, "prompt__"), row["campaign__k"], row["campaign__k_max"]
    decision = f'"{row["outcome"]}" at {row["n_positive"]} of {row["n_labels"]} (posterior {row["posterior"]:.4f})'
    if k_max is None:
        return [f"{name}: {decision} logged, but its campaign has a fixed k = {k}"]
    return [
        (
            f"{name} (now {row['prompt_slots']} slots): {decision} breaks the rule k = {k} to k_max = {k_max}, "
            f"stop at {row['campaign__stop_confidence']}"
        )
    ]


def _count_of(rows: QuerySet, key: str) -> Coalesce:
    """The number of ``rows`` (correlated to the outer row through ``key``), 0 for none."""
    n = rows.order_by().values(key).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(n, output_field=IntegerField()), 0)


def _name(violations: list[str], rows: QuerySet, describe) -> None:
    shown = list(rows[: VIOLATIONS_NAMED + 1])
    for row in shown[:VIOLATIONS_NAMED]:
        violations.extend(describe(row))
    if len(shown) > VIOLATIONS_NAMED:
        violations.append(f"... and {rows.count() - VIOLATIONS_NAMED} more like the last")


def _prompt_name(row: dict, prefix: str = "") -> str:
    return f"prompt {row[prefix + 'external_id']!r} of {row[prefix + 'campaign__slug']}"


def _worker_name(row: dict) -> str:
    return f"worker {public_worker_id(row['worker__channel'], row['worker__external_id'])}"


def _prompt_problems(row: dict, *, complete: bool) -> list[str]:
    name, n, n_slots = _prompt_name(row), row["counted"], row["n_slots"]
    k, k_max = row["campaign__k"], row["campaign__k_max"]
    most = k if k_max is None else k_max
    wanted = f"k = {k}" if k_max is None else f"k = {k} to k_max = {k_max}"
    problems = []
    exactly_k = not row["is_control"]
    if exactly_k and n > most:
        problems.append(f"{name} has {n} counted labels, more than {'k' if k_max is None else 'k_max'} = {most}")
    retired = row["retired_at"] is not None
    if retired and n:
        problems.append(f"retired {name} has {n} counted labels: only a prompt without labels is retired")
    if exactly_k and complete and n < n_slots and not retired:
        problems.append(f"{name} has {n} counted labels for its {n_slots} slots: not complete")
    if n != row["n_labels"]:
        problems.append(f"{name}: its counter says {row['n_labels']} labels, {n} count")
    if exactly_k and not k <= n_slots <= most:
        problems.append(f"{name} has {n_slots} slots, not {wanted}")
    if not exactly_k and n_slots:
        problems.append(f"control {name} has {n_slots} slots: a control has none")
    return problems


def _lease_slot_problems(row: dict) -> list[str]:
    lease, prompt = f"lease {row['pk']}", _prompt_name(row, "prompt__")
    if row["prompt__is_control"]:
        return [f"{lease} on control {prompt} holds slot {row['slot']}: a control has no slots"]
    if row["slot"] is None:
        return [f"{lease} on {prompt} holds no slot"]
    return [f"{lease} on {prompt} holds slot {row['slot']} of prompt {row['slot__prompt__external_id']!r}"]


def _label_lease_problems(row: dict) -> list[str]:
    label, lease = f"label {row['pk']}", f"lease {row['lease']}"
    problems = []
    if (row["worker"], row["prompt"]) != (row["lease__worker"], row["lease__prompt"]):
        problems.append(
            f"{label} (worker {row['worker']}, prompt {row['prompt']}) came through {lease} of worker "
            f"{row['lease__worker']} on prompt {row['lease__prompt']}"
        )
    if row["lease__status"] != Lease.Status.SUBMITTED:
        problems.append(f"{label}: its {lease} is {row['lease__status']}, not submitted")
    if row["created_at"] >= row["lease__expires_at"]:
        problems.append(f"{label} arrived at {row['created_at']:%H:%M:%S.%f}, after its {lease} ran out")
    return problems
