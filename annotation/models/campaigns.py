from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from annotation.schemas import MAX_BUTTONS, LabelSchema, LabelValueError, binarization_clean, scale_step_problem

# The most anchors a scale may carry: one per button (a scale of more points is a slider, whose
# anchors are two, for its ends).
MAX_SCALE_POINTS = MAX_BUTTONS
# The most steps a stepped scale may have: as many as a continuous one keeps (schemas.CONTINUOUS_STEPS
# up to ten times that), so the audit's integer sums stay far inside 64 bits.
MAX_SCALE_STEPS = 10_000
MAX_ANCHOR_LENGTH = 60
# Free text: the longest answer a campaign may allow. Answers are short phrases (ProtoQA's longest
# raw answer has 49 characters); a limit of a tweet's length still fits one line of the text input.
MAX_ANSWER_LENGTH = 280
# ProtoQA collected up to 101 answers per question, and free-text answers are audited by their
# clusters, which need many answers per prompt.
MAX_K = 200


class Campaign(models.Model):
    """A labeling campaign: prompts, a label schema, and k labels wanted per prompt (adaptive k: from k
    up to ``k_max``, decided prompt by prompt by ``annotation.services.adaptive``)."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        LIVE = "live", "Live"
        PAUSED = "paused", "Paused"
        CLOSED = "closed", "Closed"

    class Schema(models.TextChoices):
        BINARY = "binary", "Binary (1/0)"
        RATING = "rating", "Rating scale"
        OPTION_RATING = "option_rating", "Rate each answer option"
        FREE_TEXT = "free_text", "Free text"

    class ClusteringProtocol(models.TextChoices):
        DOUBLE_BLIND = "double_blind", "Double-blind: two independent clusterings, then an adjudicator"
        SINGLE = "single", "Single: one researcher's saved clustering is final"

    class Policy(models.TextChoices):
        RANDOM = "random", "Random among eligible prompts"
        FILL_FIRST = "fill_first", "Fill nearly complete prompts first"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="campaigns")
    collaborators = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="annotation.Collaboration", blank=True, related_name="shared_campaigns"
    )
    title = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True, help_text="Appears in the workers' link.")
    instructions = models.TextField(blank=True, help_text="Markdown, shown to workers.")

    schema = models.CharField(max_length=20, choices=Schema.choices, default=Schema.BINARY)
    positive_text = models.CharField(max_length=40, default="True", help_text="Binary schema: the 1 answer.")
    negative_text = models.CharField(max_length=40, default="False", help_text="Binary schema: the 0 answer.")
    scale_min = models.SmallIntegerField(default=1, help_text="Rating schemas: lowest value.")
    scale_max = models.SmallIntegerField(default=4, help_text="Rating schemas: highest value.")
    scale_step = models.FloatField(
        null=True,
        blank=True,
        default=1.0,
        help_text="Rating schemas: the step between the scale's points (1, 0.5, 0.1; it must divide the scale); "
        "empty (null): continuous, entered with a slider. Up to 11 points are buttons, more a slider.",
    )
    scale_anchors = models.JSONField(
        default=list,
        blank=True,
        help_text="Rating schemas: words for the scale's points, lowest first, shown to workers with the buttons: "
        'one per point (["bad fit", "poor fit", "good fit", "very good fit"]) or two, for the ends.',
    )
    binarization = models.JSONField(
        default=dict,
        blank=True,
        help_text="Rating schemas, optional: raw value → 0/1 for a binarized view of the audit, e.g. "
        '{"1": 0, "2": 0, "3": 1, "4": 1}; without it the audit maps ratings onto 0–1 as (value − min) / (max − min).',
    )

    answer_min_length = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_ANSWER_LENGTH)],
        help_text="Free text: the fewest characters of an answer (after trimming).",
    )
    answer_max_length = models.PositiveSmallIntegerField(
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_ANSWER_LENGTH)],
        help_text=f"Free text: the most characters of an answer (at most {MAX_ANSWER_LENGTH}).",
    )
    clustering_protocol = models.CharField(
        "clustering protocol (free text)",
        max_length=12,
        choices=ClusteringProtocol.choices,
        default=ClusteringProtocol.DOUBLE_BLIND,
        help_text="Free text: how a prompt's answer clusters become final, which the systems are scored against. "
        "double_blind (ProtoQA's): two researchers cluster independently and a third adjudicates; "
        "single: one researcher's saved clustering is final (no agreement is measured). Other schemas: double_blind.",
    )

    k = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(MAX_K)], help_text="Labels per prompt."
    )
    lease_seconds = models.PositiveIntegerField(
        default=600, validators=[MinValueValidator(10), MaxValueValidator(24 * 3600)]
    )
    k_max = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_K)],
        help_text="Adaptive k: the most labels a prompt may get; k is then the least. Empty: every prompt gets k.",
    )
    stop_confidence = models.FloatField(
        default=0.95,
        validators=[MinValueValidator(0.5), MaxValueValidator(0.999)],
        help_text="Adaptive k: a prompt stops once the posterior probability that its majority is the crowd's "
        "majority reaches this.",
    )
    control_rate = models.FloatField(
        null=True, blank=True, help_text="Share of a worker's prompts that are controls (e.g. 0.1); empty: none."
    )
    control_first = models.PositiveSmallIntegerField(
        default=0, help_text="Controls served first to every worker, as a qualification."
    )
    max_labels_per_worker = models.PositiveIntegerField(null=True, blank=True)
    policy = models.CharField(max_length=20, choices=Policy.choices, default=Policy.RANDOM)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    created_at = models.DateTimeField(auto_now_add=True)
    launched_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    imported_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="An imported study: its labels were collected elsewhere and imported at this time; it is "
        "closed for labeling and read-only (annotation.services.studies).",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(scale_min__lt=models.F("scale_max")), name="campaign_scale_ordered"),
            models.CheckConstraint(
                condition=Q(answer_min_length__lte=models.F("answer_max_length")),
                name="campaign_answer_lengths_ordered",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    def clean(self):
        """One place for the schema rules, so the web form, the API and services agree."""
        if self.schema != self.Schema.FREE_TEXT:  # only answers are clustered
            self.clustering_protocol = self.ClusteringProtocol.DOUBLE_BLIND
        if self.scale_min is not None and self.scale_max is not None and self.scale_min >= self.scale_max:
            raise ValidationError({"scale_max": "The highest value must be above the lowest."})
        if (
            self.answer_min_length is not None
            and self.answer_max_length is not None
            and self.answer_min_length > self.answer_max_length
        ):
            raise ValidationError({"answer_max_length": "The longest answer must be at least the shortest."})
        if self.schema in (self.Schema.BINARY, self.Schema.FREE_TEXT):
            self.binarization, self.scale_anchors = {}, []
            self._clean_adaptive_k()
            return
        if not isinstance(self.binarization or {}, dict):
            raise ValidationError({"binarization": "A binarization is a map of value → 0 or 1."})
        try:
            mapping = binarization_clean((self.binarization or {}).items())
        except LabelValueError as exc:
            raise ValidationError({"binarization": str(exc)}) from exc
        self.binarization = mapping  # canonical before the schema reads it
        if (problem := scale_step_problem(self.scale_min, self.scale_max, self.scale_step)) is not None:
            raise ValidationError({"scale_step": problem})
        schema = LabelSchema.for_campaign(self)
        if schema.intervals > MAX_SCALE_STEPS:
            raise ValidationError(
                {
                    "scale_step": (
                        f"A scale has at most {MAX_SCALE_STEPS:,} steps; {self.scale_min}–{self.scale_max} in steps "
                        f"of {schema.grid.normalize():f} has {schema.intervals:,}: take a larger step, or a "
                        "continuous scale."
                    )
                }
            )
        if self.schema == self.Schema.OPTION_RATING and schema.input == "slider":
            raise ValidationError(
                {
                    "scale_step": f"Rating each answer option takes buttons: a scale of at most {MAX_BUTTONS} points "
                    "with a step, such as 1–5 or 1–3 in halves."
                }
            )
        self.scale_anchors = self._clean_anchors(schema.intervals + 1 if schema.input == "buttons" else 2)
        if mapping and self.scale_step != 1:
            raise ValidationError(
                {
                    "binarization": "A binarization maps whole points: it needs a step of 1; leave it empty for "
                    "this scale."
                }
            )
        outside = [raw for raw in mapping if not self.scale_min <= int(raw) <= self.scale_max]
        if outside:
            raise ValidationError(
                {"binarization": f"{', '.join(outside)} outside the scale {self.scale_min}–{self.scale_max}."}
            )
        self.binarization = mapping
        self._clean_adaptive_k()

    def _clean_adaptive_k(self) -> None:
        """Adaptive k (``k_max`` set) decides on each prompt's share of 1s: one 0/1 answer per prompt."""
        if self.k_max is None:
            return
        if self.k is not None and self.k_max < self.k:
            raise ValidationError(
                {
                    "k_max": (
                        f"The most labels per prompt (k_max = {self.k_max}) must be at least the least (k = {self.k})."
                    )
                }
            )
        if self.schema == self.Schema.OPTION_RATING:
            raise ValidationError(
                {
                    "k_max": (
                        "Adaptive k needs one 0/1 answer per prompt, so it is not available when workers rate each "
                        "answer option: leave k_max empty."
                    )
                }
            )
        if self.schema == self.Schema.FREE_TEXT:
            raise ValidationError(
                {
                    "k_max": "Adaptive k needs one 0/1 answer per prompt, so it is not available for free text: "
                    "leave k_max empty."
                }
            )
        if self.schema == self.Schema.RATING:
            left_out = [str(v) for v in range(self.scale_min, self.scale_max + 1) if str(v) not in self.binarization]
            if left_out:
                raise ValidationError(
                    {
                        "k_max": (
                            "Adaptive k counts every label as 0 or 1, so the binarization must map every point of the "
                            f"scale; it leaves out {', '.join(left_out)}. Map them, or leave k_max empty."
                        )
                    }
                )

    def _clean_anchors(self, points: int) -> list[str]:
        """The anchors, one per point of a scale of buttons or two (its ends; a slider's only)."""
        anchors = self.scale_anchors or []
        if not isinstance(anchors, list) or not all(isinstance(text, str) for text in anchors):
            raise ValidationError({"scale_anchors": "Scale anchors are a list of texts, lowest point first."})
        anchors = [text.strip() for text in anchors]
        if anchors and points == 2 and len(anchors) != 2 and self.label_schema.input == "slider":
            raise ValidationError({"scale_anchors": f"A slider takes two anchors (its two ends); got {len(anchors)}."})
        if anchors and len(anchors) not in (2, points):
            raise ValidationError(
                {
                    "scale_anchors": (
                        f"Give one anchor per point of the scale {self.scale_min}–{self.scale_max} ({points}), or two "
                        f"(the lowest and the highest point); got {len(anchors)}."
                    )
                }
            )
        for number, text in enumerate(anchors, start=1):
            if not text or len(text) > MAX_ANCHOR_LENGTH:
                raise ValidationError(
                    {
                        "scale_anchors": (
                            f"Each anchor is 1 to {MAX_ANCHOR_LENGTH} characters; anchor {number} has {len(text)}."
                        )
                    }
                )
        return anchors

    @property
    def label_schema(self) -> LabelSchema:
        return LabelSchema.for_campaign(self)

    @property
    def k_rule(self) -> str:
        """How many labels a prompt gets, as the export's ``k_rule`` column states it: ``k=5``, or for
        adaptive k ``k=3..7, stop at P(majority)>=0.95`` (``annotation.services.adaptive``)."""
        if self.k_max is None:
            return f"k={self.k}"
        return f"k={self.k}..{self.k_max}, stop at P(majority)>={self.stop_confidence:g}"
