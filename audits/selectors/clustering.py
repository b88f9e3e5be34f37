"""Reads of answer clustering (free-text campaigns, ProtoQA's workflow): a prompt's answers, its
clusterings' current versions, what a researcher may see of them, the agreement of the two independent
clusterings, the free-text noise of the final ones, and the campaign's export in ProtoQA's format.

A campaign's ``clustering_protocol`` says when a prompt's clustering is final. Double-blind
(ProtoQA's): until both independent clusterings of a prompt are saved, a researcher sees only the
proposal and their own; after that (which is when adjudication may start) everyone who manages the
campaign sees both; the adjudicated clustering is final. Single: a researcher's save is final at once
(saved in the adjudicated lane, which every researcher of the campaign shares), nothing is blind and
no agreement is measured. Every number comes from ``audits.engine.clustering``.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Count, Max

from annotation.models import Campaign, Label, Prompt
from audits.engine import clustering as engine
from audits.models import AnswerClustering

Role = AnswerClustering.Role
Protocol = Campaign.ClusteringProtocol
# The agreement numbers need both independent clusterings; more researchers cluster no prompt.
INDEPENDENT_CLUSTERERS = 2


MAX_NAME = 100  # characters of a cluster's name


def _unique_names(names: dict) -> dict:
    """Two groups whose most frequent answers coincide (after trimming) get distinct names."""
    seen, out = set(), {}
    for group, name in names.items():
        name = (name.strip() or "(empty)")[: MAX_NAME - 4]
        unique, n = name, 2
        while unique in seen:
            unique, n = f"{name} ({n})", n + 1
        seen.add(unique)
        out[group] = unique
    return out


def proposed_assignment(*, answers: list[tuple[int, str]]) -> dict[str, str]:
    """The engine's proposal (``propose_clusters``) for ``answers`` (``prompt_answers``' pairs) as an
    assignment {label id: cluster name}, each cluster named after its most frequent answer."""
    groups = engine.propose_clusters([value for _, value in answers])
    members = defaultdict(Counter)
    for (_, value), group in zip(answers, groups, strict=True):
        members[group][value] += 1
    names = _unique_names({group: strings.most_common(1)[0][0] for group, strings in members.items()})
    return {str(pk): names[g] for (pk, _), g in zip(answers, groups, strict=True)}


def prompt_answers(*, prompt: Prompt) -> list[tuple[int, str]]:
    """``(label id, answer)`` of the prompt's counted labels, oldest first: what a clustering assigns."""
    rows = Label.objects.counted().filter(prompt=prompt, is_control=False).order_by("id").values_list("id", "value")
    return [(pk, str(value)) for pk, value in rows]


@dataclass
class PromptClusterings:
    """The current version of each of a prompt's clusterings (latest per author and role) and its history."""

    proposal: AnswerClustering | None = None
    independent: dict = field(default_factory=dict)  # author id → latest independent version
    adjudicated: AnswerClustering | None = None  # the latest adjudicated version
    history: list = field(default_factory=list)  # every version, oldest first
    single: bool = False  # the campaign's clustering protocol is single

    @property
    def both_independent(self) -> bool:
        return len(self.independent) >= INDEPENDENT_CLUSTERERS

    @property
    def final(self) -> AnswerClustering | None:
        """The clustering the noise numbers and the systems' scores take: the adjudicated one; under the
        single protocol, else the latest independent one (saved before the campaign switched to it)."""
        if self.adjudicated is not None or not self.single or not self.independent:
            return self.adjudicated
        return max(self.independent.values(), key=lambda c: c.pk)

    def lane(self, *, role: str, author_id) -> AnswerClustering | None:
        """The current version a new save by ``author_id`` as ``role`` must be based on. Proposals and
        the adjudicated clustering are one lane per prompt (two adjudicators must not overwrite each
        other); independent clusterings one per author."""
        if role == Role.PROPOSAL:
            return self.proposal
        if role == Role.ADJUDICATED:
            return self.adjudicated
        return self.independent.get(author_id)


def _single(campaign: Campaign) -> bool:
    return campaign.clustering_protocol == Protocol.SINGLE


def _collect(rows, *, single: bool) -> dict[int, PromptClusterings]:
    by_prompt: dict[int, PromptClusterings] = defaultdict(lambda: PromptClusterings(single=single))
    for row in rows:  # ordered by id: later rows are later versions
        current = by_prompt[row.prompt_id]
        current.history.append(row)
        if row.role == Role.PROPOSAL:
            current.proposal = row
        elif row.role == Role.ADJUDICATED:
            current.adjudicated = row
        else:
            current.independent[row.author_id] = row
    return by_prompt


