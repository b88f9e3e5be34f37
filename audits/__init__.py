"""Chorus's noise audit, in two parts with a border between them.

- ``audits.engine``: the pure library (numpy/scipy, no Django). Its public names are re-exported
  here, so ``from audits import noise_audit`` works in a notebook without Django settings.
- The Django app of the live audit (models, ``selectors`` for reads, ``services`` for writes,
  ``tasks`` for Celery, ``views`` and ``api`` for the dashboard and the REST API), which calls the
  engine and is never imported by it.

The re-export is lazy (PEP 562), so loading the Django app does not import the engine.

>>> from audits import LabelMatrix, noise_audit
>>> m = LabelMatrix.from_triples(["a", "b", "a", "b"], [1, 1, 2, 2], [1, 1, 0, 1])
>>> noise_audit(m).n_labels
4
"""

import importlib


def __getattr__(name):
    # import_module, not "from audits import engine", which would call this function again.
    engine = importlib.import_module("audits.engine")
    if name in engine.__all__:
        return getattr(engine, name)
    raise AttributeError(f"module 'audits' has no attribute {name!r}")


def __dir__():
    engine = importlib.import_module("audits.engine")
    return sorted([*globals(), *engine.__all__])
