"""Management commands: import_prompts, export_labels, and the seeding half of demo."""

import io
import json
import socket
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command, execute_from_command_line
from django.core.management.base import CommandError

from annotation import demo, selectors, services
from annotation.crowd import Crowd, Personality
from annotation.management.commands import demo as demo_command
from annotation.models import Campaign, Label, Lease, Prompt, Slot
from tests.helpers import import_counts, label_all, prompts_jsonl

pytestmark = pytest.mark.django_db


# --- import_prompts ---------------------------------------------------------------------------------


@pytest.mark.both_dbs
def test_import_prompts_imports_a_file(make_campaign, tmp_path):
    campaign = make_campaign(0, launch=False, k=2)
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(prompts_jsonl(4))
    out = io.StringIO()
    call_command("import_prompts", campaign.slug, str(path), stdout=out)
    assert f"Imported 4 prompts into {campaign.slug} from {path}." in out.getvalue()
    assert import_counts() == (4, 8, 1, 0)


@pytest.mark.both_dbs
def test_import_prompts_lists_every_bad_line_and_imports_nothing(make_campaign, tmp_path):
    campaign = make_campaign(1, launch=False)
    path = tmp_path / "bad.csv"
    path.write_bytes(b"id,text,gold\nx1,fine,1\nx2,,1\nx3,odd,5\n")
    before = import_counts()
    with pytest.raises(CommandError) as refused:
        call_command("import_prompts", campaign.slug, str(path))
    assert str(refused.value) == (
        f"Nothing was imported from {path}:\n"
        "  line 3: empty text for id 'x2'\n"
        "  line 4: bad gold value: The label must be one of 0, 1; got 5."
    )
    assert import_counts() == before


def test_import_prompts_exits_non_zero_from_the_command_line(make_campaign, tmp_path, capsys):
    campaign = make_campaign(1, launch=False)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"{broken\n")
    # run_from_argv closes the database connections when it ends, which would end the test's transaction.
    keep_connections = mock.patch("django.core.management.base.connections.close_all")
    with keep_connections, pytest.raises(SystemExit) as exited:
        execute_from_command_line(["manage.py", "import_prompts", campaign.slug, str(path)])
    assert exited.value.code == 1
    assert "line 1: not valid JSON" in capsys.readouterr().err
    with keep_connections, pytest.raises(SystemExit) as exited:
        execute_from_command_line(["manage.py", "import_prompts", "no-such-campaign", str(path)])
    assert exited.value.code == 1
    assert "No campaign with slug 'no-such-campaign'." in capsys.readouterr().err


def test_import_prompts_reports_a_missing_file(make_campaign, tmp_path):
    campaign = make_campaign(0, launch=False)
    with pytest.raises(CommandError, match="Cannot read .*missing.csv: No such file or directory"):
        call_command("import_prompts", campaign.slug, str(tmp_path / "missing.csv"))


# --- export_labels ----------------------------------------------------------------------------------


@pytest.fixture
def labeled(make_campaign, make_worker):
    campaign = make_campaign(2, k=1)
    worker = make_worker()
    assert label_all(campaign, worker) == 2
    return campaign, worker


def test_export_labels_writes_csv_to_stdout(labeled):
    campaign, worker = labeled
    out = io.StringIO()
    call_command("export_labels", campaign.slug, stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "worker,prompt,value,gold,group,created_at,leased_at,time_spent_s,campaign,label_id,prompt_text,control,"
        "excluded,final_k,k_rule"
    )
    assert len(lines) == 3 and all(line.startswith(f"native:{worker.external_id},p") for line in lines[1:])


def test_export_labels_writes_pseudonymised_jsonl_to_a_file(labeled, tmp_path):
    campaign, worker = labeled
    path = tmp_path / "labels.jsonl"
    call_command("export_labels", campaign.slug, "--format", "jsonl", "--output", str(path), "--pseudonymize")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 2 and {row["prompt"] for row in rows} == {"p0", "p1"}
    assert len({row["worker"] for row in rows}) == 1 and rows[0]["worker"].startswith("w-")
    assert worker.external_id not in {row["worker"] for row in rows}
    assert sorted(row["label_id"] for row in rows) == sorted(Label.objects.values_list("id", flat=True))


