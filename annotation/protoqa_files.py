"""Reading ProtoQA's crowdsourced answers (Boratko et al., EMNLP 2020; ``dev.crowdsourced.jsonl``).

Each line is a question: ``metadata.id``, ``question.original``, ``answers.raw`` (each answer as typed,
lightly cleaned, with how many respondents gave it) and ``answers.clusters`` (the experts' groups of
equivalent answers, ``{cluster id: {count, answers}}``). ``services.protoqa_import.protoqa_import`` makes a
finished free-text campaign of the raw answers; the clusters are not stored with it (a prompt's
``gold`` is a label taken as true, and a control's accepted answers, which clusters are not): the
clustering reads them from the file with ``protoqa_clusters``. Reading only, no database.
"""

import json
from dataclasses import dataclass
from pathlib import Path


class ProtoQAFileError(ValueError):
    """A file that is not ProtoQA's crowdsourced JSONL; ``errors`` are ``(line, problem)`` pairs."""

    def __init__(self, errors: list[tuple[int, str]]):
        super().__init__("; ".join(f"line {line}: {problem}" if line else problem for line, problem in errors))
        self.errors = errors


@dataclass(frozen=True)
class ProtoQAQuestion:
    line: int
    qid: str
    text: str
    raw: dict[str, int]  # answer as typed → how many respondents gave it, in the file's order
    clusters: dict[str, dict]  # cluster id → {"count": int, "answers": [str, ...]}

    @property
    def n_answers(self) -> int:
        return sum(self.raw.values())


def _question(line: int, record) -> ProtoQAQuestion:
    """One line's question; ValueError naming the first problem."""
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    qid = (record.get("metadata") or {}).get("id")
    text = (record.get("question") or {}).get("original")
    answers = record.get("answers") or {}
    raw, clusters = answers.get("raw"), answers.get("clusters", {})
    if not isinstance(qid, str) or not qid.strip():
        raise ValueError("no metadata.id")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"question {qid!r} has no question.original")
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"question {qid!r} has no answers.raw")
    for answer, count in raw.items():
        if type(count) is not int or count < 1:  # type(): not True, not 1.0
            raise ValueError(f"question {qid!r}: answer {answer!r} has count {count!r}, not a positive integer")
    if not isinstance(clusters, dict) or not all(
        isinstance(c, dict) and isinstance(c.get("count"), int) and isinstance(c.get("answers"), list)
        for c in clusters.values()
    ):
        raise ValueError(f"question {qid!r}: answers.clusters is not a map of id → {{count, answers}}")
    return ProtoQAQuestion(line=line, qid=qid.strip(), text=text.strip(), raw=raw, clusters=clusters)


def protoqa_read(path: Path | str) -> list[ProtoQAQuestion]:
    """Every question of the file, or ProtoQAFileError listing every bad line (and repeated ids)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProtoQAFileError([(0, f"cannot read {path}: {exc}")]) from exc
    questions, errors, seen = [], [], {}
    for line, body in enumerate(text.splitlines(), start=1):
        if not body.strip():
            continue
        try:
            question = _question(line, json.loads(body))
        except (ValueError, AttributeError) as exc:  # AttributeError: metadata or question not an object
            errors.append((line, str(exc) if isinstance(exc, ValueError) else "metadata and question are objects"))
            continue
        if question.qid in seen:
            errors.append((line, f"question {question.qid!r} again (first on line {seen[question.qid]})"))
            continue
        seen[question.qid] = line
        questions.append(question)
    if not questions and not errors:
        errors.append((0, f"{path} holds no question"))
    if errors:
        raise ProtoQAFileError(errors)
    return questions


def protoqa_clusters(path: Path | str) -> dict[str, dict[str, dict]]:
    """The experts' answer clusters per question: ``{qid: {cluster_id: {"count": n, "answers": [...]}}}``,
    as the file gives them (answers as typed, not normalised like stored labels)."""
    return {q.qid: q.clusters for q in protoqa_read(path)}
