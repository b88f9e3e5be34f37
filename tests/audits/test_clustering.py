"""Free-text answer clustering (``audits.engine.clustering``): BLANC and ARI against naive and
library versions, normalisation, proposed clusters, answer noise, ProtoQA's filter, and the
proposal's agreement with ProtoQA's expert clusters (numbers from ``benchmarks/clustering.py``)."""

from __future__ import annotations

import doctest
import itertools
import math
import statistics

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from audits.engine import clustering
from audits.engine.clustering import (
    adjusted_rand,
    answer_noise,
    answer_noise_summary,
    blanc,
    cluster_counts,
    normalize_answer,
    passes_protoqa_filter,
    propose_clusters,
)
from audits.engine.wordnet import morphy_index, reader

from .conftest import dataset


def naive_blanc(a, b, weights=None):
    """BLANC pair by pair over mentions (each answer repeated ``weight`` times); None = singleton."""
    w = [1] * len(a) if weights is None else weights
    mentions = [
        (("inv", i) if x is None else x, ("inv", i) if y is None else y)
        for i, (x, y, n) in enumerate(zip(a, b, w))
        for _ in range(n)
    ]
    rc = wc = wn = rn = 0
    for (a1, b1), (a2, b2) in itertools.combinations(mentions, 2):
        in_a, in_b = a1 == a2, b1 == b2
        rc += in_a and in_b
        wc += in_b and not in_a
        wn += in_a and not in_b
        rn += not in_a and not in_b
    if rc + wc + wn + rn == 0:
        return math.nan
    f_c = 2 * rc / (2 * rc + wc + wn) if 2 * rc + wc + wn else None
    f_n = 2 * rn / (2 * rn + wc + wn) if 2 * rn + wc + wn else None
    if f_c is None or f_n is None:
        return f_n if f_c is None else f_c
    return (f_c + f_n) / 2


class TestBlanc:
    def test_hand_worked(self):
        # 4 answers, 6 pairs. a links (0,1); b links (0,1) and (2,3): rc = 1, F_c = 2·1/(1+2) = 2/3;
        # unlinked: 5 in a, 4 in b, 4 in both: F_n = 2·4/(5+4) = 8/9; BLANC = (2/3 + 8/9)/2 = 7/9
        assert blanc(["x", "x", "y", "z"], [1, 1, 2, 2]) == pytest.approx(7 / 9)

    def test_degenerate_cases(self):
        assert blanc([1, 2, 3], ["a", "b", "c"]) == 1.0  # no links anywhere: BLANC = F_n = 1
        assert blanc([1, 1, 1], ["a", "a", "a"]) == 1.0  # one cluster each: BLANC = F_c = 1
        assert blanc([1, 2, 3], ["a", "a", "a"]) == 0.0  # F_c = 0 and F_n = 0
        assert math.isnan(blanc(["x"], ["y"]))

    @pytest.mark.parametrize("seed", range(30))
    def test_equals_naive_pairwise(self, seed):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 25))
        a = [None if rng.random() < 0.1 else int(v) for v in rng.integers(0, rng.integers(1, 8), n)]
        b = [None if rng.random() < 0.1 else f"c{v}" for v in rng.integers(0, rng.integers(1, 8), n)]
        weights = rng.integers(1, 5, n).tolist()
        assert blanc(a, b) == pytest.approx(naive_blanc(a, b), nan_ok=True)
        assert blanc(a, b, weights=weights) == pytest.approx(naive_blanc(a, b, weights), nan_ok=True)
        assert blanc(a, b) == pytest.approx(blanc(b, a), nan_ok=True)  # symmetric

    def test_invalid_answers(self):
        a = ["age", "age", None, None]
        b = ["age", "age", "junk", "junk"]
        # singleton: a keeps 2,3 apart, b links them; drop: only the two valid answers are compared
        assert blanc(a, b) == pytest.approx(naive_blanc(a, b))
        assert blanc(a, b) < 1.0
        assert blanc(a, b, invalid="drop") == 1.0
        assert blanc(a, a) == 1.0  # agreeing on the rejections is agreement

    def test_weights_count_workers(self):
        # "age" given by 3 workers is 3 mentions always linked to each other
        assert blanc(["x", "y"], ["x", "x"], weights=[3, 1]) == pytest.approx(
            naive_blanc(["x", "y"], ["x", "x"], [3, 1])
        )

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"a": [1, 2], "b": [1]}, "both clusterings must label the same answers"),
            ({"a": [1, 2], "b": [1, 2], "weights": [1, -1]}, "weights: need 2 non-negative integers"),
            ({"a": [1, 2], "b": [1, 2], "weights": [1.5, 1]}, "weights: need 2 non-negative integers"),
            ({"a": [1, 2], "b": [1, 2], "invalid": "zero"}, "invalid: 'zero'"),
        ],
    )
    def test_bad_input(self, kwargs, message):
        for fn in (blanc, adjusted_rand):
            with pytest.raises(ValueError, match=message):
                fn(**kwargs)


