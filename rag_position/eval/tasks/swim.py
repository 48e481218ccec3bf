"""SWiM's position and size tests (Dsouza et al., Snorkel) on a QA file's own passages.

Depth test: the answer document at 0/25/50/75/100% depth of a context filled to a
token budget with shuffled distractor documents (the same distractors at every
depth). Size test: the answer document among distractors filling 0/25/50/75/100% of
the budget, at a seeded random place. Tokens are counted with the model's own
``count_tokens`` (tiktoken for OpenAI models). Where SWiM generates QA pairs from a
user's documents and judges answers with an LLM, this uses the data file's
questions with their gold passages (``--data`` takes any oracle-format file) and
the paper's best-subspan match.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from rag_position.data import QAInstance, contains_answer
from rag_position.eval.engine.common import EvalConfigError, Prepared, derive_seed
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import Param, int_list
from rag_position.eval.engine.plots import Panel, plot_panels
from rag_position.eval.engine.report import EvalResult, Section, Table, acc_cell, point
from rag_position.eval.engine.stats import summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec, qa_records
from rag_position.passages import Passage
from rag_position.prompts import format_documents, render_qa

TASK = "swim"
PERCENTS = (0, 25, 50, 75, 100)
TEMPLATE_ALLOWANCE = 64
"""Tokens kept free for a chat template when the budget defaults to the model's window."""


SWIM = TaskSpec(
    "swim",
    "SWiM depth and size tests within a token budget",
    (
        Param("budget", None, "tokens (default: the window)", "--budget", {"type": int}),
        int_list("depths", PERCENTS, "--depths", "0,25,50,75,100", "depth percentages"),
        int_list("sizes", PERCENTS, "--sizes", "0,25,50,75,100", "size percentages"),
    ),
)


@SWIM.task
def run_swim(run: TaskRun) -> EvalResult:
    """Run the depth and size tests; ``budget`` defaults to the model's window.

    (The window less ``max_new_tokens`` and :data:`TEMPLATE_ALLOWANCE`.) Parameters
    (:data:`SWIM`): ``budget``, ``depths`` and ``sizes`` (percentages, default
    0,25,50,75,100), and the common ones (:data:`~rag_position.eval.engine.params.COMMON`).

    Example::

        result = run_swim(load_model("embedded"), budget=1000, questions=20, out="runs/swim")
        for row in result.rows:  # test: "depth" or "size", percent: 0, 25, ..., 100
            row["test"], row["percent"], row["accuracy"]
    """
    count = getattr(run.model, "count_tokens", None)
    if not callable(count):
        raise EvalConfigError(
            "swim counts tokens with the model's count_tokens; this model has none"
        )
    budget = run.values["budget"] = run["budget"] or _window_budget(
        run.model, run["max_new_tokens"]
    )
    depths, sizes = run["depths"], run["sizes"]
    for name, values in (("--depths", depths), ("--sizes", sizes)):
        if any(not 0 <= v <= 100 for v in values):
            raise EvalConfigError(f"{name}: percentages must be within 0..100, got {list(values)}")
    path, records = qa_records(run)
    ctx = run.ctx
    chosen = records[: run["questions"] or len(records)]
    section = swim_section(ctx, chosen, _documents(records), budget, depths, sizes, path.name)
    return run.finish([section], title=f"SWiM tests, {budget}-token budget")


