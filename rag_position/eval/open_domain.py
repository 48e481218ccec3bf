"""Open-domain QA: retriever recall@k against reader accuracy@k ("Lost in the Middle", Fig. 14).

Two kinds of ``data`` file, told apart by their first record:

- **retrieval results**, the release's
  ``nq-open-contriever-msmarco-retrieved-documents.jsonl.gz`` (:data:`RETRIEVED_FILE`)
  and any file in its format: each question's own ranked passages (``ctxs``, best
  first, each with ``hasanswer`` and no ``isgold``). Nothing is retrieved: recall@k
  is whether any of the question's top k carries ``hasanswer: true`` (the file's
  flags, as the paper computes it), and the reader answers from those k in the
  file's order. This reproduces the paper's curve.
- **a corpus file** (the oracle format, default: the packaged dev file; or a
  ``gold_at_i`` file): its distinct passages are the corpus, optionally split into
  chunks of ``chunk_sentences`` sentences (the title kept on each chunk), and the
  retriever (dense or BM25) ranks it for each question. Recall@k: any of the top k
  chunks holds an answer (the metric's normalised match, as DPR's ``has_answer``:
  the text only).

In both, the reader answers from the top k in retrieval order, k in 5, 10, 20, 30,
40, 50. The paper's finding: reader accuracy saturates long before recall. On the
1,966 whole passages of the dev file retrieval is easy (each question's own gold
passage is in the corpus); one-sentence chunks ranked by BM25 make it hard.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from rag_position.data import QAInstance, contains_answer, load_qa
from rag_position.data.loaders import iter_jsonl
from rag_position.errors import DataFormatError
from rag_position.eval.common import EvalConfigError, Key, Prepared, check_questions, derive_seed
from rag_position.eval.datasets import LazyEmbedder, default_oracle_path
from rag_position.eval.plots import Panel, plot_panels
from rag_position.eval.report import EvalResult, Section, Table, acc_cell, point
from rag_position.eval.retrieval import BM25Retriever, DenseRetriever, Retriever
from rag_position.eval.rows import OPEN_DOMAIN_STRATEGIES, RETRIEVER
from rag_position.eval.runner import Job, RunContext
from rag_position.eval.stats import bootstrap_ci, summarize
from rag_position.eval.strategies import EvalStrategy, PromptScores, seed_name, select_strategies
from rag_position.eval.task import EMBEDDER, SCORER, Param, TaskRun, TaskSpec, int_list, names
from rag_position.passages import Passage, check_text
from rag_position.prompts import render_qa
from rag_position.strategies._align import sentence_spans

TASK = "open-domain"
DEFAULT_KS = (5, 10, 20, 30, 40, 50)
RETRIEVED_FILE = "nq-open-contriever-msmarco-retrieved-documents.jsonl.gz"
"""The release's retrieval results: 2,655 NQ-open questions, each with its top 100
Contriever (MS MARCO) passages from the 21M-passage Wikipedia dump."""
FILE_RETRIEVER = "file"
"""The retriever name of rankings read from a retrieval-results file."""
RETRIEVAL = "retriever"  # not a row
"""The parameter, and the rows' field, naming how the passages were retrieved (dense,
bm25): not the ``retriever`` row (:data:`~rag_position.eval.rows.RETRIEVER`)."""


OPEN_DOMAIN = TaskSpec(
    "open-domain",
    "retriever recall@k vs reader accuracy@k",
    (
        int_list("ks", DEFAULT_KS, "--ks", "5,10,20,30,40,50", "passage counts"),
        Param(RETRIEVAL, "dense", "", "--retriever", {"choices": ("dense", "bm25")}),
        Param(
            "chunk_sentences",
            None,
            "split each corpus passage into chunks of N sentences (default: whole passages)",
            "--chunk-sentences",
            {"type": int, "metavar": "N"},
            omit_default=True,
        ),
        Param(
            "strategies",
            None,
            "what the reader does with the top k, comma-separated strategies (default: "
            "retriever, the top k as ranked); e.g. retriever,select_and_place",
            "--strategies",
            {},
            names,
            omit_default=True,
        ),
        SCORER,
        EMBEDDER,
    ),
)

READER = "reader"
"""The rows' strategy name for the top k in retrieval order (``retriever``); another
strategy's rows are ``reader+NAME``."""


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


