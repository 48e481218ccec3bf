"""Multi-document QA position sweep ("Lost in the Middle", Liu et al., TACL 2024).

The gold passage moves through the given positions among k-1 distractors in
decreasing retrieval relevance (or shuffled, ``ordered_randomly``), with the
closed-book (no passage) and oracle (gold passage alone) baselines. Accuracy by
gold position, with 95% bootstrap intervals, is the paper's U-curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_position.data import QAInstance, place_gold
from rag_position.data.builder import random_distractor_order
from rag_position.eval.engine.common import (
    EvalConfigError,
    Key,
    Prepared,
    check_positions,
    derive_seed,
    paper_positions,
)
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import (
    EMBEDDER,
    FLAG,
    Param,
    docs_param,
    negate,
    positions_param,
)
from rag_position.eval.engine.plots import Panel, plot_panels
from rag_position.eval.engine.report import (
    Column,
    EvalResult,
    Section,
    Table,
    acc_cell,
    point,
    with_columns,
)
from rag_position.eval.engine.runner import Job
from rag_position.eval.engine.stats import summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.rows import SANDWICH
from rag_position.eval.tasks.datasets import MultidocData
from rag_position.prompts import render_closedbook, render_qa

TASK = "multidoc"
BASELINE = "baseline"


MULTIDOC = TaskSpec(
    "multidoc",
    "multi-document QA: accuracy by gold position",
    (
        docs_param(),
        positions_param(),
        Param("ordered_randomly", False, "shuffled distractors", "--ordered-randomly", FLAG),
        Param(SANDWICH, False, "query-aware prompt", "--sandwich", FLAG),
        Param("baselines", True, "skip closed-book, oracle", "--no-baselines", FLAG, negate),
        EMBEDDER,
    ),
)


@MULTIDOC.task
def run_multidoc(run: TaskRun) -> EvalResult:
    """Run the position sweep on ``model`` (any Generator) and write the report to ``out``.

    Parameters (:data:`MULTIDOC`): ``docs=10``, ``positions`` (default: the paper's,
    0,4,9 / 0,4,9,14,19 / ...), ``ordered_randomly=False``, ``sandwich=False``,
    ``baselines=True`` (closed-book and oracle), ``embedder``, and the common ones
    (:data:`~rag_position.eval.engine.params.COMMON`): ``questions`` are the first N of ``data``
    (``None``: all). Predictions already in ``out/predictions.jsonl`` are reused.

    Example::

        result = run_multidoc(load_model("embedded"), docs=10, questions=20, out="runs/md")
        result.row(setting="closedbook")["accuracy"]
    """
    docs = run["docs"]
    sweep_positions(run["positions"], docs)
    options = {k: run[k] for k in ("positions", "ordered_randomly", SANDWICH, "baselines")}
    prompt_variant(run["ordered_randomly"], run[SANDWICH], run["seed"])  # refuses a combination
    ctx, dataset = run.multidoc(docs)
    section = multidoc_section(ctx, dataset, **options)
    sweep = not (run["ordered_randomly"] or run[SANDWICH])
    profile = eval_profile(section.rows, docs, ctx.label) if sweep else None
    if profile is not None and ctx.shard is not None:
        section.notes.append(
            f"{PROFILE_FILE} is not written for one share: merge the shares and rerun "
            "without --shard to measure the profile on every question"
        )
    elif profile is not None:
        profile.save(ctx.store.path.parent / PROFILE_FILE)
        section.notes.append(
            f"{PROFILE_FILE}: this model's accuracy by position (linear between the measured "
            "positions), for `eval compare --profile` or `convex_score(..., profile=)`"
        )
    return run.finish([section], title=f"Multi-document QA, {docs} passages")


def sweep_positions(positions: Sequence[int] | None, k: int) -> list[int]:
    """The gold positions of a sweep over ``k`` passages (default: the paper's), checked."""
    chosen = list(positions) if positions is not None else paper_positions(k)
    check_positions(chosen, k)
    return chosen


def prompt_variant(ordered_randomly: bool, sandwich: bool, seed: int) -> str:
    """The prompt's name in settings: ``qa``, ``qa_query_aware``, ``qa_ordered_randomly(...)``."""
    if ordered_randomly and sandwich:
        raise EvalConfigError(
            "--ordered-randomly and --sandwich cannot be combined (no published prompt does both)"
        )
    if ordered_randomly:
        return f"qa_ordered_randomly(seed={seed})"
    return "qa_query_aware" if sandwich else "qa"


def multidoc_jobs(
    ctx: RunContext,
    dataset: MultidocData,
    *,
    positions: Sequence[int] | None = None,
    ordered_randomly: bool = False,
    sandwich: bool = False,
    baselines: bool = True,
) -> list[Job]:
    """One job per (question, gold position), plus closed-book and oracle per question.

    Example::

        ctx = open_context(load_model("embedded"), "runs/md")
        jobs = multidoc_jobs(ctx, load_multidoc(None, docs=10, questions=5), positions=[0, 9])
        len(jobs), jobs[0].key.setting        # 20, "docs=10 gold=0 prompt=qa"
        records = ctx.run(jobs, desc="multidoc")
    """
    k = dataset.docs
    chosen = sweep_positions(positions, k)
    variant = prompt_variant(ordered_randomly, sandwich, ctx.seed)
    jobs: list[Job] = []
    for instance in dataset.instances:
        iid = str(instance.id)
        for position in chosen:
            setting = f"docs={k} gold={position} prompt={variant}"
            jobs.append(
                Job(
                    Key(TASK, ctx.label, BASELINE, iid, setting),
                    instance.answers,
                    _position_prompt(instance, position, ordered_randomly, sandwich, ctx.seed),
                    {"kind": "position", "docs": k, "position": position, "prompt": variant},
                )
            )
        if baselines:
            jobs.append(_baseline_job(ctx, instance, "closedbook"))
            jobs.append(_baseline_job(ctx, instance, "oracle"))
    return jobs


def multidoc_section(
    ctx: RunContext,
    dataset: MultidocData,
    *,
    name: str = "multidoc",
    columns: Sequence[Column] = (),
    **options: Any,
) -> Section:
    """Run the sweep's jobs in ``ctx`` and summarise them as a report section.

    ``options`` are :func:`multidoc_jobs`'s (``positions``, ``ordered_randomly``,
    ``sandwich``, ``baselines``); ``columns`` are added to the table (``eval quick``'s
    200-question reference, :mod:`rag_position.eval.tasks.reference`).

    Example::

        ctx = open_context(load_model("embedded"), "runs/md")
        section = multidoc_section(ctx, load_multidoc(None, docs=10, questions=20))
        [(row["setting"], row["accuracy"]) for row in section.rows]
        section.figures  # the accuracy-by-position plot, written beside the predictions
    """
    jobs = multidoc_jobs(ctx, dataset, **options)
    rows = summarize(ctx.run(jobs, desc=f"multidoc k={dataset.docs}"), seed=ctx.seed)
    k = dataset.docs
    by_kind = {
        kind: [r for r in rows if r.get("kind") == kind]
        for kind in ("position", "closedbook", "oracle")
    }
    curve = [point(r, r["position"]) for r in by_kind["position"]]
    hlines = {r["kind"]: point(r) for r in by_kind["closedbook"] + by_kind["oracle"]}
    figure = f"{name}-accuracy-by-position.png"
    plot_panels(
        ctx.store.path.parent / figure,
        [
            Panel(
                title=f"{ctx.label}, {k} passages",
                xlabel="position of the gold passage (0 = first)",
                ylabel="accuracy (%)",
                curves={"gold at position": curve},
                hlines=hlines,
                xticks=[r["position"] for r in by_kind["position"]],
            )
        ],
    )
    shown = by_kind["position"] + by_kind["closedbook"] + by_kind["oracle"]
    cells = [
        [
            f"gold at {r['position']}" if r["kind"] == "position" else r["kind"],
            str(r["n"]),
            acc_cell(r),
        ]
        for r in shown
    ]
    variant = prompt_variant(
        options.get("ordered_randomly", False), options.get(SANDWICH, False), ctx.seed
    )
    return Section(
        title=f"Multi-document QA: accuracy by gold position, {k} passages",
        task=TASK,
        rows=rows,
        tables=[
            Table(
                "Accuracy (%) [95% CI]",
                *with_columns(["setting", "n", "accuracy"], cells, shown, columns),
            )
        ],
        figures=[(figure, f"Accuracy by gold position ({k} passages); dashed: baselines")],
        notes=[
            f"{len(dataset.instances)} questions from `{Path(dataset.path).name}` "
            + (
                "(distractors mined by dense retrieval from the file's own passages)"
                if dataset.kind == "oracle"
                else "(the file's own distractors)"
            ),
            f"prompt: `{variant}`; closed-book: the question alone; oracle: the gold passage alone",
        ],
    )


def _position_prompt(
    instance: QAInstance, position: int, ordered_randomly: bool, sandwich: bool, seed: int
) -> Any:
    def prepare() -> Prepared:
        moved = place_gold(instance, position)
        if ordered_randomly:
            moved = random_distractor_order(moved, derive_seed(seed, instance.id))
        prompt = render_qa(
            moved.question, moved.passages, query_aware=sandwich, ordered_randomly=ordered_randomly
        )
        return Prepared(prompt=prompt)

    return prepare


def _baseline_job(ctx: RunContext, instance: QAInstance, kind: str) -> Job:
    gold = instance.gold
    if gold is None:
        raise EvalConfigError(f"instance {instance.id} has no gold passage")

    def prepare() -> Prepared:
        if kind == "closedbook":
            return Prepared(prompt=render_closedbook(instance.question))
        return Prepared(prompt=render_qa(instance.question, [gold]))

    return Job(
        Key(TASK, ctx.label, BASELINE, str(instance.id), kind),
        instance.answers,
        prepare,
        {"kind": kind},
    )


PROFILE_FILE = "profile.json"


def eval_profile(sweep: Sequence[Mapping[str, Any]], k: int, model: str) -> Any:
    """The position profile a sweep measured (accuracy by gold position), or ``None``.

    Linear between measured positions, flat beyond the outermost; ``None`` with fewer
    than two positions of ``k`` passages. ``run_multidoc`` saves it as ``profile.json``
    beside its report, ready for ``eval compare --profile`` or ``convex_score``'s
    ``profile=``.

    Example:
        >>> rows = [{"kind": "position", "docs": 5, "position": p, "accuracy": a}
        ...         for p, a in ((0, 0.2), (2, 0.1), (4, 0.4))]
        >>> [round(v, 2) for v in eval_profile(rows, 5, "embedded").values]
        [0.2, 0.15, 0.1, 0.25, 0.4]
    """
    try:
        from rag_position.strategies import PositionProfile
    except ImportError:  # a registry replaced without it (the eval's own tests do)
        return None
    pts = sorted(
        (int(r["position"]), float(r["accuracy"]))
        for r in sweep
        if r.get("kind") == "position" and r.get("docs") == k
    )
    if len(pts) < 2:
        return None
    values = []
    for p in range(k):
        lo = max((q for q in pts if q[0] <= p), default=pts[0])
        hi = min((q for q in pts if q[0] >= p), default=pts[-1])
        t = 0.0 if hi[0] == lo[0] else (p - lo[0]) / (hi[0] - lo[0])
        values.append(lo[1] + t * (hi[1] - lo[1]))
    return PositionProfile(tuple(values), model_name=model, source="eval")


WORST_POSITION = Param("worst_position", None, "skip the sweep", "--worst-position", {"type": int})
"""The worst gold position, given; else measured by :func:`worst_sweep` in the same run."""


def worst_sweep(
    ctx: RunContext, dataset: MultidocData, worst_position: int | None, *, needed: bool = True
) -> tuple[list[Section], list[dict[str, Any]] | None]:
    """The sweep a task reads the model's worst position from: its report section and rows.

    Nothing when the worst position is given or not needed; else the paper's positions
    on the task's own instances, without baselines (the rows go to
    :func:`find_worst_position` and, for ``convex_score_profile``, :func:`eval_profile`).
    """
    if worst_position is not None or not needed:
        return [], None
    section = multidoc_section(ctx, dataset, baselines=False)
    return [section], section.rows


def find_worst_position(
    given: int | None, sweep: Sequence[Mapping[str, Any]] | None, k: int, notes: list[str]
) -> int:
    """The worst gold position: ``given``, else the lowest point of ``sweep``'s rows."""
    if given is not None:
        check_positions([given], k, where="--worst-position")
        notes.append(f"worst position {given}: given")
        return given
    rows = [r for r in sweep or [] if r.get("kind") == "position" and r.get("docs") == k]
    if not rows:
        raise EvalConfigError(
            "compare needs the model's worst position: pass --worst-position, or run it "
            "with a multidoc sweep of the same passage count"
        )
    worst = min(rows, key=lambda r: (r["accuracy"], r["position"]))
    notes.append(
        f"worst position {worst['position']}: lowest accuracy of the sweep over "
        f"{[r['position'] for r in rows]} on these questions"
    )
    return int(worst["position"])
