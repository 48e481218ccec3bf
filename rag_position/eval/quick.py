"""``rag-position eval quick``: the README's main job, about 10 minutes on a 2-core CPU.

Multi-document QA with 10 passages, the gold passage at positions 0, 4 and 9,
closed-book and oracle baselines, then the strategy comparison on the same questions:
the baselines, the frameworks' ``LongContextReorder`` and the no-scoring strategies with
the gold at a random position and at the worst of the three; the scoring strategies
(passage likelihood placed by the position profile this run's sweep has just measured,
and select-and-place, which keeps only the passages that passage likelihood trusts: the
library's best, docs/measurements.md, "Measured: select, then place") with the gold at
the random position. Every row is paired with the retriever's order: the questions it
wins and loses, and a sign test. All on the first :data:`QUICK_QUESTIONS` dev questions.
Fixed seeds: two runs give identical numbers (and a second run into the same folder
recomputes nothing).
"""

from __future__ import annotations

from rag_position.eval.common import EvalConfigError
from rag_position.eval.compare import compare_section
from rag_position.eval.multidoc import multidoc_section
from rag_position.eval.report import EvalResult, Section
from rag_position.eval.strategies import available_strategies
from rag_position.eval.task import EMBEDDER, FLAG, Param, TaskRun, TaskSpec, names, negate

QUICK_QUESTIONS = 10
"""Sized for about 10 minutes with the embedded model on a 2-core CPU with bfloat16;
docs/measurements.md has the times ("Measured: `eval quick` on the embedded model")."""
QUICK_DOCS = 10
QUICK_POSITIONS = (0, 4, 9)
QUICK_STRATEGIES = (
    "retriever", "random", "gold_first", "gold_last", "edge", "sandwich",
    "langchain_reorder", "llamaindex_reorder", "passage_likelihood_profile",
    "select_and_place",
)  # fmt: skip
"""The baselines, the frameworks' reorders (where installed), the strategies that need
no scoring pass, and the two scoring strategies of :data:`QUICK_RANDOM_ONLY`."""
QUICK_RANDOM_ONLY = ("passage_likelihood_profile", "select_and_place")
"""Run with the gold at the random position only: they score (ten prompts a question)."""


QUICK = TaskSpec(
    "quick",
    "10-passage sweep, baselines and strategies (~10 min on CPU)",
    (
        Param(
            "strategies", None, "comma-separated (default: light set)", "--strategies", {}, names
        ),
        Param("compare", True, "skip the strategy comparison", "--no-compare", FLAG, negate),
        EMBEDDER,
    ),
    defaults={"questions": QUICK_QUESTIONS},
    cli_questions=None,
)


@QUICK.task
def run_quick(run: TaskRun) -> EvalResult:
    """The position sweep, baselines and comparison on ``questions`` dev questions.

    Parameters (:data:`QUICK`): ``strategies`` (default: :data:`QUICK_STRATEGIES`
    where available; those of :data:`QUICK_RANDOM_ONLY` run with the gold at the
    random position only), ``compare=True``, ``embedder``, and the common ones
    (:data:`~rag_position.eval.task.COMMON`; ``questions`` defaults to
    :data:`QUICK_QUESTIONS`).

    Example::

        result = run_quick(load_model("embedded"), out="runs/quick")  # about 10 minutes
        print(result.report.read_text())
        result.row(setting="closedbook")["accuracy"]
    """
    if run["shard"] is not None and run["compare"]:
        raise EvalConfigError(
            "--shard with quick needs --no-compare: its comparison uses the worst position "
            "of the sweep, which one share would pick on its own questions"
        )
    ctx, dataset = run.multidoc(QUICK_DOCS)
    sweep = multidoc_section(ctx, dataset, positions=list(QUICK_POSITIONS))
    sections: list[Section] = [sweep]
    if run["compare"]:
        if run["strategies"] is None:  # recorded as resolved: the frameworks installed here
            known = available_strategies()
            run.values["strategies"] = [name for name in QUICK_STRATEGIES if name in known]
        narrowed = {name: ("random",) for name in QUICK_RANDOM_ONLY}
        sections.append(
            compare_section(
                ctx, dataset, strategies=run["strategies"], sweep_rows=sweep.rows, gold_of=narrowed
            )
        )
    return run.finish(
        sections,
        title="Quick eval: accuracy by gold position, baselines and strategies",
        settings={"questions": run["questions"], "passages": QUICK_DOCS},
    )
