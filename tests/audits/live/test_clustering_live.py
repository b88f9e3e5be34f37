"""Answer clustering (ProtoQA's workflow): versions, stale saves refused, double-blind visibility, the
agreement of the two independent clusterings, adjudication rules, expert clusters imported from and
exported to ProtoQA's format, and who may open the pages."""

import io
import json
import math
import threading

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection
from sklearn.metrics import adjusted_rand_score

from annotation.models import Campaign, Label
from annotation.protoqa_files import protoqa_clusters
from annotation.schemas import answer_normalize
from audits.engine import clustering as engine
from audits.models import AnswerClustering
from audits.selectors import clustering as selectors
from audits.services import clustering as services
from tests.audits.conftest import dataset
from tests.audits.live.free_text import free_text_campaign, protoqa_dev_campaign
from tests.helpers import signed_in

pytestmark = pytest.mark.django_db

Role = AnswerClustering.Role
QUESTIONS = {
    "q1": ("Name something you drink in the morning.", ["coffee", "Coffee", "tea", "juice"]),
    "q2": ("Name a pet.", ["dog", "cat"]),
}


@pytest.fixture
def world(researcher, make_user):
    """A free-text campaign with two prompts; ``alice`` and ``bob`` collaborate on it, ``carol`` too."""
    campaign = free_text_campaign(researcher, QUESTIONS)
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    campaign.collaborators.add(alice, bob, carol)
    prompt = campaign.prompts.get(external_id="q1")
    ids = list(Label.objects.filter(prompt=prompt).order_by("id").values_list("id", flat=True))
    return campaign, prompt, ids, alice, bob, carol


def save(prompt, by, groups: dict, invalid=(), *, base, role=Role.INDEPENDENT, based_on=None):
    """``groups``: {cluster name: [label ids]}."""
    assignment = {str(pk): name for name, pks in groups.items() for pk in pks}
    return services.clustering_save(
        prompt=prompt, by=by, role=role, assignment=assignment, invalid=invalid, base_version=base, based_on=based_on
    )


def messages(excinfo) -> str:
    return " ".join(excinfo.value.messages)


def test_each_save_is_a_new_version_and_a_revert_adds_one(world):
    campaign, prompt, (c1, c2, t, j), alice, *_ = world
    v1 = save(prompt, alice, {"coffee": [c1, c2], "tea": [t], "juice": [j]}, base=0)
    v2 = save(prompt, alice, {"hot": [c1, c2, t], "juice": [j]}, base=1)
    assert (v1.version, v2.version, v2.based_on_id) == (1, 2, v1.pk)
    assert selectors.prompt_clusterings(prompt=prompt).independent[alice.pk] == v2
    v3 = services.clustering_revert(clustering=v1, by=alice, base_version=2)
    assert (v3.version, v3.assignment, v3.based_on_id, v3.note) == (3, v1.assignment, v1.pk, "revert to version 1")
    v1.refresh_from_db()
    assert v1.assignment == {str(c1): "coffee", str(c2): "coffee", str(t): "tea", str(j): "juice"}  # unchanged
    assert AnswerClustering.objects.filter(prompt=prompt).count() == 3


def test_a_stale_base_version_is_refused_and_nothing_is_saved(world):
    campaign, prompt, (c1, c2, t, j), alice, *_ = world
    save(prompt, alice, {"a": [c1, c2, t, j]}, base=0)
    save(prompt, alice, {"a": [c1, c2], "b": [t, j]}, base=1)  # the other tab
    with pytest.raises(ValidationError) as excinfo:
        save(prompt, alice, {"a": [c1], "b": [c2, t, j]}, base=1)
    assert "Version 2 of this clustering was saved" in messages(excinfo)
    assert "after you loaded version 1: nothing was saved" in messages(excinfo)
    assert AnswerClustering.objects.filter(prompt=prompt).count() == 2
    with pytest.raises(ValidationError, match="There is no version 3 of this clustering"):
        save(prompt, world[5], {"a": [c1, c2, t, j]}, base=3)


