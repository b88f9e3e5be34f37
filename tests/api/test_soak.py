"""The fault-injection soak (benchmarks/soak.py), short: real gunicorn, Celery and database processes,
killed and restarted while simulated workers label over HTTP; and the embedded default (SQLite, its
SQLite broker, no Redis) through a ComVE-size campaign."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.services


def soak(*args: str, timeout: float) -> tuple[str, dict]:
    """Run the soak; its output, and its counts and checks by name."""
    result = subprocess.run(
        [sys.executable, "benchmarks/soak.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            **os.environ,
            "CHORUS_TEST_POSTGRES_URL": os.environ.get(
                "CHORUS_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
            ),
        },
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "violations found: 0" in output
    counts = {name: int(n) for name, n in re.findall(r"^  ([^:\n]+): (\d+)$", output, re.MULTILINE)}
    return output, counts


@pytest.mark.parametrize("stack", ["postgres-redis", "embedded"])
def test_nothing_is_lost_or_doubled_under_faults(stack):
    output, count = soak(
        "--seconds",
        "20",
        "--threads",
        "8",
        "--identities",
        "24",
        "--prompts",
        "120",
        "--catch-up",
        "60",
        *(["--embedded"] if stack == "embedded" else []),
        timeout=400,
    )
    assert count.get("labels acknowledged", 0) > 0, output
    assert count["faults injected"] >= 3, output  # one every 1.5-4 s, plus the restarts' own time
    assert count["labels exported"] == count["counted labels"] == count["labels stored"] >= count["labels acknowledged"]
    assert count["audit watermark"] == count["counted labels"]
    assert count["invariant violations"] == 0


def test_the_embedded_default_audits_every_label_of_a_comve_size_campaign():
    """2,000 prompts × k = 5 by 244 workers over HTTP, as the study's ComVE campaign: the embedded
    default's Celery worker stays up throughout (the soak counts any exit of its own as a violation)
    and the newest snapshot covers all 10,000 labels."""
    output, count = soak(
        "--embedded",
        "--no-faults",
        "--seconds",
        "2400",
        "--threads",
        "12",
        "--identities",
        "244",
        "--prompts",
        "2000",
        "--k",
        "5",
        "--catch-up",
        "60",
        timeout=2700,
    )
    assert count["counted labels"] == count["labels exported"] == count["audit watermark"] == 10_000, output
    assert count["labels stored"] == 10_000
    assert count["invariant violations"] == 0 and "faults injected" not in count
