"""Cost of the instrument card (``/audits/<slug>/card/`` and its exports) and of its bootstrap.

Run from the repository root::

    .venv/bin/python benchmarks/instrument_card.py                 # 10,000 labels, rating and binary
    .venv/bin/python benchmarks/instrument_card.py --labels 50000 --repeat 5

A throwaway SQLite database in a temporary folder (migrated with ``manage.py migrate``); no broker:
the bootstrap task's body is called here. For each schema, one campaign of --labels labels:
--labels/k prompts (k = 5), each labeled by k of --workers workers drawn at random, ratings 0–10
(or 0/1 answers) from a crossed model (prompt effect, worker effect, noise), written in bulk as a
full campaign's rows, its statistics rebuilt, and --systems systems uploaded (their leaderboard,
scored on the request, is part of the card). Measured, wall clock (``time.perf_counter``):

- ``card`` (and ``card.md``, ``card.json``, ``card.html``): a signed-in GET through Django's test
  client (the whole request: queries, the label matrix, every engine number, the SVG charts, the
  template), the first request apart (it pays scipy's import) and the best of --repeat after it;
- ``bootstrap``: ``bootstrap_request`` then ``bootstrap_compute`` (the task's body: the label
  matrix, 1,000 crossed-bootstrap resamples of the six numbers and of Krippendorff's α, its progress
  written after every 50), and the engine alone (``noise_intervals`` + ``alpha_interval``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def seed(*, schema: str, n_labels: int, k: int, n_workers: int, n_systems: int, owner, rng):
    """A launched campaign holding ``n_labels`` labels, written in bulk as label_submit would leave them."""
    import json
    from datetime import timedelta

    import numpy as np
    from django.db import transaction
    from django.utils import timezone

    from annotation import services
    from annotation.models import Label, Lease, Participation, Prompt, Slot
    from audits.services import stats_rebuild
    from audits.services.systems import system_save

    n_prompts = n_labels // k
    fields = {"k": k}
    if schema == "rating":
        fields.update(schema="rating", scale_min=0, scale_max=10, binarization={str(v): int(v >= 5) for v in range(11)})
    campaign = services.campaign_create(owner=owner, title=f"Card benchmark {schema}", **fields)
    data = "".join(json.dumps({"id": f"p{i}", "text": f"Prompt {i}"}) + "\n" for i in range(n_prompts)).encode()
    services.prompts_import(campaign=campaign, data=data, filename="bench.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    workers = [
        services.worker_get_or_create(channel="bench", external_id=f"{campaign.pk}-{i}") for i in range(n_workers)
    ]
    prompt_effect, worker_effect = rng.normal(0, 2.0, n_prompts), rng.normal(0, 0.8, n_workers)
    slots = list(Slot.objects.filter(campaign=campaign).order_by("prompt_id", "index"))
    order = {pk: i for i, pk in enumerate(sorted({s.prompt_id for s in slots}))}
    chosen = {p: rng.choice(n_workers, k, replace=False) for p in order}
    now = timezone.now()
    with transaction.atomic():
        leases = Lease.objects.bulk_create(
            [
                Lease(
                    campaign=campaign,
                    prompt_id=s.prompt_id,
                    worker=workers[chosen[s.prompt_id][s.index]],
                    slot=s,
                    status=Lease.Status.SUBMITTED,
                    created_at=now,
                    expires_at=now + timedelta(minutes=10),
                )
                for s in slots
            ],
            batch_size=2000,
        )
        labels = []
        for s, lease in zip(slots, leases):
            w = chosen[s.prompt_id][s.index]
            latent = prompt_effect[order[s.prompt_id]] + worker_effect[w] + rng.normal(0, 1.5)
            value = int(np.clip(np.rint(5 + latent), 0, 10)) if schema == "rating" else int(latent > 0)
            labels.append(
                Label(
                    campaign=campaign,
                    prompt_id=s.prompt_id,
                    worker=workers[w],
                    lease=lease,
                    slot=s,
                    value=value,
                    client_token=f"b{lease.pk}",
                    leased_at=now,
                    created_at=now,
                )
            )
            s.lease, s.filled = lease, True
        Label.objects.bulk_create(labels, batch_size=2000)
        Slot.objects.bulk_update(slots, ["lease", "filled"], batch_size=2000)
        Prompt.objects.filter(campaign=campaign).update(n_labels=k)
        per_worker = np.bincount([w for ws in chosen.values() for w in ws], minlength=n_workers)
        Participation.objects.bulk_create(
            [Participation(campaign=campaign, worker=workers[i], n_labels=int(per_worker[i])) for i in range(n_workers)]
        )
    stats_rebuild(campaign_id=campaign.pk)
    for number in range(n_systems):  # graded scores (rating) or answers (binary), noisier system after system
        guess = prompt_effect + rng.normal(0, 1.0 + number, n_prompts)
        predictions = {f"p{i}": float(g) if schema == "rating" else int(g > 0) for i, g in enumerate(guess)}
        system_save(campaign=campaign, name=f"system-{number + 1}", predictions=predictions, by=owner)
    return campaign


def timed(call) -> tuple[float, object]:
    started = time.perf_counter()
    out = call()
    return time.perf_counter() - started, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--systems", type=int, default=2, help="systems uploaded (the card shows their leaderboard)")
    parser.add_argument("--repeat", type=int, default=3, help="timed requests after the first (best is reported)")
    parser.add_argument("--schemas", nargs="+", default=["rating", "binary"], choices=["rating", "binary"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-card-bench-") as tmp:
        env = {"CHORUS_VAR_DIR": tmp, "CHORUS_SQLITE_PATH": str(Path(tmp) / "bench.sqlite3")}
        os.environ.update(env)
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
            os.environ.pop(name, None)
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=os.environ, check=True)
        run(args)


def run(args) -> None:
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from audits.engine.intervals import alpha_interval, noise_intervals
    from audits.selectors import campaign_label_matrix
    from audits.selectors.card import card_alpha_options
    from audits.services import bootstrap_compute, bootstrap_request
    from audits.tasks import bootstrap_task

    bootstrap_task.apply_async = lambda *a, **kw: None  # no broker: the task's body runs below, timed
    setup_test_environment()
    owner = get_user_model().objects.create_user(username="bench-owner", password="bench-pass-phrase-1")
    client = Client()
    client.force_login(owner)
    rng = np.random.default_rng(0)
    print(f"| schema | labels | prompts | workers | request | first (s) | best of {args.repeat} (s) |")
    print("|---|---|---|---|---|---|---|", flush=True)
    results = []
    for schema in args.schemas:
        campaign = seed(
            schema=schema,
            n_labels=args.labels,
            k=5,
            n_workers=args.workers,
            n_systems=args.systems,
            owner=owner,
            rng=rng,
        )
        size = f"| {schema} | {args.labels:,} | {args.labels // 5:,} | {args.workers}"
        for name, url in (
            ("card", reverse("audit_card", args=[campaign.slug])),
            *(
                (f"card.{fmt}", reverse("audit_card_export", args=[campaign.slug, fmt]))
                for fmt in ("md", "json", "html")
            ),
        ):
            first, response = timed(partial(client.get, url))
            assert response.status_code == 200, (url, response.status_code)
            best = min(timed(partial(client.get, url))[0] for _ in range(args.repeat))
            print(f"{size} | {name} | {first:.2f} | {best:.2f} |")
        run_, _ = bootstrap_request(campaign=campaign, by=owner)
        seconds, done = timed(partial(bootstrap_compute, run_id=run_.pk))
        assert done.status == "done", done.error
        matrix, _ = campaign_label_matrix(campaign=campaign)
        options = {"n_resamples": 1000, "seed": 0}
        started = time.perf_counter()
        noise_intervals(matrix, **options)
        alpha_interval(matrix, **options, **card_alpha_options(campaign, matrix))
        engine = time.perf_counter() - started
        results.append((schema, seconds, engine, done.data["alpha"]["interval"]))
    print()
    print("| schema | bootstrap_compute, 1,000 resamples (s) | engine alone (s) | α interval |")
    print("|---|---|---|---|")
    for schema, seconds, engine, interval in results:
        print(f"| {schema} | {seconds:.2f} | {engine:.2f} | {interval[0]:.3f} – {interval[1]:.3f} |")


if __name__ == "__main__":
    main()
