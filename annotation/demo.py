"""The demo campaign of ``manage.py demo``: its account, its prompts and the supply that keeps it going.

The demo starts with 60 hand-written statements. So that the dashboard keeps moving for as long as the
demo runs, it then imports new prompts while the crowd labels (``demo_refill``): statements comparing
the sizes and weights of everyday things, made from a table of typical figures; a few thousand of them,
hours of the simulated crowd's work. Only pairs at least ``CLEAR_RATIO`` apart are compared, so every
generated statement has a clear true answer.
"""

import json
import random
from dataclasses import dataclass
from itertools import permutations

from django.contrib.auth import get_user_model

from annotation import selectors, services
from annotation.models import Campaign

DEMO_USERNAME = "admin"
DEMO_PASSWORD = "chorus-demo"
DEMO_TITLE = "Everyday plausibility (demo)"
DEMO_K = 5
DEMO_INSTRUCTIONS = """\
Read each statement and decide whether it describes something that could **plausibly** happen in
everyday life.

- **Plausible** (key `p`): it makes sense in the ordinary world.
- **Implausible** (key `i`): it could not happen, or makes no sense.

Go with your first reading; there is no need to look anything up. You can stop whenever you like.
"""
# The first prompts, (statement, gold): 1 = plausible, 0 = implausible. Written for this demo.
DEMO_PROMPTS = [
    ("You can boil water in a kettle to make tea.", 1),
    ("A goldfish can climb a tree to escape a cat.", 0),
    ("A wet towel dries faster in the sun than in a closed drawer.", 1),
    ("You can fold a bicycle small enough to fit in your wallet.", 0),
    ("People often carry an umbrella when rain is forecast.", 1),
    ("Ice stays frozen longer in a hot oven than in a freezer.", 0),
    ("Ice cream melts if you leave it on a hot pavement.", 1),
    ("Most people brush their teeth with a fork.", 0),
    ("A bicycle rides badly when its tyres are flat.", 1),
    ("You can charge a phone by leaving it in a bowl of soup.", 0),
    ("Bread goes stale if you leave it uncovered for a few days.", 1),
    ("An adult elephant fits comfortably in a shoebox.", 0),
    ("It is wise to look both ways before crossing a busy street.", 1),
    ("A posted letter can arrive before it was written.", 0),
    ("A candle gets shorter as it burns.", 1),
    ("A sandwich is made mostly of concrete.", 0),
    ("Cats often sleep for much of the day.", 1),
    ("Most people take a boat to get from their bedroom to their kitchen.", 0),
    ("A packed suitcase is heavier than an empty one.", 1),
    ("Sunglasses help you see better in a dark cave.", 0),
    ("A houseplant kept in a dark cupboard for weeks tends to wilt.", 1),
    ("Pouring a bucket of water on a campfire makes it burn hotter.", 0),
    ("Shoes wear out faster if you walk a lot.", 1),
    ("A newborn baby can usually drive a car.", 0),
    ("A phone battery runs down faster when the screen stays on.", 1),
    ("Slicing bread with a spoon is quicker than with a bread knife.", 0),
    ("Children often lose their first baby tooth around the age of six.", 1),
    ("Trees grow their roots up into the sky.", 0),
    ("Putting a lid on a pot helps the water come to a boil sooner.", 1),
    ("Milk stays fresh for a year on a sunny windowsill.", 0),
    ("In Canada, snow is more common in winter than in summer.", 1),
    ("In Norway, a snowman lasts longer outdoors in July than in January.", 0),
    ("A library lets you borrow books and bring them back later.", 1),
    ("Shouting at a seedling makes it grow a metre overnight.", 0),
    ("Paper catches fire more easily than a stone does.", 1),
    ("Wearing thick mittens makes it easier to thread a needle.", 0),
    ("Dogs often bark when a stranger knocks at the door.", 1),
    ("Most people sleep more comfortably on a pile of bricks than on a mattress.", 0),
    ("Fish left out of the fridge for a week starts to smell bad.", 1),
    ("Fish have to leave the water every hour to breathe.", 0),
    ("You usually need a key or a code to open a locked door.", 1),
    ("A bathtub holds less water than a teacup.", 0),
    ("A glass dropped on a tiled floor may shatter.", 1),
    ("Dogs usually meow when they are hungry.", 0),
    ("People tend to wear coats when it is cold outside.", 1),
    ("Reading in complete darkness is easier than reading in daylight.", 0),
    ("Adding salt to a soup changes how it tastes.", 1),
    ("A paper boat can carry a family across the ocean.", 0),
    ("A train timetable tells you when trains leave.", 1),
    ("Chopsticks are the quickest way to finish a bowl of thin soup.", 0),
    ("The leaves of many trees change colour in autumn.", 1),
    ("People open umbrellas indoors to stay dry while watching television.", 0),
    ("Brushing your teeth helps prevent cavities.", 1),
    ("Bees make milk from flowers.", 0),
    ("Running a marathon usually leaves people tired.", 1),
    ("Keeping shoes in the freezer makes them fit bigger feet.", 0),
    ("A wool jumper can shrink when washed in very hot water.", 1),
    ("A cup of coffee gets hotter the longer it sits on the table.", 0),
    ("A full moon is easier to see on a clear night than on a cloudy one.", 1),
    ("Most people can hold their breath underwater for a whole day.", 0),
]

