from django.conf import settings
from django.db import models


class ImportBatch(models.Model):
    """One imported file. The digest makes re-importing the same file a refusal, not a duplicate."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="imports")
    filename = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64)
    n_prompts = models.PositiveIntegerField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "import batches"
        constraints = [models.UniqueConstraint(fields=["campaign", "sha256"], name="import_once_per_file")]

    def __str__(self) -> str:
        return f"{self.filename} ({self.n_prompts} prompts)"


#: The live audit codes option n (counted from 1) of a prompt as the one integer unit
#: ``prompt_pk * OPTION_BASE + n``, so a prompt carries at most ``MAX_OPTIONS`` options.
OPTION_BASE = 1024
MAX_OPTIONS = OPTION_BASE - 1


class Prompt(models.Model):
    """One item to label. Per-option schemas carry their answer options; each option is an audit unit."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="prompts")
    batch = models.ForeignKey(ImportBatch, on_delete=models.PROTECT, related_name="prompts")
    external_id = models.CharField(max_length=200)
    text = models.TextField()
    options = models.JSONField(default=list, blank=True)
    gold = models.JSONField(null=True, blank=True, help_text="The putative label imported with the prompt.")
    group = models.CharField(max_length=200, blank=True, help_text="Theme or context column of the import.")
    is_control = models.BooleanField(
        default=False,
        help_text="A control: its gold is known, it is served to workers to measure them, never counted in "
        "k or in the benchmark's audit.",
    )
    n_labels = models.PositiveSmallIntegerField(default=0)
    retired_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When an editor retired the prompt (it had no counted label): never served again and owed "
        "no labels, its slots closed (``Slot.filled``); empty while it is in the campaign.",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "external_id"], name="prompt_external_id_unique")]
        indexes = [
            # A campaign's few control prompts, read without its other prompts: drawing a control for a
            # worker, counting their unseen controls, the quick audit's prompt count (72 ms → 0.3 ms at 1M).
            models.Index(fields=["campaign"], condition=models.Q(is_control=True), name="prompt_control"),
        ]

    def __str__(self) -> str:
        return self.external_id


class Slot(models.Model):
    """One of a prompt's k places for a label.

    Exactly-k lives here: a prompt has k slots, a label fills one slot (unique), and a lease holds
    one slot at a time (a conditional UPDATE). Only unfilled slots are indexed, so finding work
    costs the same for 10k prompts as for 1M, and a prompt leaves the pool with its last slot.
    ``rand`` is drawn once at creation; a request starts at a random point of it instead of
    sorting the table by random(). ``priority`` is the prompt's label count, for fill-first.

    ``filled`` means closed to labels: a counted label fills the slot, or its prompt is retired
    (``Prompt.retired_at``, ``services.prompts_retired_set``). Retiring closes a prompt's slots instead of
    adding a condition to the pool's query, so every reader of open slots (assignment, progress, the
    channels' "labels still needed", webhooks' completion) leaves a retired prompt out at no cost, and
    the pool's partial indexes shrink rather than grow a join.
    """

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="slots")
    index = models.PositiveSmallIntegerField()
    rand = models.FloatField()
    priority = models.PositiveSmallIntegerField(default=0)
    filled = models.BooleanField(default=False)
    lease = models.ForeignKey("annotation.Lease", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["prompt", "index"], name="slot_index_unique")]
        indexes = [
            models.Index(fields=["campaign", "rand"], condition=models.Q(filled=False), name="slot_open_random"),
            models.Index(
                fields=["campaign", "-priority", "rand"], condition=models.Q(filled=False), name="slot_open_fill_first"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.prompt} slot {self.index}"
