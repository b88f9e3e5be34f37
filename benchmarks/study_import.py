"""Importing a study (``manage.py import_study``) against the offline audit (``manage.py audit``) of the same
labels file: time and peak memory, each in a process of its own.

Run from the repository root::

    .venv/bin/python benchmarks/study_import.py                    # 100,000 and 1,000,000 labels
    .venv/bin/python benchmarks/study_import.py --sizes 100000

For each size, a labels file (CSV: worker, prompt, value) of a binary study is written to a temporary
folder: prompts of k = 10 labels each from --workers workers, each worker with a bias of their own. The
import runs into a throwaway SQLite database, migrated first (``manage.py migrate``). Measured for each
command, as a child process: the wall clock, and its peak RSS (``ru_maxrss`` of the finished child, from
``os.wait4``). The issue's budget: the import's peak memory within the offline command's.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
K = 10


def labels_file(path: Path, n_labels: int, n_workers: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    bias = [rng.random() for _ in range(n_workers)]
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["worker", "prompt", "value"])
        for p in range(n_labels // K):
            for w in rng.sample(range(n_workers), K):
                out.writerow([f"w{w}", f"p{p}", int(rng.random() < bias[w])])
    return path


def timed(command: list[str], env: dict) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of ``command`` run to its end."""
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed ({status})")
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="labels per study")
    parser.add_argument("--workers", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-study-bench-") as tmp:
        env = {**os.environ, "CHORUS_VAR_DIR": tmp, "CHORUS_SQLITE_PATH": str(Path(tmp) / "bench.sqlite3")}
        env["DJANGO_SETTINGS_MODULE"] = "config.settings"
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
            env.pop(name, None)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
        script = "from django.contrib.auth.models import User; User.objects.get_or_create(username='bench')"
        subprocess.run([*manage, "shell", "-c", script], cwd=REPO, env=env, check=True)
        print(
            "| labels | offline audit (s) | its peak RSS (MiB) | import (s) | its peak RSS (MiB) | import / audit RSS |"
        )
        print("|---|---|---|---|---|---|", flush=True)
        for n in args.sizes:
            path = labels_file(Path(tmp) / f"study-{n}.csv", n, args.workers)
            audit_s, audit_mib = timed([*manage, "audit", str(path), "--sweep", "none"], env)
            command = [*manage, "import_study", str(path), "--owner", "bench", "--title", f"Bench {n}"]
            import_s, import_mib = timed(command, env)
            print(
                f"| {n:,} | {audit_s:.1f} | {audit_mib:.0f} | {import_s:.1f} | {import_mib:.0f} "
                f"| {import_mib / audit_mib:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
