"""Dashboard feed bytes: what an open audit dashboard downloads while labels arrive at 200 labels/s, polled
as the page did before (the whole ``data.json`` every 2 s, with If-None-Match) and as it does now (the
delta feed, ``data.json?since=``), in one run on the same labels.

One command::

    .venv/bin/python benchmarks/dashboard_bytes.py                    # 60 s at 200 labels/s, 40 workers
    .venv/bin/python benchmarks/dashboard_bytes.py --seconds 30 --rate 100 --workers 20

A throwaway SQLite database (migrated with ``manage.py migrate``) in a temporary folder, in this process.
Time is simulated: ``django.utils.timezone.now`` is a clock the benchmark moves, so each 2 s poll sees what
2 s of labels at --rate leave however long the machine takes to write them, and the quick history's
thinning (one snapshot per ``HISTORY_RESOLUTION`` window) runs on that clock.

* One binary campaign (k = 5) with enough prompts, --workers workers whose labels are written as
  ``label_submit`` leaves them (``Stream``). Before the measured minute, --history quick snapshots one window
  apart stand for the collection so far (the series the dashboard draws is at its 300-point cap), and
  a first quick and full audit run.
* Each 2 s of simulated time: rate × 2 labels, then the quick audit (``audit_refresh``, as the debounced
  task does within that time) and the full audit when ``full_audit_due`` says so; then each client polls
  once through Django's test client (the view, its ETag and JSON encoding; no network).
* ``before``: ``data.json?have_full=…`` with If-None-Match, as dashboard.js polled before this change.
  ``after``: ``data.json?have_full=…&since=…`` with If-None-Match, merged as dashboard.js merges it;
  after the run the merged feed is checked against the whole feed (they must be equal).
* Then an idle minute (no labels) and a hidden minute (the page in a background tab: the new page does
  not poll; the old one polled as if seen).

Bytes are response bodies (no compression: Chorus serves JSON uncompressed), per minute of dashboard.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

POLL_SECONDS = 2


class Clock:
    """The simulated ``timezone.now``: a start and the seconds the benchmark has moved it on."""

    def __init__(self, start):
        self.start, self.elapsed = start, 0.0

    def __call__(self):
        return self.start + timedelta(seconds=self.elapsed)


class Dashboard:
    """One open dashboard: polls as the page does (``delta``: the new page, else the old one), counts bytes."""

    def __init__(self, client, url: str, *, delta: bool):
        self.client, self.url, self.delta = client, url, delta
        self.etag, self.since, self.have_full, self.feed = None, "", -1, {}
        self.bytes = self.requests = self.not_modified = 0

    def poll(self) -> None:
        params = {"have_full": self.have_full}
        if self.delta:
            params["since"] = self.since
        headers = {"HTTP_IF_NONE_MATCH": self.etag} if self.etag else {}
        response = self.client.get(self.url, params, **headers)
        self.requests += 1
        self.bytes += len(response.content)
        if response.status_code == 304:
            self.not_modified += 1
            return
        assert response.status_code == 200, response.status_code
        self.etag = response["ETag"]
        body = response.json()
        if self.delta:  # as dashboard.js merge()
            self.feed.update(body["changed"])
            tail = body.get("history_tail")
            if tail:
                self.feed["history"] = self.feed["history"][: tail["keep"]] + tail["points"]
            for name, patch in body.get("row_patches", {}).items():
                held = {row[patch["key"]]: row for row in self.feed[name]}
                self.feed[name] = [{**held.get(i, {}), **patch["rows"].get(i, {})} for i in patch["order"]]
            self.since = body["since"]
        else:
            self.feed = body
        full = self.feed.get("full")
        if full and full.get("report"):  # as dashboard.js drawFull(): the report is kept, its watermark sent
            self.have_full = full["watermark"]


def seed(args, clock):
    """The campaign, its workers, labels before the measured minute, a history of quick snapshots."""
    from django.contrib.auth import get_user_model

    from annotation import services
    from annotation.services.accounts import researcher_set
    from audits import services as audit_services
    from audits.models import AuditSnapshot

    owner = get_user_model().objects.create_user("bench-owner", password="x")
    researcher_set(user=owner)
    labels_needed = int(args.rate * (args.seconds + POLL_SECONDS) + args.warmup)
    n_prompts = labels_needed // 5 + 5
    campaign = services.campaign_create(owner=owner, title="Dashboard bytes benchmark", k=5)
    lines = (json.dumps({"id": f"p{i}", "text": f"Statement {i}.", "gold": str(i % 2)}) for i in range(n_prompts))
    services.prompts_import(campaign=campaign, data="\n".join(lines).encode(), filename="bench.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    workers = [services.worker_get_or_create(channel="bench", external_id=f"w{i}") for i in range(args.workers)]
    stream = Stream(campaign, workers)
    stream.label(args.warmup)
    audit_services.audit_refresh(campaign_id=campaign.pk)
    quick = AuditSnapshot.objects.get(campaign=campaign, kind="quick")
    window = 10  # HISTORY_RESOLUTION's default: one snapshot per 10 s
    AuditSnapshot.objects.bulk_create(
        AuditSnapshot(
            campaign=campaign,
            kind="quick",
            watermark=1 + i * (args.warmup - 2) // args.history,
            data=quick.data,
            computed_at=clock() - timedelta(seconds=window * (args.history - i)),
            duration_ms=quick.duration_ms,
            cpu_ms=quick.cpu_ms,
        )
        for i in range(args.history)
    )
    audit_services.audit_full(campaign_id=campaign.pk)
    return owner, campaign, stream


class Stream:
    """Labels as ``label_submit`` leaves them, written a poll's worth at a time: a lease per slot made
    beforehand (k different workers per prompt, in turn), then, in one transaction per batch, the labels,
    their leases submitted, slots filled, counts moved and each label marked for the audit's fold by
    the real ``label_stats_add`` (as benchmarks/live_audit.py streams). A value agrees with the
    prompt's gold four times in five. Through ``lease_acquire`` / ``label_submit`` themselves a label
    costs tens of milliseconds here: 12,000 of them would make the run last many minutes."""

    def __init__(self, campaign, workers):
        from django.utils import timezone

        from annotation.models import Lease, Participation, Slot

        now = timezone.now()
        slots = Slot.objects.filter(campaign=campaign).order_by("prompt_id", "index").values_list("pk", "prompt_id")
        Lease.objects.bulk_create(
            Lease(
                campaign=campaign,
                prompt_id=prompt_id,
                worker=workers[i % len(workers)],
                slot_id=slot_id,
                created_at=now,
                expires_at=now + timedelta(days=1),
            )
            for i, (slot_id, prompt_id) in enumerate(list(slots))
        )
        Participation.objects.bulk_create(Participation(campaign=campaign, worker=w) for w in workers)
        self.campaign = campaign
        self.leases = list(
            Lease.objects.filter(campaign=campaign)
            .order_by("prompt_id", "slot__index")
            .values_list("pk", "prompt_id", "worker_id", "slot_id", "created_at")
        )
        self.done = 0

    def label(self, n: int) -> None:
        from django.db import transaction
        from django.db.models import F
        from django.utils import timezone

        from annotation.models import Label, Lease, Participation, Prompt, Slot
        from audits.services import label_stats_add

        chunk, self.done = self.leases[self.done : self.done + n], self.done + n
        assert len(chunk) == n, "the campaign has no prompt left for the stream"
        with transaction.atomic():
            now = timezone.now()
            labels = Label.objects.bulk_create(
                Label(
                    campaign=self.campaign,
                    prompt_id=p,
                    worker_id=w,
                    lease_id=lease,
                    slot_id=slot,
                    value=(p + (lease % 5 == 0)) % 2,
                    client_token=f"b{lease}",
                    leased_at=at,
                    created_at=now,
                )
                for lease, p, w, slot, at in chunk
            )
            Lease.objects.filter(pk__in=[x[0] for x in chunk]).update(status=Lease.Status.SUBMITTED)
            Slot.objects.filter(pk__in=[x[3] for x in chunk]).update(filled=True)
            for label in sorted(labels, key=lambda x: x.worker_id):
                Prompt.objects.filter(pk=label.prompt_id).update(n_labels=F("n_labels") + 1)
                Participation.objects.filter(campaign=self.campaign, worker_id=label.worker_id).update(
                    n_labels=F("n_labels") + 1
                )
                label_stats_add(label=label)


def run(args) -> None:
    import django

    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    django.setup()
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from audits import selectors
    from audits import services as audit_services
    from audits.tasks import audit_full_task, audit_refresh_task, ground_truths_task

    clock = Clock(timezone.now())
    with (
        mock.patch("django.utils.timezone.now", clock),
        # no broker: the benchmark runs the audits itself, when the tasks would
        mock.patch.object(audit_refresh_task, "apply_async"),
        mock.patch.object(audit_full_task, "apply_async"),
        mock.patch.object(ground_truths_task, "apply_async"),
    ):
        started = time.perf_counter()
        owner, campaign, stream = seed(args, clock)
        print(f"seeded in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        client = Client(HTTP_HOST="localhost")
        client.force_login(owner)
        url = reverse("audit_dashboard_data", args=[campaign.slug])
        before, after = Dashboard(client, url, delta=False), Dashboard(client, url, delta=True)
        for dashboard in (before, after):  # the page opens: its first answer is not part of the minute
            dashboard.poll()
            dashboard.bytes = dashboard.requests = dashboard.not_modified = 0

        def minute(labels_per_poll: int, pollers) -> dict:
            counts = {id(d): (d.bytes, d.requests, d.not_modified) for d in (before, after)}
            fulls = 0
            for _ in range(round(args.seconds / POLL_SECONDS)):
                clock.elapsed += POLL_SECONDS
                if labels_per_poll:
                    stream.label(labels_per_poll)
                    audit_services.audit_refresh(campaign_id=campaign.pk)
                    n = selectors.campaign_totals(campaign_id=campaign.pk).n_labels
                    if selectors.full_audit_due(campaign.pk, n, timezone.now()):
                        audit_services.audit_full(campaign_id=campaign.pk)
                        fulls += 1
                for dashboard in pollers:
                    dashboard.poll()
            scale = 60 / args.seconds
            out = {"full audits": fulls}
            for name, d in (("before", before), ("after", after)):
                b, r, nm = (x - y for x, y in zip((d.bytes, d.requests, d.not_modified), counts[id(d)]))
                out[name] = (b * scale, r * scale, nm * scale)
            return out

        started = time.perf_counter()
        streaming = minute(round(args.rate * POLL_SECONDS), (before, after))
        print(f"streamed in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        idle = minute(0, (before, after))
        hidden = minute(0, (before,))  # the new page polls nothing while hidden
        whole = Dashboard(client, url, delta=False)
        whole.have_full = -1
        whole.poll()
        sizes = ", ".join(f"{k} {len(json.dumps(v)) / 1000:.1f}" for k, v in whole.feed.items())
        check(whole.feed, after.feed)

    print(
        f"\n{args.rate:g} labels/s for {args.seconds:g} s (simulated), {args.workers} workers, "
        f"{campaign.labels.count():,} labels at the end, history of {len(whole.feed['history'])} points, "
        f"{len(whole.feed['workers'])} worker rows; full audits during the stream: {streaming['full audits']}"
    )
    print(f"the whole feed at the end, by piece (KB, the full audit's report included): {sizes}")
    print("| dashboard | protocol | KB per minute | requests per minute | of which 304 |")
    print("|---|---|---|---|---|")
    for label, result in (("open, labels arriving", streaming), ("open, no labels", idle), ("hidden tab", hidden)):
        for name in ("before", "after"):
            b, r, nm = result[name]
            print(f"| {label} | {name} | {b / 1000:,.1f} | {r:.0f} | {nm:.0f} |")


def check(whole: dict, merged: dict) -> None:
    """The delta client's feed, merged piece by piece, is the whole feed (but for the clock's fields)."""
    for feed in (whole, merged):
        feed.pop("now", None)
        feed["status"].pop("age_seconds", None)
        if feed.get("full"):
            feed["full"].pop("report", None)
            feed["full"].pop("agreement", None)
            feed["full"].pop("agreement_note", None)
    assert whole == merged, "the delta feed, merged, differs from the whole feed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200, help="labels per second")
    parser.add_argument("--seconds", type=float, default=60, help="simulated seconds measured (per scenario)")
    parser.add_argument("--workers", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=2000, help="labels before the measured minute")
    parser.add_argument("--history", type=int, default=400, help="quick snapshots before the measured minute")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-dashboard-bench-") as tmp:
        os.environ.update(CHORUS_VAR_DIR=tmp, CHORUS_SQLITE_PATH=str(Path(tmp) / "bench.sqlite3"))
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
            os.environ.pop(name, None)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=os.environ, check=True)
        run(args)


if __name__ == "__main__":
    main()