class TestAdjustedRand:
    @pytest.mark.parametrize("seed", range(10))
    def test_equals_sklearn(self, seed):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 40))
        a, b = rng.integers(0, 5, n).tolist(), rng.integers(0, 4, n).tolist()
        weights = rng.integers(1, 4, n)
        assert adjusted_rand(a, b) == pytest.approx(adjusted_rand_score(a, b))
        assert adjusted_rand(a, b, weights=weights) == pytest.approx(
            adjusted_rand_score(np.repeat(a, weights), np.repeat(b, weights))
        )

    def test_invalid_become_singletons(self):
        a, b = ["x", "x", None, None], ["x", "x", "y", "y"]
        assert adjusted_rand(a, b) == pytest.approx(adjusted_rand_score([0, 0, 1, 2], [0, 0, 1, 1]))
        assert adjusted_rand(a, b, invalid="drop") == 1.0


class TestNormalize:
    @pytest.mark.parametrize(
        ("text", "key"),
        [
            ("Showers", "shower"),  # plural and case
            ("a shower", "shower"),  # leading article
            ("The  Kids!", "kid"),  # article, whitespace, punctuation
            ("their age", "age"),  # possessive determiner
            ("dad's name", "dad name"),  # apostrophe dropped, then singular
            ("children", "child"),  # irregular plural (WordNet's exception list)
            ("Salt & Pepper", "salt and pepper"),
            ("glasses", "glasses"),  # a WordNet lemma of its own (eyeglasses) stays
            ("the", "the"),  # an answer that is only an article keeps it
            ("  ", ""),
        ],
    )
    def test_cases(self, text, key):
        assert clustering.lemmatizer() == "wordnet-morphy"
        assert normalize_answer(text) == key

    def test_rules_without_wordnet(self, monkeypatch, tmp_path):
        monkeypatch.setenv("CHORUS_WORDNET_DIR", str(tmp_path / "missing"))
        morphy_index.cache_clear()
        try:
            assert clustering.lemmatizer() == "rules"
            assert [normalize_answer(t) for t in ("Showers", "the Dishes", "parties", "bus")] == [
                "shower",
                "dish",
                "party",
                "bus",
            ]
            assert normalize_answer("children") == "children"  # irregular plurals need WordNet
        finally:
            monkeypatch.delenv("CHORUS_WORDNET_DIR")
            morphy_index.cache_clear()

    def test_morphy_matches_nltk(self):
        """The direct morphy index gives nltk's morphy on the same files."""
        reference = reader()
        words = (
            "showers glasses dishes ate eating children teeth wolves feet mice pants cookies better ran geese".split()
        )
        ours = morphy_index()
        assert [ours.morphy(w) for w in words] == [reference.morphy(w) for w in words]


class TestProposeClusters:
    def test_obvious_variants(self):
        # "take shower" joins "shower": token_set_ratio scores a key contained in another as 100,
        # and ProtoQA's experts put "shower" and "take a shower" in one cluster
        labels = propose_clusters(["a shower", "Showers", "take shower", "coffee", "Coffee.", "brush teeth"])
        assert labels == [0, 0, 0, 1, 1, 2]

    def test_exact_baseline_and_order(self):
        assert propose_clusters(["b", "a", "B", "the a"], threshold=None) == [0, 1, 0, 1]
        assert propose_clusters([]) == []
        assert propose_clusters(["only"]) == [0]

    def test_deterministic(self):
        answers = ["dog", "dogs", "cat", "a cat", "hamster", "the fish", "fishes", "goldfish"] * 3
        assert propose_clusters(answers) == propose_clusters(list(answers))

    def test_blank_answers_share_a_cluster(self):
        assert propose_clusters(["", "  ", "!!", "x"]) == [0, 0, 0, 1]

    def test_threshold_is_a_similarity(self):
        # token_set_ratio("cat", "hat") = 66.7: merged at 65, apart at 70
        assert propose_clusters(["cat", "hat"], threshold=65) == [0, 0]
        assert propose_clusters(["cat", "hat"], threshold=70) == [0, 1]

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"scorer": "nope"}, "scorer: rapidfuzz.fuzz has no scorer 'nope'"),
            ({"linkage": "ward"}, "linkage: 'ward'; use one of single, average, complete, weighted"),
            ({"threshold": 120}, "threshold: 120; a similarity between 0 and 100, or None"),
        ],
    )
    def test_bad_settings(self, kwargs, message):
        with pytest.raises(ValueError, match=message):
            propose_clusters(["a", "b"], **kwargs)


