"""``rag-position eval quick``: the README's main job, about 10 minutes on a 2-core CPU.

Multi-document QA with 10 passages, the gold passage at positions 0, 4 and 9,
closed-book and oracle baselines (the U-curve: where this model reads worst), then the
strategy comparison on the same questions with the gold at a random position: the
retriever's order, the gold-first and gold-last bounds, the frameworks'
``LongContextReorder``, the no-scoring strategies, and the scoring ones (passage
likelihood placed by the position profile this run's sweep has just measured, and
select-and-place, which keeps only the passages that passage likelihood trusts: the
library's best, docs/measurements.md, "Measured: select, then place"). Every row is
paired with the retriever's order: the questions it wins and loses, and a sign test.
All on the first :data:`QUICK_QUESTIONS` dev questions. Fixed seeds: two runs give
identical numbers (and a second run into the same folder recomputes nothing).

Sized for the first run on a laptop (issue 31): the shuffled-order baseline and the
comparison at the sweep's worst position are left to ``eval compare``, whose 200-question
figures docs/measurements.md reports.

On the embedded model, each table row gets the same row measured on the first 200
questions (:mod:`rag_position.eval.tasks.reference`, in float32): the 10-question intervals
are up to 60 points wide, the reference's at most 14. Another model's report says why
it has no such column.
"""

from __future__ import annotations

from pathlib import Path

from rag_position.eval.engine.common import EvalConfigError
from rag_position.eval.engine.params import EMBEDDER, FLAG, Param, names, negate
from rag_position.eval.engine.report import EvalResult, Section
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.rows import QUICK_GOLD, QUICK_STRATEGIES, QUICK_VERSUS
from rag_position.eval.rows.catalog import available_strategies
from rag_position.eval.tasks.compare import compare_section
from rag_position.eval.tasks.multidoc import multidoc_section
from rag_position.eval.tasks.reference import absent_note, load_reference, reference_problem

QUICK_QUESTIONS = 10
"""Sized for at most 6 minutes with the embedded model on a 2-core CPU in float32;
docs/measurements.md has the times ("Measured: `eval quick` on the embedded model")."""
QUICK_DOCS = 10
QUICK_POSITIONS = (0, 4, 9)


QUICK = TaskSpec(
    "quick",
    "10-passage sweep, baselines and strategies (~6 min on CPU)",
    (
        Param(
            "strategies", None, "comma-separated (default: light set)", "--strategies", {}, names
        ),
        Param("compare", True, "skip the strategy comparison", "--no-compare", FLAG, negate),
        EMBEDDER,
    ),
    defaults={"questions": QUICK_QUESTIONS},
    cli_questions=None,
    questions_help=f"the first {QUICK_QUESTIONS} of dev",
)


@QUICK.task
def run_quick(run: TaskRun) -> EvalResult:
    """The position sweep, baselines and comparison on ``questions`` dev questions.

    Parameters (:data:`QUICK`): ``strategies`` (default: :data:`QUICK_STRATEGIES`
    where available; all with the gold at a random position, :data:`QUICK_GOLD`),
    ``compare=True``, ``embedder``, and the common ones
    (:data:`~rag_position.eval.engine.params.COMMON`; ``questions`` defaults to
    :data:`QUICK_QUESTIONS`).

    Example::

        result = run_quick(load_model("embedded"), out="runs/quick")  # about 6 minutes
        print(result.report.read_text())
        result.row(setting="closedbook")["accuracy"]
    """
    if run["shard"] is not None and run["compare"]:
        raise EvalConfigError(
            "--shard with quick needs --no-compare: its comparison places passages by the "
            "profile of the sweep, which one share would measure on its own questions"
        )
    ctx, dataset = run.multidoc(QUICK_DOCS)
    problem = reference_problem(
        ctx.label,
        data_name=Path(dataset.path).name if dataset.kind == "oracle" else None,
        default_embedder=run["embedder"] is None,
        seed=run["seed"],
        max_new_tokens=run["max_new_tokens"],
    )
    reference = load_reference() if problem is None else None
    sweep = multidoc_section(
        ctx,
        dataset,
        positions=list(QUICK_POSITIONS),
        columns=reference.columns() if reference else (),
    )
    sections: list[Section] = [sweep]
    if run["compare"]:
        if run["strategies"] is None:  # recorded as resolved: the frameworks installed here
            known = available_strategies()
            run.values["strategies"] = [name for name in QUICK_STRATEGIES if name in known]
        sections.append(
            compare_section(
                ctx,
                dataset,
                strategies=run["strategies"],
                sweep_rows=sweep.rows,
                gold=QUICK_GOLD,
                columns=reference.columns(versus=QUICK_VERSUS) if reference else (),
                versus=QUICK_VERSUS,
            )
        )
    questions = len(dataset.instances)
    if reference is not None:
        for section in sections:
            section.notes.extend(reference.note(section.rows, ctx.label, questions))
    elif problem is not None:
        sweep.notes.append(absent_note(problem, sweep.rows, questions))
    return run.finish(
        sections,
        title="Quick eval: accuracy by gold position, baselines and strategies",
        settings={"questions": run["questions"], "passages": QUICK_DOCS},
    )
