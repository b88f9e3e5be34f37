"""ProtoQA scoring of ranked free-text answers against crowd answer clusters (no Django).

ProtoQA (Boratko et al., EMNLP 2020, arXiv:2005.00771, §4) asks ~100 crowd workers one question
each; experts group their answers into clusters, and a cluster is worth the number of workers whose
answer fell in it. A system's ranked answer list is scored by matching answers to clusters one to
one (the optimal assignment, Hungarian method, :func:`scipy.optimize.linear_sum_assignment`) and
dividing the matched workers by what the best possible list would get:

- **Max Answers@k**: only the first k answers count; the best list names the k largest clusters.
- **Max Incorrect@k**: answers count until the k-th answer that matches no cluster (inclusive);
  the best list names every cluster.
- **Max Answers@None** and **Max Incorrect@None** (the evaluator's "- None": no cut-off): every
  answer counts and the best list names every cluster, so the two are one number.
- **Set Intersection**: every cluster is worth 1 whatever its size (the evaluator's
  ``set_intersection``, ``assign_cluster_scores=False``): the clusters one-to-one matched by the whole
  list over the number of clusters.

Matching follows the official evaluator (github.com/iesl/protoqa-evaluator): ``exact`` compares
answers after :func:`normalize_answer`; ``wordnet`` (the paper's recommended setting) also accepts
answers whose words share a WordNet synset with a cluster string (:func:`wordnet_match`), read
offline from Debian's ``wordnet-base`` database. :func:`probeval_kl` is Chorus's distribution score
for sampled answers (KL divergence of the model's cluster distribution from the crowd's).

Inputs are the released formats: crowdsourced targets (JSONL, :func:`read_targets`) and
predictions or samples (one JSON object ``{question_id: [answers]}`` or JSONL lines of such
objects, :func:`read_answers`). scipy is imported inside the functions that need it.

>>> clusters = {"q.0": (60, ("age", "birthday")), "q.1": (40, ("name",))}
>>> score_question(clusters, ["Birthday", "job", "name"])["max_answers@1"]
1.0
>>> round(score_question(clusters, ["job", "name"])["max_incorrect@1"], 2)
0.0
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from audits.engine.wordnet import WordNetUnavailable, reader

#: the official evaluator's k values (its "Max Answers - k" and "Max Incorrect - k")
MAX_ANSWERS_K = (1, 3, 5, 10)
MAX_INCORRECT_K = (1, 3, 5)
#: the evaluator's metrics without a cut-off ("Max Answers - None", "Max Incorrect - None") and its set
#: intersection; after the cut ones, which came first (a score's keys are a contract: new ones go last)
UNCUT_KEYS = ("max_answers@None", "max_incorrect@None", "set_intersection")
RANKED_KEYS = (
    tuple(f"max_answers@{k}" for k in MAX_ANSWERS_K) + tuple(f"max_incorrect@{k}" for k in MAX_INCORRECT_K) + UNCUT_KEYS
)
MATCHINGS = ("exact", "wordnet")
#: the evaluator keeps the first 50 characters of an answer (``default_string_preprocessing``)
LENGTH_LIMIT = 50

#: ``{cluster id: (count, answer strings)}`` — the shape the live campaign passes in
Clusters = dict[str, tuple[int, tuple[str, ...]]]


class ProtoQAFormatError(ValueError):
    """A malformed targets, predictions or samples file; the message names the line and the problem."""

    def __init__(self, path, line: int | None, problem: str):
        self.path, self.line, self.problem = str(path), line, problem
        where = f"{Path(self.path).name} line {line}" if line else Path(self.path).name
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class Question:
    """One crowdsourced question: its id, text, answer clusters and the raw answer counts."""

    id: str
    question: str
    clusters: Clusters
    raw: dict[str, int] = field(default_factory=dict)


def normalize_answer(answer: str) -> str:
    """The evaluator's exact-match normalisation: lower-case, first 50 characters, trimmed.

    >>> normalize_answer("  Their AGE ")
    'their age'
    """
    return answer.lower()[:LENGTH_LIMIT].strip()


# --------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------


def _is_count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _parse_question(obj, path, line: int) -> Question:
    def need(cond, problem):
        if not cond:
            raise ProtoQAFormatError(path, line, problem)

    need(isinstance(obj, dict), "expected a JSON object")
    meta, answers, question = obj.get("metadata"), obj.get("answers"), obj.get("question")
    need(isinstance(meta, dict) and isinstance(meta.get("id"), str) and meta["id"], "missing metadata.id")
    need(isinstance(answers, dict) and isinstance(answers.get("clusters"), dict), "missing answers.clusters")
    need(question is not None, "missing question")
    if isinstance(question, dict):
        question = question.get("normalized") or question.get("original") or ""
    clusters: Clusters = {}
    for cid, cluster in answers["clusters"].items():
        need(
            isinstance(cluster, dict) and _is_count(cluster.get("count")),
            f"cluster {cid!r}: count must be a whole number ≥ 0",
        )
        strings = cluster.get("answers")
        need(
            isinstance(strings, list) and strings and all(isinstance(s, str) for s in strings),
            f"cluster {cid!r}: answers must be a non-empty list of strings",
        )
        clusters[cid] = (cluster["count"], tuple(strings))
    need(clusters, "answers.clusters is empty")
    raw = answers.get("raw", {})
    need(
        isinstance(raw, dict) and all(_is_count(v) for v in raw.values()),
        "answers.raw must map answers to counts",
    )
    return Question(id=meta["id"], question=str(question), clusters=clusters, raw=dict(raw))


def read_targets(path) -> dict[str, Question]:
    """ProtoQA crowdsourced targets (JSONL: ``metadata.id``, ``question``, ``answers.raw``,
    ``answers.clusters`` = ``{cluster id: {count, answers}}``), keyed by question id, in file order."""
    out: dict[str, Question] = {}
    with open(path, encoding="utf-8") as fh:
        for no, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ProtoQAFormatError(path, no, f"bad JSON ({exc.msg}, column {exc.colno})") from None
            q = _parse_question(obj, path, no)
            if q.id in out:
                raise ProtoQAFormatError(path, no, f"question id {q.id!r} repeats an earlier line")
            out[q.id] = q
    if not out:
        raise ProtoQAFormatError(path, None, "no questions")
    return out


def _add_answers(out: dict, qid, answers, path, line: int | None, known) -> None:
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise ProtoQAFormatError(path, line, f"question {qid!r}: answers must be a list of strings")
    if known is not None and qid not in known:
        raise ProtoQAFormatError(path, line, f"question id {qid!r} is not in the targets")
    if qid in out:
        raise ProtoQAFormatError(path, line, f"question id {qid!r} appears twice")
    out[qid] = answers


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def read_answers(path, *, known_ids=None) -> dict[str, list[str]]:
    """Ranked predictions or samples from a file: see :func:`parse_answers`."""
    return parse_answers(Path(path).read_text(encoding="utf-8"), source=path, known_ids=known_ids)


def parse_answers(text: str, *, source="answers", known_ids=None) -> dict[str, list[str]]:
    """Ranked predictions or samples: ``{question_id: [answers]}`` as one JSON object, or JSONL lines
    each holding such an object (the evaluator's ``{"question_id", "ranked_answers"}`` lines too).
    ``source`` names the file in errors (:class:`ProtoQAFormatError`, with the line).

    With ``known_ids``, a question id outside it is an error (never silently dropped): a list scored
    against the wrong targets would otherwise look like a weak system.
    """
    path = source
    out: dict[str, list[str]] = {}
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        first = next((t for t in text.splitlines() if t.strip()), "")
        if not _parses(first):
            # not JSONL either: a broken multi-line object, so the document's own position counts
            raise ProtoQAFormatError(path, exc.lineno, f"bad JSON ({exc.msg}, column {exc.colno})") from None
        whole = None
    if isinstance(whole, dict) and text.strip().count("\n") > 0:
        # one pretty-printed object for the whole file: no line of its own per question
        for qid, answers in whole.items():
            _add_answers(out, qid, answers, path, None, known_ids)
        return out
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ProtoQAFormatError(path, no, f"bad JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(obj, dict) or not obj:
            raise ProtoQAFormatError(path, no, "expected a JSON object {question_id: [answers]}")
        if "question_id" in obj:
            if not isinstance(obj["question_id"], str) or "ranked_answers" not in obj:
                raise ProtoQAFormatError(path, no, "question_id needs a string id and ranked_answers")
            obj = {obj["question_id"]: obj["ranked_answers"]}
        for qid, answers in obj.items():
            _add_answers(out, qid, answers, path, no, known_ids)
    if not out:
        raise ProtoQAFormatError(path, None, "no answers")
    return out


# --------------------------------------------------------------------------------------------
# Matching answers to clusters
# --------------------------------------------------------------------------------------------


def _check_matching(matching: str) -> None:
    if matching not in MATCHINGS:
        raise ValueError(f"matching must be one of {MATCHINGS}, got {matching!r}")


def match_matrix(clusters: Clusters, answers, *, matching: str = "exact") -> np.ndarray:
    """Boolean ``answers × clusters`` matrix: answer i matches cluster j.

    ``exact``: the normalised answer equals a normalised string of the cluster (the evaluator
    normalises only the answers; the released cluster strings are already normal, so normalising
    both sides changes nothing there and keeps live clusters with capitals matchable).
    ``wordnet``: an exact match or :func:`wordnet_match` with a cluster string, as the evaluator's
    ``wordnet_score`` rounded to 0/1 (``np.round``).
    """
    _check_matching(matching)
    norm = [normalize_answer(a) for a in answers]
    strings = [[normalize_answer(s) for s in c[1]] for c in clusters.values()]
    m = np.zeros((len(norm), len(strings)), dtype=bool)
    for j, cluster in enumerate(strings):
        exact = set(cluster)
        for i, a in enumerate(norm):
            m[i, j] = a in exact or (matching == "wordnet" and any(wordnet_match(a, s) for s in cluster))
    return m


def _assigned_count(matrix: np.ndarray, counts: np.ndarray) -> float:
    """The most workers a one-to-one answer→cluster assignment can collect (Hungarian method)."""
    if matrix.shape[0] == 0 or not matrix.any():
        return 0.0
    from scipy.optimize import linear_sum_assignment  # imported here: scipy is slow to import

    weights = matrix * counts[None, :]
    rows, cols = linear_sum_assignment(weights, maximize=True)
    return float(weights[rows, cols].sum())


def _until_kth_incorrect(matrix: np.ndarray, k: int) -> np.ndarray:
    """The answers up to and including the k-th that matches no cluster (``limit_total_wrong``).

    An answer repeating an already-matched cluster still "matches" here, as in the evaluator.
    """
    wrong = np.flatnonzero(~matrix.any(axis=1))
    return matrix[: wrong[k - 1] + 1] if len(wrong) >= k else matrix


def _ratio(got: float, best: float) -> float:
    return float(got / best) if best > 0 else math.nan


def ranked_scores(matrix: np.ndarray, counts) -> dict[str, float]:
    """Max Answers@k, Max Incorrect@k, both without a cut-off, and Set Intersection from a match
    matrix (answers in rank order) and cluster counts."""
    counts = np.asarray(counts, dtype=np.float64)
    top = np.sort(counts)[::-1]
    out = {}
    for k in MAX_ANSWERS_K:
        out[f"max_answers@{k}"] = _ratio(_assigned_count(matrix[:k], counts), top[:k].sum())
    for k in MAX_INCORRECT_K:
        out[f"max_incorrect@{k}"] = _ratio(_assigned_count(_until_kth_incorrect(matrix, k), counts), counts.sum())
    # No cut-off: neither the answer count nor wrong answers stop the list, so both are the whole list's share
    out["max_answers@None"] = out["max_incorrect@None"] = _ratio(_assigned_count(matrix, counts), counts.sum())
    out["set_intersection"] = _ratio(_assigned_count(matrix, np.ones_like(counts)), float(len(counts)))
    return out


def score_question(clusters: Clusters, ranked, *, matching: str = "exact") -> dict[str, float]:
    """Max Answers@{1,3,5,10,None}, Max Incorrect@{1,3,5,None} and Set Intersection of one ranked
    answer list (fractions of the best possible list's score, NaN when no worker answered, or no
    cluster for Set Intersection) under ``exact`` or ``wordnet`` matching."""
    counts = [c[0] for c in clusters.values()]
    return ranked_scores(match_matrix(clusters, list(ranked), matching=matching), counts)


def probeval_kl(clusters: Clusters, samples, *, matching: str = "exact") -> float:
    """KL(human ‖ model) in nats over the question's clusters plus one "unmatched" category.

    Human side: the cluster counts, 0 unmatched. Model side: each sample counts for the cluster it
    matches (under ``wordnet`` a sample can match several: the one with most workers, then the
    first), else "unmatched". One is added to every category on both sides before normalising
    (so an empty sample list gives the uniform model), then KL = Σ p_h log(p_h / p_m).
    """
    counts = np.array([c[0] for c in clusters.values()], dtype=np.float64)
    model = np.zeros(len(counts) + 1)
    m = match_matrix(clusters, list(samples), matching=matching)
    for row in m:
        hits = np.flatnonzero(row)
        # stable sort: ties between equally large clusters go to the first listed
        model[hits[np.argsort(-counts[hits], kind="stable")][0] if len(hits) else -1] += 1
    human = np.append(counts, 0.0) + 1.0
    model += 1.0
    p, q = human / human.sum(), model / model.sum()
    return float(np.sum(p * np.log(p / q)))


def score_protoqa(
    targets: dict[str, Question],
    predictions: dict[str, list[str]],
    samples: dict[str, list[str]] | None = None,
    *,
    matching: str = "exact",
) -> dict:
    """Every target question scored; a question without predictions (or samples) is scored on an
    empty list. Returns ``{"n_questions", "matching", "metrics": means, "questions": {id: scores}}``
    with NaN as None."""
    _check_matching(matching)
    questions = {}
    for qid, q in targets.items():
        scores = score_question(q.clusters, predictions.get(qid, []), matching=matching)
        if samples is not None:
            scores["probeval_kl"] = probeval_kl(q.clusters, samples.get(qid, []), matching=matching)
        questions[qid] = scores
    keys = RANKED_KEYS + (("probeval_kl",) if samples is not None else ())
    means = {k: float(np.nanmean([s[k] for s in questions.values()])) for k in keys}

    def clean(d):
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    return {
        "n_questions": len(questions),
        "matching": matching,
        "metrics": clean(means),
        "questions": {qid: clean(s) for qid, s in questions.items()},
    }


# --------------------------------------------------------------------------------------------
# WordNet matching (ProtoQA's recommended setting), offline
# --------------------------------------------------------------------------------------------

#: Longer answers (in content words) are compared as whole strings only: the evaluator tries every
#: pair of contiguous splits of the two answers, 2^(n-1) per side, which explodes past this.
WORDNET_MAX_WORDS = 8

#: English function words dropped before WordNet look-ups. The evaluator drops NLTK's English
#: stop-word list, a downloaded corpus we cannot fetch offline; this list, written for Chorus,
#: covers the same kinds of words (articles, pronouns, auxiliaries, prepositions, conjunctions).
STOPWORDS = frozenset(
    """a an the this that these those i me my mine myself we us our ours ourselves you your yours
    yourself yourselves he him his himself she her hers herself it its itself they them their
    theirs themselves what which who whom whose is am are was were be been being have has had
    having do does did doing will would shall should can could may might must and but or nor if
    then else because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further once here
    there when where why how all any both each few more most other some such no not only own same
    so than too very just s t don now""".split()
)


def wordnet_available() -> str | None:
    """None when WordNet matching works here, else the reason it does not."""
    try:
        reader()
    except WordNetUnavailable as exc:
        return str(exc)
    return None


# Bounded caches: the live scoring runs in long-lived workers, and the same answers recur across
# the clusters of a question and across systems.
@functools.lru_cache(maxsize=1 << 16)
def _synsets(phrase: str) -> frozenset:
    return frozenset(reader().synsets(phrase.replace(" ", "_"))) if phrase else frozenset()


@functools.lru_cache(maxsize=1 << 16)
def _content_words(text: str) -> tuple[str, ...]:
    # word_tokenize without punkt's sentence split (punkt is a download); lazy as in wordnet.reader
    from nltk.tokenize import NLTKWordTokenizer  # noqa: PLC0415

    return tuple(t for t in NLTKWordTokenizer().tokenize(text) if t not in STOPWORDS)


def _splits(n: int):
    """Every split of n words into contiguous parts, as lists of (start, end) spans."""
    for cuts in range(2 ** max(n - 1, 0)):
        bounds = [0] + [i + 1 for i in range(n - 1) if cuts >> i & 1] + [n]
        yield list(zip(bounds[:-1], bounds[1:]))


def _parts_agree(a: str, b: str) -> bool:
    return a == b or bool(_synsets(a) & _synsets(b))


def wordnet_match(answer: str, target: str) -> bool:
    """ProtoQA's WordNet similarity of two answers, rounded to 0/1 as its evaluator does.

    Both strings lose stop words and are split into contiguous parts in every way; parts agree when
    equal or sharing a WordNet synset (multi-word parts looked up as collocations, ``birth_date``).
    A pair of splits scores (parts matched one to one) / (parts in the longer split); the
    similarity is the best pair's score, and it rounds to 1 when above 0.5 (``np.round``, half to
    even). Answers of more than :data:`WORDNET_MAX_WORDS` content words are compared whole.
    ``wordnet_match("car", "automobile")`` is true (synset car.n.01); ``("birthday date",
    "birthday")`` is not: one of two parts matched is 0.5, which rounds to 0.
    """
    return _wordnet_match(_content_words(answer), _content_words(target))


@functools.lru_cache(maxsize=1 << 18)
def _wordnet_match(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if not a or not b:
        return a == b
    if len(a) > WORDNET_MAX_WORDS or len(b) > WORDNET_MAX_WORDS:
        return _parts_agree(" ".join(a), " ".join(b))
    from scipy.optimize import linear_sum_assignment  # imported here: scipy is slow to import

    spans_a = [(i, j) for i in range(len(a)) for j in range(i + 1, len(a) + 1)]
    spans_b = [(i, j) for i in range(len(b)) for j in range(i + 1, len(b) + 1)]
    agree = {
        (sa, sb) for sa in spans_a for sb in spans_b if _parts_agree(" ".join(a[slice(*sa)]), " ".join(b[slice(*sb)]))
    }
    if not agree:
        return False
    for pa in _splits(len(a)):
        for pb in _splits(len(b)):
            # m matched parts out of max(|pa|, |pb|) can beat 0.5 only if min/max does
            if 2 * min(len(pa), len(pb)) <= max(len(pa), len(pb)):
                continue
            m = np.array([[(sa, sb) in agree for sb in pb] for sa in pa])
            if not m.any():
                continue
            rows, cols = linear_sum_assignment(m, maximize=True)
            if 2 * int(m[rows, cols].sum()) > max(len(pa), len(pb)):
                return True
    return False
