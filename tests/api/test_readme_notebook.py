"""The README's notebook example, run as written against a live server: a token client creates a
campaign, imports, launches, waits for completion by polling, and reads the labels as Parquet and the
card as JSON. Only the server's address, the password and the wait (where a simulated crowd labels)
are supplied by the test."""

import re
import time
from pathlib import Path

import pytest

from annotation import services
from annotation.models import Campaign
from annotation.services.accounts import researcher_set
from tests.helpers import PASSWORD, prompts_jsonl

pytestmark = pytest.mark.django_db(transaction=True)

README = Path(__file__).resolve().parents[2] / "README.md"


def notebook_block() -> str:
    text = README.read_text()
    start = text.index("- **A whole study from a notebook**")
    code = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    return "\n".join(line.removeprefix("  ") for line in code.splitlines())


def test_the_readme_notebook_runs_a_whole_study(live_server, make_user, tmp_path, monkeypatch):
    researcher_set(user=make_user("ada"))
    (tmp_path / "prompts.jsonl").write_bytes(prompts_jsonl(4))
    monkeypatch.chdir(tmp_path)
    waits = []

    def crowd_labels_everything(seconds):
        """The wait: three workers label every prompt of the campaign the notebook launched."""
        waits.append(seconds)
        campaign = Campaign.objects.get(title="Plausible?")
        for n in range(3):
            worker = services.worker_get_or_create(channel="panel", external_id=f"crowd{n}")
            while not isinstance(
                lease := services.lease_acquire(campaign=campaign, worker=worker), services.NothingLeft
            ):
                services.label_submit(lease_id=lease.pk, worker=worker, value=n % 2, client_token=f"{n}-{lease.pk}")

    monkeypatch.setattr(time, "sleep", crowd_labels_everything)
    code = notebook_block().replace('"http://127.0.0.1:8000"', repr(live_server.url))
    namespace = {"PASSWORD": PASSWORD}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 — the README's own example

    assert waits == [30]  # it polled, waited once, and saw the campaign complete
    labels = namespace["labels"]
    assert len(labels) == 12 and set(labels["prompt"]) == {f"p{i}" for i in range(4)}
    assert str(labels["created_at"].dtype).startswith("datetime64")
    card = namespace["card"]
    assert card["campaign"]["slug"] == namespace["slug"]