def test_bad_assignments_are_refused_naming_the_problem(world):
    campaign, prompt, (c1, c2, t, j), alice, *_ = world
    other = Label.objects.filter(prompt__external_id="q2", prompt__campaign=campaign).first()
    with pytest.raises(ValidationError) as excinfo:
        save(prompt, alice, {"a": [c1, c2, t, j, other.pk]}, base=0)
    assert f"Labels {other.pk} are not answers of this prompt." in messages(excinfo)
    with pytest.raises(ValidationError) as excinfo:
        save(prompt, alice, {"a": [c1, c2, t]}, base=0)
    assert "1 answers are in no cluster and not marked invalid (e.g. “juice”)" in messages(excinfo)
    with pytest.raises(ValidationError) as excinfo:
        save(prompt, alice, {"a": [c1, c2, t], "  ": [j]}, base=0)
    assert f"Label {j} is in a cluster without a name" in messages(excinfo)
    with pytest.raises(ValidationError) as excinfo:
        save(prompt, alice, {"a": [c1, c2, t, j]}, invalid=[j], base=0)
    assert f"Labels {j} are both in a cluster and marked invalid." in messages(excinfo)
    assert not AnswerClustering.objects.exists()
    saved = save(prompt, alice, {" drinks ": [c1, c2, t]}, invalid=[j], base=0)
    assert (saved.assignment[str(c1)], saved.invalid) == ("drinks", [j])


def test_double_blind_until_both_independent_clusterings_are_saved(world):
    campaign, prompt, (c1, c2, t, j), alice, bob, carol = world
    proposal = services.clustering_propose(prompt=prompt)
    mine = save(prompt, alice, {"coffee": [c1, c2], "other": [t, j]}, base=0)

    def seen(user):
        return selectors.visible_clusterings(clusterings=selectors.prompt_clusterings(prompt=prompt), user=user)

    bob_sees = seen(bob)
    assert (bob_sees["proposal"], bob_sees["mine"], bob_sees["others"]) == (proposal, None, [])
    assert mine not in bob_sees["history"] and proposal in bob_sees["history"]
    assert seen(alice)["mine"] == mine and seen(alice)["others"] == []
    # Carol cannot adjudicate yet, and sees nothing of Alice's.
    with pytest.raises(ValidationError, match=r"two researchers have clustered this prompt independently \(1 so far\)"):
        save(prompt, carol, {"x": [c1, c2, t, j]}, base=0, role=Role.ADJUDICATED)
    assert seen(carol)["others"] == []
    # Bob may not start from Alice's clustering: he has not seen it.
    with pytest.raises(ValidationError, match="only from the proposal or your own"):
        save(prompt, bob, {"x": [c1, c2, t, j]}, base=0, based_on=mine)
    theirs = save(prompt, bob, {"coffee": [c1, c2, t], "juice": [j]}, base=0, based_on=proposal)
    assert seen(alice)["others"] == [theirs] and seen(bob)["others"] == [mine]
    assert {c.pk for c in seen(carol)["others"]} == {mine.pk, theirs.pk}
    assert (
        selectors.workspace_role(clusterings=selectors.prompt_clusterings(prompt=prompt), user=carol) == "adjudicated"
    )


def test_agreement_is_blanc_and_adjusted_rand_of_the_two_independent_clusterings(world):
    campaign, prompt, (c1, c2, t, j), alice, bob, _ = world
    save(prompt, alice, {"coffee": [c1, c2], "other": [t, j]}, base=0)
    assert (
        selectors.agreement(clusterings=selectors.prompt_clusterings(prompt=prompt), label_ids=[c1, c2, t, j]) is None
    )
    save(prompt, bob, {"hot": [c1, c2, t], "juice": [j]}, base=0)
    got = selectors.agreement(clusterings=selectors.prompt_clusterings(prompt=prompt), label_ids=[c1, c2, t, j])
    # By hand: 6 pairs; links A {12, 34}, B {12, 13, 23}; both linked 1, both unlinked {14, 24} = 2.
    # F_c = 2·1/(2+3) = 0.4, F_n = 2·2/(4+3) = 4/7, BLANC = (0.4 + 4/7)/2.
    assert got["blanc"] == pytest.approx((0.4 + 4 / 7) / 2)
    assert got["adjusted_rand"] == pytest.approx(adjusted_rand_score([0, 0, 1, 1], [0, 0, 0, 1]))
    assert got["blanc"] == engine.blanc(["coffee", "coffee", "other", "other"], ["hot", "hot", "hot", "juice"])
    assert (got["n_answers"], got["authors"]) == (4, ["alice", "bob"])


