"""Label schemas: which values a campaign accepts, how workers enter them, how the audit binarizes them."""

import re
import unicodedata
from dataclasses import dataclass, field

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
    value: int
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
        """The unit-scale value the audit uses, or None when the map leaves this value out."""
        return self.binarization.get(raw)
