"""Context length alone (Du, Tian et al.): VarSum accuracy as filler grows, answered
directly vs recite-then-solve.

Each example lists 50 integer variables, then filler (essay-like passages or
whitespace) of 0, 1K, 2K or 4K tokens, then asks for the sum of three of them
(:func:`~rag_position.data.synthetic.make_varsum`). ``direct`` answers from the whole
prompt; ``recite`` is :func:`~rag_position.strategies.recite_then_solve` (recite the
lines needed, answer from them alone). Retrieval is reported on its own: ``recited``
is the share of the three needed lines that the recitation holds word for word
(before grounding repairs anything), ``exact`` the share of recited lines copied
exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from rag_position.data.synthetic import SyntheticInstance, essay_filler, make_varsum
from rag_position.eval.engine.common import (
    EvalConfigError,
    Key,
    Prepared,
    check_fits,
    token_counter,
)
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import Param, int_list, names
from rag_position.eval.engine.plots import Panel, plot_panels
from rag_position.eval.engine.report import EvalResult, Section, Table, num, point, row_cells
from rag_position.eval.engine.runner import Job
from rag_position.eval.engine.stats import summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.rows import DIRECT, RECITE
from rag_position.eval.tasks.multifact import recall
from rag_position.prompts import fill_template
from rag_position.strategies import recite_then_solve

TASK = "length"
DEFAULT_FILLER_TOKENS = (0, 1000, 2000, 4000)
FILLERS = ("essay", "whitespace")
DIRECT_TEMPLATE = "{context}\n\nQuestion: {question}\nAnswer:"
"""The direct prompt: the whole input, then the question."""
ANSWER_TOKENS = 32
RECITE_TOKENS = 256


LENGTH_EXAMPLES = 20
"""Examples the task generates by default."""

LENGTH = TaskSpec(
    "length",
    "VarSum by filler size: direct vs recite-then-solve",
    (
        int_list(
            "filler_tokens",
            DEFAULT_FILLER_TOKENS,
            "--filler-tokens",
            "0,1000,2000,4000",
            "filler sizes",
        ),
        Param(
            "fillers",
            FILLERS,
            "filler kinds",
            "--fillers",
            {"default": "essay,whitespace"},
            lambda text: names(text, what="--fillers") or [],
        ),
        Param("summed", 3, "variables summed (1: a lookup)", "--summed", {"type": int}),
        Param(
            "recite_tokens",
            RECITE_TOKENS,
            "new tokens for the recitation (default 256)",
            "--recite-tokens",
            {"type": int},
        ),
    ),
    defaults={"max_new_tokens": ANSWER_TOKENS},
    cli_questions=None,
    questions_help=f"{LENGTH_EXAMPLES} examples",
)


@LENGTH.task
def run_length(run: TaskRun) -> EvalResult:
    """VarSum accuracy, direct vs recite-then-solve, by filler kind and size; report in
    ``out``. Parameters (:data:`LENGTH`): ``filler_tokens=(0, 1000, 2000, 4000)``,
    ``fillers=("essay", "whitespace")``, ``summed=3``, ``recite_tokens=256``, and the
    common ones (:data:`~rag_position.eval.engine.params.COMMON`). ``questions`` examples per
    setting (default 20). ``summed=1`` turns the sum into a lookup of one variable: a
    model too small to add still shows what length does to its retrieval.
    ``max_new_tokens`` (default 32) bounds each answer, ``recite_tokens`` the recitation.

    Example::

        result = run_length(load_model("embedded"), filler_tokens=(0, 1000), questions=10,
                            out="runs/length")
        for row in result.rows:  # strategy: "direct" or "recite"
            row["strategy"], row["setting"], row["accuracy"]
    """
    filler_tokens, fillers = run["filler_tokens"], run["fillers"]
    unknown = [f for f in fillers if f not in FILLERS]
    if unknown or not fillers:
        raise EvalConfigError(f"--fillers: expected some of {FILLERS}, got {list(fillers)}")
    if not filler_tokens or any(t < 0 for t in filler_tokens):
        raise EvalConfigError(f"--filler-tokens: expected sizes >= 0, got {list(filler_tokens)}")
    check_fits(run.model, filler_tokens, 600 + run["recite_tokens"], option="--filler-tokens")
    ctx = run.ctx
    essay = essay_filler(run["data"]) if "essay" in fillers else None
    examples: dict[tuple[str, int], list[SyntheticInstance]] = {}
    for size in filler_tokens:
        for kind in ["none"] if size == 0 else fillers:
            examples[(kind, size)] = make_varsum(
                run["questions"] or LENGTH_EXAMPLES,
                filler_tokens=size,
                filler=essay if kind == "essay" else None,
                summed=run["summed"],
                seed=run["seed"],
                count_tokens=token_counter(run.model),
            )
    section = length_section(ctx, examples, recite_tokens=run["recite_tokens"])
    return run.finish([section], title="Context length: VarSum, direct vs recite")


def length_section(
    ctx: RunContext,
    examples: Mapping[tuple[str, int], Sequence[SyntheticInstance]],
    *,
    recite_tokens: int = RECITE_TOKENS,
) -> Section:
    """Run direct and recite on every example in ``ctx``; summarise as a section."""
    first = next(iter(examples.values()))[0]
    jobs: list[Job] = []
    for (kind, size), instances in examples.items():
        setting = f"filler={kind} tokens={size}"
        fields = {"filler": kind, "filler_tokens": size}
        for inst in instances:
            prompt = fill_template(DIRECT_TEMPLATE, context=inst.context, question=inst.question)
            jobs.append(
                Job(
                    Key(TASK, ctx.label, DIRECT, inst.id, setting),
                    inst.answers,
                    partial(Prepared, prompt=prompt),
                    fields,
                )
            )
            jobs.append(
                Job(
                    Key(TASK, ctx.label, RECITE, inst.id, setting),
                    inst.answers,
                    partial(_recite, ctx, inst, recite_tokens),
                    fields,
                )
            )
    rows = summarize(ctx.run(jobs, desc="length"), seed=ctx.seed, metric=recall)
    panels = []
    for kind in [k for k in FILLERS if any(r["filler"] == k for r in rows)]:
        curves: dict[str, list[tuple[float, float, float, float]]] = {}
        for row in rows:
            if row["filler"] in (kind, "none"):
                curves.setdefault(row["strategy"], []).append(point(row, row["filler_tokens"]))
        panels.append(
            Panel(
                f"{ctx.label}, {kind} filler",
                "filler tokens",
                "accuracy (%)",
                {name: sorted(points) for name, points in curves.items()},
            )
        )
    figure = "length-accuracy-by-filler.png"
    if panels:
        plot_panels(ctx.store.path.parent / figure, panels)
    cells = [
        [
            *row_cells(r, "filler", "filler_tokens", "strategy", "n", "accuracy"),
            num(_pct(r.get("recited")), 0),
            num(_pct(r.get("exact")), 0),
            num(_pct(r.get("fell_back")), 0),
            num(r["lm_calls"]),
            num(r["seconds"], 2),
        ]
        for r in rows
    ]
    headers = [
        "filler", "tokens", "strategy", "n", "accuracy", "needed lines recited (%)",
        "recited lines exact (%)", "fell back (%)", "LM calls", "seconds",
    ]  # fmt: skip
    return Section(
        title="VarSum: accuracy by filler, direct vs recite-then-solve",
        task=TASK,
        rows=rows,
        tables=[Table("Accuracy (%) [95% CI], recitation and mean cost", headers, cells)],
        figures=[(figure, "Accuracy by filler size")] if panels else [],
        notes=[
            f"{len(first.evidence)} of 50 variables summed; correct when the sum appears in "
            "the answer as a whole number; 'needed lines recited': share of the lines the "
            "sum needs that the raw recitation holds word for word; 'recited lines exact': "
            "share of recited lines copied exactly; 'fell back': no usable recitation, "
            "answered from the full input",
        ],
    )


def _recite(ctx: RunContext, inst: SyntheticInstance, recite_tokens: int) -> Prepared:
    result = recite_then_solve(
        inst.question,
        inst.context,
        ctx.model,
        max_new_tokens=recite_tokens,
        answer_max_new_tokens=ctx.decoding.max_new_tokens,
    )
    raw = result.trace.raw or ""
    info: dict[str, Any] = {
        "recited": sum(line in raw for line in inst.evidence) / len(inst.evidence),
        "fell_back": 1.0 if result.trace.fell_back else 0.0,
    }
    if result.trace.exact_rate is not None:
        info["exact"] = result.trace.exact_rate
    return Prepared(answer=result.answer or "(no answer)", cost=result.cost, info=info)


def _pct(value: float | None) -> float | None:
    return None if value is None else 100 * value