def test_invalid_answers_are_singletons_in_the_agreement(world):
    campaign, prompt, (c1, c2, t, j), alice, bob, _ = world
    save(prompt, alice, {"coffee": [c1, c2]}, invalid=[t, j], base=0)
    save(prompt, bob, {"coffee": [c1, c2]}, invalid=[t, j], base=0)
    got = selectors.agreement(clusterings=selectors.prompt_clusterings(prompt=prompt), label_ids=[c1, c2, t, j])
    assert got["blanc"] == 1.0 and got["adjusted_rand"] == 1.0
    assert got["blanc"] == engine.blanc(["c", "c", None, None], ["c", "c", None, None])


def test_adjudication_rules(world, make_user):
    campaign, prompt, (c1, c2, t, j), alice, bob, carol = world
    a = save(prompt, alice, {"coffee": [c1, c2], "other": [t, j]}, base=0)
    save(prompt, bob, {"coffee": [c1, c2, t], "juice": [j]}, base=0)
    with pytest.raises(ValidationError, match="somebody else must adjudicate"):
        save(prompt, alice, {"x": [c1, c2, t, j]}, base=0, role=Role.ADJUDICATED)
    dave = make_user("dave")
    with pytest.raises(ValidationError, match=r"already has two independent clusterings \(alice and bob\)"):
        save(prompt, dave, {"x": [c1, c2, t, j]}, base=0)
    final = save(
        prompt, carol, {"coffee": [c1, c2], "tea": [t]}, invalid=[j], base=0, role=Role.ADJUDICATED, based_on=a
    )
    assert (final.role, final.version, final.based_on_id, final.author) == ("adjudicated", 1, a.pk, carol)
    with pytest.raises(ValidationError, match="you cannot also cluster it independently"):
        save(prompt, carol, {"x": [c1, c2, t, j]}, base=0)
    # A second adjudicator working from version 0 does not overwrite Carol's version 1.
    with pytest.raises(ValidationError, match="Version 1 of this clustering was saved by carol"):
        save(prompt, dave, {"x": [c1, c2, t, j]}, base=0, role=Role.ADJUDICATED)
    assert selectors.prompt_clusterings(prompt=prompt).adjudicated == final


def test_proposal_names_clusters_after_their_most_frequent_answer(world):
    campaign, prompt, (c1, c2, t, j), *_ = world
    proposal = services.clustering_propose(prompt=prompt)
    groups = engine.propose_clusters(["coffee", "Coffee", "tea", "juice"])
    assert [proposal.assignment[str(pk)] for pk in (c1, c2, t, j)] == [
        {0: "coffee", 1: "tea", 2: "juice"}[g] for g in groups
    ]
    assert (proposal.role, proposal.author, proposal.version) == ("proposal", None, 1)
    assert services.clustering_propose(prompt=prompt) == proposal  # same answers: no new version