@OPEN_DOMAIN.task
def run_open_domain(run: TaskRun) -> EvalResult:
    """Recall and reader accuracy at each k for the first ``questions`` of ``data``.

    Parameters (:data:`OPEN_DOMAIN`): ``ks=(5, 10, 20, 30, 40, 50)``,
    ``retriever="dense"`` (or ``"bm25"``), ``chunk_sentences=None`` (whole passages;
    ``N``: chunks of N sentences), ``strategies=None`` (what the reader does with the
    top k: ``["retriever"]``, the ranking as it is; any of ``compare``'s strategies,
    e.g. ``"select_and_place"`` to keep the likeliest chunks), ``embedder`` (the dense
    retriever's), and the common ones (:data:`~rag_position.eval.task.COMMON`). A ``data`` file of
    retrieval results (:func:`is_retrieval_results`, e.g. :data:`RETRIEVED_FILE`) is
    read as ranked, with its ``hasanswer`` flags: ``retriever`` and
    ``chunk_sentences`` then do not apply.

    Example::

        result = run_open_domain(load_model("embedded"), ks=(5, 10, 20), retriever="bm25",
                                 chunk_sentences=1, questions=50, out="runs/open-domain")
        for row in result.rows:  # strategy: "retriever-recall" or "reader"
            row["strategy"], row["setting"], row["accuracy"]
        # the paper's setting, from the release's retrieval results (all 2,655 questions):
        run_open_domain(model, data="nq-open-contriever-msmarco-retrieved-documents.jsonl.gz")
    """
    ks, retriever, questions = run["ks"], run[RETRIEVAL], run["questions"]
    chunk = run["chunk_sentences"]
    if retriever not in ("dense", "bm25"):
        raise EvalConfigError(f"--retriever must be 'dense' or 'bm25', got {retriever!r}")
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise EvalConfigError(f"--ks must be positive passage counts, got {list(ks)}")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise EvalConfigError(
            f"--chunk-sentences must be a positive number of sentences, got {chunk!r}"
        )
    ks = sorted(set(ks))
    path = Path(run["data"]) if run["data"] is not None else default_oracle_path()
    if is_retrieval_results(path):
        if chunk is not None or retriever != "dense":
            given = "--chunk-sentences" if chunk is not None else f"--retriever {retriever}"
            raise EvalConfigError(
                f"{given}: {path} holds retrieval results (each question's own ranked "
                "passages, with 'hasanswer' flags), which are read as given; --retriever "
                "and --chunk-sentences apply to a corpus file (the oracle format)"
            )
        ranked = load_retrieved(path, depth=max(ks), limit=questions)
        note = (
            f"each question's own ranked passages from `{path.name}` (retrieval results), "
            "in the file's order; recall@k: any of the top k has `hasanswer: true` "
            "(the file's flags, as the paper computes it)"
        )
        section = open_domain_section(
            run.ctx, ranked, ks, retriever=FILE_RETRIEVER, note=note, strategies=run["strategies"]
        )
        return run.finish([section], title="Open-domain QA: recall vs accuracy")
    records = load_qa(path)
    check_questions(questions, len(records))
    passages = distinct_passages(records)
    corpus = sentence_chunks(passages, chunk) if chunk else passages
    if max(ks) > len(corpus):
        units = f"{chunk}-sentence chunks" if chunk else "passages"
        raise EvalConfigError(f"--ks: k={max(ks)} exceeds the {len(corpus)} {units} of {path}")
    ranker: Retriever = (
        DenseRetriever(corpus, run["embedder"] or LazyEmbedder())
        if retriever == "dense"
        else BM25Retriever(corpus)
    )
    ctx = run.ctx
    chosen = records[: questions or len(records)]
    ranked = rank_corpus(chosen, corpus, ranker, max(ks))
    source = f"the {len(passages)} distinct passages of `{path.name}`"
    if chunk:
        source = (
            f"the {len(corpus)} distinct chunks of {chunk} sentence{'s' if chunk > 1 else ''} "
            f"of {source} (each chunk keeps its passage's title)"
        )
    note = (
        f"corpus: {source}; passages in retrieval order, best first; recall@k: any of the "
        "top k holds an answer (normalised match in the text)"
    )
    section = open_domain_section(
        ctx, ranked, ks, retriever=ranker.name, chunk_sentences=chunk, note=note,
        strategies=run["strategies"],
    )  # fmt: skip
    return run.finish([section], title="Open-domain QA: recall vs accuracy")


