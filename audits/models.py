"""What the live audit keeps in the database.

Sufficient statistics (``AuditStatsShard``, ``WorkerAuditStats``, ``UnitAuditStats``, ``UnitStateCount``)
are updated by the quick run, which folds in the labels that came since the last one
(``PendingLabel``, ``audits.services.stats_fold``), so the quick audit never re-reads the labels.
``AuditSnapshot`` rows are the audits themselves: the latest is what the dashboard shows, their
history is the time series of noise during collection.

A *unit* (audit unit) is one row of the label matrix: the prompt itself for binary and rating
schemas, each (prompt, answer option) for per-option schemas (exported as ``<external id>#<n>``).
A label's *scaled value* is its value on the audit's [0, 1] scale (after the binarization map).
"""

from django.conf import settings
from django.db import models
from django.db.models import Q


class AuditStats(models.Model):
    """A campaign's audit state: the map its statistics use and how far its audit has got.

    The label counters themselves live in ``AuditStatsShard`` rows. Its row is also the fold's lock:
    ``stats_fold`` holds it, so one campaign's folds run one at a time.
    """

    campaign = models.OneToOneField("annotation.Campaign", on_delete=models.CASCADE, related_name="audit_stats")
    scale = models.JSONField(default=dict, help_text="The raw → scaled value map the statistics were built with.")
    needs_rebuild = models.BooleanField(
        default=False,
        help_text="The map changed under existing labels, or a label became void: rebuild from the labels.",
    )
    rebuilds = models.PositiveIntegerField(
        default=0, help_text="Rebuilds so far: a full run that read the labels before the latest one is not saved."
    )
    audited_labels = models.PositiveBigIntegerField(default=0, help_text="Watermark of the latest quick snapshot.")
    audited_at = models.DateTimeField(null=True, blank=True)
    # Where the campaign's median seconds per label was at the latest worker-quality read: the
    # ``LabelSeconds`` row (seconds, label) at its lower middle, how many rows order before it and how
    # many there were, so that the next read walks from there instead of from the fastest label
    # (quality_tables.campaign_median_seconds). Null seconds: no anchor (none yet, or a rebuild).
    median_seconds_at = models.FloatField(null=True, blank=True)
    median_label_at = models.BigIntegerField(null=True, blank=True)
    median_rank_at = models.PositiveBigIntegerField(default=0)
    median_of = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = "audit statistics"
        verbose_name_plural = "audit statistics"

    def __str__(self) -> str:
        return f"{self.campaign}: audited {self.audited_labels} labels"


class AuditStatsShard(models.Model):
    """One shard of a campaign's label counters; the campaign's totals are the sums over its shards.
    Since the quick run folds the labels (one writer per campaign), every count goes to shard 0; the
    rows of other shards are those labels wrote themselves before (summed all the same).

    ``n_labels`` counts label rows: summed in one consistent read it is a snapshot's *watermark*,
    the number of labels the snapshot includes.
    """

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    shard = models.PositiveSmallIntegerField()
    n_labels = models.PositiveBigIntegerField(default=0, help_text="Label rows folded in.")
    n_units = models.PositiveBigIntegerField(default=0, help_text="Valid scaled values (audited).")
    n_invalid = models.PositiveBigIntegerField(
        default=0, help_text="Raw values the binarization map leaves out (not audited)."
    )
    sum = models.FloatField(default=0.0)
    sumsq = models.FloatField(default=0.0)
    prompts_complete = models.PositiveIntegerField(default=0, help_text="Prompts whose k-th label fell here.")
    first_unaudited_at = models.DateTimeField(null=True, blank=True, help_text="Oldest label no snapshot includes.")

    class Meta:
        verbose_name = "audit statistics shard"
        constraints = [models.UniqueConstraint(fields=["campaign", "shard"], name="auditstatsshard_unique")]

    def __str__(self) -> str:
        return f"{self.campaign} shard {self.shard}: {self.n_labels} labels"


