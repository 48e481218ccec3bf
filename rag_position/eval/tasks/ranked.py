"""Open-domain's rankings: the questions with their retrieved passages, best first
(:class:`Ranked`), from a retrieval-results file (:func:`load_retrieved`) or by ranking
a corpus of the bundled passages (:func:`rank_corpus`, :func:`sentence_chunks`).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from rag_position.data import QAInstance, contains_answer
from rag_position.data.loaders import iter_jsonl
from rag_position.errors import DataFormatError
from rag_position.eval.engine.common import (
    check_questions,
)
from rag_position.eval.tasks.retrieval import Retriever
from rag_position.passages import Passage, check_text
from rag_position.strategies._align import sentence_spans

RETRIEVED_FILE = "nq-open-contriever-msmarco-retrieved-documents.jsonl.gz"
"""The release's retrieval results: 2,655 NQ-open questions, each with its top 100
Contriever (MS MARCO) passages from the 21M-passage Wikipedia dump."""


@dataclass(frozen=True)
class Ranked:
    """One question with its retrieved passages, best first, and which hold an answer.

    ``question.passages`` is the ranking (at least the largest k); ``hits[i]`` says
    whether ``question.passages[i]`` holds an answer (a file's ``hasanswer`` flag, or
    the metric's normalised match for a retrieved corpus passage).

    Example:
        >>> inst = QAInstance("Who?", ("Ann",), (Passage("Ann did."), Passage("Bob.")))
        >>> Ranked(inst, (True, False)).recall(1), Ranked(inst, (False, True)).recall(1)
        (1.0, 0.0)
    """

    question: QAInstance
    hits: tuple[bool, ...]

    def recall(self, k: int) -> float:
        """1.0 when any of the top ``k`` passages holds an answer, else 0.0."""
        return 1.0 if any(self.hits[:k]) else 0.0


def rank_corpus(
    questions: Sequence[QAInstance], corpus: Sequence[Passage], ranker: Retriever, depth: int
) -> list[Ranked]:
    """Each question with the top ``depth`` of ``corpus`` by ``ranker``, and which of
    them hold an answer (the metric's normalised match in the text, as DPR's
    ``has_answer``)."""
    rankings = ranker.top([inst.question for inst in questions], depth)
    ranked = []
    for inst, ranking in zip(questions, rankings, strict=True):
        top = tuple(corpus[i] for i in ranking)
        hits = tuple(contains_answer(p.text, inst.answers) for p in top)
        question = QAInstance(
            inst.question, inst.answers, top, id=inst.id, source=inst.source, line=inst.line
        )
        ranked.append(Ranked(question, hits))
    return ranked


def sentence_chunks(passages: Sequence[Passage], sentences: int) -> list[Passage]:
    """Each passage split into consecutive chunks of ``sentences`` sentences (the
    last may hold fewer), in order; every chunk keeps its passage's title. Chunks
    seen before (same title and text) are dropped.

    Sentences end at ``.``, ``!`` or ``?`` before whitespace (so an initial such as
    "J. K." ends one too: the splitter a RAG pipeline without a language model uses).

    Example:
        >>> p = Passage("Paris is in France. It is big. Rome is in Italy.", title="Cities")
        >>> [c.text for c in sentence_chunks([p], 2)], sentence_chunks([p], 1)[2].title
        (['Paris is in France. It is big.', 'Rome is in Italy.'], 'Cities')
    """
    if isinstance(sentences, bool) or not isinstance(sentences, int) or sentences < 1:
        raise ValueError(f"`sentences` must be a positive count, got {sentences!r}")
    seen: set[tuple[str, str]] = set()
    chunks = []
    for passage in passages:
        spans = sentence_spans(passage.text) or [(0, len(passage.text))]
        for i in range(0, len(spans), sentences):
            group = spans[i : i + sentences]
            text = passage.text[group[0][0] : group[-1][1]].strip()
            key = (passage.title.strip(), text)
            if text and key not in seen:
                seen.add(key)
                chunks.append(Passage(text, title=passage.title))
    return chunks


def is_retrieval_results(path: Path) -> bool:
    """Whether ``path`` holds retrieval results (the release's :data:`RETRIEVED_FILE`
    format): its first record's ``ctxs`` carry ``hasanswer`` and none ``isgold`` (the
    oracle and ``gold_at_i`` files mark their gold passage with ``isgold``).

    A file that cannot be read or is empty is not: the corpus loader then reports it.
    """
    try:
        records = _records(path)
        try:
            _, first = next(records)
        finally:
            records.close()
    except (StopIteration, DataFormatError):
        return False
    ctxs = first.get("ctxs")
    if not isinstance(ctxs, list) or not ctxs or not all(isinstance(c, dict) for c in ctxs):
        return False
    return any("hasanswer" in c for c in ctxs) and not any("isgold" in c for c in ctxs)


def load_retrieved(path: Path, *, depth: int, limit: int | None = None) -> list[Ranked]:
    """The first ``limit`` questions (default: all) of a retrieval-results file, each
    with its top ``depth`` passages in the file's order and their ``hasanswer`` flags.

    Each line needs ``question`` (str), ``answers`` (non-empty list of str) and
    ``ctxs`` (at least ``depth`` objects, best first, each with ``id``, ``title``,
    ``text``, ``score`` (a number, or a string holding one) and ``hasanswer``
    (bool)); only the top ``depth`` are read. Other keys (``nq_annotated_gold``) go
    to the question's ``metadata``. A line that breaks this raises
    :class:`~rag_position.errors.DataFormatError` naming the file, the line and the
    field; a ``limit`` beyond the file's questions, an
    :class:`~rag_position.eval.engine.common.EvalConfigError`.

    Example::

        ranked = load_retrieved(Path(RETRIEVED_FILE), depth=20, limit=100)
        ranked[0].question.question, ranked[0].question.passages[0].title
        sum(r.recall(5) for r in ranked) / len(ranked)  # recall@5
    """
    name = str(path)
    ranked: list[Ranked] = []
    records = _records(path)
    try:
        for line, record in records:
            if limit is not None and len(ranked) >= limit:
                break
            ranked.append(_ranked_from_record(record, name, line, depth))
    finally:
        records.close()
    if not ranked:
        raise DataFormatError(f"{name}: the file holds no records")
    check_questions(limit, len(ranked))
    return ranked


def _ranked_from_record(record: Mapping[str, Any], name: str, line: int, depth: int) -> Ranked:
    def fail(what: str) -> DataFormatError:
        return DataFormatError(f"{name}: line {line}: {what}")

    def get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], label: str) -> Any:
        if key not in obj:
            raise fail(f"missing field '{label}'")
        value = obj[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            expected = " or ".join(k.__name__ for k in kinds)
            raise fail(f"field '{label}' must be {expected}, got {type(value).__name__}")
        if isinstance(value, str):
            try:
                check_text(value, f"field '{label}'")
            except ValueError as exc:
                raise fail(str(exc)) from None
        return value

    question = get(record, "question", str, "question")
    if not question.strip():
        raise fail("field 'question' is empty")
    answers = get(record, "answers", list, "answers")
    if not answers:
        raise fail("field 'answers' is empty")
    for i, answer in enumerate(answers):
        if not isinstance(answer, str):
            raise fail(f"field 'answers[{i}]' must be str, got {type(answer).__name__}")
        try:
            check_text(answer, f"field 'answers[{i}]'")
        except ValueError as exc:
            raise fail(str(exc)) from None
    ctxs = get(record, "ctxs", list, "ctxs")
    if len(ctxs) < depth:
        raise fail(
            f"field 'ctxs' holds {len(ctxs)} passages, fewer than the largest k ({depth}); "
            "pass --ks no larger than every question's list"
        )
    passages: list[Passage] = []
    hits: list[bool] = []
    for i, ctx in enumerate(ctxs[:depth]):
        where = f"ctxs[{i}]"
        if not isinstance(ctx, dict):
            raise fail(f"field '{where}' must be an object, got {type(ctx).__name__}")
        raw_id = get(ctx, "id", (str, int), f"{where}.id")
        title = get(ctx, "title", str, f"{where}.title")
        text = get(ctx, "text", str, f"{where}.text")
        raw_score = get(ctx, "score", (str, int, float), f"{where}.score")
        try:
            score = float(raw_score)
        except (ValueError, OverflowError):
            raise fail(f"field '{where}.score' must be a number, got {raw_score!r}") from None
        hits.append(get(ctx, "hasanswer", bool, f"{where}.hasanswer"))
        passages.append(Passage(text, title=title, id=str(raw_id), score=score))
    metadata = {k: v for k, v in record.items() if k not in {"question", "answers", "ctxs"}}
    instance = QAInstance(
        question,
        tuple(answers),
        tuple(passages),
        id=f"{Path(name).name}:{line}",
        source=name,
        line=line,
        metadata=metadata,
    )
    return Ranked(instance, tuple(hits))


def _records(path: Path) -> Generator[tuple[int, dict[str, Any]], None, None]:
    """:func:`~rag_position.data.loaders.iter_jsonl`'s generator, to close early."""
    return cast(Generator[tuple[int, dict[str, Any]], None, None], iter_jsonl(path))


def distinct_passages(records: Sequence[QAInstance]) -> list[Passage]:
    """Every passage of ``records`` once (same title and text: the first kept), in order.

    Example:
        >>> a, b = Passage("Rome.", title="R"), Passage("Paris.", title="P")
        >>> [p.text for p in distinct_passages([QAInstance("q?", ("x",), (a, b, a))])]
        ['Rome.', 'Paris.']
    """
    seen: set[tuple[str, str]] = set()
    corpus = []
    for record in records:
        for passage in record.passages:
            key = (passage.title.strip(), passage.text.strip())
            if key not in seen:
                seen.add(key)
                corpus.append(passage)
    return corpus
