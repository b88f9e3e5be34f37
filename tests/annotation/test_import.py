"""Importing prompt files: every bad input names its line and problem, and changes nothing."""
import json

import pytest
from django.test import override_settings

from annotation import services
from annotation.importing import PromptFileError
from annotation.models import ImportBatch, Prompt, Slot

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def counts():
    return Prompt.objects.count(), Slot.objects.count(), ImportBatch.objects.count()


def jsonl(*rows) -> bytes:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows).encode()


@pytest.fixture
def draft(make_campaign):
    """A draft binary campaign that already holds two prompts (p0, p1), so "unchanged" means something."""
    return make_campaign(2, k=3, launch=False)


@pytest.fixture
def rating(researcher):
    campaign = services.campaign_create(
        owner=researcher, title="Rating", schema="rating", scale_min=1, scale_max=4, k=2,
        binarization={"1": 0, "2": 0, "3": 1, "4": 1},
    )
    services.prompts_import(campaign=campaign, data=jsonl({"id": "r0", "text": "seed"}), filename="seed.jsonl")
    return campaign


@pytest.fixture
def per_option(researcher):
    campaign = services.campaign_create(
        owner=researcher, title="Options", schema="option_rating", scale_min=0, scale_max=10, k=2,
        binarization={"0": 0, "10": 1},
    )
    services.prompts_import(
        campaign=campaign, data=jsonl({"id": "o0", "text": "seed", "options": ["a", "b"]}), filename="seed.jsonl"
    )
    return campaign


BAD_FILES = [
    ("missing column", "draft", "p.csv", b"id,body\n1,hello\n", [(1, "missing column 'text' in the header")]),
    ("empty text", "draft", "p.csv", b"id,text,gold\nx1,fine,1\nx2,,0\nx3,  ,1\n",
     [(3, "empty text for id 'x2'"), (4, "empty text for id 'x3'")]),
    ("duplicate id in the file", "draft", "p.jsonl",
     jsonl({"id": "a", "text": "one"}, {"id": "b", "text": "two"}, {"id": "a", "text": "three"}),
     [(3, "duplicate id 'a' (first on line 1)")]),
    ("id already in the campaign", "draft", "p.csv", b"id,text\nnew,fresh\np1,again\n",
     [(3, "id 'p1' is already in this campaign")]),
    ("binary gold out of the schema", "draft", "p.csv", b"id,text,gold\nx1,fine,1\nx2,odd,2\n",
     [(3, "bad gold value: The label must be one of 0, 1; got 2.")]),
    ("binary gold not a number", "draft", "p.jsonl", jsonl({"id": "x1", "text": "t", "gold": "yes"}),
     [(1, "bad gold value: The label must be one of 0, 1; got 'yes'.")]),
    ("rating gold out of the scale", "rating", "p.csv", b"id,text,gold\nx1,fine,4\nx2,too high,7\n",
     [(3, "bad gold value: The label must be one of 1, 2, 3, 4; got 7.")]),
    ("per-option gold of the wrong length", "per_option", "p.jsonl",
     jsonl({"id": "x1", "text": "t", "options": ["a", "b", "c"], "gold": [1, 2]}),
     [(1, "bad gold value: Rate each of the 3 options: expected a list of 3 ratings.")]),
    ("per-option prompt without options", "per_option", "p.jsonl", jsonl({"id": "x1", "text": "t"}),
     [(1, "a per-option schema needs an 'options' column with the answer options")]),
    ("bad encoding", "draft", "p.csv", "id,text\nx1,fine\nx2,café\n".encode("latin-1"),
     [(3, "the file is not UTF-8 (byte 0xe9); save it as UTF-8")]),
    ("JSONL bad line", "draft", "p.jsonl", jsonl({"id": "x1", "text": "ok"}, '{"id": "x2", "text": "no end"',
                                                 "[1, 2]", {"id": "x4"}),
     [(2, "not valid JSON (Expecting ',' delimiter at column 30)"), (3, "each line must be a JSON object"),
      (4, "missing field 'text'")]),
    ("more cells than columns", "draft", "p.csv", b"id,text\nx1,one,two\n", [(2, "more cells than header columns")]),
    ("empty file", "draft", "p.jsonl", b"\n\n", [(0, "the file holds no prompts")]),
]


