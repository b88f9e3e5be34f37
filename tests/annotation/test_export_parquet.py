"""Label export as Parquet: typed columns from EXPORT_COLUMNS, the same rows and values as the CSV (with
every option), streamed one row group at a time, readable by pandas and DuckDB as is."""

import io
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation import parquet, services
from annotation.exporting import export_chunks, export_rows, pseudonym
from annotation.selectors import EXPORT_COLUMNS, EXPORT_FIELDS
from tests.helpers import csv_export_typed, label_all

pytestmark = [pytest.mark.django_db]

ARROW_TYPES = {
    "worker": pa.string(),
    "prompt": pa.string(),
    "value": pa.string(),
    "gold": pa.string(),
    "group": pa.string(),
    "created_at": pa.timestamp("us", tz="UTC"),
    "leased_at": pa.timestamp("us", tz="UTC"),
    "time_spent_s": pa.float64(),
    "campaign": pa.string(),
    "label_id": pa.int64(),
    "prompt_text": pa.string(),
    "control": pa.bool_(),
    "excluded": pa.bool_(),
    "final_k": pa.int64(),
    "k_rule": pa.string(),
}


@pytest.fixture
def binary(make_campaign, make_worker):
    """3 binary prompts with gold and groups, fully labeled (k = 2) by two workers; p0's text is a formula."""
    campaign = make_campaign(0, launch=False, k=2)
    rows = [{"id": "p0", "text": '=HYPERLINK("http://evil")', "gold": 1, "group": "g1"}]
    rows += [{"id": f"p{i}", "text": f"Statement {i}, “quoted”", "gold": i % 2} for i in (1, 2)]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    services.prompts_import(campaign=campaign, data=data, filename="x.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    workers = [make_worker(), make_worker()]
    for n, worker in enumerate(workers):
        label_all(campaign, worker, value=n)
    return campaign, workers


@pytest.fixture
def options(per_option, make_worker):
    """A per-option campaign (no gold: an empty column) labeled by two workers: a row per option."""
    workers = [make_worker(), make_worker()]
    for n, worker in enumerate(workers):
        label_all(per_option, worker, value=[n, 10 - n])
    return per_option, workers


def parquet_bytes(campaign, **options) -> bytes:
    return b"".join(export_chunks(campaign=campaign, fmt="parquet", **options))


def csv_text(campaign, **options) -> str:
    return "".join(export_chunks(campaign=campaign, fmt="csv", **options))


def test_the_schema_is_typed_from_the_export_columns(binary):
    schema = pq.read_schema(io.BytesIO(parquet_bytes(binary[0])))
    assert schema.names == EXPORT_FIELDS
    assert {field.name: field.type for field in schema} == ARROW_TYPES
    # Only the columns that may be empty are nullable.
    assert [field.name for field in schema if field.nullable] == ["gold", "final_k"]


@pytest.mark.parametrize("pseudonymize", [False, True])
@pytest.mark.parametrize("made", ["binary", "options"])
def test_parquet_equals_the_csv_row_for_row(request, made, pseudonymize):
    campaign, _ = request.getfixturevalue(made)
    frame = pd.read_parquet(io.BytesIO(parquet_bytes(campaign, pseudonymize=pseudonymize)))
    expected = csv_export_typed(csv_text(campaign, pseudonymize=pseudonymize))
    assert len(frame) == len(expected) == len(list(export_rows(campaign=campaign)))
    pd.testing.assert_frame_equal(frame, expected)


def test_parquet_keeps_values_as_the_rows_have_them(binary):
    campaign, workers = binary
    frame = pd.read_parquet(io.BytesIO(parquet_bytes(campaign, pseudonymize=True)))
    assert set(frame["worker"]) == {pseudonym(w.public_id) for w in workers}
    assert set(frame.loc[frame["prompt"] == "p0", "prompt_text"]) == {'=HYPERLINK("http://evil")'}
    assert sorted(frame["value"].unique()) == ["0", "1"]
    assert frame["created_at"].dt.tz is not None and (frame["time_spent_s"] >= 0).all()


def test_the_per_option_rows_leave_an_absent_gold_empty(options):
    frame = pd.read_parquet(io.BytesIO(parquet_bytes(options[0])))
    assert frame["prompt"].tolist() == ["o0#1", "o0#2", "o0#1", "o0#2"]
    assert frame["value"].tolist() == ["0", "10", "1", "9"] and frame["gold"].isna().all()


def test_duckdb_reads_the_file_as_is(binary, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "labels.parquet"
    path.write_bytes(parquet_bytes(binary[0]))
    relation = duckdb.sql(f"select * from '{path}'")
    types = dict(zip(relation.columns, map(str, relation.types)))
    assert types["label_id"] == "BIGINT" and types["final_k"] == "BIGINT"
    assert types["created_at"] == "TIMESTAMP WITH TIME ZONE" and types["control"] == "BOOLEAN"
    assert types["time_spent_s"] == "DOUBLE" and types["value"] == "VARCHAR"
    assert relation.aggregate("count(*), count(distinct worker), sum(value::int)").fetchall() == [(6, 2, 3)]


def test_an_empty_campaign_gives_a_valid_file_of_the_schema(make_campaign):
    data = parquet_bytes(make_campaign(2))
    table = pq.read_table(io.BytesIO(data))
    assert table.num_rows == 0 and {field.name: field.type for field in table.schema} == ARROW_TYPES
    assert pd.read_parquet(io.BytesIO(data)).columns.tolist() == EXPORT_FIELDS


def test_row_groups_are_bounded_and_each_is_yielded_as_written(binary):
    rows = list(export_rows(campaign=binary[0]))
    chunks = list(parquet.parquet_chunks(iter(rows), EXPORT_COLUMNS, row_group_rows=4))
    assert len(chunks) == 3  # two row groups (4 + 2 rows), then the footer
    assert all(chunks) and chunks[0].startswith(b"PAR1") and chunks[-1].endswith(b"PAR1")
    metadata = pq.ParquetFile(io.BytesIO(b"".join(chunks))).metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [4, 2]


def test_the_page_streams_parquet_with_the_pseudonymize_option(binary, researcher_client):
    campaign, workers = binary
    url = reverse("campaign_export", args=[campaign.slug, "parquet"])
    response = researcher_client.get(url, {"pseudonymize": "1"})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/vnd.apache.parquet"
    assert f'filename="{campaign.slug}-labels.parquet"' in response["Content-Disposition"]
    frame = pd.read_parquet(io.BytesIO(b"".join(response.streaming_content)))
    pd.testing.assert_frame_equal(frame, pd.read_parquet(io.BytesIO(parquet_bytes(campaign, pseudonymize=True))))
    assert not set(frame["worker"]) & {w.public_id for w in workers}


def test_the_command_writes_parquet_to_a_file_only(binary, tmp_path):
    campaign, _ = binary
    path = tmp_path / "labels.parquet"
    call_command("export_labels", campaign.slug, "--format", "parquet", "--output", str(path), stderr=io.StringIO())
    assert path.read_bytes() == parquet_bytes(campaign)
    with pytest.raises(CommandError, match="--format parquet writes a binary file"):
        call_command("export_labels", campaign.slug, "--format", "parquet", stdout=io.StringIO())
