"""The fault-injection soak (benchmarks/soak.py), short: real gunicorn, PostgreSQL, Redis and Celery
processes, killed and restarted while simulated workers label over HTTP."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.services
def test_nothing_is_lost_or_doubled_under_faults():
    result = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--seconds", "20", "--threads", "8", "--identities", "24",
         "--prompts", "120", "--catch-up", "60"],
        cwd=ROOT, capture_output=True, text=True, timeout=400,
        env={**os.environ, "CHORUS_TEST_POSTGRES_URL": os.environ.get(
            "CHORUS_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "violations found: 0" in output

    def count(name):
        found = re.search(rf"^  {re.escape(name)}: (\d+)$", output, re.MULTILINE)
        return int(found.group(1)) if found else 0

    assert count("labels acknowledged") > 0, output
    assert count("faults injected") >= 3, output  # one every 1.5-4 s, plus the restarts' own time
    assert count("labels exported") == count("labels stored") >= count("labels acknowledged")
    assert count("audit watermark") == count("labels stored")
