"""The likelihood-gauge analysis (Liu, Qi, He et al.): does question likelihood predict accuracy?

For every question and gold position, the mean log-likelihood of the question's
tokens given the passages before it (one scoring pass, the model's chat template
applied as for generation) beside whether the answer is correct. Corpus level:
accuracy by tertile of question likelihood. Instance level: per question, the
order (gold position) of highest vs lowest question likelihood. The
question-likelihood curve by gold position is drawn beside the accuracy curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rag_position.data import QAInstance, place_gold
from rag_position.eval.engine.common import EvalConfigError, Key, Prepared, derive_seed
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import EMBEDDER, docs_param, positions_param
from rag_position.eval.engine.plots import Panel, plot_panels
from rag_position.eval.engine.report import EvalResult, Section, Table, acc_cell, num, point
from rag_position.eval.engine.runner import Job
from rag_position.eval.engine.stats import bootstrap_ci, summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.tasks.datasets import MultidocData
from rag_position.eval.tasks.multidoc import sweep_positions
from rag_position.strategies import question_likelihood

TASK = "gauge"


GAUGE = TaskSpec(
    "gauge",
    "question likelihood as a gauge of accuracy",
    (docs_param(), positions_param(), EMBEDDER),
)


@GAUGE.task
def run_gauge(run: TaskRun) -> EvalResult:
    """Score and answer every (question, gold position); write the gauge report to ``out``.

    ``model`` must be a Scorer (``score_spans``) as well as a Generator. Parameters
    (:data:`GAUGE`): ``docs=10``, ``positions`` (default: the paper's), ``embedder``,
    and the common ones (:data:`~rag_position.eval.engine.params.COMMON`).

    Example::

        result = run_gauge(load_model("embedded"), docs=10, questions=20, out="runs/gauge")
        for row in result.rows:  # per position, then likelihood tertiles and per instance
            row["strategy"], row["setting"], row["accuracy"], row["question_ll"]
    """
    if not callable(getattr(run.model, "score_spans", None)):
        raise EvalConfigError("the gauge needs a model that scores spans (score_spans)")
    docs, positions = run["docs"], run["positions"]
    chosen = sweep_positions(positions, docs)
    ctx, dataset = run.multidoc(docs)
    section = gauge_section(ctx, dataset, chosen)
    return run.finish([section], title=f"Likelihood gauge, {docs} passages")


def gauge_section(ctx: RunContext, dataset: MultidocData, positions: Sequence[int]) -> Section:
    """Run the scored sweep in ``ctx``; summarise corpus- and instance-level as a section."""
    k = dataset.docs
    jobs = [
        Job(
            Key(TASK, ctx.label, "baseline", str(inst.id), f"docs={k} gold={p} prompt=qa"),
            inst.answers,
            _prepare(ctx.model, inst, p),
            {"docs": k, "position": p},
        )
        for inst in dataset.instances
        for p in positions
    ]
    records = ctx.run(jobs, desc=f"gauge k={k}")
    rows = summarize(records, seed=ctx.seed)
    derived = _tertile_rows(records, ctx) + _instance_rows(records, ctx)
    lls = {
        p: [r["info"]["question_ll"] for r in records if r["fields"]["position"] == p]
        for p in positions
    }
    ll_points = [(p, *bootstrap_ci(v, seed=derive_seed(ctx.seed, "ll", p))) for p, v in lls.items()]
    figure = "gauge-accuracy-and-likelihood.png"
    plot_panels(
        ctx.store.path.parent / figure,
        [
            Panel(
                "accuracy by gold position",
                "position of the gold passage",
                "accuracy (%)",
                {"accuracy": [point(r, r["position"]) for r in rows]},
                xticks=list(positions),
            ),
            Panel(
                "question log-likelihood by gold position",
                "position of the gold passage",
                "mean log-prob per question token",
                {"question likelihood": ll_points},
                percent=False,
                xticks=list(positions),
            ),
        ],
        suptitle=f"{ctx.label}, {k} passages",
    )
    cells = [
        [f"gold at {r['position']}", str(r["n"]), acc_cell(r), num(r.get("question_ll"), 3)]
        for r in rows
    ]
    cells += [
        [f"{r['strategy']}: {r['setting']}", str(r["n"]), acc_cell(r), num(r.get("question_ll"), 3)]
        for r in derived
    ]
    return Section(
        title=f"Likelihood gauge, {k} passages",
        task=TASK,
        rows=rows + derived,
        tables=[
            Table(
                "Accuracy (%) [95% CI] and mean question log-likelihood",
                ["group", "n", "accuracy", "question log-lik"],
                cells,
            )
        ],
        figures=[(figure, "Accuracy and question likelihood by gold position")],
        notes=[
            "tertile: all (question, position) pairs split into thirds by question likelihood",
            "instance: per question, the gold position of highest vs lowest question likelihood",
        ],
    )


def _prepare(model: Any, instance: QAInstance, position: int) -> Any:
    def prepare() -> Prepared:
        moved = place_gold(instance, position)
        gauge = question_likelihood(moved.question, moved.passages, model)
        (prompt,) = gauge.prompts
        info = {"question_ll": float(gauge.scores[0])}
        return Prepared(prompt=prompt, cost=gauge.cost, info=info)

    return prepare


def _tertile_rows(records: Sequence[Mapping[str, Any]], ctx: RunContext) -> list[dict[str, Any]]:
    lls = np.array([r["info"]["question_ll"] for r in records])
    cuts = np.quantile(lls, [1 / 3, 2 / 3])
    groups: dict[str, list[Mapping[str, Any]]] = {"low": [], "middle": [], "high": []}
    for record, ll in zip(records, lls, strict=True):
        groups["low" if ll <= cuts[0] else "middle" if ll <= cuts[1] else "high"].append(record)
    return [_row(ctx, "tertile", name, members) for name, members in groups.items() if members]


def _instance_rows(records: Sequence[Mapping[str, Any]], ctx: RunContext) -> list[dict[str, Any]]:
    by_instance: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_instance.setdefault(record["instance"], []).append(record)
    highest = [max(g, key=lambda r: r["info"]["question_ll"]) for g in by_instance.values()]
    lowest = [min(g, key=lambda r: r["info"]["question_ll"]) for g in by_instance.values()]
    return [
        _row(ctx, "instance", "highest-likelihood order", highest),
        _row(ctx, "instance", "lowest-likelihood order", lowest),
    ]


def _row(
    ctx: RunContext, strategy: str, setting: str, members: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    correct = [1.0 if m["correct"] else 0.0 for m in members]
    mean, low, high = bootstrap_ci(correct, seed=derive_seed(ctx.seed, strategy, setting))
    ll = float(np.mean([m["info"]["question_ll"] for m in members]))
    return {
        "task": TASK,
        "model": ctx.label,
        "strategy": strategy,
        "setting": setting,
        "n": len(members),
        "accuracy": mean,
        "ci_low": low,
        "ci_high": high,
        "question_ll": ll,
    }