@pytest.mark.parametrize("case, campaign_name, filename, data, errors", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_bad_file_names_each_bad_line_and_imports_nothing(request, case, campaign_name, filename, data, errors):
    campaign = request.getfixturevalue(campaign_name)
    before = counts()
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=campaign, data=data, filename=filename)
    assert refused.value.errors == errors
    assert str(refused.value).startswith("Nothing was imported.")
    assert counts() == before


@pytest.mark.parametrize(
    "data, error",
    [
        (b'id,text\nx1,fine\nx2,"bad"quote\nx3,fine\n', (3, "broken CSV: ',' expected after '\"'")),
        (b'id,text\nx1,fine\nx2,"never closed\n', (3, "broken CSV: unexpected end of data")),
    ],
    ids=["stray quote", "unterminated quote"],
)
def test_broken_csv_quoting_names_the_bad_line_and_imports_nothing(draft, data, error):
    """The bad record's line, not the one before (DictReader.line_num lags behind on csv.Error)."""
    before = counts()
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=draft, data=data, filename="p.csv")
    assert refused.value.errors == [error]
    assert counts() == before


@override_settings(CHORUS_MAX_IMPORT_BYTES=64)
def test_an_oversize_file_is_refused(draft):
    before = counts()
    data = jsonl(*({"id": f"x{i}", "text": "a statement"} for i in range(5)))
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=draft, data=data, filename="p.jsonl")
    assert refused.value.errors == [(0, f"the file is {len(data):,} bytes; the limit is 64")]
    assert counts() == before


def test_reimporting_the_same_file_is_refused(draft):
    data = b"id,text,gold,group\nn1,Water is wet.,1,physics\nn2,Fire is cold.,0,physics\n"
    batch = services.prompts_import(campaign=draft, data=data, filename="first.csv")
    assert batch.n_prompts == 2
    before = counts()
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=draft, data=data, filename="renamed.csv")
    [(line, message)] = refused.value.errors
    assert line == 0 and message.startswith("this file was already imported as 'first.csv'")
    assert counts() == before


def test_a_good_csv_imports_every_column_and_k_slots(draft):
    data = (
        "id,text,gold,group\n"
        'n1,"Commas, and ""quotes"" survive",1,kitchen\n'
        "n2,Snow is warm.,0,\n"
        "n3,No gold here.,,garden\n"
    ).encode()
    services.prompts_import(campaign=draft, data=data, filename="good.csv")
    imported = {p.external_id: (p.text, p.gold, p.group) for p in Prompt.objects.filter(batch__filename="good.csv")}
    assert imported == {
        "n1": ('Commas, and "quotes" survive', 1, "kitchen"),
        "n2": ("Snow is warm.", 0, ""),
        "n3": ("No gold here.", None, "garden"),
    }
    assert Slot.objects.filter(prompt__external_id__in=["n1", "n2", "n3"], prompt__campaign=draft).count() == 9


def test_a_good_per_option_file_keeps_options_and_gold(per_option):
    data = (
        'id,text,options,gold\nq1,Pick,"[""x"", ""y""]","[0, 10]"\nq2,Rate,left | right | centre,\n'
    ).encode()
    services.prompts_import(campaign=per_option, data=data, filename="opts.csv")
    q1, q2 = Prompt.objects.filter(external_id__in=["q1", "q2"]).order_by("external_id")
    assert (q1.options, q1.gold) == (["x", "y"], [0, 10])
    assert (q2.options, q2.gold) == (["left", "right", "centre"], None)
