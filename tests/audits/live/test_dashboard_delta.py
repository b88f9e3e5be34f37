"""The dashboard feed's delta protocol (``data.json?since=``): only the pieces that changed, the history as
a tail, 304 or an empty change set when nothing moved; the whole feed without the parameter, as before;
the workers' standing (blocked, excluded, flagged) and the pk their worker page is linked by."""

import pytest
from django.urls import reverse
from django.utils.timezone import now

from annotation.models import Participation, Worker
from annotation.services.quality import worker_act
from audits import services as audit_services
from audits.models import AuditSnapshot
from audits.selectors.feed import DELTA_PIECES, snapshot_history
from tests.audits.live.labeling import label_one_each as _labels

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def audited(make_campaign):
    campaign = make_campaign(4, k=3)
    _labels(campaign, [1, 0, 1, 1, 1, 0, 0, 1])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    audit_services.audit_full(campaign_id=campaign.pk)
    return campaign


@pytest.fixture
def feed(client, audited, researcher):
    client.force_login(researcher)
    url = reverse("audit_dashboard_data", args=[audited.slug])

    def get(**params):
        headers = {"HTTP_IF_NONE_MATCH": params.pop("etag")} if "etag" in params else {}
        return client.get(url, params, **headers)

    return get


def test_without_since_the_feed_is_whole_and_keeps_its_keys(feed):
    d = feed().json()
    assert set(d) == {"now", *DELTA_PIECES}
    assert d["full"]["report"] and d["history"] and d["workers"]


def test_the_first_delta_has_every_piece_and_an_unchanged_feed_answers_304_or_nothing(feed, audited):
    first = feed(since="", have_full=-1)
    d = first.json()
    assert first.status_code == 200 and set(d["changed"]) == set(DELTA_PIECES) and "history_tail" not in d
    whole = feed().json()
    for d_ in (d["changed"], whole):
        d_["status"].pop("age_seconds")  # the clock's
    assert d["changed"] == {k: v for k, v in whole.items() if k != "now"}  # the same numbers as whole
    assert first["ETag"] != feed()["ETag"]  # a delta and a whole feed are different bodies
    again = feed(since=d["since"], have_full=-1, etag=first["ETag"])
    assert again.status_code == 304 and again.content == b""
    # without If-None-Match: an empty change set, a few hundred bytes, but the full piece loses its report
    quiet = feed(since=d["since"], have_full=-1)
    assert quiet.status_code == 200 and quiet.json()["changed"] == {} and len(quiet.content) < 600


def _merged(held: dict, delta: dict) -> dict:
    """A delta merged into the feed a client holds, as dashboard.js merges it."""
    feed = {**held, **delta["changed"], "now": delta["now"]}
    if "history_tail" in delta:
        tail = delta["history_tail"]
        feed["history"] = feed["history"][: tail["keep"]] + tail["points"]
    for name, patch in delta.get("row_patches", {}).items():
        rows = {row[patch["key"]]: row for row in feed[name]}
        feed[name] = [{**rows.get(i, {}), **patch["rows"].get(i, {})} for i in patch["order"]]
    return feed


def test_a_new_label_sends_the_status_then_the_snapshot_s_pieces_with_the_history_as_a_tail(feed, audited):
    first = feed(since="", have_full=8).json()
    held = {**first["changed"], "now": first["now"]}
    _labels(audited, [1])
    behind = feed(since=first["since"], have_full=8).json()
    # the label waits for the quick run's fold: only the status moves, one label behind
    assert set(behind["changed"]) == {"status"} and behind["changed"]["status"]["behind"] == 1
    assert "row_patches" not in behind
    held = _merged(held, behind)
    audit_services.audit_refresh(campaign_id=audited.pk)
    fresh = feed(since=behind["since"], have_full=8).json()
    assert {"status", "quick"} <= set(fresh["changed"]) and "history" not in fresh["changed"]
    patch = fresh["row_patches"]["workers"]  # the new worker's row, as a patch: the others are held
    assert len(patch["order"]) == 9 and patch["rows"][patch["order"][-1]]["labels"] == 1
    assert "full" not in fresh["changed"] and "numbers" not in fresh["changed"]
    assert fresh["history_tail"]["keep"] == 0 and [p["watermark"] for p in fresh["history_tail"]["points"]] == [9]
    assert fresh["changed"]["quick"]["watermark"] == 9
    held = _merged(held, fresh)
    whole = feed(have_full=8).json()
    for d in (held, whole):
        d.pop("now")
        d["status"].pop("age_seconds")
    assert held == whole  # the client's merged feed is the whole feed