class WorkerAuditStats(models.Model):
    """One worker's labels in one campaign: count, sum and sum of squares of their scaled values."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.CASCADE, related_name="+")
    n_labels = models.PositiveIntegerField(default=0)
    n_units = models.PositiveIntegerField(default=0)
    n_invalid = models.PositiveIntegerField(default=0)
    sum = models.FloatField(default=0.0)
    sumsq = models.FloatField(default=0.0)

    class Meta:
        verbose_name = verbose_name_plural = "worker audit statistics"
        constraints = [models.UniqueConstraint(fields=["campaign", "worker"], name="workerauditstats_unique")]

    def __str__(self) -> str:
        return f"{self.worker} in {self.campaign}: {self.n_labels} labels"


class WorkerQualityStats(models.Model):
    """One worker's worker-quality counts in one campaign, kept by the fold (``stats_fold``):
    counted labels of prompts that are not controls (excluded workers' included), controls answered
    and answered correctly, and the median of their seconds per label (``LabelSeconds``)."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.CASCADE, related_name="+")
    n_labels = models.PositiveIntegerField(default=0)
    n_controls = models.PositiveIntegerField(default=0)
    n_correct = models.PositiveIntegerField(default=0)
    median_seconds = models.FloatField(null=True)

    class Meta:
        verbose_name = verbose_name_plural = "worker quality statistics"
        constraints = [models.UniqueConstraint(fields=["campaign", "worker"], name="workerqualitystats_unique")]

    def __str__(self) -> str:
        return f"{self.worker} in {self.campaign}: {self.n_labels} labels, {self.n_controls} controls"


class WorkerValueCount(models.Model):
    """How many of a worker's audited cells (valid units of their non-control labels) hold a scaled
    value: the straight-lining rule's sufficient statistics."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.CASCADE, related_name="+")
    value = models.BigIntegerField()
    n = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = verbose_name_plural = "worker value counts"
        constraints = [models.UniqueConstraint(fields=["campaign", "worker", "value"], name="workervaluecount_unique")]

    def __str__(self) -> str:
        return f"{self.worker} in {self.campaign}: {self.value} × {self.n}"


class BiasSums(models.Model):
    """The bias's six sums over compared cells (``audits.quality_tables.BIAS_FIELDS``): the count, and
    the integer sums of x, x², o, o², x·o."""

    n = models.BigIntegerField(default=0)
    sx = models.BigIntegerField(default=0)
    sxx = models.BigIntegerField(default=0)
    so = models.BigIntegerField(default=0)
    soo = models.BigIntegerField(default=0)
    sxo = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class WorkerBiasStats(BiasSums):
    """The bias's exact sufficient statistics of one worker's cells compared with ``k`` others
    (``audits.selectors.worker_numbers``): with ``x`` the worker's scaled value on a unit and ``o`` the
    sum of the k reference others' values there, the count and the integer sums of x, x², o, o², x·o.
    Scaled values are integers, so every sum is exact and the bias follows in rationals."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.CASCADE, related_name="+")
    k = models.PositiveIntegerField()

    class Meta:
        verbose_name = verbose_name_plural = "worker bias statistics"
        constraints = [models.UniqueConstraint(fields=["campaign", "worker", "k"], name="workerbiasstats_unique")]

    def __str__(self) -> str:
        return f"{self.worker} in {self.campaign}: {self.n} cells with {self.k} others"


class PendingLabel(models.Model):
    """A counted label that the quick run has not folded into its campaign's statistics yet.

    Inserted in the label's own transaction (``audits.services.label_stats_add``: the one statement the
    audit adds to a submit), deleted in the transaction that folds the label (``stats_fold``) or by a
    rebuild, which takes every label from the table: each label is folded exactly once, whichever
    process dies when."""

    label = models.OneToOneField("annotation.Label", primary_key=True, on_delete=models.CASCADE, related_name="+")
    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")

    class Meta:
        verbose_name = verbose_name_plural = "pending labels"

    def __str__(self) -> str:
        return f"label {self.label_id}, not folded yet"


class LabelSeconds(models.Model):
    """Seconds from lease to label of each folded label (controls included; negative read as 0), for
    the campaign's and each worker's median by index rather than by reading every label. Inserted by
    the fold (``stats_fold``) or a rebuild, never before: the rows are exactly the labels the
    worker-quality counts include."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    worker_id = models.BigIntegerField()
    label_id = models.BigIntegerField()
    seconds = models.FloatField()

    class Meta:
        verbose_name = verbose_name_plural = "label seconds"
        indexes = [
            models.Index(fields=["campaign", "seconds", "label_id"], name="labelseconds_campaign_order"),
            models.Index(fields=["campaign", "worker_id", "seconds"], name="labelseconds_worker"),
        ]

    def __str__(self) -> str:
        return f"label {self.label_id}: {self.seconds} s"


class UnitAuditStats(models.Model):
    """One unit's labels: count, sum and sum of squares of their scaled values.

    ``option`` is 0 for a whole prompt, n ≥ 1 for answer option n of a per-option prompt.
    ``disagreement`` is the population variance of the unit's values (null below two labels); an index on it
    finds the most ambiguous units without a scan.
    """

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    prompt = models.ForeignKey("annotation.Prompt", on_delete=models.CASCADE, related_name="+")
    option = models.PositiveSmallIntegerField(default=0)
    count = models.PositiveIntegerField(default=0)
    sum = models.FloatField(default=0.0)
    sumsq = models.FloatField(default=0.0)
    disagreement = models.FloatField(null=True, blank=True)

    class Meta:
        verbose_name = verbose_name_plural = "unit audit statistics"
        constraints = [models.UniqueConstraint(fields=["prompt", "option"], name="unitauditstats_unique")]
        indexes = [
            models.Index(
                fields=["campaign", "-disagreement", "-count"],
                condition=Q(disagreement__isnull=False),
                name="unitauditstats_ambiguous",
            )
        ]

    def __str__(self) -> str:
        unit = f"{self.prompt}#{self.option}" if self.option else str(self.prompt)
        return f"{unit}: {self.count} labels"


class UnitStateCount(models.Model):
    """How many units of a campaign are in each state (count, sum, sum of squares), per shard.

    With k labels per prompt there are few states (k + 1 choose 2 for binary units), so the
    prompt side of the six numbers is computed from a handful of rows whatever the campaign's size.
    A fold moves each unit from its old state to its new one in shard 0 (``AuditStatsShard``), so a
    shard's count may be negative; the sum over shards is the number of units in the state.
    """

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    shard = models.PositiveSmallIntegerField(default=0)
    count = models.PositiveIntegerField()
    sum = models.FloatField()
    sumsq = models.FloatField()
    n_units = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "shard", "count", "sum", "sumsq"], name="unitstatecount_unique"
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.campaign} shard {self.shard}: {self.n_units} units with "
            f"{self.count} labels, sum {self.sum:g}, sumsq {self.sumsq:g}"
        )


class AuditSnapshot(models.Model):
    """One audit run's result.

    ``kind`` quick: the six numbers, progress, partitions and straight-lining flags from the running
    statistics (every few labels);
    full: the engine's whole report on the label matrix (filter sweeps, accuracy, agreement; slower
    cadence). Saved idempotently keyed by (campaign, kind, watermark), so a rerun is harmless. A rebuild
    of the statistics (a new map, void labels) deletes the snapshots at and above the rebuilt label
    count: they no longer describe the labels at their watermark, and the next runs replace them.
    """

    class Kind(models.TextChoices):
        QUICK = "quick", "Quick (running statistics)"
        FULL = "full", "Full (label matrix)"

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="audit_snapshots")
    kind = models.CharField(max_length=5, choices=Kind.choices)
    watermark = models.PositiveBigIntegerField(help_text="Label rows the audit saw.")
    data = models.JSONField(help_text="The numbers (quick) or the engine's report dict (full).")
    computed_at = models.DateTimeField(db_index=True)
    read_at = models.DateTimeField(null=True, blank=True, help_text="When the labels it includes were read.")
    duration_ms = models.FloatField(default=0.0)
    cpu_ms = models.FloatField(default=0.0, help_text="CPU time of the computing process.")
    rules_applied_at = models.DateTimeField(
        null=True, blank=True, help_text="Quick runs: when the quality rules were applied to its worker numbers."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "kind", "watermark"], name="auditsnapshot_unique"),
        ]
        indexes = [models.Index(fields=["campaign", "kind", "-watermark"], name="auditsnapshot_latest")]
        get_latest_by = "watermark"

    def __str__(self) -> str:
        return f"{self.campaign} {self.kind} @{self.watermark}"


class RequestedRun(models.Model):
    """What every run on request shares (``audits.services.run_requests``): who asked and when, and the
    result on the labels counted at ``watermark``, or the engine's error."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    watermark = models.PositiveBigIntegerField(null=True, blank=True, help_text="Label rows the run saw.")
    data = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    computed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(default=0.0)

    class Meta:
        abstract = True