def prompt_clusterings(*, prompt: Prompt) -> PromptClusterings:
    rows = AnswerClustering.objects.filter(prompt=prompt).select_related("author").order_by("id")
    return _collect(rows, single=_single(prompt.campaign))[prompt.pk]


def visible_clusterings(*, clusterings: PromptClusterings, user) -> dict:
    """What ``user`` may see (double-blind): ``{"proposal", "mine", "others", "adjudicated", "history"}``.
    ``others`` (the other independent clusterings) and the history of other researchers' independent
    versions stay hidden until both independent clusterings are saved; under the single protocol
    nothing is hidden."""
    mine = clusterings.independent.get(user.pk)
    open_ = clusterings.both_independent or clusterings.single
    others = [c for a, c in clusterings.independent.items() if a != user.pk] if open_ else []
    history = [
        c
        for c in clusterings.history
        if c.role != Role.INDEPENDENT or c.author_id == user.pk or open_  # others' drafts stay blind
    ]
    return {
        "proposal": clusterings.proposal,
        "mine": mine,
        "others": others,
        "adjudicated": clusterings.adjudicated,
        "history": history,
    }


def workspace_role(*, clusterings: PromptClusterings, user) -> str:
    """The role ``user``'s saves take on this prompt: independent for its independent clusterers and,
    until there are two, for anyone; adjudicated for anyone else once both are saved (or for the
    author of an adjudicated version, e.g. imported expert clusters). Under the single protocol,
    adjudicated for everyone: a save is final."""
    if clusterings.single:
        return Role.ADJUDICATED
    if user.pk in clusterings.independent:
        return Role.INDEPENDENT
    if clusterings.both_independent:
        return Role.ADJUDICATED
    if clusterings.adjudicated is not None and clusterings.adjudicated.author_id == user.pk:
        return Role.ADJUDICATED  # imported expert clusters, or an adjudication without independent ones
    return Role.INDEPENDENT


def cluster_labels(clustering: AnswerClustering, label_ids) -> list:
    """The clustering as the engine takes it: one cluster name per label of ``label_ids``, and
    ``engine.INVALID`` for an invalid answer."""
    invalid = {str(pk) for pk in clustering.invalid}
    return [engine.INVALID if str(pk) in invalid else clustering.assignment.get(str(pk)) for pk in label_ids]


def agreement(*, clusterings: PromptClusterings, label_ids) -> dict | None:
    """BLANC and the adjusted Rand index of the two independent clusterings (their current versions),
    over the answers both cover (each invalid answer its own cluster, the engine's default); None until
    both are saved, and under the single protocol (one annotator: no agreement is measured)."""
    if clusterings.single or not clusterings.both_independent:
        return None
    first, second = sorted(clusterings.independent.values(), key=lambda c: c.pk)[:INDEPENDENT_CLUSTERERS]
    covered = [pk for pk in label_ids if _covers(first, pk) and _covers(second, pk)]
    if not covered:
        return None
    a, b = cluster_labels(first, covered), cluster_labels(second, covered)
    return {
        "blanc": engine.blanc(a, b),
        "adjusted_rand": engine.adjusted_rand(a, b),
        "n_answers": len(covered),
        "authors": [first.author.get_username(), second.author.get_username()],
    }


def _covers(clustering: AnswerClustering, pk: int) -> bool:
    return str(pk) in clustering.assignment or pk in clustering.invalid


def counts_of(clustering: AnswerClustering) -> tuple[list[int], int]:
    """``engine.cluster_counts`` of a clustering: answers per cluster, largest first, and invalid answers."""
    return engine.cluster_counts(list(clustering.assignment.values()) + [engine.INVALID] * len(clustering.invalid))


def clusters_of(clustering: AnswerClustering, answers: list[tuple[int, str]]) -> list[dict]:
    """The clusters as ``[{"name", "count", "answers": [(string, count), …]}]``, largest first;
    identical strings are counted once."""
    members: dict[str, Counter] = defaultdict(Counter)
    for pk, value in answers:
        name = clustering.assignment.get(str(pk))
        if name is not None:
            members[name][value] += 1
    clusters = [
        {"name": name, "count": sum(strings.values()), "answers": strings.most_common()}
        for name, strings in members.items()
    ]
    return sorted(clusters, key=lambda c: (-c["count"], c["name"]))


def _campaign_answers(campaign: Campaign) -> dict[int, list[tuple[int, str]]]:
    rows = (
        Label.objects.counted()
        .filter(campaign=campaign, is_control=False)
        .order_by("id")
        .values_list("prompt_id", "id", "value")
    )
    answers = defaultdict(list)
    for prompt_id, pk, value in rows:
        answers[prompt_id].append((pk, str(value)))
    return answers


