"""What MTurk work costs: the pool's plan of HITs, MTurk's commission and the cost preview a researcher
sees before publishing. Pure arithmetic on US dollar amounts (``Decimal``, cents); no database."""

from dataclasses import dataclass
from decimal import Decimal

MTURK_COMMISSION_THRESHOLD = 10  # HITs with this many assignments or more pay the higher commission
MTURK_BONUS_MAX = Decimal("100.00")  # per bonus, in US dollars: a mistyped amount must not empty the prepaid balance
CENT = Decimal("0.01")


@dataclass(frozen=True)
class CostPreview:
    """What a publication costs on MTurk: rewards plus MTurk's commission (20% per assignment, 40% on
    HITs with 10 or more assignments, at least $0.01 per assignment), in US dollars."""

    n_assignments: int
    n_hits: int
    reward: Decimal
    rewards_total: Decimal
    commission_total: Decimal
    total: Decimal
    commission_rates: tuple[str, ...]


def mturk_plan(*, n_assignments: int, assignments_per_hit: int) -> list[int]:
    """The pool: HIT sizes, ``assignments_per_hit`` each and the remainder last."""
    full, rest = divmod(n_assignments, assignments_per_hit)
    return [assignments_per_hit] * full + ([rest] if rest else [])


def mturk_commission_rate(*, hit_size: int) -> Decimal:
    """MTurk's commission on each assignment of a HIT with ``hit_size`` assignments: 20%, or 40% from
    ``MTURK_COMMISSION_THRESHOLD`` assignments up."""
    return Decimal("0.40") if hit_size >= MTURK_COMMISSION_THRESHOLD else Decimal("0.20")


def mturk_commission(*, reward: Decimal, hit_size: int) -> Decimal:
    """MTurk's commission on one HIT of ``hit_size`` assignments paying ``reward`` each (at least $0.01
    per assignment)."""
    per_assignment = max((reward * mturk_commission_rate(hit_size=hit_size)).quantize(CENT), CENT)
    return per_assignment * hit_size


def mturk_cost_preview(*, reward: Decimal, n_assignments: int, assignments_per_hit: int) -> CostPreview:
    """Rewards plus commission of ``n_assignments`` at ``reward`` each, planned in HITs of
    ``assignments_per_hit`` (see ``mturk_plan``)."""
    reward = Decimal(reward).quantize(CENT)
    plan = mturk_plan(n_assignments=n_assignments, assignments_per_hit=assignments_per_hit)
    commission = sum((mturk_commission(reward=reward, hit_size=size) for size in plan), Decimal("0"))
    rates = {f"{int(mturk_commission_rate(hit_size=size) * 100)}%" for size in plan}
    rewards = reward * n_assignments
    return CostPreview(
        n_assignments=n_assignments,
        n_hits=len(plan),
        reward=reward,
        rewards_total=rewards,
        commission_total=commission,
        total=rewards + commission,
        commission_rates=tuple(sorted(rates)),
    )
