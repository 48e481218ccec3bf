"""Medoid voting (Dsouza et al., SWiM) against single runs at the model's worst position.

Multi-document QA with the gold passage at the model's worst position (the lowest
point of this run's position sweep, unless given). ``single``: one greedy answer.
``medoid_k3`` / ``medoid_k5`` (one per ``--votes`` value ``k``):
:func:`~rag_position.strategies.medoid_vote` over the given order and k - 1 seeded
permutations (greedy). The paper's control,
``resample_k5_t0.7`` (one per ``--control-temperatures`` value): five samples at the
same fixed order with temperature, then the same medoid vote, so any gain of the
permutations over it comes from moving the passages, not from voting alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_position.data import QAInstance, place_gold
from rag_position.eval.engine.common import EvalConfigError, Key, Prepared, derive_seed
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import EMBEDDER, docs_param, float_list, int_list
from rag_position.eval.engine.plots import plot_bars
from rag_position.eval.engine.report import EvalResult, Section, Table, acc_cell, num, point
from rag_position.eval.engine.runner import Job
from rag_position.eval.engine.stats import summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.tasks.datasets import MultidocData
from rag_position.eval.tasks.multidoc import WORST_POSITION, find_worst_position, worst_sweep
from rag_position.models.embedders import load_embedder
from rag_position.prompts import render_qa
from rag_position.strategies import medoid_vote

TASK = "voting"
DEFAULT_VOTES = (3, 5)
"""Orders (hence answers) per medoid vote: the ``medoid_k3`` and ``medoid_k5`` rows."""
DEFAULT_CONTROL_TEMPERATURES = (0.7,)
CONTROL_ORDERS = 5
"""Samples per resampling control vote: the ``resample_k5_t...`` rows."""


VOTING_QUESTIONS = 30
"""Dev questions ``voting`` runs by default (all of a ``data`` file)."""

VOTING = TaskSpec(
    "voting",
    "medoid voting vs single runs at the worst position",
    (
        docs_param(),
        int_list("votes", DEFAULT_VOTES, "--votes", "3,5", "orders (answers) per vote"),
        float_list(
            "control_temperatures",
            DEFAULT_CONTROL_TEMPERATURES,
            "--control-temperatures",
            "0.7",
            "resampling controls",
        ),
        WORST_POSITION,
        EMBEDDER,
    ),
    cli_questions=None,
    questions_help=f"{VOTING_QUESTIONS} of dev, all of --data",
)


@VOTING.task
def run_voting(run: TaskRun) -> EvalResult:
    """Single runs vs medoid voting (``votes``) vs resampling controls; report in ``out``.

    Parameters (:data:`VOTING`): ``votes=(3, 5)`` (answers per vote, one ``medoid_k<n>``
    row each), ``control_temperatures=(0.7,)``,
    ``docs=10``, ``worst_position`` (default: measured by a sweep in the same run),
    ``embedder``, and the common ones (:data:`~rag_position.eval.engine.params.COMMON`).
    ``questions`` defaults to 30 of the dev file (all of a ``data`` file). ``embedder``
    embeds the answers (default: the embedded all-MiniLM-L6-v2; it also mines the
    distractors when building instances).

    Example::

        result = run_voting(load_model("embedded"), votes=(3,), questions=20, worst_position=4,
                            embedder=load_embedder("embedded"), out="runs/voting")
        for row in result.rows:  # strategy: "single", "medoid_k3", "resample_k5_t0.7"
            row["strategy"], row["accuracy"], row["lm_calls"]
    """
    votes, temperatures, worst = run["votes"], run["control_temperatures"], run["worst_position"]
    if not votes or any(n < 2 for n in votes):
        raise EvalConfigError(f"--votes: voting needs at least 2 answers, got {list(votes)}")
    if any(t <= 0 for t in temperatures):
        raise EvalConfigError(
            f"--control-temperatures must be > 0 (greedy resampling repeats one answer), "
            f"got {list(temperatures)}"
        )
    if run["shard"] is not None and worst is None:
        raise EvalConfigError(
            "--shard needs --worst-position: a sweep run on one share would pick its own "
            "worst position; measure it first (`eval multidoc`, sharded and merged)"
        )
    embedder = run["embedder"] or load_embedder("embedded")
    if run["questions"] is None and run["data"] is None:
        run.values["questions"] = VOTING_QUESTIONS
    ctx, dataset = run.multidoc(run["docs"], embedder)
    sweep, rows = worst_sweep(ctx, dataset, worst)
    voted = voting_section(
        ctx,
        dataset,
        embedder,
        votes=votes,
        control_temperatures=temperatures,
        worst_position=worst,
        sweep_rows=rows,
        max_new_tokens=run["max_new_tokens"],
    )
    return run.finish([*sweep, voted], title=f"Medoid voting, {run['docs']} passages")


def voting_section(
    ctx: RunContext,
    dataset: MultidocData,
    embedder: Any,
    *,
    votes: Sequence[int],
    control_temperatures: Sequence[float],
    worst_position: int | None,
    sweep_rows: Any,
    max_new_tokens: int,
) -> Section:
    """Run every variant at the worst position in ``ctx``; summarise as a section."""
    notes: list[str] = []
    k_docs = dataset.docs
    worst = find_worst_position(worst_position, sweep_rows, k_docs, notes)
    setting = f"docs={k_docs} gold={worst}"
    variants: list[tuple[str, dict[str, Any]]] = [("single", {})]
    # the row names keep the paper's "k" (answers per vote)
    variants += [(f"medoid_k{n}", {"n_orders": n}) for n in votes]
    variants += [
        (
            f"resample_k{CONTROL_ORDERS}_t{t:g}",
            {"n_orders": CONTROL_ORDERS, "temperature": t, "permute": False},
        )
        for t in control_temperatures
    ]
    jobs = []
    for instance in dataset.instances:
        placed = place_gold(instance, worst)
        for name, options in variants:
            jobs.append(
                Job(
                    Key(TASK, ctx.label, name, str(instance.id), setting),
                    instance.answers,
                    _prepare(ctx, placed, name, options, embedder, max_new_tokens),
                    {"docs": k_docs, "position": worst},
                )
            )
    rows = summarize(ctx.run(jobs, desc=f"voting k={k_docs}"), seed=ctx.seed)
    figure = "voting-accuracy.png"
    plot_bars(
        ctx.store.path.parent / figure,
        {f"gold at the worst position ({worst})": {r["strategy"]: point(r) for r in rows}},
        title=f"{ctx.label}, {k_docs} passages: medoid voting",
    )
    cells = [
        [
            r["strategy"],
            str(r["n"]),
            acc_cell(r),
            num(r.get("absent"), 2),
            num(r["lm_calls"]),
            num(r["seconds"], 2),
        ]
        for r in rows
    ]
    notes.append(
        "medoid_k: the given order plus k-1 seeded permutations, greedy; resample: k "
        "samples at the fixed order with temperature (the paper's control); both vote by "
        "the medoid of the answers' embeddings after dropping 'not in the context' answers; "
        "'absent': mean count of such answers"
    )
    return Section(
        title=f"Medoid voting at the worst position, {k_docs} passages",
        task=TASK,
        rows=rows,
        tables=[
            Table(
                "Accuracy (%) [95% CI] and mean cost per question",
                ["strategy", "n", "accuracy", "absent", "LM calls", "seconds"],
                cells,
            )
        ],
        figures=[(figure, "Accuracy by variant, 95% intervals")],
        notes=notes,
        settings={"worst position": worst},
    )


def _prepare(
    ctx: RunContext,
    instance: QAInstance,
    name: str,
    options: dict[str, Any],
    embedder: Any,
    max_new_tokens: int,
) -> Any:
    def prepare() -> Prepared:
        if name == "single":
            return Prepared(prompt=render_qa(instance.question, instance.passages))
        result = medoid_vote(
            instance.question,
            instance.passages,
            ctx.model,
            embedder,
            seed=derive_seed(ctx.seed, name, instance.id),
            max_new_tokens=max_new_tokens,
            **options,
        )
        return Prepared(
            answer=result.answer or "(no answer)",
            cost=result.cost,
            info={"absent": len(result.trace.absent)},
        )

    return prepare
