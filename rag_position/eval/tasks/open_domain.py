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

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rag_position.data import QAInstance, contains_answer, load_qa
from rag_position.eval.engine.common import (
    EvalConfigError,
    Key,
    Prepared,
    check_questions,
    derive_seed,
)
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import EMBEDDER, SCORER, Param, int_list
from rag_position.eval.engine.plots import Panel, plot_panels
from rag_position.eval.engine.report import EvalResult, Section, Table, acc_cell, point
from rag_position.eval.engine.runner import Job
from rag_position.eval.engine.stats import bootstrap_ci, summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.rows import OPEN_DOMAIN_STRATEGIES, RETRIEVER
from rag_position.eval.rows.catalog import (
    EvalStrategy,
    seed_name,
    select_strategies,
    strategy_names,
)
from rag_position.eval.rows.scoring import PromptScores
from rag_position.eval.tasks.datasets import LazyEmbedder, default_oracle_path
from rag_position.eval.tasks.ranked import (
    Ranked,
    distinct_passages,
    is_retrieval_results,
    load_retrieved,
    rank_corpus,
    sentence_chunks,
)
from rag_position.eval.tasks.retrieval import BM25Retriever, DenseRetriever, Retriever
from rag_position.prompts import render_qa

TASK = "open-domain"
DEFAULT_KS = (5, 10, 20, 30, 40, 50)
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
            strategy_names,
            omit_default=True,
        ),
        SCORER,
        EMBEDDER,
    ),
)

READER = "reader"
"""The rows' strategy name for the top k in retrieval order (``retriever``); another
strategy's rows are ``reader+NAME``."""


@OPEN_DOMAIN.task
def run_open_domain(run: TaskRun) -> EvalResult:
    """Recall and reader accuracy at each k for the first ``questions`` of ``data``.

    Parameters (:data:`OPEN_DOMAIN`): ``ks=(5, 10, 20, 30, 40, 50)``,
    ``retriever="dense"`` (or ``"bm25"``), ``chunk_sentences=None`` (whole passages;
    ``N``: chunks of N sentences), ``strategies=None`` (what the reader does with the
    top k: ``["retriever"]``, the ranking as it is; any of ``compare``'s strategies,
    e.g. ``"select_and_place"`` to keep the likeliest chunks), ``embedder`` (the dense
    retriever's), and the common ones (:data:`~rag_position.eval.engine.params.COMMON`). A ``data`` file of
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
    """  # noqa: E501
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
    one-passage prompts across k (:class:`~rag_position.eval.rows.scoring.PromptScores`).
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
