"""Writes of answer clustering: the engine's proposal, a researcher's saved version, a revert, the
adjudicated final clustering, and expert clusters imported from ProtoQA's format.

A clustering is never edited: each save adds a version (``AnswerClustering``). A save names the
version it was based on, and one based on anything but the current version is refused (two tabs, or
two adjudicators, must not silently overwrite each other). Saves take a row lock on the prompt, so the
check and the insert are one step on PostgreSQL as on SQLite. Rules (ProtoQA's workflow, the
double-blind clustering protocol): at most two researchers cluster a prompt independently; the
adjudicator is somebody else and starts once both are saved, from either of them or from the proposal.
Under the single protocol every save is final (the adjudicated lane), by any researcher of the campaign.
Every save and import is recorded in the activity log.
"""

from collections import defaultdict

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from annotation.models import Campaign, Prompt
from annotation.schemas import LabelValueError, answer_normalize
from audits.models import AnswerClustering
from audits.selectors.clustering import (
    INDEPENDENT_CLUSTERERS,
    MAX_NAME,
    prompt_answers,
    prompt_clusterings,
    proposed_assignment,
)
from audits.signals import analysis_recorded

Role = AnswerClustering.Role
# The code of the refusal of a save based on anything but the lane's current version (the API answers
# it 409, naming the rule, where other refusals are 400s).
STALE = "stale_version"


def _locked(prompt: Prompt) -> Prompt:
    return Prompt.objects.select_for_update().get(pk=prompt.pk)


def _next_version(*, prompt: Prompt, role: str, author) -> int:
    lane = AnswerClustering.objects.filter(prompt=prompt, role=role)
    if role == Role.INDEPENDENT:
        lane = lane.filter(author=author)
    return (lane.aggregate(v=Max("version"))["v"] or 0) + 1


def _clean(*, answers, assignment: dict, invalid) -> tuple[dict, list[int]]:
    """The assignment with stripped names and string keys, and the sorted invalid ids; refuses label ids
    that are not the prompt's answers, answers left out, answers twice, and empty or long names."""
    answer_ids = {pk for pk, _ in answers}
    try:
        assigned = {int(pk): name for pk, name in assignment.items()}
        rejected = [int(pk) for pk in invalid]
    except (TypeError, ValueError, AttributeError) as error:
        raise ValidationError(f"Label ids must be numbers ({error}).") from error
    problems = []
    unknown = sorted((set(assigned) | set(rejected)) - answer_ids)
    if unknown:
        problems.append(f"Labels {', '.join(map(str, unknown[:10]))} are not answers of this prompt.")
    both = sorted(set(assigned) & set(rejected))
    if both:
        problems.append(f"Labels {', '.join(map(str, both[:10]))} are both in a cluster and marked invalid.")
    missing = [value for pk, value in answers if pk not in assigned and pk not in rejected]
    if missing:
        problems.append(
            f"{len(missing)} answers are in no cluster and not marked invalid "
            f"(e.g. “{missing[0]}”): put each in a cluster or mark it invalid."
        )
    cleaned = {}
    for pk, name in sorted(assigned.items()):
        name = name.strip() if isinstance(name, str) else ""
        if not name:
            problems.append(f"Label {pk} is in a cluster without a name: every cluster needs one.")
            break
        if len(name) > MAX_NAME:
            problems.append(f"The cluster name “{name[:30]}…” is longer than {MAX_NAME} characters.")
            break
        cleaned[str(pk)] = name
    if problems:
        raise ValidationError(problems)
    return cleaned, sorted(rejected)


def _check_role(*, clusterings, role: str, by) -> None:
    """ProtoQA's workflow: two independent clusterers, then an adjudicator who is neither; under the
    single protocol, only final saves."""
    if clusterings.single:
        if role != Role.ADJUDICATED:
            raise ValidationError(
                "This campaign's clustering protocol is single: a save is the final clustering (role adjudicated)."
            )
        return
    if role == Role.INDEPENDENT:
        if clusterings.adjudicated is not None and clusterings.adjudicated.author_id == by.pk:
            raise ValidationError("You adjudicated this prompt, so you cannot also cluster it independently.")
        others = [c.author.get_username() for a, c in clusterings.independent.items() if a != by.pk]
        if by.pk not in clusterings.independent and len(others) >= INDEPENDENT_CLUSTERERS:
            raise ValidationError(
                f"This prompt already has two independent clusterings ({' and '.join(others)}): adjudicate it instead."
            )
    elif role == Role.ADJUDICATED:
        if by.pk in clusterings.independent:
            raise ValidationError("You clustered this prompt independently, so somebody else must adjudicate it.")
        # Imported expert clusters are a final clustering already: they may be corrected without
        # independent ones.
        if not clusterings.both_independent and clusterings.adjudicated is None:
            raise ValidationError(
                f"Adjudication starts once two researchers have clustered this prompt independently "
                f"({len(clusterings.independent)} so far)."
            )
    else:
        raise ValidationError(f"Unknown role “{role}”: independent or adjudicated.")


