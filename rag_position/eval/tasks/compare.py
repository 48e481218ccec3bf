"""Every strategy on the same instances: accuracy with 95% intervals beside what it costs.

Two settings per question: the gold passage at a seeded uniformly random position
among the retriever-ordered distractors, and at the model's worst position (the
lowest point of its accuracy-by-position sweep on the same instances, measured in
the same run unless given). Strategies are those of :mod:`rag_position.eval.rows.catalog`:
the baselines plus everything registered in ``rag_position.strategies``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_position.data import QAInstance, place_gold
from rag_position.eval.engine.common import EvalConfigError, Key, Prepared, derive_seed
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import EMBEDDER, SCORER, Param, docs_param, names
from rag_position.eval.engine.plots import plot_bars
from rag_position.eval.engine.report import (
    Column,
    EvalResult,
    Section,
    Table,
    acc_cell,
    num,
    point,
    versus_cell,
    with_columns,
)
from rag_position.eval.engine.runner import Job
from rag_position.eval.engine.stats import paired, summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.rows import (
    COMPARE_VERSUS,
    FRAMEWORK_ROWS,
    GOLD_ALONE,
    GOLD_RANDOM,
    GOLD_SETTINGS,
    GOLD_WORST,
    PROFILE,
    PROFILE_ROWS,
)
from rag_position.eval.rows.attention_sort import ATTENTION_ROWS, attention_model_problem
from rag_position.eval.rows.catalog import (
    EvalStrategy,
    available_strategies,
    framework_strategies,
    one_strategy_name,
    seed_name,
    select_strategies,
    split_variant,
    strategy_names,
)
from rag_position.eval.rows.lingua import LINGUA_ROWS, lingua_installed, lingua_model_problem
from rag_position.eval.rows.scoring import SharedScoring
from rag_position.eval.tasks.compare_cells import SPLIT_HEADERS, SPLIT_NOTE, kept_notes, split_cells
from rag_position.eval.tasks.datasets import MultidocData
from rag_position.eval.tasks.multidoc import (
    WORST_POSITION,
    eval_profile,
    find_worst_position,
    worst_sweep,
)

TASK = "compare"


COMPARE = TaskSpec(
    "compare",
    "every strategy on the same instances, with costs",
    (
        docs_param(),
        Param(
            "strategies",
            None,
            "comma-separated (default: all)",
            "--strategies",
            {},
            strategy_names,
        ),
        WORST_POSITION,
        Param(
            "gold",
            GOLD_SETTINGS,
            "gold settings, comma-separated: random, worst (default: both)",
            "--gold",
            {"default": "random,worst"},
            lambda text: names(text, what="--gold") or (),
        ),
        Param(
            "strategy_options",
            None,
            "profile JSON for *_profile",
            "--profile",
            {"type": Path},
            lambda path: {name: {PROFILE: path} for name in PROFILE_ROWS},
        ),
        Param(
            "versus",
            COMPARE_VERSUS,
            "the row each strategy is paired with (wins, losses, sign test)",
            "--versus",
            parse=one_strategy_name,
            omit_default=True,
        ),
        SCORER,
        EMBEDDER,
    ),
)


@COMPARE.task
def run_compare(run: TaskRun) -> EvalResult:
    """Rank ``strategies`` (default: all available) on ``model``; write the report to ``out``.

    Parameters (:data:`COMPARE`): ``strategies``, ``docs=10``, ``worst_position``,
    ``gold=("random", "worst")``, ``strategy_options``, ``embedder``, and the common
    ones (:data:`~rag_position.eval.engine.params.COMMON`). ``gold``: the settings to run,
    ``"random"`` and/or ``"worst"``. With ``"worst"`` and no ``worst_position`` the run
    first sweeps the paper's positions (no baselines) and takes the worst; its
    section is part of the report. ``strategy_options[name]`` go to a registered
    strategy on every call (e.g. ``{"convex_score_profile": {"profile": "profile.json"}}``).

    Example::

        result = run_compare(load_model("embedded"), strategies=["retriever", "edge", "sandwich"],
                             docs=10, questions=20, out="runs/compare")
        for row in result.rows:
            row["strategy"], row["setting"], row["accuracy"], row["lm_calls"]
    """
    gold, worst = check_gold(run["gold"]), run["worst_position"]
    if run["shard"] is not None and worst is None and GOLD_WORST in gold:
        raise EvalConfigError(
            "--shard with the worst-position setting needs --worst-position (and --profile for "
            "convex_score_profile): a sweep run on one share would pick its own worst position "
            "and profile; measure them first (`eval multidoc`, sharded and merged)"
        )
    if run["strategies"] is not None:  # names and options checked before any work
        select_strategies(list(run["strategies"]), run["strategy_options"])
    docs = run["docs"]
    ctx, dataset = run.multidoc(docs)
    sweep, rows = worst_sweep(ctx, dataset, worst, needed=GOLD_WORST in gold)
    options = run["strategy_options"]
    compared = compare_section(
        ctx, dataset, strategies=run["strategies"], worst_position=worst, gold=gold,
        sweep_rows=rows, strategy_options=options, versus=run["versus"],
    )  # fmt: skip
    return run.finish([*sweep, compared], title=f"Strategy comparison, {docs} passages")


def compare_section(
    ctx: RunContext,
    dataset: MultidocData,
    *,
    strategies: Sequence[str] | None = None,
    worst_position: int | None = None,
    gold: Sequence[str] = GOLD_SETTINGS,
    sweep_rows: Sequence[Mapping[str, Any]] | None = None,
    strategy_options: Mapping[str, Mapping[str, Any]] | None = None,
    gold_of: Mapping[str, Sequence[str]] | None = None,
    versus: str | None = COMPARE_VERSUS,
    columns: Sequence[Column] = (),
) -> Section:
    """Run every strategy in the ``gold`` settings in ``ctx``; summarise as a report section.

    ``gold_of[name]`` narrows strategy ``name`` to some of those settings (``eval quick``
    runs the scoring strategies, ten passes a question each, at the random position only).
    ``versus``: the row every other is paired with, question by question: the table
    shows the questions each wins and loses against it and the exact sign test's
    p-value (``None``, or a row not run: no such column). ``columns`` are added to the
    table (``eval quick``'s 200-question reference, :mod:`rag_position.eval.tasks.reference`).

    Each strategy's seed on an instance derives from its seed group's name
    (:func:`~rag_position.eval.rows.catalog.seed_name`): the ConvexScore variants share
    one base order, and their scoring is computed once (:class:`SharedScoring`),
    each still charged its full cost.

    Example::

        ctx = open_context(load_model("embedded"), "runs/compare")
        dataset = load_multidoc(None, docs=10, questions=20)
        section = compare_section(ctx, dataset, strategies=["retriever", "edge"], worst_position=4)
        section.rows, section.tables[0].cells  # summary rows, the Markdown table's cells
    """
    gold = check_gold(gold)
    narrowed = {name: check_gold(labels) for name, labels in (gold_of or {}).items()}
    for name, labels in narrowed.items():
        if not set(labels) <= set(gold):
            raise EvalConfigError(
                f"gold_of[{name!r}] = {list(labels)} is not among this run's settings {list(gold)}"
            )
    k = dataset.docs
    notes: list[str] = []
    worst = -1
    if GOLD_WORST in gold:
        worst = find_worst_position(worst_position, sweep_rows, k, notes)
    options = {name: dict(opts) for name, opts in (strategy_options or {}).items()}
    chosen = _choose(strategies, options, sweep_rows, k, ctx, notes)
    every = {
        GOLD_RANDOM: f"docs={k} gold={GOLD_RANDOM}(seed={ctx.seed})",
        GOLD_WORST: f"docs={k} gold={worst}",
    }
    settings = [(label, every[label]) for label in gold]
    model = ctx.scoring(SharedScoring)
    jobs: list[Job] = []
    for instance in dataset.instances:
        rpos = random.Random(derive_seed(ctx.seed, "gold-position", instance.id)).randrange(k)
        position = {GOLD_RANDOM: rpos, GOLD_WORST: worst}
        for label, setting in settings:
            placed = place_gold(instance, position[label])
            for strategy in chosen:
                if label in narrowed.get(strategy.name, gold):
                    jobs.append(_job(ctx, model, strategy, placed, setting, label, position[label]))
    records = list(ctx.run(jobs, desc=f"compare k={k}"))
    rows = summarize(records, seed=ctx.seed)
    pairs = paired(records, versus) if versus is not None else {}
    versus_run = versus is not None and any(s.name == versus for s in chosen)
    for r in rows:
        found = pairs.get((r["strategy"], r["setting"]))
        if found is not None:
            r.update(versus=versus, wins=found[0], losses=found[1], sign_p=found[2])
    kept = kept_notes(rows)
    names = {
        GOLD_RANDOM: "gold at a random position",
        GOLD_WORST: f"gold at the worst position ({worst})",
    }
    figure = "compare-accuracy.png"
    plot_bars(
        ctx.store.path.parent / figure,
        {names[s]: {r["strategy"]: point(r) for r in rows if r["gold"] == s} for s, _ in settings},
        title=f"{ctx.label}, {k} passages: accuracy by strategy",
    )
    cells = [
        [
            r["strategy"],
            names[r["gold"]],
            str(r["n"]),
            acc_cell(r),
            num(r["lm_calls"]),
            num(r["prompt_tokens"], 0),
            num(r["generated_tokens"], 0),
            num(r["seconds"], 2),
            *(split_cells(r) if ctx.scorer is not None else []),
            *([versus_cell(r)] if versus_run else []),
        ]
        for r in rows
    ]
    headers = [
        "strategy",
        "setting",
        "n",
        "accuracy",
        "LM calls",
        "prompt tokens",
        "generated tokens",
        "seconds",
        *(SPLIT_HEADERS if ctx.scorer is not None else []),
        *([f"vs {versus}: won/lost (p)"] if versus_run else []),
    ]
    for name, labels in narrowed.items():
        if any(s.name == name for s in chosen) and set(labels) != set(gold):
            shown = " and the ".join(names[label] for label in labels)
            notes.append(f"{name}: run only with the {shown}")
    if versus_run:
        notes.append(
            f"won/lost: questions a strategy answers right that {versus} gets wrong, and the "
            "reverse, on the same instances; p: the exact two-sided sign test on those counts"
        )
    elif versus is not None:
        notes.append(f"no paired column: {versus} was not run")
    notes.extend(kept)
    if ctx.scorer is not None:
        notes.append(SPLIT_NOTE)
    notes.append(
        "costs are means per question: choosing the order plus generating the answer "
        "(prompt tokens as the model's tokenizer counts the prompt text; seconds shared "
        "evenly within a generation batch); gold_first and gold_last know the gold "
        "passage and are upper bounds, not strategies"
    )
    if any(s.name == GOLD_ALONE for s in chosen):
        notes.append(f"{GOLD_ALONE}: the gold passage alone (the oracle), a bound too")
    return Section(
        title=f"Strategies compared, {k} passages",
        task=TASK,
        rows=rows,
        tables=[
            Table(
                "Accuracy (%) [95% CI] and mean cost per question",
                *with_columns(headers, cells, rows, columns),
            )
        ],
        figures=[(figure, "Accuracy by strategy, 95% intervals")],
        notes=notes,
        settings={
            "strategies": [s.name for s in chosen],
            "gold": list(gold),
            **({"worst position": worst} if GOLD_WORST in gold else {}),
        },
    )


def check_gold(gold: Sequence[str]) -> tuple[str, ...]:
    """The gold settings asked for, checked: a non-empty subset of ``random``, ``worst``."""
    chosen = tuple(dict.fromkeys(gold))
    unknown = [g for g in chosen if g not in GOLD_SETTINGS]
    if not chosen or unknown:
        raise EvalConfigError(
            f"--gold: choose from {', '.join(GOLD_SETTINGS)} (comma-separated), got {list(gold)}"
        )
    return chosen


def _job(
    ctx: RunContext,
    model: Any,
    strategy: EvalStrategy,
    instance: QAInstance,
    setting: str,
    label: str,
    position: int,
) -> Job:
    seed = derive_seed(ctx.seed, seed_name(strategy.name), instance.id)

    def prepare() -> Prepared:
        return strategy.prepare(instance, model, seed=seed)

    return Job(
        Key(TASK, ctx.label, strategy.name, str(instance.id), setting),
        instance.answers,
        prepare,
        {"gold": label, "docs": instance.k, "position": position},
    )


def _choose(
    names: Sequence[str] | None,
    options: dict[str, dict[str, Any]],
    sweep: Sequence[Mapping[str, Any]] | None,
    k: int,
    ctx: RunContext,
    notes: list[str],
) -> list[EvalStrategy]:
    parsed = [split_variant(n) for n in names] if names is not None else []
    measured = eval_profile(sweep, k, ctx.label) if sweep else None
    scorer = ctx.model if ctx.scorer is None else ctx.scorer
    lingua_problem = lingua_model_problem(scorer) if lingua_installed() else None
    attention_problem = attention_model_problem(ctx.model)
    for profile_name in PROFILE_ROWS:
        wanted = names is None or any(base == profile_name for base, _ in parsed)
        if profile_name not in options and measured is not None:
            options[profile_name] = {PROFILE: measured}
            if wanted:
                notes.append(f"{profile_name} uses the accuracy profile of this run's sweep")
    missing = [n for n in FRAMEWORK_ROWS if n not in framework_strategies()]
    if missing:
        notes.append(
            f"{', '.join(missing)}: not run, the framework is not installed (langchain-community, "
            "llama-index-core); the registered `edge` strategy reproduces LangChain's order"
        )
    if names is None:
        found = available_strategies(options)
        if lingua_problem:
            for name in LINGUA_ROWS:
                found.pop(name, None)
            notes.append(f"{', '.join(LINGUA_ROWS)}: not run: {lingua_problem}")
        elif not lingua_installed():
            notes.append(
                f"{', '.join(LINGUA_ROWS)}: not run, llmlingua is not installed "
                "(pip install 'rag-position[baselines]')"
            )
        if attention_problem:
            for name in ATTENTION_ROWS:
                found.pop(name, None)
            notes.append(f"{', '.join(ATTENTION_ROWS)}: not run: {attention_problem}")
        for profile_name in PROFILE_ROWS:
            if profile_name in found and profile_name not in options:
                del found[profile_name]
                notes.append(f"{profile_name} skipped: it needs a profile (a sweep or --profile)")
        return list(found.values())
    named_lingua = [n for n in names if split_variant(n)[0] in LINGUA_ROWS]
    if named_lingua and not lingua_installed():
        raise EvalConfigError(
            f"--strategies: {', '.join(named_lingua)}: llmlingua is not installed "
            "(pip install 'rag-position[baselines]')"
        )
    if named_lingua and lingua_problem:
        raise EvalConfigError(f"--strategies: {', '.join(named_lingua)}: {lingua_problem}")
    if attention_problem and any(split_variant(n)[0] in ATTENTION_ROWS for n in names):
        raise EvalConfigError(f"--strategies: {attention_problem}")
    for profile_name in PROFILE_ROWS:
        unprofiled = any(base == profile_name and PROFILE not in own for base, own in parsed)
        if unprofiled and profile_name not in options:
            raise EvalConfigError(
                f"--strategies: {profile_name} needs a position profile: pass --profile PATH, "
                "or let compare run its own sweep (no --worst-position)"
            )
    return select_strategies(list(names), options)