def test_overview_noise_and_quality_filter_come_from_the_final_clustering(world):
    campaign, prompt, (c1, c2, t, j), alice, bob, carol = world
    services.clustering_propose(prompt=prompt)
    save(prompt, alice, {"coffee": [c1, c2], "other": [t, j]}, base=0)
    save(prompt, bob, {"coffee": [c1, c2, t], "juice": [j]}, base=0)
    save(prompt, carol, {"coffee": [c1, c2], "tea": [t]}, invalid=[j], base=0, role=Role.ADJUDICATED)
    overview = selectors.answers_overview(campaign=campaign)
    row = overview["rows"][0]
    assert (row.prompt, row.n_answers, row.n_distinct, row.noise_source) == (prompt, 4, 4, "final")
    # Final: clusters of 2 and 1 valid answers, 1 invalid: top share 2/3, entropy H(2/3, 1/3), invalid 1/4.
    assert row.noise.n_clusters == 2 and row.noise.top_share == pytest.approx(2 / 3)
    assert row.noise.entropy_bits == pytest.approx(-(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3))
    assert row.noise.invalid_share == pytest.approx(0.25)
    assert row.passes_filter is True
    assert row.agreement["blanc"] == pytest.approx((0.4 + 4 / 7) / 2)
    assert overview["rows"][1].noise is None  # q2: nothing proposed or clustered yet
    assert overview["summary"].most_divided[0][0] == "q1"


@pytest.fixture
def protoqa_dev(researcher):
    return protoqa_dev_campaign(researcher)


def test_protoqa_expert_clusters_round_trip_through_import_and_export(protoqa_dev, researcher):
    campaign, path = protoqa_dev
    expert = protoqa_clusters(path)
    assert services.expert_clusters_import(campaign=campaign, clusters=expert, by=researcher) == 52
    exported = {row["metadata"]["id"]: row for row in selectors.clusters_export(campaign=campaign)}
    assert len(exported) == 52
    n_clusters = n_answers = 0
    for line in path.read_text().splitlines():
        original = json.loads(line)
        row = exported[original["metadata"]["id"]]
        want = {
            cid: (c["count"], {answer_normalize(a) for a in c["answers"]})
            for cid, c in original["answers"]["clusters"].items()
        }
        got = {cid: (c["count"], set(c["answers"])) for cid, c in row["answers"]["clusters"].items()}
        assert got == want, original["metadata"]["id"]
        assert row["num"] == original["num"]
        raw = {}
        for answer, count in original["answers"]["raw"].items():
            raw[answer_normalize(answer)] = raw.get(answer_normalize(answer), 0) + count
        assert row["answers"]["raw"] == raw
        n_clusters += len(got)
        n_answers += row["num"]["answers"]
    assert (n_clusters, n_answers) == (541, 4886)  # PROVENANCE.md's totals
    # The answers page's noise and filter come from the imported clusters, as from the file's own counts.
    overview = selectors.answers_overview(campaign=campaign)
    from_file = {}
    for line in path.read_text().splitlines():
        original = json.loads(line)
        counts = [c["count"] for c in original["answers"]["clusters"].values()]
        n_raw = sum(original["answers"]["raw"].values())
        from_file[original["metadata"]["id"]] = (counts, n_raw - sum(counts))
    for row in overview["rows"]:
        counts, n_invalid = from_file[row.prompt.external_id]
        assert row.noise == engine.answer_noise(counts, n_invalid=n_invalid), row.prompt.external_id
        assert row.passes_filter is engine.passes_protoqa_filter(counts)
    failing = [qid for qid, (counts, _) in from_file.items() if not engine.passes_protoqa_filter(counts)]
    assert overview["summary"].failing_filter == failing


def test_an_import_with_a_bad_question_saves_nothing(world, researcher):
    campaign, prompt, ids, *_ = world
    bad = {
        "q1": {"q1.0": {"count": 2, "answers": ["coffee", "Coffee"]}, "q1.1": {"count": 2, "answers": ["tea"]}},
        "q9": {"q9.0": {"count": 1, "answers": ["x"]}},
        "q2": {"q2.0": {"count": 1, "answers": ["dog"]}, "q2.1": {"count": 1, "answers": ["dog"]}},
    }
    with pytest.raises(ValidationError) as excinfo:
        services.expert_clusters_import(campaign=campaign, clusters=bad, by=researcher)
    assert excinfo.value.messages == [
        "q1 cluster q1.1: count 2, but only 1 answers match its strings.",
        "q9: no prompt of this campaign has this id.",
        "q2: “dog” is in clusters q2.0 and q2.1.",
        "q2 cluster q2.1: count 1, but only 0 answers match its strings.",
    ]
    assert not AnswerClustering.objects.exists()


