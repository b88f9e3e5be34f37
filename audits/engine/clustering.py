"""Free-text answers: normalisation, proposed clusters, agreement between clusterings, answer noise.

ProtoQA-style campaigns (Boratko et al., "ProtoQA", EMNLP 2020, arXiv:2005.00771) ask ~100 workers
for one short answer per question; researchers then group equivalent answers into clusters. This
module proposes the clusters (researchers correct them) and measures the result:

- :func:`normalize_answer` and :func:`propose_clusters`: a normalised key per answer, then keys
  merged by rapidfuzz string similarity and hierarchical clustering (scipy);
- :func:`blanc` (Recasens & Hovy 2011) and :func:`adjusted_rand` (Hubert & Arabie 1985): agreement
  between two clusterings of the same answers;
- :func:`answer_noise`, :func:`answer_noise_summary`: how divided the crowd is on each prompt and
  across the campaign; :func:`passes_protoqa_filter`: ProtoQA's top-8-clusters quality filter.

Invalid answers. A clustering gives one label per answer; ``None`` (:data:`INVALID`) marks an answer
judged invalid (ProtoQA's experts dropped such answers from every cluster). The agreement functions
take ``invalid="singleton"`` (default: each invalid answer is its own cluster, so two clusterings
that both reject "asdf" and "naa" agree on that pair, and one that puts a rejected answer in a
cluster loses those links) or ``invalid="drop"`` (compare only answers valid in both). The noise
numbers count invalid answers apart (:attr:`AnswerNoise.invalid_share`); every other share is over
valid answers.

rapidfuzz, scipy, scikit-learn and the WordNet files are loaded inside the functions that use them,
so importing the engine stays cheap.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from audits.engine.wordnet import morphy_index

#: the label that marks an invalid answer in a clustering
INVALID = None

#: rapidfuzz scorer, scipy linkage and similarity threshold (0–100) of :func:`propose_clusters`,
#: chosen on the even-numbered ProtoQA dev questions and reported on the odd-numbered ones
#: (``benchmarks/clustering.py --sweep`` reproduces the choice)
SCORER = "token_set_ratio"
LINKAGE = "single"
THRESHOLD = 65.0
_LINKAGES = ("single", "average", "complete", "weighted")  # scipy's methods valid on any distance

# leading words dropped from an answer: articles and possessive determiners ("their age" = "age")
_LEADING = frozenset({"a", "an", "the", "some", "my", "your", "his", "her", "their", "our", "its"})
_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")


def lemmatizer() -> str:
    """Which lemmatiser :func:`normalize_answer` uses: ``"wordnet-morphy"`` when the WordNet
    database is readable (``CHORUS_WORDNET_DIR`` or /usr/share/wordnet), ``"rules"`` otherwise."""
    return "wordnet-morphy" if morphy_index() is not None else "rules"


def singularize(word: str) -> str:
    """Rule-based English singular, the fallback when WordNet is absent.

    Undoes the regular plural endings (-ies → -y, -ches/-shes/-xes/-zes/-sses → drop -es, -s → drop)
    and leaves words ending in -ss, -us, -is and words of three letters or fewer alone. Irregular
    plurals stay, and -ie nouns lose their match ("cookies" → "cooky" ≠ "cookie"): WordNet's
    exception lists and lemma check fix both.

    >>> [singularize(w) for w in ["showers", "parties", "dishes", "glass", "bus", "kids"]]
    ['shower', 'party', 'dish', 'glass', 'bus', 'kid']
    """
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "zes", "sses")):
        return word[:-2]
    return word[:-1]


def _lemma(word: str) -> str:
    if not word.isalpha():
        return word
    wordnet = morphy_index()
    if wordnet is None:
        return singularize(word)
    return wordnet.morphy(word) or word


def normalize_answer(text: str) -> str:
    """The key under which answers count as the same string.

    Steps: Unicode NFKC and case folding; apostrophes removed ("mom's" → "moms"), other punctuation
    and "&" turned into spaces/"and"; whitespace collapsed; leading articles and possessive
    determiners dropped (a, an, the, some, my, your, his, her, their, our, its); each word replaced
    by its WordNet base form (morphy, nouns first: "showers" → "shower", "children" → "child") or,
    without WordNet, by :func:`singularize` (see :func:`lemmatizer`). A word that is only an article
    keeps it ("the" stays "the"), so no non-blank answer becomes empty by this rule.

    >>> normalize_answer("  The Showers!! ")
    'shower'
    >>> normalize_answer("Mother's  name")
    'mother name'
    """
    text = unicodedata.normalize("NFKC", str(text)).casefold().replace("&", " and ")
    text = _PUNCT.sub(lambda m: "" if set(m.group()) <= {"'", "\u2019"} else " ", text)
    words = _SPACE.sub(" ", text).strip().split(" ")
    while len(words) > 1 and words[0] in _LEADING:
        words = words[1:]
    return " ".join(_lemma(w) for w in words if w)


def _first_seen(labels: Sequence[Hashable]) -> list[int]:
    """Labels renumbered 0, 1, 2, … in order of first appearance (deterministic cluster ids)."""
    seen: dict[Hashable, int] = {}
    return [seen.setdefault(x, len(seen)) for x in labels]


def propose_clusters(
    answers: Sequence[str],
    *,
    threshold: float | None = THRESHOLD,
    scorer: str = SCORER,
    linkage: str = LINKAGE,
) -> list[int]:
    """A proposed cluster index per answer (0, 1, … in order of first appearance).

    Method: answers with the same :func:`normalize_answer` key share a cluster (blank answers share
    one); the distinct keys are then compared pairwise with a rapidfuzz scorer
    (``rapidfuzz.process.cdist``, similarity 0–100) and merged by agglomerative hierarchical
    clustering on the distance 100 − similarity (``scipy.cluster.hierarchy.linkage`` with
    ``linkage``, cut by ``fcluster`` at distance 100 − ``threshold``): with single linkage two keys
    end up together when a chain of keys links them with similarity ≥ ``threshold`` at every step;
    with average linkage, when their groups' mean similarity is ≥ ``threshold``. The defaults
    (:data:`SCORER` ``token_set_ratio``, which scores a key contained in another as 100, so
    "shower" joins "take shower"; :data:`LINKAGE` ``single``; :data:`THRESHOLD` 65) were chosen on
    half of ProtoQA's dev questions (``benchmarks/clustering.py``). ``threshold=None`` stops after
    the exact-key step (the baseline).

    Deterministic (no randomness; ties in the linkage are broken by scipy's fixed order) and fast:
    ~100 answers take a few milliseconds after the first call, which loads WordNet.

    >>> propose_clusters(["a shower", "Showers", "take shower", "coffee", "Coffee."])
    [0, 0, 0, 1, 1]
    """
    normalized = {a: normalize_answer(a) for a in dict.fromkeys(answers)}  # each distinct string once
    keys = [normalized[a] for a in answers]
    key_ids = _first_seen(keys)
    distinct = list(dict.fromkeys(keys))
    if linkage not in _LINKAGES:
        raise ValueError(f"linkage: {linkage!r}; use one of {', '.join(_LINKAGES)}")
    if threshold is not None and not 0 <= threshold <= 100:
        raise ValueError(f"threshold: {threshold!r}; a similarity between 0 and 100, or None")
    if threshold is None or len(distinct) < 2:
        return key_ids
    from rapidfuzz import fuzz, process  # noqa: PLC0415 (imported here: the engine's import stays cheap)
    from scipy.cluster.hierarchy import fcluster  # noqa: PLC0415 (as rapidfuzz)
    from scipy.cluster.hierarchy import linkage as scipy_linkage  # noqa: PLC0415 (as rapidfuzz)

    score = getattr(fuzz, scorer, None)
    if score is None:
        raise ValueError(f"scorer: rapidfuzz.fuzz has no scorer {scorer!r}")
    dist = 100.0 - process.cdist(distinct, distinct, scorer=score, dtype=np.float64)
    dist = np.maximum(dist, dist.T)  # partial scorers need not be symmetric
    condensed = dist[np.triu_indices(len(distinct), k=1)]
    tree = scipy_linkage(condensed, method=linkage)
    merged = _first_seen(fcluster(tree, t=100.0 - threshold, criterion="distance").tolist())
    return _first_seen([merged[k] for k in key_ids])


def _prepare(
    a: Sequence[Hashable | None],
    b: Sequence[Hashable | None],
    weights: Sequence[int] | None,
    invalid: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer codes for two clusterings (invalid answers handled) and integer weights."""
    if len(a) != len(b):
        raise ValueError(f"a and b: {len(a)} and {len(b)} labels; both clusterings must label the same answers")
    w = np.ones(len(a), dtype=np.int64) if weights is None else np.asarray(weights)
    if w.shape != (len(a),) or (w.size and (w.dtype.kind not in "iu" or w.min() < 0)):
        raise ValueError(f"weights: need {len(a)} non-negative integers (answer counts), got {weights!r}")
    if invalid == "drop":
        keep = [x is not INVALID and y is not INVALID for x, y in zip(a, b)]
        a = [x for x, k in zip(a, keep) if k]
        b = [y for y, k in zip(b, keep) if k]
        w = w[np.asarray(keep, dtype=bool)] if len(keep) else w
    elif invalid == "singleton":
        a = [("invalid", i) if x is INVALID else ("label", x) for i, x in enumerate(a)]
        b = [("invalid", i) if y is INVALID else ("label", y) for i, y in enumerate(b)]
    else:
        raise ValueError(f"invalid: {invalid!r}; use 'singleton' or 'drop'")
    return np.asarray(_first_seen(a), dtype=np.int64), np.asarray(_first_seen(b), dtype=np.int64), w.astype(np.int64)


def _pairs(n: np.ndarray) -> float:
    n = n.astype(np.float64)
    return float(np.sum(n * (n - 1) / 2))


def blanc(
    a: Sequence[Hashable | None],
    b: Sequence[Hashable | None],
    *,
    weights: Sequence[int] | None = None,
    invalid: Literal["singleton", "drop"] = "singleton",
) -> float:
    """BLANC (Recasens & Hovy 2011, "BLANC: Implementing the Rand index for coreference evaluation",
    Natural Language Engineering 17(4)): the mean of the F-scores on coreference and
    non-coreference links between two clusterings of the same answers, in [0, 1].

    Every pair of answers is a coreference link (same cluster) or a non-coreference link. With
    ``rc`` pairs linked in both, ``ca``/``cb`` pairs linked in ``a``/``b``, ``rn`` pairs unlinked in
    both and ``na``/``nb`` pairs unlinked in ``a``/``b``:
    ``F_c = 2·rc / (ca + cb)``, ``F_n = 2·rn / (na + nb)``, ``BLANC = (F_c + F_n) / 2``.
    Symmetric in ``a`` and ``b``. Counted from the weighted contingency table, not pair by pair.

    ``weights``: answer counts (how many workers gave each string). Without them each listed answer
    is one mention; with them the score is over workers' answers (each string stands for ``count``
    identical mentions, which are always linked to each other in both clusterings).

    Which unit. Chorus reports BLANC over distinct strings (pass each string once, no weights):
    every string is one decision of the person clustering, while identical repeats are linked in any
    clustering and lift the score without measuring agreement (on ProtoQA's dev set, an
    all-singletons clustering scores 0.45 per string but 0.67 per worker's answer). Which unit
    ProtoQA's 83.17 between two experts used could not be checked (the paper's text was not at hand
    offline); the weighted form is here for that comparison, and the benchmark prints both.

    Notes (edge cases, following Luo et al. 2014 and the CoNLL reference scorer):

    - no coreference link in either clustering (all singletons): BLANC = ``F_n``;
    - no non-coreference link in either (everything in one cluster): BLANC = ``F_c``;
    - fewer than two mentions: undefined, NaN;
    - invalid answers (label ``None``): see the module docstring (``invalid``).

    >>> round(blanc(["x", "x", "y", "z"], [1, 1, 2, 2]), 6)  # F_c = 2·1/(1+2), F_n = 2·4/(5+4)
    0.777778
    """
    ca_codes, cb_codes, w = _prepare(a, b, weights, invalid)
    total = float(w.sum())
    if total < 2:
        return math.nan
    table = np.zeros((ca_codes.max() + 1, cb_codes.max() + 1), dtype=np.int64)
    np.add.at(table, (ca_codes, cb_codes), w)
    rc, ca, cb = _pairs(table), _pairs(table.sum(axis=1)), _pairs(table.sum(axis=0))
    all_pairs = total * (total - 1) / 2
    na, nb = all_pairs - ca, all_pairs - cb
    rn = all_pairs - ca - cb + rc
    f_c = 2 * rc / (ca + cb) if ca + cb else None
    f_n = 2 * rn / (na + nb) if na + nb else None
    if f_c is None:
        return f_n
    if f_n is None:
        return f_c
    return (f_c + f_n) / 2


def adjusted_rand(
    a: Sequence[Hashable | None],
    b: Sequence[Hashable | None],
    *,
    weights: Sequence[int] | None = None,
    invalid: Literal["singleton", "drop"] = "singleton",
) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985) between two clusterings, by
    ``sklearn.metrics.adjusted_rand_score``; 1 for identical clusterings, about 0 for chance.

    ``weights`` repeats each answer ``count`` times (the index over workers' answers); invalid
    answers as in :func:`blanc`. sklearn's conventions hold for the degenerate cases (e.g. two
    all-singleton clusterings score 1).

    >>> adjusted_rand(["x", "x", "y", None], [1, 1, 2, 3])
    1.0
    """
    from sklearn.metrics import adjusted_rand_score  # imported here: sklearn costs ~1 s to import

    ca_codes, cb_codes, w = _prepare(a, b, weights, invalid)
    return float(adjusted_rand_score(np.repeat(ca_codes, w), np.repeat(cb_codes, w)))


def cluster_counts(labels: Sequence[Hashable | None], weights: Sequence[int] | None = None) -> tuple[list[int], int]:
    """``(counts, n_invalid)``: answers per cluster, largest first, and the number of invalid answers.

    >>> cluster_counts(["b", "a", "b", None, "b"])
    ([3, 1], 1)
    """
    w = [1] * len(labels) if weights is None else list(weights)
    counts: dict[Hashable, int] = {}
    n_invalid = 0
    for label, n in zip(labels, w, strict=True):
        if label is INVALID:
            n_invalid += n
        else:
            counts[label] = counts.get(label, 0) + n
    return sorted(counts.values(), reverse=True), n_invalid


def _check_counts(counts: Sequence[int], n_invalid: int) -> np.ndarray:
    c = np.asarray(counts, dtype=np.int64) if len(counts) else np.zeros(0, dtype=np.int64)
    if c.ndim != 1 or (c.size and c.min() < 1) or n_invalid < 0:
        raise ValueError(f"counts: need positive cluster sizes and n_invalid >= 0, got {list(counts)!r}, {n_invalid}")
    return np.sort(c)[::-1]


@dataclass(frozen=True)
class AnswerNoise:
    """How divided the crowd is on one prompt, from its cluster sizes and its invalid answers.

    ``top_share`` and ``entropy_bits`` are over valid answers and are None (with ``reason``) when
    there are none; ``entropy_bits`` is Shannon's entropy of the cluster distribution in bits (log
    base 2): 0 when everyone agrees, log2(k) for k equal clusters.
    """

    n_answers: int
    n_invalid: int
    n_clusters: int
    top_share: float | None
    entropy_bits: float | None
    invalid_share: float | None
    reason: str | None = None


def answer_noise(counts: Sequence[int], *, n_invalid: int = 0) -> AnswerNoise:
    """Answer noise of one prompt: clusters, share of the top cluster, entropy (bits), invalid share.

    ``counts``: answers per cluster (valid answers only); ``n_invalid``: answers judged invalid.
    ``entropy_bits = −Σ p_k log2 p_k`` with ``p_k = counts_k / Σ counts``; ``invalid_share =
    n_invalid / (Σ counts + n_invalid)``.

    >>> answer_noise([2, 1, 1], n_invalid=1).entropy_bits
    1.5
    """
    c = _check_counts(counts, n_invalid)
    n_valid = int(c.sum())
    n_answers = n_valid + n_invalid
    invalid_share = n_invalid / n_answers if n_answers else None
    if n_valid == 0:
        reason = "no valid answers" if n_answers else "no answers"
        return AnswerNoise(n_answers, n_invalid, 0, None, None, invalid_share, reason)
    p = c / n_valid
    entropy = float(-np.sum(p * np.log2(p))) + 0.0  # + 0.0 turns -0.0 into 0.0
    return AnswerNoise(n_answers, n_invalid, int(c.size), float(p[0]), entropy, invalid_share)


def passes_protoqa_filter(counts: Sequence[int], *, top_k: int = 8, min_share: float = 0.85) -> bool:
    """ProtoQA's quality filter: True when the ``top_k`` largest clusters hold at least ``min_share``
    of the clustered answers (ProtoQA kept a question only then: 8 clusters, 85%).

    The share is over clustered (valid) answers, the total ProtoQA's files give as ``num.answers``;
    a prompt without clustered answers fails.

    >>> passes_protoqa_filter([50, 30, 5, 5, 2, 2, 2, 2, 1, 1]), passes_protoqa_filter([10] * 10)
    (True, False)
    """
    c = _check_counts(counts, 0)
    total = float(c.sum())
    # the tolerance keeps an exact 85 of 100 from failing on the rounding of 0.85 · 100
    return bool(c.size) and float(c[:top_k].sum()) >= min_share * total - 1e-9 * total


@dataclass(frozen=True)
class AnswerNoiseSummary:
    """Answer noise across a campaign.

    ``distribution``: for each of ``n_clusters``, ``top_share``, ``entropy_bits`` and
    ``invalid_share``, ``{"mean", "median", "q1", "q3"}`` over the prompts where it is defined
    (quartiles are numpy's default linear percentiles, as in the charts), plus ``"n"``.
    ``most_divided``: ``(prompt, entropy_bits, top_share)``, highest entropy first (ties: lower top
    share, then prompt id). ``failing_filter``: prompts failing :func:`passes_protoqa_filter`.
    """

    n_prompts: int
    distribution: dict[str, dict[str, float | int | None]]
    most_divided: list[tuple[Hashable, float, float]]
    failing_filter: list[Hashable]


def answer_noise_summary(
    per_prompt: Mapping[Hashable, tuple[Sequence[int], int]],
    *,
    most_divided: int = 5,
) -> AnswerNoiseSummary:
    """Answer noise of every prompt summarised: distributions, most divided prompts, filter failures.

    ``per_prompt``: ``{prompt: (cluster counts, n_invalid)}`` (as :func:`cluster_counts` returns).
    """
    noise = {p: answer_noise(c, n_invalid=n) for p, (c, n) in per_prompt.items()}
    distribution: dict[str, dict[str, float | int | None]] = {}
    for field in ("n_clusters", "top_share", "entropy_bits", "invalid_share"):
        values = np.array([v for x in noise.values() if (v := getattr(x, field)) is not None], dtype=np.float64)
        if values.size:
            q1, median, q3 = (float(v) for v in np.percentile(values, [25, 50, 75]))
            distribution[field] = {
                "n": int(values.size),
                "mean": float(values.mean()),
                "median": median,
                "q1": q1,
                "q3": q3,
            }
        else:
            distribution[field] = {"n": 0, "mean": None, "median": None, "q1": None, "q3": None}
    ranked = sorted(
        ((p, x.entropy_bits, x.top_share) for p, x in noise.items() if x.entropy_bits is not None),
        key=lambda t: (-t[1], t[2], str(t[0])),
    )
    failing = [p for p, (c, _) in per_prompt.items() if not passes_protoqa_filter(c)]
    return AnswerNoiseSummary(len(noise), distribution, ranked[:most_divided], failing)
