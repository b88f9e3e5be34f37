"""The web side of the live-audit tests, as a separate process with production settings.

Started by ``live.Submitter`` with the environment a web process would have (``REDIS_URL`` for the
cache and the broker, the test database), so ``label_submit`` and its on-commit scheduling run
exactly as in production. Reads one JSON command per line on stdin, answers one JSON line:

    {"cmd": "submit", "campaign": 3, "n": 10, "values": [0, 1]}
      -> {"ok": true, "acks": 10, "seconds": [...], "after": <epoch seconds after the last commit>}
    {"cmd": "settings"} -> {"broker": ..., "cache": ...}
    {"cmd": "ground_truths", "campaign": 3, "methods": ["majority"]} -> {"run": <GroundTruthRun id>}
"""

import itertools
import json
import os
import random
import sys
import time


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings

    from annotation import services
    from annotation.models import Campaign, Lease

    rng = random.Random(int(os.environ.get("CHORUS_SUBMITTER_SEED", "1")))
    seq = itertools.count(1)
    prefix = os.environ.get("CHORUS_SUBMITTER_PREFIX", str(os.getpid()))
    identities = []  # external ids: a test's database flush may delete the Worker rows between commands
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        try:
            if command["cmd"] == "settings":
                answer = {"broker": settings.CELERY_BROKER_URL, "cache": settings.CACHES["default"]["BACKEND"]}
            elif command["cmd"] == "submit":
                campaign = Campaign.objects.get(pk=command["campaign"])
                values = command.get("values", [0, 1])
                seconds, acks, attempts = [], 0, 0
                while acks < command["n"] and attempts < command["n"] * 5:
                    attempts += 1
                    if len(identities) < command.get("workers", 8):
                        identities.append(f"{prefix}-{next(seq)}")
                    identity = rng.choice(identities)
                    worker = services.worker_get_or_create(channel="sim", external_id=identity)
                    lease = services.lease_acquire(campaign=campaign, worker=worker)
                    if not isinstance(lease, Lease):
                        identities.remove(identity)
                        continue
                    started = time.perf_counter()
                    services.label_submit(
                        lease_id=lease.pk, worker=worker, value=rng.choice(values), client_token=f"s{lease.pk}"
                    )
                    seconds.append(time.perf_counter() - started)
                    acks += 1
                answer = {"acks": acks, "seconds": seconds, "after": time.time()}
            elif command["cmd"] == "ground_truths":
                from audits.services import ground_truths_request  # noqa: PLC0415 (after django.setup())

                run, _ = ground_truths_request(
                    campaign=Campaign.objects.get(pk=command["campaign"]), methods=command["methods"]
                )
                answer = {"run": run.pk}
            else:
                raise ValueError(f"unknown command {command['cmd']!r}")
            answer["ok"] = True
        except Exception as exc:  # report, keep serving
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