def test_without_the_held_rows_in_the_cache_the_workers_come_whole(feed, audited):
    from django.core.cache import cache

    first = feed(since="", have_full=8).json()
    _labels(audited, [1])
    audit_services.audit_refresh(campaign_id=audited.pk)
    cache.clear()
    delta = feed(since=first["since"], have_full=8).json()
    assert "row_patches" not in delta and len(delta["changed"]["workers"]) == 9


def _snapshot(campaign, watermark):
    return AuditSnapshot.objects.create(
        campaign=campaign, kind="quick", watermark=watermark, data={}, duration_ms=1, cpu_ms=1, computed_at=now()
    )


def test_a_history_that_lost_a_point_the_client_holds_is_sent_whole(feed, audited):
    for watermark in (20, 30, 40):
        _snapshot(audited, watermark)
    d = feed(since="", have_full=8).json()
    _snapshot(audited, 50)
    tail = feed(since=d["since"], have_full=8).json()["history_tail"]
    # the token vouches for all but the last two points: they are sent again, with the new one
    assert tail["keep"] == 2 and [p["watermark"] for p in tail["points"]] == [30, 40, 50]
    AuditSnapshot.objects.filter(campaign=audited, kind="quick", watermark=20).delete()  # as a rebuild does
    fresh = feed(since=d["since"], have_full=8).json()
    assert "history_tail" not in fresh and [p["watermark"] for p in fresh["changed"]["history"]] == [8, 30, 40, 50]


def test_a_malformed_token_is_refused_naming_since(feed):
    tag = feed(since="")["ETag"]
    for bad in ("nonsense", "history:zz", "unknown:0123456789"):
        for response in (feed(since=bad), feed(since=bad, etag=tag)):  # even when the tag still matches
            assert response.status_code == 400 and response.json()["error"].startswith("since:"), bad


def test_the_history_keeps_its_points_as_snapshots_arrive_past_its_cap(audited):
    """Thinned by a power-of-two stride, a longer history keeps the shorter one's points but its last."""
    for i in range(12):
        _snapshot(audited, 100 + i)
    before = snapshot_history(campaign=audited, max_points=6)
    _snapshot(audited, 200)
    after = snapshot_history(campaign=audited, max_points=6)
    assert len(before) <= 6 and len(after) <= 6
    assert after[: len(before) - 1] == before[:-1] and after[-1]["watermark"] == 200
    assert before[0]["watermark"] == 8  # the first snapshot is always there


def test_workers_carry_their_standing_and_pk(feed, audited, researcher):
    rows = {w["worker"]: w for w in feed().json()["workers"]}
    first, second, third = (Worker.objects.get(channel="sim", external_id=w.split(":", 1)[1]) for w in list(rows)[:3])
    worker_act(kind="block", campaign=audited, worker=first, by=researcher, reason="spam")
    worker_act(kind="flag", campaign=audited, worker=second, by=researcher, reason="answers too fast")
    worker_act(kind="exclude", campaign=audited, worker=third, by=researcher, reason="a bot")
    rows = {w["worker"]: w for w in feed().json()["workers"]}
    by_pk = {w["worker_pk"]: w for w in rows.values()}
    assert set(by_pk) == set(Participation.objects.filter(campaign=audited).values_list("worker_id", flat=True))
    assert by_pk[first.pk]["blocked"] and not by_pk[first.pk]["flagged"]
    assert by_pk[second.pk]["flagged"] and by_pk[second.pk]["flag_reason"] == "answers too fast"
    assert by_pk[third.pk]["excluded_now"] and not by_pk[third.pk]["blocked"]
    assert sum(w["blocked"] or w["flagged"] or w["excluded_now"] for w in rows.values()) == 3