def _check_base(*, clusterings, role: str, by, base_version: int | None, based_on) -> None:
    current = clusterings.lane(role=role, author_id=by.pk)
    have = current.version if current is not None else 0
    if (base_version or 0) != have:
        if current is None:
            raise ValidationError(
                f"There is no version {base_version} of this clustering: reload the page.", code=STALE
            )
        who = f" by {current.author.get_username()}" if current.author_id and current.author_id != by.pk else ""
        raise ValidationError(
            f"Version {have} of this clustering was saved{who} at {current.created_at:%H:%M:%S} UTC after you "
            f"loaded version {base_version or 0}: nothing was saved. Reload the page to see it, then redo "
            "your changes.",
            code=STALE,
        )
    # Double-blind: an independent clustering starts from the proposal or its own versions only.
    if (
        based_on is not None
        and role == Role.INDEPENDENT
        and based_on.role != Role.PROPOSAL
        and not (based_on.role == Role.INDEPENDENT and based_on.author_id == by.pk)
    ):
        raise ValidationError("An independent clustering can start only from the proposal or your own versions.")


def clustering_save(
    *,
    prompt: Prompt,
    by,
    role: str,
    assignment: dict,
    invalid=(),
    base_version: int | None,
    based_on: AnswerClustering | None = None,
    note: str = "",
) -> AnswerClustering:
    """Save a new version of ``by``'s clustering of ``prompt`` as ``role`` (independent or adjudicated).
    ``base_version`` is the version the researcher loaded (0 or None: none yet); ``based_on`` the version
    their edit started from, when another (the proposal, or for an adjudicator an independent one).
    Raises ``ValidationError`` with every problem named; nothing is saved then."""
    with transaction.atomic(durable=True):
        prompt = _locked(prompt)
        clusterings = prompt_clusterings(prompt=prompt)
        _check_role(clusterings=clusterings, role=role, by=by)
        if based_on is not None and based_on.prompt_id != prompt.pk:
            raise ValidationError("The clustering you started from belongs to another prompt.")
        _check_base(clusterings=clusterings, role=role, by=by, base_version=base_version, based_on=based_on)
        cleaned, rejected = _clean(answers=prompt_answers(prompt=prompt), assignment=assignment, invalid=invalid)
        saved = AnswerClustering.objects.create(
            campaign_id=prompt.campaign_id,
            prompt=prompt,
            author=by,
            role=role,
            version=_next_version(prompt=prompt, role=role, author=by),
            assignment=cleaned,
            invalid=rejected,
            based_on=based_on or clusterings.lane(role=role, author_id=by.pk),
            note=note[:200],
        )
        final = " (final)" if clusterings.single and role == Role.ADJUDICATED else ""
        analysis_recorded.send(
            sender=AnswerClustering,
            campaign_id=prompt.campaign_id,
            verb="clustering.saved",
            summary=f"Saved the {role} clustering of prompt {prompt.external_id}{final}, version {saved.version}: "
            f"{saved.n_clusters} clusters, {len(rejected)} invalid",
            detail={"prompt": prompt.external_id, "role": role, "version": saved.version, "note": saved.note},
            actor=by,
        )
        return saved


def clustering_revert(*, clustering: AnswerClustering, by, base_version: int | None) -> AnswerClustering:
    """Make an earlier version current again, as a new version of the same lane (history is kept).
    Answers that arrived since that version are refused like any incomplete save."""
    if clustering.role == Role.PROPOSAL:
        raise ValidationError("The proposal is not yours to revert: start from it instead.")
    if clustering.role == Role.INDEPENDENT and clustering.author_id != by.pk:
        raise ValidationError("You can revert only your own independent clustering.")
    return clustering_save(
        prompt=clustering.prompt,
        by=by,
        role=clustering.role,
        assignment=clustering.assignment,
        invalid=clustering.invalid,
        base_version=base_version,
        based_on=clustering,
        note=f"revert to version {clustering.version}",
    )


def clustering_propose_all(*, campaign: Campaign) -> int:
    """``clustering_propose`` for every prompt of the campaign (controls aside); returns how many have
    a proposal covering their answers now (prompts without answers have none)."""
    proposed = [clustering_propose(prompt=prompt) for prompt in campaign.prompts.filter(is_control=False)]
    return sum(proposal is not None for proposal in proposed)