class GroundTruthRun(RequestedRun):
    """Alternative ground truths of a campaign (majority vote, Dawid–Skene, GLAD, MACE), inferred from its
    labels when a researcher asks (``audits.services.ground_truths_request``): the models take seconds
    to minutes (GLAD on thousands of prompts), too slow for the full audit's cadence. ``data`` is
    ``audits.engine.truths.ground_truths``' dict, on the labels counted at ``watermark``."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for a Celery worker"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="ground_truth_runs")
    methods = models.JSONField(help_text="The methods asked for, in audits.engine.truths.METHODS order.")
    status = models.CharField(max_length=7, choices=Status.choices, default=Status.PENDING)

    class Meta:
        indexes = [models.Index(fields=["campaign", "-requested_at"], name="groundtruthrun_latest")]

    def __str__(self) -> str:
        return f"{self.campaign} ground truths ({', '.join(self.methods)}): {self.status}"


class System(models.Model):
    """A system's predictions for a campaign's prompts, uploaded by a researcher to be scored against
    the crowd's labels (``audits.services.systems``). ``predictions`` maps a prompt's external id to
    the system's answer: a label value of the campaign's schema, a graded score on a rating campaign
    (scored by Spearman's ρ), or, for free-text campaigns, a ranked list of answers; ``samples``
    holds free-text systems' sampled answers (with repeats) where they were uploaded."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="systems")
    name = models.CharField(max_length=80)
    predictions = models.JSONField(help_text="{prompt external id: prediction}.")
    samples = models.JSONField(null=True, blank=True, help_text="Free text: {prompt external id: [sampled answers]}.")
    n_predictions = models.PositiveIntegerField(default=0)
    filename = models.CharField(max_length=255, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    uploaded_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "name"], name="system_name_unique")]
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.campaign} system {self.name}"