# (name with its article, typical longest side in cm, typical weight in kg): rough, everyday figures.
THINGS = [
    ("a grain of rice", 0.6, 0.00003),
    ("an ant", 0.5, 0.000003),
    ("a grape", 2, 0.005),
    ("a coin", 2.5, 0.007),
    ("a paperclip", 3, 0.001),
    ("a strawberry", 4, 0.02),
    ("a golf ball", 4.3, 0.046),
    ("an egg", 6, 0.06),
    ("a tennis ball", 6.7, 0.058),
    ("a mouse", 8, 0.02),
    ("an apple", 8, 0.2),
    ("a teacup", 9, 0.25),
    ("a feather", 10, 0.0001),
    ("a smartphone", 15, 0.18),
    ("a pencil", 18, 0.006),
    ("a paperback book", 18, 0.3),
    ("a banana", 20, 0.12),
    ("a brick", 21, 3),
    ("a football", 22, 0.43),
    ("a bowling ball", 22, 6.5),
    ("a kettle", 25, 1.2),
    ("a shoe", 28, 0.4),
    ("a party balloon", 28, 0.005),
    ("a laptop", 35, 1.8),
    ("a watermelon", 35, 8),
    ("a cat", 46, 4),
    ("a microwave oven", 50, 15),
    ("a pillow", 60, 0.8),
    ("a packed suitcase", 70, 18),
    ("a chair", 90, 7),
    ("a labrador", 90, 30),
    ("a guitar", 100, 3),
    ("an upright piano", 150, 250),
    ("a grown man", 175, 75),
    ("a bicycle", 175, 14),
    ("a fridge", 180, 80),
    ("a sofa", 200, 60),
    ("a horse", 240, 500),
    ("a car", 450, 1400),
    ("an elephant", 600, 5000),
    ("a bus", 1200, 12000),
    ("a house", 1500, 150000),
    ("a blue whale", 2500, 150000),
    ("a passenger jet", 6000, 80000),
]
CLEAR_RATIO = 3  # two things are compared only when one is at least 3 times the other
REFILL_BATCH = 40  # prompts imported at a time
GENERATED_PREFIX = "g"


@dataclass(frozen=True)
class DemoPrompt:
    id: str
    text: str
    gold: int


def generated_prompts() -> list[DemoPrompt]:
    """Every generated statement, in a fixed shuffled order (a restarted demo continues the same list)."""
    statements = []
    for (a, size_a, weight_a), (b, size_b, weight_b) in permutations(THINGS, 2):
        for comparative, x, y in (("bigger", size_a, size_b), ("heavier", weight_a, weight_b)):
            if max(x, y) >= CLEAR_RATIO * min(x, y):
                statements.append((f"{a[0].upper()}{a[1:]} is usually {comparative} than {b}.", int(x > y)))
    random.Random(2026).shuffle(statements)
    return [DemoPrompt(f"{GENERATED_PREFIX}{n:05d}", text, gold) for n, (text, gold) in enumerate(statements, 1)]


def first_prompts() -> list[DemoPrompt]:
    return [DemoPrompt(f"s{n:02d}", text, gold) for n, (text, gold) in enumerate(DEMO_PROMPTS, 1)]


def _jsonl(prompts: list[DemoPrompt]) -> bytes:
    return "".join(json.dumps({"id": p.id, "text": p.text, "gold": p.gold}) + "\n" for p in prompts).encode()


def demo_account() -> tuple:
    """The demo's researcher (a superuser, so the admin works too), with the demo password."""
    user, created = get_user_model().objects.get_or_create(
        username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
    )
    user.is_staff = user.is_superuser = True
    user.set_password(DEMO_PASSWORD)
    user.save()
    return user, created


def demo_campaign(owner) -> tuple[Campaign, bool]:
    """The live demo campaign: the latest one while it still wants labels or prompts remain to import,
    else a new one."""
    campaign = Campaign.objects.filter(owner=owner, title=DEMO_TITLE).exclude(status=Campaign.Status.CLOSED).first()
    if campaign is not None and campaign.prompts.exists():
        progress = selectors.campaign_progress(campaign=campaign)
        if progress.labels < progress.labels_wanted or _unimported(campaign):
            if campaign.status != Campaign.Status.LIVE:
                action = "launch" if campaign.status == Campaign.Status.DRAFT else "resume"
                campaign = services.campaign_transition(campaign=campaign, action=action)
            return campaign, False
    campaign = services.campaign_create(
        owner=owner,
        title=DEMO_TITLE,
        instructions=DEMO_INSTRUCTIONS,
        schema=Campaign.Schema.BINARY,
        positive_text="Plausible",
        negative_text="Implausible",
        k=DEMO_K,
        lease_seconds=120,
    )
    services.prompts_import(campaign=campaign, data=_jsonl(first_prompts()), filename="demo-prompts.jsonl", user=owner)
    return services.campaign_transition(campaign=campaign, action="launch"), True


def _unimported(campaign: Campaign) -> list[DemoPrompt]:
    imported = set(
        campaign.prompts.filter(external_id__startswith=GENERATED_PREFIX).values_list("external_id", flat=True)
    )
    return [p for p in generated_prompts() if p.id not in imported]


def demo_refill(campaign: Campaign, *, below: int) -> int | None:
    """Import the next ``REFILL_BATCH`` generated prompts when fewer than ``below`` labels are still
    wanted. Returns how many were imported: 0 when none were needed, None when some were needed but
    every generated prompt is imported already."""
    progress = selectors.campaign_progress(campaign=campaign)
    if progress.labels_wanted - progress.labels >= below:
        return 0
    batch = _unimported(campaign)[:REFILL_BATCH]
    if not batch:
        return None
    services.prompts_import(
        campaign=campaign, data=_jsonl(batch), filename=f"demo-prompts-{batch[0].id}.jsonl", user=campaign.owner
    )
    return len(batch)


def demo_truth() -> dict[str, int]:
    """What the simulated crowd's careful workers answer, keyed by the text they see."""
    return {p.text: p.gold for p in first_prompts() + generated_prompts()}
