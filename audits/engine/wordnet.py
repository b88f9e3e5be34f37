"""WordNet 3.0, read offline from Debian's ``wordnet-base`` (nothing is downloaded).

Two readers over the same database folder (``CHORUS_WORDNET_DIR``, else :data:`WORDNET_DIR`):

- :func:`morphy_index`: WordNet's morphy (base forms, morphy(7WN)) from the ``index.<pos>`` lemma
  lists and ``<pos>.exc`` exception lists alone, read directly in ~0.3 s; the answer clustering
  lemmatises with it on every proposal, where nltk's 4 s start would be felt;
- :func:`reader`: nltk's ``WordNetCorpusReader`` for synsets (ProtoQA's WordNet matching), opened
  once per process.

nltk cannot open Debian's folder as it is: it reads ``lexnames`` (lexicographer file names, only
used by ``Synset.lexname()``; numbered stand-ins are served) and ``index.sense`` (only read to map
other WordNet versions for the multilingual data, which is skipped), and refuses folders outside
``nltk.data.path`` (adding ours is its documented opt-in).
"""

from __future__ import annotations

import functools
import io
import os
import warnings
from pathlib import Path

#: where Debian's ``wordnet-base`` installs the WordNet 3.0 database
WORDNET_DIR = Path("/usr/share/wordnet")

POS = ("noun", "verb", "adj", "adv")  # morphy's order when no part of speech is given
# WordNet's morphy detachment rules (morphy(7WN)): suffix → replacement, per part of speech
_MORPHY_RULES = {
    "noun": (
        ("s", ""),
        ("ses", "s"),
        ("ves", "f"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("ies", "y"),
    ),
    "verb": (
        ("s", ""),
        ("ies", "y"),
        ("es", "e"),
        ("es", ""),
        ("ed", "e"),
        ("ed", ""),
        ("ing", "e"),
        ("ing", ""),
    ),
    "adj": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "adv": (),
}


class WordNetUnavailable(RuntimeError):
    """WordNet was asked for but the database cannot be opened; the message says why."""


def wordnet_dir() -> Path:
    """The database folder: ``CHORUS_WORDNET_DIR`` when set, else :data:`WORDNET_DIR`."""
    return Path(os.environ.get("CHORUS_WORDNET_DIR", WORDNET_DIR))


class MorphyIndex:
    """The two parts of WordNet that morphy reads: lemmas per part of speech and exception lists."""

    def __init__(self, root: Path) -> None:
        self.lemmas: dict[str, frozenset[str]] = {}
        self.exceptions: dict[str, dict[str, list[str]]] = {}
        for pos in POS:
            with open(root / f"index.{pos}", encoding="utf-8") as fh:
                self.lemmas[pos] = frozenset(line.split(" ", 1)[0] for line in fh if not line.startswith(" "))
            with open(root / f"{pos}.exc", encoding="utf-8") as fh:
                self.exceptions[pos] = {t[0]: t[1:] for t in (line.split() for line in fh) if t}

    def morphy(self, word: str) -> str | None:
        """WordNet's base form of ``word``: the first part of speech (noun, verb, adjective, adverb)
        where the word, an exception-list form or a detachment-rule form is a lemma; else None."""
        for pos in POS:
            lemmas = self.lemmas[pos]
            if word in self.exceptions[pos]:
                forms = self.exceptions[pos][word]
            else:
                forms = [word[: -len(old)] + new for old, new in _MORPHY_RULES[pos] if word.endswith(old)]
            for form in (word, *forms):
                if form in lemmas:
                    return form
        return None


@functools.lru_cache(maxsize=1)
def morphy_index() -> MorphyIndex | None:
    """The morphy index of :func:`wordnet_dir`, read once; None when the database is not there."""
    try:
        return MorphyIndex(wordnet_dir())
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def reader():
    """nltk's WordNet reader over :func:`wordnet_dir`, opened once (a few seconds).

    Raises :class:`WordNetUnavailable` with the reason when the database is missing or unreadable.
    """
    root = wordnet_dir()
    missing = [f for f in ("data.noun", "index.noun", "data.verb", "index.verb") if not (root / f).exists()]
    if missing:
        raise WordNetUnavailable(f"WordNet database not found in {root} (install Debian's wordnet-base)")
    import nltk  # noqa: PLC0415 (slow to import; only WordNet matching needs it)
    from nltk.corpus.reader.wordnet import WordNetCorpusReader  # noqa: PLC0415 (as nltk)

    class DebianWordNet(WordNetCorpusReader):
        def open(self, fileid):
            if fileid == "lexnames":
                return io.StringIO("".join(f"{i:02d}\tlexfile{i:02d}\t0\n" for i in range(64)))
            return super().open(fileid)

        def map_wn(self, version="wordnet"):
            return None

    if str(root) not in map(str, nltk.data.path):
        nltk.data.path.append(str(root))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "multilingual functions are not available": intended
            return DebianWordNet(str(root), None)
    except (OSError, ValueError, LookupError) as exc:
        raise WordNetUnavailable(f"cannot open WordNet in {root}: {exc}") from None