class BootstrapRun(RequestedRun):
    """Bootstrap intervals of a campaign's instrument card (the six noise numbers and Krippendorff's α),
    resampled by a Celery worker when a researcher asks: 1,000 resamples take seconds, too slow for a
    page. ``done_resamples`` is the progress the card shows; ``data`` the intervals, on the labels
    counted at ``watermark``."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for a Celery worker"
        RUNNING = "running", "Resampling"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="bootstrap_runs")
    resamples = models.PositiveIntegerField(default=1000)
    seed = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=7, choices=Status.choices, default=Status.PENDING)
    done_resamples = models.PositiveIntegerField(default=0, help_text="Progress: resamples drawn so far.")
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["campaign", "-requested_at"], name="bootstraprun_latest")]

    def __str__(self) -> str:
        return f"{self.campaign} bootstrap ({self.resamples} resamples): {self.status}"


class AnswerClustering(models.Model):
    """One saved version of a clustering of one free-text prompt's answers (ProtoQA's workflow: two
    researchers cluster independently, a third adjudicates the final clustering). Rows are never edited:
    every save, revert or import adds a version (``audits.services.clustering``); the latest per
    (prompt, author, role) is current, and a prompt's final clustering is its latest adjudicated one.

    ``assignment`` maps every counted label of the prompt (its id, as a string: JSON keys) to a
    cluster name; ``invalid`` lists the label ids judged invalid, which sit in no cluster."""

    class Role(models.TextChoices):
        PROPOSAL = "proposal", "Proposal (automatic)"
        INDEPENDENT = "independent", "Independent"
        ADJUDICATED = "adjudicated", "Adjudicated"

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="answer_clusterings")
    prompt = models.ForeignKey("annotation.Prompt", on_delete=models.CASCADE, related_name="answer_clusterings")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    role = models.CharField(max_length=11, choices=Role.choices)
    version = models.PositiveIntegerField(help_text="1, 2, … per (prompt, author, role); per prompt when adjudicated.")
    created_at = models.DateTimeField(auto_now_add=True)
    assignment = models.JSONField(help_text="{label id: cluster name}.")
    invalid = models.JSONField(default=list, blank=True, help_text="Label ids judged invalid.")
    based_on = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="The version edited."
    )
    note = models.CharField(max_length=200, blank=True, help_text="e.g. “revert to v2”, “imported from …”.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["prompt", "author", "role", "version"], name="answerclustering_version_unique"
            ),
            # Proposals (no author) and adjudicated versions number one lane per prompt.
            models.UniqueConstraint(
                fields=["prompt", "role", "version"],
                condition=~Q(role="independent"),
                name="answerclustering_shared_lane_unique",
            ),
        ]
        indexes = [models.Index(fields=["prompt", "role", "-version"], name="answerclustering_latest")]
        ordering = ["prompt", "role", "version"]

    def __str__(self) -> str:
        return f"{self.prompt} {self.role} v{self.version} by {self.author or 'Chorus'}"

    @property
    def n_clusters(self) -> int:
        return len(set(self.assignment.values()))