def test_export_labels_refuses_an_unknown_campaign():
    with pytest.raises(CommandError, match="No campaign with slug 'nope'."):
        call_command("export_labels", "nope")


# --- demo (the seeding half; the processes are exercised by running it) -----------------------------


def test_demo_seeds_a_launched_campaign_and_an_account_idempotently():
    user, created = demo.demo_account()
    assert created and user.is_superuser and user.check_password(demo.DEMO_PASSWORD)
    campaign, new = demo.demo_campaign(user)
    assert new and campaign.status == Campaign.Status.LIVE and campaign.k == 5
    prompts = Prompt.objects.filter(campaign=campaign)
    assert prompts.count() == len(demo.DEMO_PROMPTS) == 60
    assert set(prompts.values_list("gold", flat=True)) == {0, 1}
    assert prompts.filter(gold=1).count() == 30
    assert campaign.label_schema.choices[0].text == "Plausible" and campaign.label_schema.choices[0].key == "p"
    assert demo.demo_truth()[prompts.get(external_id="s01").text] == 1

    user.set_password("changed")
    user.save()
    again, created_again = demo.demo_account()
    assert (again.pk, created_again) == (user.pk, False) and again.check_password(demo.DEMO_PASSWORD)
    same, new_again = demo.demo_campaign(again)
    assert (same.pk, new_again) == (campaign.pk, False)
    assert get_user_model().objects.count() == 1 and Campaign.objects.count() == 1


def test_demo_continues_a_paused_campaign_and_starts_a_new_one_when_full(monkeypatch):
    user, _ = demo.demo_account()
    campaign, _ = demo.demo_campaign(user)
    services.campaign_transition(campaign=campaign, action="pause")
    resumed, new = demo.demo_campaign(user)
    assert (resumed.pk, new, resumed.status) == (campaign.pk, False, Campaign.Status.LIVE)

    full = selectors.Progress(n_prompts=60, k=5, labels=300, prompts_complete=60)
    monkeypatch.setattr(demo.selectors, "campaign_progress", lambda campaign: full)
    same, new = demo.demo_campaign(user)
    assert (same.pk, new) == (campaign.pk, False)  # full, but generated prompts are still to come
    monkeypatch.setattr(demo, "generated_prompts", lambda: [])
    fresh, new = demo.demo_campaign(user)
    assert new and fresh.pk != campaign.pk and fresh.status == Campaign.Status.LIVE
    assert fresh.slug != campaign.slug


def test_the_demo_refills_its_campaign_before_it_runs_out(monkeypatch):
    user, _ = demo.demo_account()
    campaign, _ = demo.demo_campaign(user)
    assert demo.demo_refill(campaign, below=300) == 0  # 300 labels wanted, none given: no need yet
    assert demo.demo_refill(campaign, below=301) == demo.REFILL_BATCH
    assert demo.demo_refill(campaign, below=301) == 0  # the batch's 200 labels are wanted now
    generated = demo.generated_prompts()
    imported = Prompt.objects.filter(campaign=campaign, external_id__startswith="g").order_by("external_id")
    assert [(p.external_id, p.text, p.gold) for p in imported] == [
        (g.id, g.text, g.gold) for g in generated[: demo.REFILL_BATCH]
    ]
    truth = demo.demo_truth()
    assert all(truth[p.text] == p.gold for p in imported)
    assert Slot.objects.filter(campaign=campaign).count() == (60 + demo.REFILL_BATCH) * demo.DEMO_K

    # Every generated statement has one clear answer, and there are hours of them.
    assert len(generated) > 2500 and len({g.text for g in generated}) == len(generated)
    assert 0.4 < sum(g.gold for g in generated) / len(generated) < 0.6
    assert truth["An elephant is usually heavier than a mouse."] == 1
    assert truth["A feather is usually heavier than a brick."] == 0
    assert "A brick is usually bigger than a football." not in truth  # 21 cm against 22 cm: not clear

    monkeypatch.setattr(demo, "generated_prompts", lambda: generated[: demo.REFILL_BATCH])
    assert demo.demo_refill(campaign, below=10_000) is None  # needed, but the supply is used up


