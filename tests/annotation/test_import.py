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
    # Issue 10: ids, groups and options are text; anything but a string or a whole number was stored as
    # its Python spelling ("{'a': 1}", "True", "1.5").
    ("ids that are not text", "draft", "p.jsonl",
     jsonl({"id": {"a": 1}, "text": "t"}, {"id": [1], "text": "t"}, {"id": True, "text": "t"},
           {"id": 1.5, "text": "t"}, {"id": None, "text": "t"}, {"id": 7, "text": "fine"}),
     [(1, "the id must be a string or a whole number, not an object"),
      (2, "the id must be a string or a whole number, not a list"),
      (3, "the id must be a string or a whole number, not true or false"),
      (4, "the id must be a string or a whole number, not a decimal number"), (5, "empty id")]),
    ("a group that is not text", "draft", "p.jsonl", jsonl({"id": "x1", "text": "t", "group": {"theme": "x"}}),
     [(1, "the group must be a string or a whole number, not an object")]),
    ("options that are not text", "per_option", "p.jsonl",
     jsonl({"id": "x1", "text": "t", "options": ["a", {"b": 1}]}, {"id": "x2", "text": "t", "options": ["a", None]}),
     [(1, "bad options: option 2 must be a string or a whole number, not an object"),
      (2, "an answer option is empty")]),
    ("a repeated column", "draft", "p.csv", b"id,text,text\nx1,one,two\n",
     [(1, "column 'text' appears more than once in the header")]),
    ("repeated columns, named in order", "draft", "p.csv", b"text,id,gold,id,text\n",
     [(1, "column 'id', 'text' appears more than once in the header")]),
    ("rating gold true", "rating", "p.jsonl", jsonl({"id": "x1", "text": "t", "gold": True}),
     [(1, "bad gold value: The label must be one of 1, 2, 3, 4; got true, which is not a rating.")]),
    ("per-option gold false", "per_option", "p.jsonl",
     jsonl({"id": "x1", "text": "t", "options": ["a", "b"], "gold": [0, False]}),
     [(1, "bad gold value: The rating of option 2 must be one of 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10; got false, "
          "which is not a rating.")]),
    ("gold digits int() refuses", "draft", "p.csv", "id,text,gold\nx1,t,\u00b9\n".encode(),
     [(2, "bad gold value: The label must be one of 0, 1; got '\u00b9'.")]),
    ("an integer too long to read", "draft", "p.jsonl", b'{"id": ' + b"9" * 5000 + b', "text": "t"}\n',
     [(1, "not valid JSON (Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits; "
          "use sys.set_int_max_str_digits() to increase the limit)")]),
    # str.splitlines() broke lines at U+2028, U+0085, form feeds ...: numbers after them were wrong.
    ("line numbers after U+2028, U+0085 and a form feed", "draft", "p.jsonl",
     jsonl({"id": "x1", "text": "a\u2028b\u0085c"}, '{"id": "x2", "text": "no end"\f', {"id": "x3"}),
     [(2, "not valid JSON (Expecting ',' delimiter at column 30)"), (3, "missing field 'text'")]),
    ("CRLF line numbers", "draft", "p.jsonl", b'{"id": "x1", "text": "t"}\r\n\r\n{"id": "x2"}\r\n',
     [(3, "missing field 'text'")]),
    ("a multi-line CSV record is named by its first line", "draft", "p.csv",
     b'id,text,gold\nx1,"two\nlines",1\n\nx2,"three\nlines\nhere",7\nx3,fine,9\n',
     [(5, "bad gold value: The label must be one of 0, 1; got 7."),
      (8, "bad gold value: The label must be one of 0, 1; got 9.")]),
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


def test_an_unclosed_quote_is_named_by_the_line_it_opens_on(draft):
    """The csv module finds an unclosed quote only at the end of the file; the line to fix is where it opens."""
    data = b'id,text\nx1,fine\nx2,"never closed\nx3,fine\nx4,fine\n'
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=draft, data=data, filename="p.csv")
    assert refused.value.errors == [(3, "broken CSV: unexpected end of data")]


LINE_BREAKS_IN_TEXT = "one\u2028two\u2029three\u0085four\x0cfive\x1cend"


def test_jsonl_text_keeps_unicode_line_separators_and_ids_may_be_whole_numbers(draft):
    data = jsonl({"id": "u1", "text": LINE_BREAKS_IN_TEXT}, {"id": 7, "text": "seven", "group": 3}).replace(
        b"\\u2028", "\u2028".encode()).replace(b"\\u2029", "\u2029".encode())  # raw, as ensure_ascii=False writes
    assert "\u2028".encode() in data
    services.prompts_import(campaign=draft, data=data.replace(b"\n", b"\r\n"), filename="p.jsonl")
    imported = {p.external_id: (p.text, p.group) for p in Prompt.objects.filter(batch__filename="p.jsonl")}
    assert imported == {"u1": (LINE_BREAKS_IN_TEXT, ""), "7": ("seven", "3")}


def test_csv_cells_keep_unicode_line_separators(draft):
    data = f'id,text,group\nu1,"{LINE_BREAKS_IN_TEXT}",g\u2028h\nu2,"a\r\nb",\n'.encode()
    services.prompts_import(campaign=draft, data=data, filename="p.csv")
    imported = {p.external_id: (p.text, p.group) for p in Prompt.objects.filter(batch__filename="p.csv")}
    assert imported == {"u1": (LINE_BREAKS_IN_TEXT, "g\u2028h"), "u2": ("a\r\nb", "")}


def test_binary_gold_may_be_true_or_false(draft):
    services.prompts_import(
        campaign=draft, data=jsonl({"id": "t", "text": "yes", "gold": True}, {"id": "f", "text": "no", "gold": False}),
        filename="p.jsonl",
    )
    assert dict(Prompt.objects.filter(external_id__in=["t", "f"]).values_list("external_id", "gold")) == {"t": 1, "f": 0}