class TestAnswerNoise:
    def test_hand_worked(self):
        # 5 answers: clusters of 2, 1, 1 and 1 invalid. p = (1/2, 1/4, 1/4):
        # H = 1/2·1 + 2·(1/4·2) = 1.5 bits; top share 2/4; invalid share 1/5
        noise = answer_noise([1, 2, 1], n_invalid=1)
        assert (noise.n_answers, noise.n_invalid, noise.n_clusters) == (5, 1, 3)
        assert noise.entropy_bits == pytest.approx(1.5)
        assert noise.top_share == 0.5
        assert noise.invalid_share == pytest.approx(0.2)
        assert answer_noise([25, 25, 25, 25]).entropy_bits == pytest.approx(2.0)
        assert answer_noise([7]).entropy_bits == 0.0

    def test_undefined(self):
        noise = answer_noise([], n_invalid=3)
        assert (noise.top_share, noise.entropy_bits, noise.invalid_share, noise.reason) == (
            None,
            None,
            1.0,
            "no valid answers",
        )
        assert answer_noise([]).reason == "no answers"
        with pytest.raises(ValueError, match="counts: need positive cluster sizes"):
            answer_noise([3, 0])

    def test_cluster_counts(self):
        assert cluster_counts(["b", "a", None, "b"], weights=[2, 1, 4, 3]) == ([5, 1], 4)

    def test_summary(self):
        per_prompt = {
            "unanimous": ([10], 0),
            "split": ([5, 5], 2),
            "spread": ([1] * 10, 0),
            "empty": ([], 4),
        }
        s = answer_noise_summary(per_prompt, most_divided=2)
        assert s.n_prompts == 4
        # entropies 0, 1, log2(10) over the three prompts with valid answers
        entropy = [0.0, 1.0, math.log2(10)]
        assert s.distribution["entropy_bits"]["mean"] == pytest.approx(statistics.fmean(entropy))
        assert s.distribution["entropy_bits"]["median"] == 1.0
        assert s.distribution["entropy_bits"]["q1"] == pytest.approx(np.percentile(entropy, 25))
        assert s.distribution["n_clusters"]["n"] == 4  # defined (0) for the empty prompt too
        assert s.distribution["invalid_share"]["median"] == pytest.approx(np.median([0, 2 / 12, 0, 1]))
        assert [p for p, _, _ in s.most_divided] == ["spread", "split"]
        assert s.failing_filter == ["spread", "empty"]


class TestProtoQAFilter:
    def test_constructed(self):
        # 100 answers in 10 clusters: the top 8 hold exactly 85 (kept) or 84 (dropped); order is free
        assert passes_protoqa_filter([7, 11, 11, 11, 11, 11, 10, 10, 10, 8]) is True
        assert passes_protoqa_filter([8, 11, 11, 11, 11, 10, 10, 10, 10, 8]) is False
        assert passes_protoqa_filter([30, 70]) is True  # 8 or fewer clusters always pass
        assert passes_protoqa_filter([]) is False


def test_docstring_examples():
    result = doctest.testmod(clustering, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


@pytest.fixture(scope="module")
def questions():
    dataset("protoqa", "dev", "dev.crowdsourced.jsonl")
    from benchmarks.clustering import questions

    return questions()


class TestProtoQADev:
    """Numbers printed by ``.venv/bin/python benchmarks/clustering.py`` (all 52 questions, BLANC per
    distinct string, the experts' dropped answers left out)."""

    def test_proposal_beats_baselines(self, questions):
        from benchmarks.clustering import scores

        proposal = scores(questions, propose_clusters)["blanc"]
        singletons = scores(questions, lambda a: list(range(len(a))))["blanc"]
        exact = scores(questions, lambda a: propose_clusters(a, threshold=None))["blanc"]
        assert len(questions) == 52
        assert statistics.fmean(singletons) == pytest.approx(0.4546, abs=5e-4)
        assert statistics.fmean(exact) == pytest.approx(0.4962, abs=5e-4)
        assert statistics.fmean(proposal) == pytest.approx(0.6067, abs=5e-4)
        assert statistics.fmean(proposal) - statistics.fmean(singletons) > 0.10
        assert all(p > s for p, s in zip(proposal, singletons))  # on every question

    def test_expert_answer_noise(self, questions):
        per_prompt = {q["id"]: cluster_counts(q["expert"], q["counts"]) for q in questions}
        summary = answer_noise_summary(per_prompt)
        assert summary.n_prompts == 52
        assert summary.distribution["n_clusters"]["median"] == 10  # PROVENANCE.md: median 10 clusters
        assert summary.failing_filter == ["r2q6", "r2q47"]  # top 8 clusters hold 81.6% and 84.0%
