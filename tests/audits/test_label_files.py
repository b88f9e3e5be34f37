"""Labels files: formats, ignored columns, gold, and malformed files (clear errors, line and column)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from audits import LabelFileError, read_gold, read_labels, read_predictions


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_chorus_export_shape_extra_columns_ignored(tmp_path):
    path = write(
        tmp_path,
        "export.csv",
        "created_at,worker,prompt,value,gold,group,lease,comment\n"
        '2024-01-01T00:00:00Z,w1,p1,1,1,g,L1,"hi, there"\n'
        "2024-01-02T00:00:00Z,w2,p1,0,1,g,L2,\n"
        "2024-01-03T00:00:00Z,w1,p2,1,,g,L3,x\n",
    )
    m = read_labels(path)
    assert (m.n_workers, m.n_prompts, m.n_labels) == (2, 2, 3)
    assert m.gold.tolist()[0] == 1.0 and np.isnan(m.gold[1])
    assert m.created_at.tolist()[-1] == "2024-01-03T00:00:00Z"
    assert m.source == "export.csv"


def test_rows_the_live_audit_leaves_out_are_left_out(tmp_path):
    """Chorus's export marks a control prompt's labels and an excluded worker's: read_labels drops them
    (CSV strings and JSONL booleans alike), and a later error still names the file's own line."""
    path = write(
        tmp_path,
        "export.csv",
        "worker,prompt,value,control,excluded\n"
        "w1,p1,1,False,False\n"
        "w2,p1,0,True,False\n"  # a control's label
        "w3,p1,1,False,True\n"  # an excluded worker's
        "w1,p2,0,false,false\n",
    )
    m = read_labels(path)
    assert (m.n_workers, m.n_prompts, m.n_labels) == (1, 2, 2)
    rows = [
        {"worker": "w1", "prompt": "p1", "value": 1, "control": False, "excluded": False},
        {"worker": "w2", "prompt": "p1", "value": 0, "control": True, "excluded": False},
        {"worker": "w1", "prompt": "p1", "value": 0, "control": False, "excluded": False},
    ]
    jsonl = write(tmp_path, "export.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(LabelFileError, match="line 3"):
        read_labels(jsonl)  # w1 labeled p1 twice: the error names line 3, though line 2 was dropped


def test_invalid_and_missing_values_are_counted_not_audited(tmp_path):
    path = write(tmp_path, "l.csv", "worker,prompt,value\na,1,4\nb,1,\nc,1,NA\nd,1,7\ne,1,abc\nf,1,2\n")
    m = read_labels(path, binarize="1:0,2:0,3:1,4:1")
    assert (m.n_labels, m.n_missing, m.n_invalid) == (2, 2, 2)
    assert sorted(m.value.tolist()) == [0.0, 1.0] and sorted(m.raw.tolist()) == [2.0, 4.0]


def test_true_false_strings_and_tsv(tmp_path):
    path = write(tmp_path, "l.tsv", "worker\tprompt\tvalue\na\t1\ttrue\nb\t1\tFalse\n")
    m = read_labels(path)
    assert m.value.tolist() == [1.0, 0.0]


def test_jsonl_with_nan_token_ids_as_numbers_and_gold_file(tmp_path):
    lines = [
        {"worker": 7, "prompt": 1, "value": 1, "extra": {"x": 1}},
        {"worker": 8, "prompt": 1, "value": None},
        {"worker": 8, "prompt": 2, "value": 0},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + '\n{"worker": 9, "prompt": 2, "value": NaN}\n\n'
    path = write(tmp_path, "l.jsonl", text)
    gold = write(tmp_path, "gold.csv", "prompt,gold\n1,1\n2,1\n3,0\n")
    m = read_labels(path, gold=gold)
    assert (m.n_labels, m.n_missing) == (2, 2)
    assert m.worker_ids.tolist() == [7, 8]
    assert m.gold.tolist() == [1.0, 1.0]  # "1"/"2" in the gold file match the numeric ids
    assert read_gold(gold) == {"1": "1", "2": "1", "3": "0"}


def test_predictions_file(tmp_path):
    path = write(tmp_path, "pred.csv", "prompt,prediction,score\np1,1,0.3\np2,0,0.9\n")
    assert read_predictions(path) == {"p1": "1", "p2": "0"}


@pytest.mark.parametrize(
    "text, line, column, words",
    [
        ("worker,prompt\na,1\n", 1, "value", "missing required column 'value'"),
        ("worker,prompt,value\na,1,1\nb,1,0,9\n", 3, 4, "expected 3 fields"),
        ("worker,prompt,value\na,1,1\n\nb,1\n", 4, 3, "found 2"),
        ("worker,prompt,value\na,1,1\n,2,1\n", 3, "1 ('worker')", "empty worker"),
        ("worker,prompt,value\na, ,1\n", 2, "2 ('prompt')", "empty prompt"),
        ('worker,prompt,value\na,"multi\nline",1\nb,2,1\nc,3\n', 5, 3, "found 2"),
        ("worker,prompt,value\na,1,1\nb,1,0\na,1,0\n", 4, "2 ('prompt')", "labeled prompt '1' again (first on line 2)"),
        ("worker,prompt,value,gold\na,1,1,1\nb,1,0,0\n", 3, "4 ('gold')", "conflicts"),
        ('worker,prompt,value\na,"unterminated,1\n', 2, None, "malformed CSV"),
        ("", 1, None, "empty file"),
    ],
)
def test_malformed_csv_names_line_and_column(tmp_path, text, line, column, words):
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(LabelFileError) as info:
        read_labels(path)
    err = info.value
    assert err.line == line and err.column == column, str(err)
    assert words in str(err)
    assert str(err).startswith(str(path))


@pytest.mark.parametrize(
    "text, line, column, words",
    [
        ('{"worker": "a", "prompt": 1, "value": 1}\n{"worker": "b", "prompt": 1, "value": }\n', 2, 39, "invalid JSON"),
        ('{"worker": "a", "prompt": 1, "value": 1}\n\n[1, 2]\n', 3, 1, "expected a JSON object"),
        ('{"worker": "a", "prompt": 1}\n', 1, "value", "missing field 'value'"),
        ('{"worker": null, "prompt": 1, "value": 1}\n', 1, "worker", "worker must be"),
        ('{"worker": "a", "prompt": "", "value": 1}\n', 1, "prompt", "prompt must be"),
        ('{"worker": "a", "prompt": 1, "value": 1}\n{"worker": "a", "prompt": 1, "value": 0}\n', 2, "prompt", "again"),
    ],
)
def test_malformed_jsonl_names_line_and_column(tmp_path, text, line, column, words):
    path = write(tmp_path, "bad.jsonl", text)
    with pytest.raises(LabelFileError) as info:
        read_labels(path)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert words in str(info.value)


def test_missing_file_and_bad_binarize(tmp_path):
    with pytest.raises(LabelFileError, match="no such file"):
        read_labels(tmp_path / "nope.csv")
    path = write(tmp_path, "l.csv", "worker,prompt,value\na,1,1\n")
    with pytest.raises(ValueError, match="binarize"):
        read_labels(path, binarize="1=0")


def test_duplicates_policy_keeps_first_or_last(tmp_path):
    path = write(tmp_path, "l.csv", "worker,prompt,value\na,1,1\nb,1,1\na,1,0\n")
    assert read_labels(path, duplicates="first").value.tolist() == [1.0, 1.0]
    assert sorted(read_labels(path, duplicates="last").value.tolist()) == [0.0, 1.0]


def test_json_booleans_answer_binary_scales_only(tmp_path):
    """true/false are 1/0 for binary labels, but no rating: with a binarization map they count invalid,
    and a 1 in the same file is still a 1 (a bool and its number are told apart)."""
    import json

    from audits import read_labels

    def write(values):
        path = tmp_path / "labels.jsonl"
        path.write_text(
            "".join(
                json.dumps({"worker": f"w{w}", "prompt": f"p{p}", "value": v}) + "\n"
                for p in range(3)
                for w, v in enumerate(values)
            )
        )
        return path

    rating = read_labels(write([True, 4, 1]), binarize="1:0,2:0,3:1,4:1")
    assert (rating.n_labels, rating.n_invalid) == (6, 3)
    binary = read_labels(write([True, False, 1]))
    assert (binary.n_labels, binary.n_invalid) == (9, 0)
