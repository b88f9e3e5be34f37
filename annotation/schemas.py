"""Label schemas: which values a campaign accepts, how workers enter them, how the audit scales them
(a rating onto the unit scale by its grid point, or through a binarization map)."""

import dataclasses
import math
import re
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

# ASCII digits only: str.isdigit() also takes "²" and "١", which int() refuses or reads as another
# number. Nine digits are more than any scale bound (a SmallIntegerField) and never reach int()'s limit.
_INTEGER = re.compile(r"-?[0-9]{1,9}")
MAX_SHOWN = 40  # characters of a refused value quoted back in a message
FREE_TEXT = "free_text"
# Whitespace a pasted answer may bring along: collapsed into one space with the rest of the layout.
# Every other control character (and format, surrogate, private-use, unassigned code point) is
# refused: it is invisible on the page, so two answers that look the same would count as two.
_LAYOUT = frozenset("\t\n\r")
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_ZWJ = "\u200d"  # a format character, but it joins emoji sequences (👩‍🔬): part of what was typed
# A decimal number as a form or a file spells it ("7.5", "-2", ".5"); no exponent, no sign "+".
_DECIMAL = re.compile(r"-?(?:[0-9]{1,9}(?:\.[0-9]{0,15})?|\.[0-9]{1,15})")
# Buttons while a scale has at most this many points (0–10): they fit two rows of a phone's screen
# (static/css/chorus.css) and single keys tell them apart; a finer or continuous scale is a slider.
MAX_BUTTONS = 11
# A continuous scale keeps values to a power of ten giving 1,000 to 10,000 steps over its range
# (0.01 on 0–10, 0.1 on 0–100): finer than any slider can be set, and it keeps the audit's running
# sums exact integers (audits.services.stats), so the live audit equals the offline one on the export.
CONTINUOUS_STEPS = 1000
# How far a value may sit off its step and still be that step's point: float spellings of decimals
# ("7.499999999999999", 0.1 + 0.2) must not be refused, and anything further off is another value.
_ON_STEP = Decimal("1e-9")
# How the web form and the labels spell a continuous scale's step (stored as None).
CONTINUOUS = "continuous"
# The keys of a 0–10 scale's buttons: digits, and "t" (ten) for 10, since "1" then "0" cannot be one key.
TEN_KEY = "t"


class LabelValueError(ValueError):
    """A value outside the campaign's schema. The message is meant for the person who sent it."""


def continuous_resolution(lo: int, hi: int) -> Decimal:
    """The grid a continuous scale keeps its values on: the power of ten giving ``CONTINUOUS_STEPS`` to
    ten times as many steps over ``hi − lo`` (0.01 on 0–10, 0.001 on 1–7)."""
    return Decimal(1).scaleb((Decimal(hi - lo) / CONTINUOUS_STEPS).adjusted())


def scale_step_problem(lo: int, hi: int, step) -> str | None:
    """Why ``step`` cannot be the step of the scale ``lo``–``hi``, or None when it can (None = continuous).
    The step must be positive and divide ``hi − lo`` exactly (as a decimal: 0.1 divides 10)."""
    if step is None:
        return None
    try:
        dec = Decimal(str(step))
    except InvalidOperation:
        return f"The step must be a number; got {shown(step)}."
    if not dec.is_finite() or dec <= 0:
        return f"The step must be above 0; got {shown(step)}."
    if (Decimal(hi - lo) % dec) != 0:
        return f"A step of {dec.normalize():f} does not divide the scale {lo}–{hi} into whole steps."
    return None


