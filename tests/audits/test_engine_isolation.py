"""The engine is a library: importing and running it loads neither Django nor the Chorus apps.

Each check runs in a new interpreter without ``DJANGO_SETTINGS_MODULE``, so what the test run itself
has imported (pytest-django loads Django) cannot hide an import, and a stray ``import django`` in
an engine module fails here rather than in a notebook.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import REPO

#: modules the engine must not load: Django, the Django apps around it, Celery
FORBIDDEN = ("django", "annotation", "audits.models", "celery")

SCRIPT = """\
import sys
{imports}
m = LabelMatrix.from_triples(["a", "b", "c", "a", "b", "c"], [1, 1, 1, 2, 2, 2], [1, 1, 0, 0, 0, 1],
                             gold={{1: 1, 2: 0}})
print(noise_audit(m).n_labels)
print(render_markdown(full_report(m).to_dict()).splitlines()[0])
forbidden = {forbidden!r}
print(sorted(k for k in sys.modules if any(k == f or k.startswith(f + ".") for f in forbidden)))
"""


def run_without_django(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "imports",
    [
        "from audits.engine import LabelMatrix, full_report, noise_audit, render_markdown",
        "from audits import LabelMatrix, full_report, noise_audit, render_markdown",
    ],
    ids=["audits.engine", "audits"],
)
def test_engine_runs_without_django_or_the_apps(imports):
    proc = run_without_django(SCRIPT.format(imports=imports, forbidden=FORBIDDEN))
    assert proc.returncode == 0, proc.stderr
    n_labels, title, loaded = proc.stdout.strip().splitlines()
    assert (n_labels, title) == ("6", "# Noise audit")
    assert loaded == "[]", f"the engine loaded {loaded}"


def test_import_needs_no_django_settings():
    code = (
        "import sys, audits\n"
        "m = audits.LabelMatrix.from_triples(['a', 'b'], [1, 1], [1, 0])\n"
        "print(audits.full_report(m).to_dict()['n_labels'])\n"
        "assert not any(k == 'django' or k.startswith('django.') for k in sys.modules), 'django imported'\n"
    )
    proc = run_without_django(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"
