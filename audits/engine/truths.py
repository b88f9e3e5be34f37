"""Alternative ground truths: majority vote, Dawid–Skene, GLAD and MACE, one label per prompt.

See ``noise-audit.md`` ("Further stable keys": ``ground_truths``). The four methods come from
crowd-kit (imported inside :func:`ground_truths`, with pandas: this module imports only numpy), fed
the matrix in crowd-kit's long format (``task``, ``worker``, ``label``) with integer codes, in one
canonical row order, so the same labels always give the same answer. Each method infers one label
per prompt of the matrix (per unit: ``<id>#<n>`` for an answer option of a per-option schema) with
its confidence, and where the model has them, each worker's parameters (for the workers table).

What this module adds around crowd-kit 1.4.2, and why:

- a stated tie rule (crowd-kit's majority vote takes the first column of its vote table, whose order
  pandas decides and which differs between data sets);
- a fix of MACE's M-step input (:func:`_mace_class`): crowd-kit builds each worker's table of spam
  answers sorted by worker and label but reads it by order of first appearance, so on most row
  orders it gives one worker's counts to another, and one label's to another;
- a fix of GLAD's stopping rule (:func:`_glad_class`): crowd-kit stops when its EM objective Q
  stops rising, but Q without the posterior's entropy may fall between iterations (on the tests'
  three-category labels it stopped after two, with posteriors 0.24 from the fixed point);
- iteration budgets that reach the models' fixed points (crowd-kit's Dawid–Skene stops on a
  non-monotone bound, and MACE's 50 iterations stop short of convergence), and one MACE restart
  (crowd-kit reseeds every restart with the same seed, so its 10 restarts are 10 identical runs).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["METHODS", "ground_truths"]

#: the methods, in the order they are reported
METHODS = ("majority", "dawid_skene", "glad", "mace")

#: EM iterations for Dawid–Skene, all run: crowd-kit's stopping rule (its evidence bound rising by
#: less than ``tol``) fires early because that bound is not monotone (on the ComVE labels it dips at
#: iteration 12, with posteriors still 0.04 from the fixed point); 100 iterations get within 1e-6.
DS_ITERATIONS = 100
#: MACE's iterations: 200 bring Snow et al.'s RTE posteriors within 1e-3 of the fixed point (50,
#: crowd-kit's default, leave them up to 0.4 away and can change a label).
MACE_ITERATIONS = 200
#: GLAD stops when its evidence bound rises by less than this per label and category: posteriors
#: within 0.006 of the fixed point on RTE, ComVE and the tests' data (crowd-kit's 1e-5: up to 0.04)
GLAD_TOLERANCE = 1e-7


def ground_truths(matrix, *, methods: Iterable[str] = METHODS, values: str = "raw", seed: int = 0) -> dict:
    """Each prompt's label by majority vote, Dawid–Skene, GLAD and MACE, with confidences and gold accuracy.

    Parameters
    ----------
    matrix : LabelMatrix
        The labels; its gold (``matrix.gold``, scaled values) scores each method.
    methods : iterable of {"majority", "dawid_skene", "glad", "mace"}
        Which methods to run (default all four, reported in that order).
    values : {"raw", "scaled"}
        Aggregate the raw labels, each distinct raw value a category (default: a rating scale's
        points, a binary schema's 0/1 or true/false, a categorical schema's names), or the scaled
        values (after a binarization map).
    seed : int
        MACE's random initialisation (the other methods are deterministic).

    Returns
    -------
    dict
        ``{method: result}`` for the methods asked for, each result a dict with

        - ``labels``: ``{prompt id: label}``, the label in the ``values`` space (a raw number, a raw
          category name, or a scaled value);
        - ``confidence``: ``{prompt id: p}``, the method's probability for that label (majority:
          the label's share of the prompt's votes);
        - ``accuracy_gold``: share of the prompts with gold whose label's scaled value equals the
          gold, or None without gold; ``n_gold``: how many prompts that is;
        - ``changes``: ``{other method: number of prompts whose label differs}``;

        and per method: ``n_ties`` (majority: prompts decided by the tie rule); ``priors`` and
        ``workers`` (Dawid–Skene: per worker ``confusion`` {true label: {given label: p}} and
        ``skill``, the probability that the worker's label is the true one under the fitted class
        priors); ``workers`` with each worker's ``ability`` α and ``inverse_difficulty`` {prompt id:
        β} (GLAD); ``workers`` with each worker's ``competence`` (MACE: the probability of not
        spamming). With fewer than two categories there is nothing to infer: every method gives the
        one category with confidence 1, and ``reason`` says so.

    Raises
    ------
    ValueError
        naming ``methods`` for an unknown or empty choice, ``values`` for anything but "raw" or
        "scaled", ``seed`` when it is not an integer.

    Notes
    -----
    Models (crowd-kit's implementations, checked in the tests against independent ones written from
    the papers):

    - **Majority vote**: the label most workers gave. A tie goes to the tied label given most often
      over the whole matrix (the crowd's base rate), and a tie in that to the smallest label; the
      same rule settles exact ties in the other methods' posteriors.
    - **Dawid–Skene** (1979): class priors :math:`p_k` and one confusion matrix per worker,
      :math:`\\pi^{(w)}_{kl} = P(\\text{w answers } l \\mid \\text{true class } k)`; EM from the vote
      shares, posterior :math:`P(z_i = k) \\propto p_k \\prod_{w} \\pi^{(w)}_{k, l_{iw}}`.
    - **GLAD** (Whitehill et al. 2009): a worker gives the true class with probability
      :math:`\\sigma(\\alpha_w \\beta_i)` (ability α, inverse difficulty β > 0), any other class
      with :math:`(1 - \\sigma(\\alpha_w \\beta_i)) / (K - 1)`; uniform class prior; N(1, 1) priors
      on α and log β; EM with a conjugate-gradient M-step, until the evidence bound settles.
    - **MACE** (Hovy et al. 2013): the true class is uniform; a worker knows it with probability
      :math:`\\theta_w` and otherwise answers from their own distribution :math:`\\xi_w`;
      variational Bayes with Beta(0.5, 0.5) and Dirichlet(10) priors (crowd-kit's defaults).

    Edge cases: an empty matrix gives empty ``labels``; with one category every prompt gets it (see
    Returns); a prompt without gold is left out of ``accuracy_gold``. Cost on the study's ComVE
    labels (10,000 labels, 2,000 prompts, 244 workers; ``benchmarks/ground_truths.py``, on two
    busy cores): majority 0.03 s, Dawid–Skene 3.6 s, MACE 5 s, GLAD 18 s (crowd-kit's M-step runs
    through pandas), plus about 3 s to import crowd-kit with pandas and scipy on first use.

    References
    ----------
    A. P. Dawid and A. M. Skene, "Maximum likelihood estimation of observer error-rates using the EM
    algorithm", *Applied Statistics* 28(1), 20–28 (1979), doi:10.2307/2346806.
    J. Whitehill, P. Ruvolo, T. Wu, J. Bergsma and J. Movellan, "Whose vote should count more:
    optimal integration of labels from labelers of unknown expertise", NIPS 2009.
    D. Hovy, T. Berg-Kirkpatrick, A. Vaswani and E. Hovy, "Learning whom to trust with MACE",
    NAACL-HLT 2013, 1120–1130.

    Examples
    --------
    Three workers, two prompts; worker ``c`` disagrees on both:

    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(["a", "b", "c", "a", "b", "c"], ["p", "p", "p", "q", "q", "q"],
    ...                              [1, 1, 0, 0, 0, 1], gold={"p": 1, "q": 1})
    >>> truths = ground_truths(m, methods=("majority",))
    >>> truths["majority"]["labels"], truths["majority"]["accuracy_gold"]
    ({'p': 1, 'q': 0}, 0.5)
    >>> round(truths["majority"]["confidence"]["p"], 4)
    0.6667
    """
    methods = _check_methods(methods)
    if values not in ("raw", "scaled"):
        raise ValueError(f"values: expected 'raw' or 'scaled', got {values!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed: expected an integer, got {seed!r}")

    names, codes, scaled_of = _categories(matrix, values)
    prompt_ids = matrix.prompt_ids.tolist()
    worker_ids = matrix.worker_ids.tolist()
    n_prompts, n_classes = matrix.n_prompts, len(names)
    overall = np.bincount(codes, minlength=n_classes)
    # one canonical row order (by worker, then prompt): crowd-kit's sums and MACE's initialisation
    # follow the rows, so this makes the answer a function of the labels, not of how they came in
    order = np.lexsort((matrix.prompt, matrix.worker))
    problem = _Problem(
        matrix.prompt[order], matrix.worker[order], codes[order], names, prompt_ids, worker_ids, int(seed)
    )

    gold = np.isfinite(matrix.gold)
    n_gold = int(gold.sum())
    out: dict[str, dict] = {}
    picked: dict[str, np.ndarray] = {}
    for method in methods:
        if n_classes < 2:
            label = np.zeros(n_prompts, dtype=np.intp)
            result = {
                "confidence": dict.fromkeys(prompt_ids, 1.0),
                "reason": "one category: every method gives it, with confidence 1" if n_classes else "no labels",
            }
        else:
            probas, extra = _FIT[method](problem)
            label = _pick(probas, overall)
            result = {"confidence": dict(zip(prompt_ids, probas[np.arange(n_prompts), label].tolist()))}
            if method == "majority":
                top = probas.max(axis=1, keepdims=True)
                result["n_ties"] = int(((probas == top).sum(axis=1) > 1).sum())
            result.update(extra)
        picked[method] = label
        hits = scaled_of[label[gold]] == matrix.gold[gold]
        out[method] = {
            "labels": dict(zip(prompt_ids, [names[k] for k in label.tolist()])),
            **result,
            "accuracy_gold": float(hits.mean()) if n_gold else None,
            "n_gold": n_gold,
        }
    for method in methods:
        out[method]["changes"] = {
            other: int((picked[method] != picked[other]).sum()) for other in methods if other != method
        }
    return out


def _check_methods(methods: Any) -> tuple[str, ...]:
    if isinstance(methods, str):
        methods = (methods,)
    try:
        asked = set(methods)
    except TypeError:
        raise ValueError(f"methods: expected some of {', '.join(METHODS)}, got {methods!r}") from None
    unknown = sorted(map(repr, asked - set(METHODS)))
    if unknown:
        raise ValueError(f"methods: unknown {', '.join(unknown)}; expected some of {', '.join(METHODS)}")
    if not asked:
        raise ValueError(f"methods: none given; expected some of {', '.join(METHODS)}")
    return tuple(m for m in METHODS if m in asked)


def _categories(matrix, values: str) -> tuple[list, np.ndarray, np.ndarray]:
    """``(names, codes, scaled_of)``: the sorted categories as plain Python values, each label's index
    into them, and each category's scaled value (what gold is compared with)."""
    if values == "raw":
        cats, codes = np.unique(matrix.raw, return_inverse=True)
        if matrix.raw_levels is not None:  # raw holds codes into the category names
            names = [matrix.raw_levels[int(c)] for c in cats]
        else:
            names = [int(c) if float(c).is_integer() else float(c) for c in cats.tolist()]
    else:
        cats, codes = np.unique(matrix.value, return_inverse=True)
        names = cats.tolist()
    scaled_of = np.zeros(len(cats))
    scaled_of[codes] = matrix.value  # a category's labels all share one scaled value
    return names, codes.astype(np.intp), scaled_of


def _pick(probas: np.ndarray, overall: np.ndarray) -> np.ndarray:
    """Each row's most probable class; ties to the class given most often overall, then the smallest."""
    preference = np.lexsort((np.arange(len(overall)), -overall))  # best first
    return preference[np.argmax(probas[:, preference], axis=1)]


# ----------------------------------------------------------------------------------------- crowd-kit
class _Problem(NamedTuple):
    """What every fit needs: the coded labels in canonical order and the names to report them with."""

    prompt: np.ndarray  # prompt code of each label
    worker: np.ndarray  # worker code of each label
    label: np.ndarray  # category code of each label
    names: list  # category names, by code
    prompt_ids: list  # prompt ids, by code
    worker_ids: list  # worker ids, by code
    seed: int

    def frame(self):
        """The labels in crowd-kit's long format, with integer codes."""
        import pandas as pd

        return pd.DataFrame({"task": self.prompt, "worker": self.worker, "label": self.label})

    def probas(self, table) -> np.ndarray:
        """crowd-kit's ``probas_`` (tasks × labels, in its own order) as an array in code order."""
        table = table.reindex(index=range(len(self.prompt_ids)), columns=range(len(self.names)))
        return table.fillna(0.0).to_numpy(dtype=float)


@contextlib.contextmanager
def _quiet():
    """Silence pandas' deprecation notices about crowd-kit's own calls (``inplace=``, ``copy=``)."""
    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.Pandas4Warning)
        yield


def _fit_majority(problem: _Problem) -> tuple[np.ndarray, dict]:
    from crowdkit.aggregation import MajorityVote

    with _quiet():
        model = MajorityVote().fit(problem.frame())
    return problem.probas(model.probas_), {}


def _fit_dawid_skene(problem: _Problem) -> tuple[np.ndarray, dict]:
    from crowdkit.aggregation import DawidSkene

    with _quiet():
        model = DawidSkene(n_iter=DS_ITERATIONS, tol=-np.inf).fit(problem.frame())
    names = problem.names
    classes = range(len(names))
    priors = model.priors_.reindex(classes).fillna(0.0).to_numpy(dtype=float)
    # errors_: rows (worker, given label), columns true label; a label a worker never gave has no row
    workers = []
    for w, table in model.errors_.reindex(columns=classes).groupby(level="worker", sort=True):
        given_by_true = table.droplevel("worker").reindex(classes).fillna(0.0).to_numpy(dtype=float).T
        workers.append(
            {
                "worker": problem.worker_ids[int(w)],
                "confusion": {names[k]: dict(zip(names, row)) for k, row in enumerate(given_by_true.tolist())},
                "skill": float(priors @ np.diag(given_by_true)),
            }
        )
    return problem.probas(model.probas_), {"priors": dict(zip(names, priors.tolist())), "workers": workers}


def _fit_glad(problem: _Problem) -> tuple[np.ndarray, dict]:
    with _quiet():
        model = _glad_class()(tol=GLAD_TOLERANCE).fit(problem.frame())
    workers = [
        {"worker": problem.worker_ids[int(w)], "ability": float(a)} for w, a in model.alphas_.sort_index().items()
    ]
    # crowd-kit estimates log β, so that β = exp(log β) stays positive
    log_beta = model.betas_.reindex(range(len(problem.prompt_ids))).to_numpy(dtype=float)
    extra = {"workers": workers, "inverse_difficulty": dict(zip(problem.prompt_ids, np.exp(log_beta).tolist()))}
    return problem.probas(model.probas_), extra


def _fit_mace(problem: _Problem) -> tuple[np.ndarray, dict]:
    with _quiet():
        model = _mace_class()(n_restarts=1, n_iter=MACE_ITERATIONS, random_state=problem.seed).fit(problem.frame())
    # spamming_ has a row per worker in order of first appearance, which is code order since the
    # rows are sorted by worker; column 1 is the weight of knowing the answer, column 0 of spamming
    know, spam = model.spamming_[:, 1], model.spamming_[:, 0]
    workers = [
        {"worker": problem.worker_ids[int(w)], "competence": float(c)}
        for w, c in zip(np.unique(problem.worker), know / (know + spam))
    ]
    return problem.probas(model.probas_), {"workers": workers}


@functools.cache
def _mace_class():
    """crowd-kit's MACE with the spam-answer table of its E-step in the order its M-step reads it.

    crowd-kit 1.4.2's ``MACE._e_step`` returns that table from a ``groupby(["worker", "label"])``
    (rows sorted by worker, columns by label), while the parameters it becomes are indexed with
    ``pd.factorize`` codes (order of first appearance). Reindexing the table to the factorized
    order fixes it for any row order; sorting the rows by worker and label would not be enough,
    since the first worker's first label need not be the smallest.
    """
    from crowdkit.aggregation import MACE

    class OrderedMACE(MACE):
        def _e_step(self, annotation, task_names, worker_names, label_names, tasks, workers, labels):
            result = super()._e_step(annotation, task_names, worker_names, label_names, tasks, workers, labels)
            log_likelihood, gold_marginals, strategy_counts, knowing_counts = result
            strategy_counts = strategy_counts.reindex(index=worker_names, columns=label_names, fill_value=0.0)
            return log_likelihood, gold_marginals, strategy_counts, knowing_counts

    return OrderedMACE


@functools.cache
def _glad_class():
    """crowd-kit's GLAD with the posterior's entropy in its objective, so that it stops at convergence.

    crowd-kit 1.4.2's ``GLAD.fit`` stops when ``_compute_Q`` (the expected complete-data log
    posterior Q) rises by less than ``tol``. EM raises Q + H(posterior), the evidence bound, not Q
    alone: an E-step may lower Q, and on three-category labels the fit stopped after two iterations.
    Adding H (one term per prompt and category) turns the test into one on the bound; the M-step is
    unchanged, since H does not depend on the abilities and difficulties it optimises.
    """
    from crowdkit.aggregation import GLAD

    class BoundedGLAD(GLAD):
        def _compute_Q(self, data):
            posterior = data.drop_duplicates(["task", "variable"])["posterior"].to_numpy(dtype=float)
            entropy = -float(np.sum(posterior * np.log(np.maximum(posterior, 1e-300))))
            return super()._compute_Q(data) + entropy

    return BoundedGLAD


_FIT = {"majority": _fit_majority, "dawid_skene": _fit_dawid_skene, "glad": _fit_glad, "mace": _fit_mace}
