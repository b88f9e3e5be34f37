"""Label schemas: which values a campaign accepts, how workers enter them, how the audit binarizes them."""
from dataclasses import dataclass, field


class LabelValueError(ValueError):
    """A value outside the campaign's schema. The message is meant for the person who sent it."""


@dataclass(frozen=True)
class Choice:
    value: int
    text: str
    key: str  # the keyboard shortcut on the labeling page


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
        choices = tuple(
            Choice(v, str(v), str(v) if use_digits else "abcdefghijklmnopqrstuvwxyz"[i]) for i, v in enumerate(values)
        )
        binarization = {int(raw): int(unit) for raw, unit in (campaign.binarization or {}).items()}
        return cls(kind=campaign.schema, choices=choices, binarization=binarization)

    @property
    def values(self) -> set[int]:
        return {c.value for c in self.choices}

    def _check_one(self, value, what: str = "The label") -> int:
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value.strip())
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or value not in self.values:
            allowed = ", ".join(str(v) for v in sorted(self.values))
            raise LabelValueError(f"{what} must be one of {allowed}; got {value!r}.")
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
