"""Label schemas: which values a campaign accepts, how workers enter them, how the audit binarizes them."""

import re
from dataclasses import dataclass, field

# ASCII digits only: str.isdigit() also takes "²" and "١", which int() refuses or reads as another
# number. Nine digits are more than any scale bound (a SmallIntegerField) and never reach int()'s limit.
_INTEGER = re.compile(r"-?[0-9]{1,9}")
MAX_SHOWN = 40  # characters of a refused value quoted back in a message


class LabelValueError(ValueError):
    """A value outside the campaign's schema. The message is meant for the person who sent it."""


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


@dataclass(frozen=True)
class Choice:
    value: int
    text: str
    key: str  # the keyboard shortcut on the labeling page
    anchor: str = ""  # the researcher's words for this point of a rating scale, shown with the buttons


@dataclass(frozen=True)
class LabelSchema:
    kind: str
    choices: tuple[Choice, ...]
    binarization: dict[int, int] = field(default_factory=dict)

    @classmethod
    def for_campaign(cls, campaign) -> "LabelSchema":
        if campaign.schema == "binary":
            choices = (
                Choice(1, campaign.positive_text, campaign.positive_text[:1].lower() or "1"),
                Choice(0, campaign.negative_text, campaign.negative_text[:1].lower() or "0"),
            )
            if choices[0].key == choices[1].key:
                choices = (Choice(1, campaign.positive_text, "1"), Choice(0, campaign.negative_text, "0"))
            return cls(kind="binary", choices=choices, binarization={1: 1, 0: 0})
        values = range(campaign.scale_min, campaign.scale_max + 1)
        # Digit keys while they are unambiguous (a 0-9 or 1-9 scale); letters a, b, … beyond that.
        use_digits = campaign.scale_min >= 0 and campaign.scale_max <= 9
        # Anchors are one per point, or two for the ends (Campaign.clean).
        anchors = list(campaign.scale_anchors or [])
        if len(anchors) == 2:
            anchors = [anchors[0], *[""] * (len(values) - 2), anchors[1]]
        anchors += [""] * (len(values) - len(anchors))
        choices = tuple(
            Choice(v, str(v), str(v) if use_digits else "abcdefghijklmnopqrstuvwxyz"[i], anchors[i])
            for i, v in enumerate(values)
        )
        binarization = {int(raw): int(unit) for raw, unit in (campaign.binarization or {}).items()}
        return cls(kind=campaign.schema, choices=choices, binarization=binarization)

    @property
    def anchored_choices(self) -> list[Choice]:
        """The points the researcher put words to, for the labeling page's legend of the scale."""
        return [c for c in self.choices if c.anchor]

    @property
    def values(self) -> set[int]:
        return {c.value for c in self.choices}

    def _check_one(self, value, what: str = "The label") -> int:
        allowed = ", ".join(str(v) for v in sorted(self.values))
        if isinstance(value, bool):
            # true/false is a yes/no answer: the 1/0 of a binary schema (noise-audit.md), never a rating.
            if self.kind != "binary":
                raise LabelValueError(f"{what} must be one of {allowed}; got {shown(value)}, which is not a rating.")
            return int(value)
        if isinstance(value, str) and (number := parse_int(value)) is not None:
            value = number
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or value not in self.values:
            raise LabelValueError(f"{what} must be one of {allowed}; got {shown(value)}.")
        return value

    def clean(self, value, *, n_options: int = 0):
        """Return the value in canonical form (an int, or a list of ints per option) or raise LabelValueError."""
        if self.kind != "option_rating":
            return self._check_one(value)
        if not isinstance(value, (list, tuple)) or len(value) != n_options:
            raise LabelValueError(f"Rate each of the {n_options} options: expected a list of {n_options} ratings.")
        return [self._check_one(v, f"The rating of option {i + 1}") for i, v in enumerate(value)]

    def clean_gold(self, value, *, n_options: int = 0):
        """Gold labels follow the schema: a value per prompt, or (per-option) a value per option."""
        return self.clean(value, n_options=n_options)

    def binarize(self, raw: int) -> int | None:
        """The unit-scale value the audit uses, or None when the map leaves this value out."""
        return self.binarization.get(raw)