def test_pages_are_for_the_campaign_managers_and_saves_answer_in_json(world, make_user):
    campaign, prompt, (c1, c2, t, j), alice, bob, carol = world
    base = f"/audits/{campaign.slug}/answers/"
    stranger = signed_in(make_user("stranger"))
    for url in (base, f"{base}q1/", f"/audits/{campaign.slug}/answers.jsonl"):
        assert stranger.get(url).status_code == 404
    assert stranger.post(f"{base}q1/save/", "{}", content_type="application/json").status_code == 404
    client = signed_in(alice)
    page = client.get(f"{base}q1/")
    assert page.status_code == 200 and b"clustering <strong>independently</strong>" in page.content
    assert page.context["data"]["baseVersion"] == 0 and page.context["data"]["role"] == "independent"
    body = {"role": "independent", "baseVersion": 0, "assignment": {str(c1): "coffee", str(c2): "coffee"}}
    refused = client.post(f"{base}q1/save/", json.dumps(body), content_type="application/json")
    assert refused.status_code == 400
    assert refused.json() == {
        "errors": [
            "2 answers are in no cluster and not marked invalid (e.g. “tea”): put each in a cluster or mark it invalid."
        ]
    }
    body["invalid"] = [t, j]
    saved = client.post(f"{base}q1/save/", json.dumps(body), content_type="application/json")
    assert saved.json() == {"version": 1, "clusters": 1}
    stale = client.post(f"{base}q1/save/", json.dumps(body), content_type="application/json")
    assert stale.status_code == 400 and "after you loaded version 0" in stale.json()["errors"][0]
    assert client.post(f"{base}q1/save/", b"{not json", content_type="application/json").json() == {
        "errors": ["The request is not valid JSON."]
    }
    # The history's revert form makes version 1 current again, as version 3.
    body.update(baseVersion=1, assignment={str(c1): "coffee", str(c2): "coffee", str(t): "tea"}, invalid=[j])
    assert client.post(f"{base}q1/save/", json.dumps(body), content_type="application/json").json()["version"] == 2
    first = AnswerClustering.objects.get(author=alice, version=1)
    reverted = client.post(f"{base}q1/revert/", {"clustering": first.pk, "base_version": 2}, follow=True)
    assert "Version 1 is current again, as version 3." in [str(m) for m in reverted.context["messages"]]
    assert AnswerClustering.objects.get(author=alice, version=3).assignment == first.assignment
    stale = client.post(f"{base}q1/revert/", {"clustering": first.pk, "base_version": 2}, follow=True)
    assert "after you loaded version 2: nothing was saved" in " ".join(str(m) for m in stale.context["messages"])
    # Bob's page shows none of Alice's clustering (double-blind).
    bob_page = signed_in(bob).get(f"{base}q1/")
    # Nothing of Bob's is saved: his page opens on the engine's proposal, unsaved, not on Alice's work.
    unsaved = selectors.proposed_assignment(answers=selectors.prompt_answers(prompt=prompt))
    assert bob_page.context["data"]["assignment"] == unsaved and bob_page.context["data"]["invalid"] == []
    assert bob_page.context["data"]["basedOn"] is None and bob_page.context["shown"] == []
    assert b"alice" not in bob_page.content.split(b"<h2>Versions</h2>")[1]
    # "Propose clusters for every prompt": Bob's page then starts from the proposal.
    client.post(base)
    proposal = AnswerClustering.objects.get(role="proposal", prompt=prompt)
    assert AnswerClustering.objects.filter(role="proposal").count() == 2
    assert signed_in(bob).get(f"{base}q1/").context["data"]["assignment"] == proposal.assignment