def clustering_propose(*, prompt: Prompt) -> AnswerClustering | None:
    """The engine's proposal for ``prompt`` (``propose_clusters``), saved as a new proposal version
    unless the current one already covers exactly the prompt's answers; None for a prompt without
    answers. Clusters are named after their most frequent answer."""
    with transaction.atomic(durable=True):
        prompt = _locked(prompt)
        answers = prompt_answers(prompt=prompt)
        if not answers:
            return None
        current = prompt_clusterings(prompt=prompt).proposal
        ids = {str(pk) for pk, _ in answers}
        if current is not None and set(current.assignment) | {str(pk) for pk in current.invalid} == ids:
            return current
        return AnswerClustering.objects.create(
            campaign_id=prompt.campaign_id,
            prompt=prompt,
            author=None,
            role=Role.PROPOSAL,
            version=_next_version(prompt=prompt, role=Role.PROPOSAL, author=None),
            assignment=proposed_assignment(answers=answers),
            based_on=current,
            note="proposed by Chorus",
        )


def expert_clusters_import(*, campaign: Campaign, clusters: dict, by, note: str = "imported") -> int:
    """Import expert clusters (ProtoQA's ``{question id: {cluster id: {count, answers}}}``) as the
    adjudicated clusterings of the campaign's prompts with those external ids; returns how many.

    Each cluster takes, for each of its strings, the labels whose answer is that string, up to its
    ``count`` (ProtoQA's counts are authoritative: its cleaning dropped a few answers from clusters,
    which then stay invalid, as do answers in no cluster). All or nothing: a missing question, a
    string in two clusters of a question or a cluster with fewer matching answers than its count
    refuses the whole file, every problem named."""
    prompts = {p.external_id: p for p in Prompt.objects.filter(campaign=campaign, external_id__in=list(clusters))}
    problems, plans = [], []
    for qid, question in clusters.items():
        prompt = prompts.get(qid)
        if prompt is None:
            problems.append(f"{qid}: no prompt of this campaign has this id.")
            continue
        plan = _match(qid=qid, question=question, answers=prompt_answers(prompt=prompt), problems=problems)
        if plan is not None:
            plans.append((prompt, *plan))
    if problems:
        raise ValidationError(problems[:20] + ([f"… and {len(problems) - 20} more."] if len(problems) > 20 else []))
    with transaction.atomic(durable=True):
        for prompt, assignment, rejected in plans:
            prompt = _locked(prompt)
            AnswerClustering.objects.create(
                campaign=campaign,
                prompt=prompt,
                author=by,
                role=Role.ADJUDICATED,
                version=_next_version(prompt=prompt, role=Role.ADJUDICATED, author=by),
                assignment=assignment,
                invalid=rejected,
                based_on=prompt_clusterings(prompt=prompt).adjudicated,
                note=note[:200],
            )
        analysis_recorded.send(
            sender=AnswerClustering,
            campaign_id=campaign.pk,
            verb="clustering.imported",
            summary=f"Imported expert clusters of {len(plans)} prompts as their final clusterings",
            detail={"prompts": [prompt.external_id for prompt, _, _ in plans][:100], "note": note[:200]},
            actor=by,
        )
    return len(plans)


def _answer_key(text) -> str:
    """A cluster's string as a worker's answer is stored (``answer_normalize``), so it finds the labels."""
    try:
        return answer_normalize(text)
    except LabelValueError:
        return str(text)


def _match(*, qid: str, question, answers, problems: list) -> tuple[dict, list] | None:
    by_value = defaultdict(list)
    for pk, value in answers:
        by_value[value].append(pk)
    assignment, owner = {}, {}
    if not isinstance(question, dict):
        problems.append(f"{qid}: clusters must be a mapping of cluster id to {{count, answers}}.")
        return None
    for cid, cluster in question.items():
        try:
            count, strings = int(cluster["count"]), list(cluster["answers"])
        except (KeyError, TypeError, ValueError):
            problems.append(f"{qid} cluster {cid}: needs a count and a list of answers.")
            continue
        matched = []
        for string in strings:
            if string in owner and owner[string] != cid:
                problems.append(f"{qid}: “{string}” is in clusters {owner[string]} and {cid}.")
            owner[string] = cid
            matched += by_value.pop(_answer_key(string), [])
        if len(matched) < count:
            problems.append(f"{qid} cluster {cid}: count {count}, but only {len(matched)} answers match its strings.")
        for pk in matched[:count]:
            assignment[str(pk)] = str(cid)[:MAX_NAME]
    rejected = sorted(pk for pk, _ in answers if str(pk) not in assignment)
    return assignment, rejected
