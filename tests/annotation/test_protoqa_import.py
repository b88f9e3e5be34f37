"""Issue 14: ``import_protoqa`` makes ProtoQA's crowdsourced dev answers a finished free-text campaign,
all or nothing, idempotently; ``protoqa_clusters`` keeps the experts' clusters for the clustering."""

import json
from collections import Counter

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Campaign, Label, Lease, Prompt, Slot, Worker
from annotation.protoqa_files import protoqa_clusters
from annotation.schemas import answer_normalize
from annotation.selectors import invariant_violations
from audits.models import AuditStatsShard
from tests.audits.conftest import dataset
from tests.helpers import import_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def dev():
    return dataset("protoqa", "dev", "dev.crowdsourced.jsonl")


def rows_of(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_dev_file_becomes_a_closed_campaign_with_every_answer(dev, researcher, capsys):
    call_command("import_protoqa", str(dev), "--owner", researcher.username)
    campaign = Campaign.objects.get(slug="protoqa-dev")
    rows = rows_of(dev)
    totals = {r["metadata"]["id"]: sum(r["answers"]["raw"].values()) for r in rows}
    assert (campaign.schema, campaign.status, campaign.owner) == ("free_text", "closed", researcher)
    assert campaign.k == max(totals.values()) == 101
    assert (Prompt.objects.count(), Label.objects.count()) == (52, 5192)
    assert "Imported 52 questions and 5192 answers into protoqa-dev (k = 101)." in capsys.readouterr().out
    # The guarantees hold (not complete: a question with 99 answers keeps 2 of its 101 slots free).
    assert invariant_violations(campaign=campaign) == []
    assert Slot.objects.filter(filled=True).count() == 5192 == Lease.objects.count()
    # Each prompt: the question's text and id, one label per raw occurrence, each from its own worker.
    first = rows[0]
    prompt = Prompt.objects.get(external_id=first["metadata"]["id"])
    assert prompt.text == first["question"]["original"] and prompt.n_labels == totals[prompt.external_id]
    expected = Counter()
    for answer, count in first["answers"]["raw"].items():
        expected[answer_normalize(answer)] += count
    assert Counter(prompt.labels.values_list("value", flat=True)) == expected
    assert dict(Prompt.objects.values_list("external_id", "n_labels")) == totals
    assert Label.objects.values("worker").distinct().count() == 5192
    assert Worker.objects.filter(channel="protoqa").count() == 5192
    # The audit's statistics were built: every label counted, none of them a number to fold.
    assert sum(AuditStatsShard.objects.filter(campaign=campaign).values_list("n_labels", flat=True)) == 5192


def test_a_second_run_changes_nothing_and_a_taken_slug_is_refused(dev, researcher, make_campaign, capsys):
    other = make_campaign(1, title="Taken")
    call_command("import_protoqa", str(dev), "--owner", researcher.username)
    before = import_counts()
    call_command("import_protoqa", str(dev), "--owner", researcher.username)
    assert "is already campaign protoqa-dev: nothing changed." in capsys.readouterr().out
    assert import_counts() == before
    with pytest.raises(CommandError, match=f"The slug '{other.slug}' belongs to another campaign"):
        call_command("import_protoqa", str(dev), "--slug", other.slug, "--owner", researcher.username)
    assert import_counts() == before


def test_a_bad_file_imports_nothing_naming_each_line(tmp_path, researcher):
    good = {
        "metadata": {"id": "q1"},
        "question": {"original": "Name a fruit."},
        "answers": {"raw": {"apple": 2}, "clusters": {}},
    }
    bad = [
        json.dumps(good),
        json.dumps({**good, "metadata": {"id": "q2"}, "answers": {"raw": {"pear": 0}}}),
        json.dumps({**good, "metadata": {"id": "q3"}, "answers": {"raw": {"bell\u0007": 1}}}),
        "not json",
        json.dumps(good),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(bad) + "\n", encoding="utf-8")
    with pytest.raises(CommandError) as refused:
        call_command("import_protoqa", str(path), "--owner", researcher.username)
    message = str(refused.value)
    assert "line 2: question 'q2': answer 'pear' has count 0, not a positive integer" in message
    assert "line 4: " in message and "line 5: question 'q1' again (first on line 1)" in message
    assert import_counts() == (0, 0, 0, 0) and Campaign.objects.count() == 0
    path.write_text(bad[0] + "\n" + bad[2] + "\n", encoding="utf-8")  # read, but an answer is refused
    with pytest.raises(CommandError, match=r"line 2: question 'q3': The answer holds a non-printing character"):
        call_command("import_protoqa", str(path), "--owner", researcher.username)
    assert Campaign.objects.count() == 0
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("import_protoqa", str(path), "--owner", "nobody")


def test_protoqa_clusters_are_the_files_clusters(dev):
    clusters = protoqa_clusters(dev)
    assert len(clusters) == 52
    assert sum(c["count"] for q in clusters.values() for c in q.values()) == 4886  # PROVENANCE.md
    assert sum(len(q) for q in clusters.values()) == 541
    first = rows_of(dev)[0]
    assert clusters[first["metadata"]["id"]] == first["answers"]["clusters"]