def clustering_version(*, campaign: Campaign) -> tuple[int, int]:
    """``(number of clustering versions, newest id)`` of the campaign: changes with every save, revert,
    proposal or import (each adds a version), so the dashboard's ETag moves with them."""
    row = AnswerClustering.objects.filter(campaign=campaign).aggregate(n=Count("id"), last=Max("id"))
    return row["n"], row["last"] or 0


def _campaign_clusterings(campaign: Campaign) -> dict[int, PromptClusterings]:
    rows = AnswerClustering.objects.filter(campaign=campaign).select_related("author").order_by("id")
    return _collect(rows, single=_single(campaign))


def clusters_export(*, campaign: Campaign) -> list[dict]:
    """The campaign's final clusterings (``PromptClusterings.final``) in ProtoQA's crowdsourced JSONL
    format, one dict per
    prompt that has one (its external id as ``metadata.id``), so ProtoQA's offline scorer reads them.
    ``answers.raw`` counts every counted answer string, invalid ones included, as ProtoQA's does."""
    answers = _campaign_answers(campaign)
    rows = []
    clusterings = _campaign_clusterings(campaign)
    for prompt in Prompt.objects.filter(campaign=campaign, pk__in=list(clusterings)).order_by("id"):
        final = clusterings[prompt.pk].final
        if final is None:
            continue
        mine = answers.get(prompt.pk, [])
        clusters = {
            c["name"]: {"count": c["count"], "answers": [string for string, _ in c["answers"]]}
            for c in clusters_of(final, mine)
        }
        rows.append(
            {
                "metadata": {"id": prompt.external_id, "source": f"chorus:{campaign.slug}"},
                "question": {"original": prompt.text, "normalized": prompt.text.lower()},
                "answers": {"raw": dict(Counter(value for _, value in mine)), "clusters": clusters},
                "num": {"answers": sum(c["count"] for c in clusters.values()), "clusters": len(clusters)},
            }
        )
    return rows


@dataclass
class OverviewRow:
    prompt: Prompt
    n_answers: int
    n_distinct: int
    clusterings: PromptClusterings
    agreement: dict | None
    noise: engine.AnswerNoise | None  # from the final clustering, else the user's own, else the proposal
    noise_source: str  # "final", "yours", "proposal" or ""
    passes_filter: bool | None


def answers_overview(*, campaign: Campaign, user=None, most_divided: int = 5) -> dict:
    """The answers page: a row per prompt (status, counts, agreement, noise from the final clustering,
    else ``user``'s own independent clustering, else the proposal, and ProtoQA's quality filter: top 8
    clusters hold ≥ 85 % of clustered answers), the campaign's noise summary and its most divided
    prompts. Other researchers' independent clusterings enter only through the agreement, which needs
    both: the page keeps the double-blind."""
    answers = _campaign_answers(campaign)
    clusterings = _campaign_clusterings(campaign)
    single = _single(campaign)
    rows, per_prompt = [], {}
    for prompt in Prompt.objects.filter(campaign=campaign, is_control=False).order_by("id"):
        mine = answers.get(prompt.pk, [])
        current = clusterings.get(prompt.pk) or PromptClusterings(single=single)
        own = current.independent.get(user.pk) if user is not None else None
        candidates = [(current.final, "final"), (own, "yours"), (current.proposal, "proposal")]
        source, noise_source = next(((c, name) for c, name in candidates if c is not None), (None, ""))
        noise = passes = None
        if source is not None:
            counts, n_invalid = counts_of(source)
            noise = engine.answer_noise(counts, n_invalid=n_invalid)
            passes = engine.passes_protoqa_filter(counts)
            per_prompt[prompt.external_id] = (counts, n_invalid)
        rows.append(
            OverviewRow(
                prompt=prompt,
                n_answers=len(mine),
                n_distinct=len({value for _, value in mine}),
                clusterings=current,
                agreement=agreement(clusterings=current, label_ids=[pk for pk, _ in mine]),
                noise=noise,
                noise_source=noise_source,
                passes_filter=passes,
            )
        )
    summary = engine.answer_noise_summary(per_prompt, most_divided=most_divided) if per_prompt else None
    agreed = [row.agreement for row in rows if row.agreement is not None]
    return {
        "rows": rows,
        "summary": summary,
        "clustering_protocol": campaign.clustering_protocol,
        "n_adjudicated": sum(row.clusterings.adjudicated is not None for row in rows),
        "n_final": sum(row.clusterings.final is not None for row in rows),
        "mean_blanc": float(np.mean([a["blanc"] for a in agreed])) if agreed else None,
        "mean_adjusted_rand": float(np.mean([a["adjusted_rand"] for a in agreed])) if agreed else None,
    }
