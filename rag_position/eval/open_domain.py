"""Open-domain QA: retriever recall@k against reader accuracy@k ("Lost in the Middle", Fig. 14).

The corpus is every distinct passage of the data file (for the oracle file: all
2000 gold passages); the retriever ranks it for each question, and the reader
answers from the top k in retrieval order, k in 5, 10, 20, 30, 40, 50. Recall@k:
any of the k passages holds an answer (the metric's normalised match). The
paper's finding: reader accuracy saturates long before recall.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_position.data import QAInstance, contains_answer
from rag_position.eval.common import EvalConfigError, Key, Prepared, derive_seed
from rag_position.eval.datasets import LazyEmbedder
from rag_position.eval.plots import Panel, plot_panels
from rag_position.eval.report import EvalResult, Section, Table, acc_cell, point
from rag_position.eval.retrieval import BM25Retriever, DenseRetriever, Retriever
from rag_position.eval.runner import Job, RunContext
from rag_position.eval.stats import bootstrap_ci, summarize
from rag_position.eval.task import EMBEDDER, Param, TaskRun, TaskSpec, int_list, qa_records
from rag_position.passages import Passage
from rag_position.prompts import render_qa

TASK = "open-domain"
DEFAULT_KS = (5, 10, 20, 30, 40, 50)


OPEN_DOMAIN = TaskSpec(
    "open-domain",
    "retriever recall@k vs reader accuracy@k",
    (
        int_list("ks", DEFAULT_KS, "--ks", "5,10,20,30,40,50", "passage counts"),
        Param("retriever", "dense", "", "--retriever", {"choices": ("dense", "bm25")}),
        EMBEDDER,
    ),
)


@OPEN_DOMAIN.task
def run_open_domain(run: TaskRun) -> EvalResult:
    """Recall and reader accuracy at each k for the first ``questions`` of ``data``.

    Parameters (:data:`OPEN_DOMAIN`): ``ks=(5, 10, 20, 30, 40, 50)``,
    ``retriever="dense"`` (or ``"bm25"``), ``embedder`` (the dense retriever's), and
    the common ones (:data:`~rag_position.eval.task.COMMON`).

    Example::

        result = run_open_domain(load_model("embedded"), ks=(5, 10, 20), retriever="bm25",
                                 questions=50, out="runs/open-domain")
        for row in result.rows:  # strategy: "retriever-recall" or "reader"
            row["strategy"], row["setting"], row["accuracy"]
    """
    ks, retriever, questions = run["ks"], run["retriever"], run["questions"]
    if retriever not in ("dense", "bm25"):
        raise EvalConfigError(f"--retriever must be 'dense' or 'bm25', got {retriever!r}")
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise EvalConfigError(f"--ks must be positive passage counts, got {list(ks)}")
    path, records = qa_records(run)
    corpus = _corpus(records)
    if max(ks) > len(corpus):
        raise EvalConfigError(f"--ks: k={max(ks)} exceeds the {len(corpus)} passages of {path}")
    ctx = run.ctx
    ranker: Retriever = (
        DenseRetriever(corpus, run["embedder"] or LazyEmbedder())
        if retriever == "dense"
        else BM25Retriever(corpus)
    )
    chosen = records[: questions or len(records)]
    section = open_domain_section(ctx, chosen, corpus, ranker, sorted(set(ks)), path.name)
    return run.finish([section], title="Open-domain QA: recall vs accuracy")


def open_domain_section(
    ctx: RunContext,
    instances: Sequence[QAInstance],
    corpus: Sequence[Passage],
    ranker: Retriever,
    ks: Sequence[int],
    source: str,
) -> Section:
    """Retrieve, answer at each k in ``ctx``, and summarise both curves as a section."""
    ranked = ranker.top([inst.question for inst in instances], max(ks))
    jobs: list[Job] = []
    recall_rows: list[dict[str, Any]] = []
    for k in ks:
        hits = [
            1.0 if any(_has_answer(corpus[i], inst.answers) for i in ranking[:k]) else 0.0
            for inst, ranking in zip(instances, ranked, strict=True)
        ]
        mean, low, high = bootstrap_ci(hits, seed=derive_seed(ctx.seed, "recall", k))
        recall_rows.append(
            {
                "task": TASK,
                "model": ctx.label,
                "strategy": "retriever-recall",
                "setting": f"k={k} retriever={ranker.name}",
                "k": k,
                "n": len(hits),
                "accuracy": mean,
                "ci_low": low,
                "ci_high": high,
            }
        )
        for inst, ranking in zip(instances, ranked, strict=True):
            passages = [corpus[i] for i in ranking[:k]]
            jobs.append(
                Job(
                    Key(TASK, ctx.label, "reader", str(inst.id), f"k={k} retriever={ranker.name}"),
                    inst.answers,
                    _prepare(inst.question, passages),
                    {"k": k, "retriever": ranker.name},
                )
            )
    rows = summarize(ctx.run(jobs, desc="open-domain"), seed=ctx.seed)
    figure = "open-domain-recall-vs-accuracy.png"
    plot_panels(
        ctx.store.path.parent / figure,
        [
            Panel(
                f"{ctx.label}, {ranker.name} retrieval",
                "retrieved passages (k)",
                "%",
                {
                    "retriever recall@k": [point(r, r["k"]) for r in recall_rows],
                    "reader accuracy@k": [point(r, r["k"]) for r in rows],
                },
                xticks=list(ks),
            )
        ],
    )
    by_k = {r["k"]: r for r in rows}
    cells = [[str(r["k"]), acc_cell(r), acc_cell(by_k[r["k"]])] for r in recall_rows]
    return Section(
        title="Open-domain QA: retriever recall and reader accuracy by k",
        task=TASK,
        rows=recall_rows + rows,
        tables=[Table("Percent [95% CI]", ["k", "retriever recall@k", "reader accuracy@k"], cells)],
        figures=[(figure, "Retriever recall@k and reader accuracy@k")],
        notes=[
            f"{len(instances)} questions; corpus: the {len(corpus)} distinct passages of "
            f"`{source}`; passages in retrieval order, best first"
        ],
    )


def _corpus(records: Sequence[QAInstance]) -> list[Passage]:
    seen: set[tuple[str, str]] = set()
    corpus = []
    for record in records:
        for passage in record.passages:
            key = (passage.title.strip(), passage.text.strip())
            if key not in seen:
                seen.add(key)
                corpus.append(passage)
    return corpus


def _has_answer(passage: Passage, answers: Sequence[str]) -> bool:
    return contains_answer(passage.text, answers)  # as DPR's has_answer: the text only


def _prepare(question: str, passages: list[Passage]) -> Any:
    def prepare() -> Prepared:
        return Prepared(prompt=render_qa(question, passages))

    return prepare
