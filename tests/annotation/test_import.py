"""Importing prompt files: every bad input names its line and problem, and changes nothing."""

import pytest
from django.test import override_settings

from annotation import services
from annotation.importing import PromptFileError
from annotation.models import Prompt, Slot
from annotation.models.prompts import MAX_OPTIONS
from tests.helpers import BAD_PROMPT_FILES, import_counts, jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


@pytest.mark.parametrize("case", list(BAD_PROMPT_FILES))
def test_a_bad_file_names_each_bad_line_and_imports_nothing(request, case):
    bad = BAD_PROMPT_FILES[case]
    campaign = request.getfixturevalue(bad.campaign)
    before = import_counts()
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=campaign, data=bad.data, filename=bad.filename)
    assert refused.value.errors == bad.errors
    assert str(refused.value).startswith("Nothing was imported.")
    assert import_counts() == before


@override_settings(CHORUS_MAX_IMPORT_BYTES=64)
def test_an_oversize_file_is_refused(binary_draft):
    before = import_counts()
    data = jsonl(*({"id": f"x{i}", "text": "a statement"} for i in range(5)))
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=binary_draft, data=data, filename="p.jsonl")
    assert refused.value.errors == [(0, f"the file is {len(data):,} bytes; the limit is 64")]
    assert import_counts() == before


def test_reimporting_the_same_file_is_refused(binary_draft):
    data = b"id,text,gold,group\nn1,Water is wet.,1,physics\nn2,Fire is cold.,0,physics\n"
    batch = services.prompts_import(campaign=binary_draft, data=data, filename="first.csv")
    assert batch.n_prompts == 2
    before = import_counts()
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(campaign=binary_draft, data=data, filename="renamed.csv")
    [(line, message)] = refused.value.errors
    assert line == 0 and message.startswith("this file was already imported as 'first.csv'")
    assert import_counts() == before


def test_a_good_csv_imports_every_column_and_k_slots(binary_draft):
    data = (
        b"id,text,gold,group\n"
        b'n1,"Commas, and ""quotes"" survive",1,kitchen\n'
        b"n2,Snow is warm.,0,\n"
        b"n3,No gold here.,,garden\n"
    )
    services.prompts_import(campaign=binary_draft, data=data, filename="good.csv")
    imported = {p.external_id: (p.text, p.gold, p.group) for p in Prompt.objects.filter(batch__filename="good.csv")}
    assert imported == {
        "n1": ('Commas, and "quotes" survive', 1, "kitchen"),
        "n2": ("Snow is warm.", 0, ""),
        "n3": ("No gold here.", None, "garden"),
    }
    assert Slot.objects.filter(prompt__external_id__in=["n1", "n2", "n3"], prompt__campaign=binary_draft).count() == 9


def test_a_good_per_option_file_keeps_options_and_gold(per_option):
    data = b'id,text,options,gold\nq1,Pick,"[""x"", ""y""]","[0, 10]"\nq2,Rate,left | right | centre,\n'
    services.prompts_import(campaign=per_option, data=data, filename="opts.csv")
    q1, q2 = Prompt.objects.filter(external_id__in=["q1", "q2"]).order_by("external_id")
    assert (q1.options, q1.gold) == (["x", "y"], [0, 10])
    assert (q2.options, q2.gold) == (["left", "right", "centre"], None)


LINE_BREAKS_IN_TEXT = "one\u2028two\u2029three\u0085four\x0cfive\x1cend"


def test_a_prompt_may_carry_as_many_options_as_the_audit_can_code(per_option):
    options = [f"option {n}" for n in range(1, MAX_OPTIONS + 1)]
    services.prompts_import(
        campaign=per_option, data=jsonl({"id": "many", "text": "t", "options": options}), filename="many.jsonl"
    )
    assert Prompt.objects.get(campaign=per_option, external_id="many").options == options


def test_jsonl_text_keeps_unicode_line_separators_and_ids_may_be_whole_numbers(binary_draft):
    data = jsonl({"id": "u1", "text": LINE_BREAKS_IN_TEXT}, {"id": 7, "text": "seven", "group": 3})
    assert "\u2028".encode() in data and "\u2029".encode() in data  # raw, as ensure_ascii=False writes
    services.prompts_import(campaign=binary_draft, data=data.replace(b"\n", b"\r\n"), filename="p.jsonl")
    imported = {p.external_id: (p.text, p.group) for p in Prompt.objects.filter(batch__filename="p.jsonl")}
    assert imported == {"u1": (LINE_BREAKS_IN_TEXT, ""), "7": ("seven", "3")}


def test_csv_cells_keep_unicode_line_separators(binary_draft):
    data = f'id,text,group\nu1,"{LINE_BREAKS_IN_TEXT}",g\u2028h\nu2,"a\r\nb",\n'.encode()
    services.prompts_import(campaign=binary_draft, data=data, filename="p.csv")
    imported = {p.external_id: (p.text, p.group) for p in Prompt.objects.filter(batch__filename="p.csv")}
    assert imported == {"u1": (LINE_BREAKS_IN_TEXT, "g\u2028h"), "u2": ("a\r\nb", "")}


def test_binary_gold_may_be_true_or_false(binary_draft):
    services.prompts_import(
        campaign=binary_draft,
        data=jsonl({"id": "t", "text": "yes", "gold": True}, {"id": "f", "text": "no", "gold": False}),
        filename="p.jsonl",
    )
    assert dict(Prompt.objects.filter(external_id__in=["t", "f"]).values_list("external_id", "gold")) == {
        "t": 1,
        "f": 0,
    }