def _as_decimal(value) -> Decimal | None:
    """A number as a Decimal by its shortest spelling (``repr`` of a float: 0.1 is "0.1", not
    0.1000000000000000055…), or None for anything that is not a finite number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value)) if math.isfinite(value) else None
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        return Decimal(value.strip())
    return None


def scale_description(lo: int, hi: int, step) -> str:
    """What a valid rating is, as a refusal states it: "one of 1, 2, 3, 4" (whole points that are
    buttons), "a whole number from 0 to 100", "a number from 0 to 10 in steps of 0.5", or for a
    continuous scale "a number from 0 to 100"."""
    if step is None:
        return f"a number from {lo} to {hi}"
    step = Decimal(str(step))
    if step != 1:
        return f"a number from {lo} to {hi} in steps of {step.normalize():f}"
    if hi - lo + 1 <= MAX_BUTTONS:
        return "one of " + ", ".join(str(v) for v in range(lo, hi + 1))
    return f"a whole number from {lo} to {hi}"


def scale_point(value, *, lo: int, hi: int, step, what: str = "The label") -> tuple[int, int | float]:
    """A rating on the scale ``lo``–``hi`` with ``step`` (a Decimal, or None for continuous): the index
    of its point on the scale's grid (0 at ``lo``; the grid is the step, or ``continuous_resolution``)
    and the value as stored, an int when it is a whole number (integer scales store ints, as ever),
    else a float. A continuous value is rounded to its grid; a stepped one must lie on a step (to
    within float spelling, ``_ON_STEP``). Raises LabelValueError naming the scale otherwise.

    The one check of a rating's value: the labeling page, the API and imported files all use it."""
    if isinstance(value, str) and (number := parse_int(value)) is not None:
        value = number  # quoted back as the number it spells, as integer scales always did
    grid = continuous_resolution(lo, hi) if step is None else Decimal(str(step))
    expected = scale_description(lo, hi, step)
    listed = expected.startswith("one of")  # a few whole points: refused as integer scales always were
    dec = _as_decimal(value)
    if dec is None or not lo - _ON_STEP <= dec <= hi + _ON_STEP:
        raise LabelValueError(f"{what} must be {expected}; got {shown(value)}.")
    position = (dec - lo) / grid
    index = position.to_integral_value()
    if step is not None and abs(position - index) > _ON_STEP / grid:
        off = "" if listed else ", which is not on a step"
        raise LabelValueError(f"{what} must be {expected}; got {shown(value)}{off}.")
    index = max(0, min(int(index), int((hi - lo) / grid)))
    point = lo + index * grid
    return index, int(point) if point == point.to_integral_value() else float(point)


def parse_int(text: str) -> int | None:
    """The integer ``text`` spells (``" 3 "``, ``"-2"``, ``"04"``), or None when it spells none that a
    scale can hold."""
    text = text.strip()
    return int(text) if _INTEGER.fullmatch(text) else None


