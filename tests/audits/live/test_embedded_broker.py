"""Live audits on the embedded default (``make demo``): no Redis, a real Celery worker process.

Settings without ``REDIS_URL`` give the embedded broker (kombu's SQLAlchemy transport over
``CHORUS_VAR_DIR/broker.sqlite3``, config/broker.py) and the database cache; the worker is
``celery -A config worker -B`` as ``manage.py demo`` starts it. Both the worker and the web side
(``submitter.py``, a separate process) get ``CHORUS_VAR_DIR`` pointing at a temporary folder of this
test, and this test run's database, so the developer's ``./var`` broker file is never written to. The
test process only creates the campaign and reads what the worker wrote.
"""

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest

from audits import selectors as audit_selectors
from audits.models import AuditSnapshot, AuditStats
from tests.audits.live.live import (
    BASE_DIR,
    NO_SWEEP,
    CeleryWorker,
    Submitter,
    snapshot_covering,
    wait_for,
)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# No Redis anywhere: REDIS_URL unset (process_env drops None), so the settings pick the embedded default.
EMBEDDED = {"REDIS_URL": None, "CELERY_BROKER_URL": None}


@pytest.fixture
def var_dir():
    """The embedded default's var folder (broker file, beat schedule, logs), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="chorus-embedded-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _audit_messages(broker_file: Path, campaign, after_id: int = 0) -> list[str]:
    """The audit tasks for ``campaign`` waiting in an embedded broker file (one row each)."""
    if not broker_file.exists():
        return []
    with sqlite3.connect(broker_file) as db:
        rows = db.execute("SELECT payload FROM kombu_message WHERE id > ? ORDER BY id", (after_id,)).fetchall()
    out = []
    for (payload,) in rows:
        headers = json.loads(payload)["headers"]
        if headers.get("task", "").startswith("audits.") and headers.get("argsrepr") == f"({campaign.pk},)":
            out.append(headers["task"])
    return out


def _last_message_id(broker_file: Path) -> int:
    if not broker_file.exists():
        return 0
    with sqlite3.connect(broker_file) as db:
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'kombu_message'").fetchone()
    return row[0] if row else 0


def test_the_embedded_default_audits_labels_with_a_real_worker_and_no_redis(make_campaign, var_dir, django_db_setup):
    developer_broker = BASE_DIR / "var" / "broker.sqlite3"
    before = _last_message_id(developer_broker)
    env = {**EMBEDDED, "CHORUS_VAR_DIR": var_dir}
    campaign = make_campaign(40, k=3)
    submitter = Submitter("", **env)
    worker = CeleryWorker("", var_dir, **env, **NO_SWEEP)  # no beat sweep: the labels' own triggers must do it
    try:
        settings = submitter.ask(cmd="settings")
        assert settings["broker"] == f"sqlite:///{var_dir / 'broker.sqlite3'}", settings
        assert settings["cache"] == "django.core.cache.backends.db.DatabaseCache", settings

        # No worker yet: labels are acknowledged at once, and their audit waits in the broker file.
        first = submitter.ask(cmd="submit", campaign=campaign.pk, n=30, workers=8)
        assert first["acks"] == 30
        # Nothing waits on the audit (no worker is even running): a label costs milliseconds, well
        # under the debounce countdown; the bound on the slowest allows for a busy machine.
        assert max(first["seconds"]) < 1.0 and sorted(first["seconds"])[-2] < 0.25, first["seconds"]
        assert audit_selectors.labels_waiting(campaign_id=campaign.pk)[0] == 30  # marked for the audit's fold
        queued = _audit_messages(var_dir / "broker.sqlite3", campaign)
        assert queued == ["audits.refresh"], queued  # one enqueue for the burst (debounced in the DB cache)
        assert not AuditSnapshot.objects.filter(campaign=campaign).exists()

        # The worker starts, finds the queued audit in the broker file and runs it.
        worker.start()
        snapshot = wait_for(
            lambda: snapshot_covering(campaign, 30), timeout=20, what="a snapshot of the 30 queued labels"
        )
        assert snapshot.watermark == 30 and snapshot.data["n_labels"] == 30

        # With the worker running: more labels, acknowledged at once, audited within seconds.
        second = submitter.ask(cmd="submit", campaign=campaign.pk, n=30, workers=8)
        assert second["acks"] == 30
        assert max(second["seconds"]) < 1.0 and sorted(second["seconds"])[-2] < 0.25, second["seconds"]
        snapshot = wait_for(lambda: snapshot_covering(campaign, 60), timeout=20, what="a snapshot of all 60 labels")
        assert snapshot.watermark == 60 and snapshot.data["n_labels"] == 60 and snapshot.data["n_workers"] >= 2
        lag = snapshot.computed_at.timestamp() - second["after"]
        assert lag < 5, f"the snapshot came {lag:.2f} s after the last label"
        # The web side returned before the audit of its labels existed: it never waited on it.
        assert second["after"] < snapshot.computed_at.timestamp()
        assert AuditStats.objects.get(campaign=campaign).audited_labels == 60
        # The first full audit is due at once; it lands through the same broker.
        report = wait_for(lambda: snapshot_covering(campaign, 1, kind="full"), timeout=20, what="a full audit")
        assert report.data["n_workers"] >= 2 and "accuracy" in report.data
        assert worker.proc.poll() is None, "the worker died"
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- worker log ---\n{worker.output()[-6000:]}") from None
    finally:
        submitter.stop()
        worker.stop()
    ours = _audit_messages(developer_broker, campaign, after_id=before)
    assert not ours, f"the test wrote to the developer's broker file: {ours}"
    assert worker.proc is None and submitter.proc.poll() is not None