def open_domain_section(
    ctx: RunContext,
    ranked: Sequence[Ranked],
    ks: Sequence[int],
    *,
    retriever: str,
    chunk_sentences: int | None = None,
    note: str = "",
    strategies: Sequence[str] | None = None,
) -> Section:
    """Recall at each k from ``ranked``, the reader's answers from its top k in
    ``ctx``, and both curves as a section.

    ``retriever`` and ``chunk_sentences`` name the ranking in the rows' settings
    (``k=5 retriever=bm25 chunk_sentences=1``) and fields; ``note`` describes the
    corpus in the report. ``strategies``: what the reader does with the top k
    (``compare``'s names; default ``["retriever"]``, the ranking as it is, whose rows are
    ``reader``; another's are ``reader+NAME``). Scoring strategies share their
    one-passage prompts across k (:class:`~rag_position.eval.strategies.PromptScores`).
    """
    chosen = select_strategies(list(strategies or OPEN_DOMAIN_STRATEGIES))
    model = ctx.scoring(PromptScores)
    setting = f"retriever={retriever}"
    fields: dict[str, Any] = {RETRIEVAL: retriever}
    label = f"{retriever} retrieval"
    if chunk_sentences:
        setting += f" chunk_sentences={chunk_sentences}"
        fields["chunk_sentences"] = chunk_sentences
        label += f", {chunk_sentences}-sentence chunks"
    jobs: list[Job] = []
    recall_rows: list[dict[str, Any]] = []
    for k in ks:
        hits = [r.recall(k) for r in ranked]
        mean, low, high = bootstrap_ci(hits, seed=derive_seed(ctx.seed, "recall", k))
        recall_rows.append(
            {
                "task": TASK,
                "model": ctx.label,
                "strategy": "retriever-recall",
                "setting": f"k={k} {setting}",
                "k": k,
                "n": len(hits),
                "accuracy": mean,
                "ci_low": low,
                "ci_high": high,
            }
        )
        for r in ranked:
            inst = r.question
            for strategy in chosen:
                name = READER if strategy.name == RETRIEVER else f"{READER}+{strategy.name}"
                jobs.append(
                    Job(
                        Key(TASK, ctx.label, name, str(inst.id), f"k={k} {setting}"),
                        inst.answers,
                        _prepare(ctx, model, strategy, inst, k),
                        {"k": k, **fields},
                    )
                )
    rows = summarize(ctx.run(jobs, desc="open-domain"), seed=ctx.seed)
    readers = list(dict.fromkeys(r["strategy"] for r in rows))
    figure = "open-domain-recall-vs-accuracy.png"
    plot_panels(
        ctx.store.path.parent / figure,
        [
            Panel(
                f"{ctx.label}, {label}",
                "retrieved passages (k)",
                "%",
                {
                    "retriever recall@k": [point(r, r["k"]) for r in recall_rows],
                    **{
                        _label(name): [point(r, r["k"]) for r in rows if r["strategy"] == name]
                        for name in readers
                    },
                },
                xticks=list(ks),
            )
        ],
    )
    by = {(r["strategy"], r["k"]): r for r in rows}
    cells = [
        [str(r["k"]), acc_cell(r), *(acc_cell(by[(name, r["k"])]) for name in readers)]
        for r in recall_rows
    ]
    notes = [f"{len(ranked)} questions; {note}" if note else f"{len(ranked)} questions"]
    for name in readers:
        held = [by[(name, k)].get("answer_in_context") for k in ks]
        if all(isinstance(x, float) for x in held):
            listed = ", ".join(
                f"{100 * (1 - float(x or 0)):.1f}% at k={k}" for x, k in zip(held, ks, strict=True)
            )
            notes.append(f"{_label(name)}: no passage given holds an answer: {listed}")
        kept = [by[(name, k)].get("kept") for k in ks]
        if all(isinstance(x, float) for x in kept):
            listed = ", ".join(f"{x:.2f} at k={k}" for x, k in zip(kept, ks, strict=True))
            notes.append(f"{_label(name)}: passages kept a question: {listed}")
    return Section(
        title="Open-domain QA: retriever recall and reader accuracy by k",
        task=TASK,
        rows=recall_rows + rows,
        tables=[
            Table(
                "Percent [95% CI]",
                ["k", "retriever recall@k", *(_label(name) for name in readers)],
                cells,
            )
        ],
        figures=[(figure, "Retriever recall@k and reader accuracy@k")],
        notes=notes,
    )


def _label(name: str) -> str:
    """``reader`` -> ``reader accuracy@k``; ``reader+NAME`` -> ``reader accuracy@k, NAME``."""
    _, _, strategy = name.partition("+")
    return "reader accuracy@k" + (f", {strategy}" if strategy else "")


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
    :class:`~rag_position.eval.common.EvalConfigError`.

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


def _prepare(
    ctx: RunContext, model: Any, strategy: EvalStrategy, instance: QAInstance, k: int
) -> Any:
    top = QAInstance(instance.question, instance.answers, tuple(instance.passages[:k]),
                     id=instance.id)  # fmt: skip

    def prepare() -> Prepared:
        if strategy.name == RETRIEVER:  # the ranking as it is
            prepared = Prepared(prompt=render_qa(top.question, list(top.passages)))
        else:
            seed = derive_seed(ctx.seed, seed_name(strategy.name), str(instance.id))
            prepared = strategy.prepare(top, model, seed=seed)
        if prepared.prompt is None:
            return prepared
        # Whether any passage the reader gets holds an answer (the question left out).
        context = prepared.prompt.replace(top.question, " ")
        held = float(contains_answer(context, top.answers))
        return replace(prepared, info={**prepared.info, "answer_in_context": held})

    return prepare