def test_the_port_probe_ignores_connections_of_a_server_that_just_stopped():
    """A server that closed its side of a connection leaves it in TIME_WAIT for about a minute; the
    demo must not call the port taken then (gunicorn can listen on it: SO_REUSEADDR)."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.listen()
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    assert not demo_command.port_is_free(port)  # listening: taken
    accepted.close()  # the server closes first: its side goes to TIME_WAIT
    server.close()
    client.close()
    with socket.socket() as naive:  # what the probe did before: refused while TIME_WAIT lasts
        with pytest.raises(OSError):
            naive.bind(("127.0.0.1", port))
    assert demo_command.port_is_free(port)


# --- the simulated crowd, over real HTTP --------------------------------------------------------------

SURE = Personality("sure", accuracy=1.0, volume=None, pause=(0, 0))
STUBBORN = Personality("stubborn", accuracy=0.0, volume=None, pause=(0, 0), same_answer=True)


@pytest.mark.django_db(transaction=True)
def test_the_simulated_crowd_labels_through_the_worker_pages(live_server, make_campaign):
    campaign = make_campaign(6, k=2)
    truth = {prompt.text: prompt.gold for prompt in campaign.prompts.all()}
    crowd = Crowd(
        base_url=live_server.url,
        slug=campaign.slug,
        size=3,
        truth=truth,
        pause_scale=0,
        seed=7,
        personalities=(SURE, STUBBORN),
    )
    crowd.start()
    crowd.join(timeout=90)
    assert crowd.active == 0
    results = {r.username: r for r in crowd.results}
    assert {name: (r.personality, r.stopped_by, r.errors) for name, r in results.items()} == {
        "crowd-01": ("sure", "nothing_left:nothing_left", []),
        "crowd-02": ("stubborn", "nothing_left:nothing_left", []),
        "crowd-03": ("sure", "nothing_left:nothing_left", []),
    }
    labels = Label.objects.filter(campaign=campaign).select_related("worker__user", "prompt")
    assert labels.count() == 12 == sum(r.labels for r in results.values())  # every slot of 6 prompts × k=2
    for label in labels:
        username = label.worker.user.username
        assert label.value == (label.prompt.gold if username != "crowd-02" else 1)  # "True" is the first button
        assert results[username].labels == labels.filter(worker=label.worker).count()


@pytest.mark.django_db(transaction=True)
def test_a_crowd_worker_stops_at_its_volume_and_gives_its_prompt_back(live_server, make_campaign):
    campaign = make_campaign(4, k=1)
    brief = Personality("brief", accuracy=1.0, volume=2, pause=(0, 0))
    crowd = Crowd(base_url=live_server.url, slug=campaign.slug, size=1, pause_scale=0, personalities=(brief,))
    crowd.start()
    crowd.join(timeout=60)
    [result] = crowd.results
    assert (result.labels, result.stopped_by, result.errors) == (2, "volume", [])
    assert Label.objects.count() == 2
    assert sorted(Lease.objects.values_list("status", flat=True)) == ["released", "submitted", "submitted"]


@pytest.mark.django_db(transaction=True)
def test_a_replenished_crowd_replaces_the_workers_who_leave(live_server, make_campaign):
    campaign = make_campaign(6, k=2)
    brief = Personality("brief", accuracy=1.0, volume=1, pause=(0, 0))
    crowd = Crowd(base_url=live_server.url, slug=campaign.slug, size=1, pause_scale=0, personalities=(brief, SURE))
    crowd.start()
    crowd.join(timeout=60)
    [(leaver, newcomer)] = crowd.replenish()
    assert (leaver.username, leaver.labels, leaver.stopped_by, newcomer) == ("crowd-01", 1, "volume", "crowd-02")
    crowd.join(timeout=60)
    # The newcomer has the leaver's personality (brief, not the next in the cycle): the mix stays.
    assert [(r.username, r.personality, r.labels) for r in crowd.results] == [
        ("crowd-01", "brief", 1),
        ("crowd-02", "brief", 1),
    ]
    assert Label.objects.filter(campaign=campaign).values("worker").distinct().count() == 2
    crowd.stop()
    assert crowd.replenish() == []  # a stopped crowd recruits nobody
    # Newcomers sign up rather than first failing to sign in: the crowd's address, which the demo's
    # researcher shares, is charged no failed sign-in (enough of them would lock everyone there out).
    assert not [key for key in ("login-failures:addr:127.0.0.1",) if cache.get(key)]
