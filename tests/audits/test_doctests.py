"""The docstring examples of the engine modules run (they include the spec's worked example and
Gwet's published AC1 = 0.7754)."""
import doctest

import pytest

import audits
import audits.accuracy
import audits.agreement
import audits.flags
import audits.glossary
import audits.matrix
import audits.noise
import audits.partitions


@pytest.mark.parametrize("module", [audits, audits.matrix, audits.noise, audits.accuracy, audits.partitions,
                                    audits.agreement, audits.flags, audits.glossary], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