def swim_section(
    ctx: RunContext,
    instances: Sequence[QAInstance],
    documents: Sequence[Passage],
    budget: int,
    depths: Sequence[int],
    sizes: Sequence[int],
    source: str,
) -> Section:
    """Run both tests in ``ctx`` and summarise them as a report section."""
    jobs = []
    for inst in instances:
        for test, values in (("depth", depths), ("size", sizes)):
            for percent in values:
                jobs.append(
                    ctx.job(
                        (TASK, "baseline", inst.id, f"{test}={percent}% budget={budget}"),
                        inst.answers,
                        _prepare(ctx, inst, documents, budget, test, percent),
                        {"test": test, "percent": percent, "budget": budget},
                    )
                )
    rows = summarize(ctx.run(jobs, desc="swim"), seed=ctx.seed)
    panels = [
        Panel(
            f"{test} test",
            xlabel,
            "accuracy (%)",
            {ctx.label: [point(r, r["percent"]) for r in rows if r["test"] == test]},
            xticks=list(values),
        )
        for test, xlabel, values in (
            ("depth", "depth of the answer document (% of the budget)", depths),
            ("size", "context filled with distractors (% of the budget)", sizes),
        )
    ]
    figure = "swim-depth-and-size.png"
    plot_panels(ctx.store.path.parent / figure, panels, suptitle=f"{budget}-token budget")
    cells = [[r["test"], f"{r['percent']}%", str(r["n"]), acc_cell(r), _mean_docs(r)] for r in rows]
    return Section(
        title=f"SWiM depth and size tests, {budget}-token budget",
        task=TASK,
        rows=rows,
        tables=[
            Table("Accuracy (%) [95% CI]", ["test", "percent", "n", "accuracy", "documents"], cells)
        ],
        figures=[(figure, "Accuracy by depth of the answer document and by context size")],
        notes=[
            f"{len(instances)} questions of `{source}`; distractors: its passages holding "
            "none of the answers, shuffled per question (seeded)"
        ],
    )


def _prepare(
    ctx: RunContext,
    inst: QAInstance,
    documents: Sequence[Passage],
    budget: int,
    test: str,
    percent: int,
) -> Any:
    def prepare() -> Prepared:
        gold = inst.gold
        if gold is None:
            raise EvalConfigError(f"{inst.source}: line {inst.line}: no gold passage")
        count = ctx.model.count_tokens
        room = budget - count(render_qa(inst.question, [gold]))
        if room < 0:
            raise EvalConfigError(f"--budget {budget} is too small for question {inst.id}")
        share = room if test == "depth" else room * percent // 100
        rng = random.Random(derive_seed(ctx.seed, TASK, inst.id))
        pool = list(documents)
        rng.shuffle(pool)
        chosen: list[Passage] = []
        sizes: list[int] = []
        used = 0
        for doc in pool:
            if doc == gold or contains_answer(f"{doc.title} {doc.text}", inst.answers):
                continue
            size = count(format_documents([doc])) + 1
            if used + size > share:
                break
            chosen.append(doc)
            sizes.append(size)
            used += size
        if test == "depth":
            target = used * percent / 100
            cumulative = [sum(sizes[:i]) for i in range(len(chosen) + 1)]
            at = min(range(len(cumulative)), key=lambda i: (abs(cumulative[i] - target), i))
        else:
            at = rng.randint(0, len(chosen))
        docs = [*chosen[:at], gold, *chosen[at:]]
        prompt = render_qa(inst.question, docs)
        while count(prompt) > budget and len(docs) > 1:  # numbering can add a few tokens
            drop = len(docs) - 1 if docs[-1] is not gold else 0
            docs.pop(drop)
            prompt = render_qa(inst.question, docs)
        info = {"documents": len(docs), "gold_at": docs.index(gold)}
        return Prepared(prompt=prompt, info=info)

    return prepare


def _documents(records: Sequence[QAInstance]) -> list[Passage]:
    seen: set[tuple[str, str]] = set()
    out = []
    for record in records:
        for p in record.passages:
            if (p.title, p.text) not in seen:
                seen.add((p.title, p.text))
                out.append(p)
    return out


def _window_budget(model: Any, max_new_tokens: int) -> int:
    window = getattr(model, "max_context", None)
    if not isinstance(window, int) or window <= 0:
        raise EvalConfigError("the model does not say its context window; pass --budget TOKENS")
    return window - max_new_tokens - TEMPLATE_ALLOWANCE


def _mean_docs(row: dict[str, Any]) -> str:
    docs = row.get("documents")
    return "-" if docs is None else f"{docs:.1f}"