def test_the_export_is_protoqa_jsonl(world, researcher):
    campaign, prompt, ids, *_ = world
    services.expert_clusters_import(
        campaign=campaign, clusters={"q1": {"q1.0": {"count": 2, "answers": ["coffee", "Coffee"]}}}, by=researcher
    )
    # The importer corrects the imported clusters (a final clustering needs no independent ones then).
    c1, c2, t, j = ids
    corrected = save(prompt, researcher, {"q1.0": [c1, c2], "q1.1": [t]}, invalid=[j], base=1, role=Role.ADJUDICATED)
    assert (corrected.version, corrected.based_on.note) == (2, "imported")
    services.clustering_revert(clustering=corrected.based_on, by=researcher, base_version=2)
    response = signed_in(researcher).get(f"/audits/{campaign.slug}/answers.jsonl")
    rows = [json.loads(line) for line in response.content.decode().splitlines()]
    assert rows == [
        {
            "metadata": {"id": "q1", "source": f"chorus:{campaign.slug}"},
            "question": {
                "original": "Name something you drink in the morning.",
                "normalized": "name something you drink in the morning.",
            },
            "answers": {
                "raw": {"coffee": 1, "Coffee": 1, "tea": 1, "juice": 1},
                "clusters": {"q1.0": {"count": 2, "answers": ["coffee", "Coffee"]}},
            },
            "num": {"answers": 2, "clusters": 1},
        }
    ]


@pytest.mark.both_dbs
@pytest.mark.django_db(transaction=True)
def test_two_tabs_saving_at_once_store_one_version(researcher):
    """Both tabs loaded version n and save at the same instant: one version n+1, the other refused."""
    campaign = free_text_campaign(researcher, QUESTIONS)
    prompt = campaign.prompts.get(external_id="q1")
    ids = list(Label.objects.filter(prompt=prompt).order_by("id").values_list("id", flat=True))
    for base in range(5):
        together, outcomes = threading.Barrier(2), []

        def tab(name, base=base, together=together, outcomes=outcomes):
            try:
                together.wait()
                outcomes.append(save(prompt, researcher, {name: ids}, base=base).version)
            except ValidationError as error:
                outcomes.append(" ".join(error.messages))
            finally:
                connection.close()

        tabs = [threading.Thread(target=tab, args=(name,)) for name in ("left", "right")]
        for t in tabs:
            t.start()
        for t in tabs:
            t.join()
        assert sorted(outcomes, key=str)[0] == base + 1, outcomes
        assert f"after you loaded version {base}: nothing was saved" in sorted(outcomes, key=str)[1]
    versions = list(
        AnswerClustering.objects.filter(prompt=prompt).order_by("version").values_list("version", flat=True)
    )
    assert versions == [1, 2, 3, 4, 5]


def test_the_commands_import_protoqa_answers_then_their_expert_clusters(researcher, tmp_path):
    path = dataset("protoqa", "dev", "dev.crowdsourced.jsonl")
    call_command("import_protoqa", str(path), "--owner", researcher.username, "--slug", "dev")
    out = io.StringIO()
    call_command("import_answer_clusters", "dev", str(path), stdout=out)
    assert "final clusters of 52 prompts" in out.getvalue()
    campaign = Campaign.objects.get(slug="dev")
    exported = {
        row["metadata"]["id"]: row["answers"]["clusters"] for row in selectors.clusters_export(campaign=campaign)
    }
    expert = protoqa_clusters(path)
    assert {q: sorted(c["count"] for c in cs.values()) for q, cs in exported.items()} == {
        q: sorted(c["count"] for c in cs.values()) for q, cs in expert.items()
    }
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text(encoding="utf-8").splitlines()[0].replace('"r1q1"', '"zz9"') + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"(?s)Nothing was imported .*zz9: no prompt of this campaign has this id"):
        call_command("import_answer_clusters", "dev", str(bad))
    with pytest.raises(CommandError, match="not a free-text campaign"):
        call_command("import_answer_clusters", free_text_or_other(researcher), str(path))


def free_text_or_other(owner) -> str:
    """A binary campaign's slug: the command refuses it."""
    from annotation import services as annotation_services

    return annotation_services.campaign_create(owner=owner, title="Binary", k=1).slug