def shown(value) -> str:
    """A value as a message quotes it back: JSON's spelling of true and false (what API clients and
    files send), and at most MAX_SHOWN characters of anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def binarization_clean(pairs) -> dict[str, int]:
    """A binarization map in canonical form (``{"1": 0, "4": 1}``) from its (raw value, 0 or 1) pairs
    as given, in order. Raises LabelValueError for a pair of another form, and for one value given
    twice (``"1"`` and ``"01"``), which a dict would otherwise settle silently by keeping the later."""
    mapping, given_as = {}, {}
    for raw, unit in pairs:
        value = parse_int(str(raw)) if isinstance(raw, (str, int)) and not isinstance(raw, bool) else None
        if value is None or type(unit) is not int or unit not in (0, 1):  # type(): not True, not 1.0
            raise LabelValueError(f"{shown(raw)}: {shown(unit)} is not of the form value → 0 or 1.")
        key = str(value)
        if key in given_as:
            first = given_as[key]
            if first == raw:
                raise LabelValueError(f"{shown(raw)} is given twice: give each value once.")
            raise LabelValueError(f"{shown(first)} and {shown(raw)} are both {value}: give each value once.")
        given_as[key], mapping[key] = raw, unit
    return mapping


def answer_normalize(value) -> str:
    """A free-text answer as stored: NFC-normalised, trimmed, its inner whitespace collapsed to one
    space. Raises LabelValueError for a value that is not text or holds a non-printing character.

    NFC because one answer can arrive in several code-point spellings of the same text ("é" as one
    code point, or as "e" and a combining accent, depending on the keyboard): comparing, counting,
    clustering and length limits must see it once. Not NFKC, which would change what was typed
    ("x²" → "x2", full-width letters). Whitespace carries no meaning in a short answer; collapsing it
    lets "take  a shower " and "take a shower" be one answer. The raw answer is not kept: it differs
    from the stored one only by whitespace and by canonically equivalent spellings (refused
    characters are refused, never stripped), so it would hold nothing a researcher could use.
    """
    if not isinstance(value, str):
        raise LabelValueError(f"The answer must be text; got {shown(value)}.")
    text = unicodedata.normalize("NFC", value)
    for position, char in enumerate(text, start=1):
        if char not in _LAYOUT and char != _ZWJ and unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise LabelValueError(
                f"The answer holds a non-printing character (U+{ord(char):04X}) at position {position}; "
                "type the answer as plain text."
            )
    return " ".join(text.split())


def answer_key(text: str) -> str:
    """What two answers must share to be the same answer for a control's gold: case- and
    whitespace-insensitive (casefold, not lower: "Straße" matches "STRASSE")."""
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


@dataclass(frozen=True)
class Choice:
    value: int | float
    text: str
    key: str  # the keyboard shortcut on the labeling page
    anchor: str = ""  # the researcher's words for this point of a rating scale, shown with the buttons


@dataclass(frozen=True)
class LabelSchema:
    kind: str
    choices: tuple[Choice, ...]
    binarization: dict[int, int] = field(default_factory=dict)
    answer_min_length: int = 1  # free text: the bounds of a stored answer's length, in characters
    answer_max_length: int = 0
    # Rating schemas: the scale and its step (a Decimal; None = continuous), and the anchors' texts
    # (one per point, or two for the ends) as the slider shows them.
    scale_min: int = 0
    scale_max: int = 1
    step: Decimal | None = None
    anchors: tuple[str, ...] = ()

    @classmethod
    def for_campaign(cls, campaign) -> "LabelSchema":
        if campaign.schema == FREE_TEXT:
            return cls(
                kind=FREE_TEXT,
                choices=(),
                answer_min_length=campaign.answer_min_length,
                answer_max_length=campaign.answer_max_length,
            )
        if campaign.schema == "binary":
            choices = (
                Choice(1, campaign.positive_text, campaign.positive_text[:1].lower() or "1"),
                Choice(0, campaign.negative_text, campaign.negative_text[:1].lower() or "0"),
            )
            if choices[0].key == choices[1].key:
                choices = (Choice(1, campaign.positive_text, "1"), Choice(0, campaign.negative_text, "0"))
            return cls(kind="binary", choices=choices, binarization={1: 1, 0: 0})
        step = None if campaign.scale_step is None else Decimal(str(campaign.scale_step))
        binarization = {int(raw): int(unit) for raw, unit in (campaign.binarization or {}).items()}
        anchors = tuple(campaign.scale_anchors or [])
        schema = cls(
            kind=campaign.schema,
            choices=(),
            binarization=binarization,
            scale_min=campaign.scale_min,
            scale_max=campaign.scale_max,
            step=step,
            anchors=anchors,
        )
        if schema.input != "buttons":
            return schema
        values = [schema.scale_min + i * step for i in range(schema.intervals + 1)]
        values = [int(v) if v == v.to_integral_value() else float(v) for v in values]
        # Digit keys while they are unambiguous (a 0–10 or 1–10 scale of whole points, "t" for 10);
        # letters a, b, … otherwise.
        use_digits = step == 1 and campaign.scale_min >= 0 and campaign.scale_max <= 10
        # Anchors are one per point, or two for the ends (Campaign.clean).
        texts = list(anchors)
        if len(texts) == 2:
            texts = [texts[0], *[""] * (len(values) - 2), texts[1]]
        texts += [""] * (len(values) - len(texts))
        choices = tuple(
            Choice(
                v,
                f"{v:g}" if isinstance(v, float) else str(v),
                (TEN_KEY if v == 10 else str(v)) if use_digits else "abcdefghijklmnopqrstuvwxyz"[i],
                texts[i],
            )
            for i, v in enumerate(values)
        )
        return dataclasses.replace(schema, choices=choices)

    @property
    def grid(self) -> Decimal:
        """The spacing of a rating scale's points: its step, or a continuous scale's resolution."""
        return continuous_resolution(self.scale_min, self.scale_max) if self.step is None else self.step

    @property
    def intervals(self) -> int:
        """How many grid steps span a rating scale (10 on a 0–10 scale of whole points, 20 of halves)."""
        return int((self.scale_max - self.scale_min) / self.grid)

    @property
    def input(self) -> str:
        """How a worker enters a rating: ``"buttons"`` (one per point, at most ``MAX_BUTTONS``) or a
        ``"slider"`` (a continuous scale, or one with more points)."""
        if self.kind in ("binary", FREE_TEXT):
            return "buttons" if self.kind == "binary" else "text"
        return "buttons" if self.step is not None and self.intervals + 1 <= MAX_BUTTONS else "slider"

    @property
    def slider_step(self) -> str:
        """The slider's and the number input's ``step`` attribute: the scale's grid, as HTML spells it."""
        return f"{self.grid.normalize():f}"

    @property
    def ten_key(self) -> str:
        """The key of the point 10 when the buttons take digit keys (shown in the page's hint), else ""."""
        return next((c.key for c in self.choices if c.key == TEN_KEY), "")

    @property
    def slider_anchors(self) -> tuple[str, str]:
        """The words for a slider's two ends (the lowest and the highest point's anchors, if any)."""
        return (self.anchors[0], self.anchors[-1]) if self.anchors else ("", "")

    @property
    def anchored_choices(self) -> list[Choice]:
        """The points the researcher put words to, for the labeling page's legend of the scale."""
        return [c for c in self.choices if c.anchor]

    @property
    def values(self) -> set[int]:
        return {c.value for c in self.choices}

    def _check_one(self, value, what: str = "The label") -> int | float:
        if self.input == "slider" and (value is None or (isinstance(value, str) and not value.strip())):
            # What an untouched slider sends (the labeling page posts no value until it is moved).
            raise LabelValueError(
                f"{what} is missing: move the slider or type a number ({self.describe()}) before you submit."
            )
        if isinstance(value, bool):
            # true/false is a yes/no answer: the 1/0 of a binary schema (noise-audit.md), never a rating.
            if self.kind != "binary":
                raise LabelValueError(f"{what} must be {self.describe()}; got {shown(value)}, which is not a rating.")
            return int(value)
        if self.kind != "binary":
            return scale_point(value, lo=self.scale_min, hi=self.scale_max, step=self.step, what=what)[1]
        if isinstance(value, str) and (number := parse_int(value)) is not None:
            value = number
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or value not in self.values:
            raise LabelValueError(f"{what} must be {self.describe()}; got {shown(value)}.")
        return value

    def describe(self) -> str:
        """What a valid value is, as a refusal states it (``scale_description`` for a rating scale)."""
        if self.kind == "binary":
            return "one of " + ", ".join(str(v) for v in sorted(self.values))
        return scale_description(self.scale_min, self.scale_max, self.step)

    def _check_answer(self, value, what: str = "The answer") -> str:
        text = answer_normalize(value)
        if not text:
            raise LabelValueError(f"{what} is empty: type an answer.")
        if not self.answer_min_length <= len(text) <= self.answer_max_length:
            raise LabelValueError(
                f"{what} must be {self.answer_min_length} to {self.answer_max_length} characters long; "
                f"{shown(text)} has {len(text)}."
            )
        return text

    def clean(self, value, *, n_options: int = 0):
        """Return the value in canonical form (an int, a list of ints per option, or the free-text answer
        as stored: ``answer_normalize``) or raise LabelValueError."""
        if self.kind == FREE_TEXT:
            return self._check_answer(value)
        if self.kind != "option_rating":
            return self._check_one(value)
        if not isinstance(value, (list, tuple)) or len(value) != n_options:
            raise LabelValueError(f"Rate each of the {n_options} options: expected a list of {n_options} ratings.")
        return [self._check_one(v, f"The rating of option {i + 1}") for i, v in enumerate(value)]

    def clean_gold(self, value, *, n_options: int = 0):
        """Gold labels follow the schema: a value per prompt, or (per-option) a value per option. A
        free-text gold is the list of accepted answers (given as a list, or as one text separated by
        ``|``), each as a worker's answer would be stored, once per ``answer_key``."""
        if self.kind != FREE_TEXT:
            return self.clean(value, n_options=n_options)
        if isinstance(value, str):
            value = value.split("|")
        if not isinstance(value, (list, tuple)) or not value:
            raise LabelValueError("A free-text gold is a list of accepted answers, or answers separated by |.")
        accepted = {}
        for number, answer in enumerate(value, start=1):
            text = self._check_answer(answer, f"Accepted answer {number}")
            accepted.setdefault(answer_key(text), text)
        return list(accepted.values())

    def answer_correct(self, value, gold) -> bool:
        """Free text: whether ``value`` is one of the accepted answers of a control's ``gold``."""
        accepted = gold if isinstance(gold, list) else [gold]
        return isinstance(value, str) and answer_key(value) in {answer_key(a) for a in accepted if isinstance(a, str)}

    def binarize(self, raw: int) -> int | None:
        """The 0/1 value the binarization map gives ``raw``, or None when the map leaves it out."""
        return self.binarization.get(raw)

    @property
    def unit_divisor(self) -> int:
        """What ``audit_point`` is divided by to give the unit scale: 1 with a binarization map (binary
        schemas included) and for free text, else the scale's grid steps (``intervals``)."""
        return 1 if self.binarization or self.kind == FREE_TEXT else self.intervals

    def audit_point(self, raw) -> int | None:
        """The integer the audit's running statistics hold for a raw value, or None when it is not
        audited: the map's 0/1 with a binarization map, else the index of the value's point on the
        scale's grid, so that ``audit_point / unit_divisor`` is ``(value − min) / (max − min)``
        (noise-audit.md, "The label matrix"). Integers keep every running sum exact."""
        if self.binarization:
            return self.binarize(raw)
        try:
            return scale_point(raw, lo=self.scale_min, hi=self.scale_max, step=self.step)[0]
        except LabelValueError:
            return None

    def unit_value(self, raw) -> float | None:
        """A raw value on the unit scale the audit uses (``point_unit`` of its ``audit_point``), or None."""
        point = self.audit_point(raw)
        return None if point is None else self.point_unit(point)

    def point_unit(self, point: int) -> float:
        """An ``audit_point`` on the unit scale: the map's 0/1 as it is, a grid point as the engine's
        ``rescale`` computes it from the stored value, ``(value − min) / (max − min)`` in floats, so
        the two agree to the last bit (``point / unit_divisor`` may differ in it: 999/1000 ≠ 99.9/100)."""
        if self.unit_divisor == 1:
            return float(point)
        value = float(self.scale_min + point * self.grid)
        return (value - self.scale_min) / (self.scale_max - self.scale_min)
