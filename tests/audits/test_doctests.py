"""The docstring examples of the engine modules run (they include the spec's worked example and
Gwet's published AC1 = 0.7754)."""

import doctest

import pytest

import audits
import audits.engine
import audits.engine.accuracy
import audits.engine.agreement
import audits.engine.flags
import audits.engine.glossary
import audits.engine.matrix
import audits.engine.noise
import audits.engine.partitions
import audits.engine.report_table
import audits.engine.workers


@pytest.mark.parametrize(
    "module",
    [
        audits,
        audits.engine,
        audits.engine.matrix,
        audits.engine.noise,
        audits.engine.accuracy,
        audits.engine.partitions,
        audits.engine.agreement,
        audits.engine.flags,
        audits.engine.glossary,
        audits.engine.report_table,
        audits.engine.workers,
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
