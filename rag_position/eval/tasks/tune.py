"""``rag-position tune``: measure, choose and write the ordering for one model.

The loop the eval leaves open (run ``eval compare``, read a report, pick a strategy,
copy a profile path into a pipeline) closed in one command. On a slice of dev
questions the reported figures never use (by default the 60 after the first 200,
which ``eval compare --questions 200`` and the README's tables use), ``tune``:

1. measures the model's position profile: the gold passage at the first, middle and
   last of ``docs`` positions (accuracy by position, :func:`eval_profile`);
2. runs the candidate strategies (:data:`TUNE_STRATEGIES`: the ordering and selection
   rows, the retriever's order among them) with the gold passage at a seeded random
   position, each paired question by question with the retriever's order;
3. chooses: the most accurate candidate whose mean tokens per question are within the
   budget (``max_tokens``, default :data:`BUDGET_FACTOR` times the retriever order's);
   among candidates within ``tie`` points of it, the cheapest;
4. writes the tuned file (:class:`rag_position.tuned.TunedChoice`): the model, the
   profile, the chosen strategy and its options, the evidence table with 95% intervals,
   and the command, ready for :func:`rag_position.load_tuned` and both frameworks'
   ``tuned=``.

Like every eval task it shows a progress bar, resumes an interrupted run from its
folder (predictions are stored as they come) and takes ``--shard``: the shares' folders
are merged, then a last unsharded run over the merged folder computes nothing new and
writes the file.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rag_position._integration.components import component_of, strategy_components
from rag_position._jsonfile import check_output_file
from rag_position.eval.engine.common import EvalConfigError, check_questions
from rag_position.eval.engine.params import EMBEDDER, SCORER, Param, docs_param, names
from rag_position.eval.engine.report import EvalResult, Section
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.rows import (
    PROFILE,
    PROFILE_ROWS,
    RETRIEVER,
    TUNE_GOLD,
    TUNE_REFERENCE,
    TUNE_STRATEGIES,
)
from rag_position.eval.rows.catalog import split_variant
from rag_position.eval.tasks.compare import compare_section
from rag_position.eval.tasks.datasets import load_multidoc
from rag_position.eval.tasks.multidoc import eval_profile, multidoc_section
from rag_position.eval.tasks.tune_choice import (
    TIE_POINTS,
    choice_section,
    choose,
    model_dtype,
)
from rag_position.models.loading import spec_of
from rag_position.strategies import STRATEGIES
from rag_position.strategies.profiles import PositionProfile, as_profile

TUNE_QUESTIONS = 60
"""Dev questions ``tune`` measures on by default."""
TUNE_SKIP = 200
"""Dev questions ``tune`` leaves out first: those the reported 200-question figures use,
so that a tuned choice can be checked on questions it never saw."""
TUNE_DOCS_POSITIONS = 3
"""The profile's measured positions: first, middle, last."""


def tuned_file(text: str) -> Path:
    """An argparse type: ``--tuned``, a file name; an empty one is refused.

    Example:
        >>> tuned_file("")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: is empty: name the tuned file to write (default <out>/tuned.json)
    """  # noqa: E501
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "is empty: name the tuned file to write (default <out>/tuned.json)"
        )
    if text.endswith(("/", os.sep)):  # Path() would drop the slash: a file of that name
        raise argparse.ArgumentTypeError(f"{text} names a folder: name the tuned file to write")
    return Path(text)


def check_tune_files(
    values: Mapping[str, Any], *, tuned_flag: str = "--tuned"
) -> PositionProfile | None:
    """``tune``'s own files, checked before any work: the tuned file it will write (a
    regular file or a new name in a folder that exists, never a folder, a device or a
    FIFO; the default ``<out>/tuned.json`` only where something is there already) and
    the ``--profile`` it reads (returned, read). ``tuned_flag``: the option that named
    the tuned file (``--out FILE.json`` names it too)."""
    tuned, out = values.get("tuned"), values.get("out")
    if tuned is not None:
        check_output_file(tuned, what=tuned_flag, error=EvalConfigError)
    elif out is not None and os.path.lexists(Path(out) / "tuned.json"):
        check_output_file(Path(out) / "tuned.json", what="--tuned", error=EvalConfigError)
    profile = values.get(PROFILE)
    if profile is None:
        return None
    try:
        return as_profile(profile)
    except (ValueError, TypeError, OSError) as exc:
        shown = os.fspath(profile) if isinstance(profile, (str, os.PathLike)) else "given"
        raise EvalConfigError(f"--profile {shown}: {exc}") from None


TUNE = TaskSpec(
    "tune",
    "measure this model's profile and strategies; write the tuned file",
    (
        docs_param(),
        Param(
            "strategies",
            None,
            "candidates, comma-separated (default: the ordering and selection rows)",
            "--strategies",
            {},
            names,
        ),
        Param(
            "skip",
            None,
            "questions left out first (default: 200 of the dev file, those the reported "
            "figures use; 0 of a --data file)",
            "--skip",
            {"type": int},
        ),
        Param(
            "max_tokens",
            None,
            "token budget per question (default: 3x the retriever order's)",
            "--max-tokens",
            {"type": float},
        ),
        Param(
            "tie",
            TIE_POINTS,
            "accuracy points within which the cheaper candidate wins",
            "--tie",
            {"type": float},
        ),
        Param(
            "tuned",
            None,
            "the tuned file to write (default: <out>/tuned.json)",
            "--tuned",
            {"type": tuned_file},
            recorded=False,
        ),
        Param(
            PROFILE,
            None,
            "position profile JSON (default: measured here; needed with --shard)",
            "--profile",
            {"type": Path},
        ),
        Param("spec", None, recorded=False),
        SCORER,
        EMBEDDER,
    ),
    defaults={"questions": TUNE_QUESTIONS},
    cli_questions=None,
    questions_help=f"{TUNE_QUESTIONS}, after the first {TUNE_SKIP} of dev",
)


@TUNE.task
def run_tune(run: TaskRun) -> EvalResult:
    """Measure and choose on ``questions`` dev questions after the first ``skip``; write
    the tuned file (``tuned``, default ``<out>/tuned.json``) and the report.

    Parameters (:data:`TUNE`): ``strategies`` (default :data:`TUNE_STRATEGIES`),
    ``docs=10``, ``skip=200``, ``max_tokens`` (default :data:`BUDGET_FACTOR` times the
    retriever order's tokens), ``tie=2.0``, ``tuned``, ``spec`` (the ``load_model``
    spec the file records, default the model's name), ``embedder``, and the common ones
    (``questions`` defaults to :data:`TUNE_QUESTIONS`).

    Example::

        result = run_tune(load_model("embedded"), spec="embedded", out="runs/tune")
        choice = read_tuned("runs/tune/tuned.json")
        choice.strategy, choice.options
    """
    given = check_tune_files(run.values)  # before any work
    questions, k = run["questions"], run["docs"]
    skip = run["skip"] if run["skip"] is not None else (TUNE_SKIP if run["data"] is None else 0)
    if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
        raise EvalConfigError(f"--skip must be an integer >= 0, got {skip!r}")
    run.values["skip"] = skip  # recorded as resolved
    check_questions(questions)
    if not (run["tie"] >= 0 and math.isfinite(run["tie"])):
        raise EvalConfigError(f"--tie must be a number >= 0, got {run['tie']!r}")
    budget = run["max_tokens"]
    if budget is not None and not (budget > 0 and math.isfinite(budget)):
        raise EvalConfigError(f"--max-tokens must be a number > 0, got {budget!r}")
    candidates = check_candidates(run["strategies"])
    if run["shard"] is not None and given is None:
        raise EvalConfigError(
            "--shard with tune needs --profile: the profile strategies place passages by the "
            "profile of the whole slice, which one share would measure on its own questions; "
            "measure it first (eval multidoc --positions 0,4,9 --no-baselines on the same "
            "questions, sharded and merged) or run tune unsharded"
        )
    wanted = None if questions is None else skip + questions
    try:
        full = load_multidoc(run["data"], docs=k, questions=wanted, embedder=run["embedder"])
    except EvalConfigError as exc:
        if "more questions than the data holds" not in str(exc):
            raise
        raise EvalConfigError(
            f"--skip {skip} and --questions {questions}: {exc} (tune measures the questions "
            "after the first --skip; lower either)"
        ) from None
    if len(full.instances) <= skip:
        raise EvalConfigError(
            f"--skip {skip}: the data holds {len(full.instances)} questions, none left to tune "
            "on; lower --skip"
        )
    dataset = replace(full, instances=full.instances[skip:])
    ctx = run.ctx  # the inputs checked: the folder becomes this run's
    sections: list[Section] = []
    if given is None:
        positions = sorted({0, k // 2, k - 1})
        sweep = multidoc_section(ctx, dataset, positions=positions, baselines=False)
        sections.append(sweep)
        profile = eval_profile(sweep.rows, k, ctx.label)
        rows, options_of = sweep.rows, None
    else:
        profile, rows = given, None
        options_of = {name: {PROFILE: given} for name in PROFILE_ROWS}
    compared = compare_section(
        ctx, dataset, strategies=candidates, sweep_rows=rows, gold=TUNE_GOLD,
        strategy_options=options_of,
    )  # fmt: skip
    chosen, evidence, notes = choose(compared.rows, budget=budget, tie=run["tie"])
    base, options = split_variant(chosen)
    options.pop(PROFILE, None)
    folder = ctx.store.path.parent
    tuned_path = Path(run["tuned"]) if run["tuned"] is not None else folder / "tuned.json"
    section = choice_section(chosen, evidence, notes, tuned_path)
    # The tuned file is written while the run still holds its folder (finish lets go).
    if run.values["shard"] is None:
        from rag_position.tuned import TunedChoice

        first = dataset.instances[0].id if dataset.instances else None
        # The file names the model a pipeline loads to score with: the scorer when the
        # run had one (--scorer), the reader's name in the report and command.
        scorer = run.model if ctx.scorer is None else ctx.scorer
        TunedChoice(
            model=getattr(scorer, "name", ctx.label),
            spec=run["spec"] or spec_of(scorer),
            dtype=model_dtype(scorer),
            strategy=base,
            options=options,
            profile=profile,
            evidence=tuple(evidence),
            questions={
                "data": Path(dataset.path).name,
                "first": skip,
                "n": len(dataset.instances),
                "first_id": first,
            },
            command=run["command"] or TUNE.call(ctx.label, run.values),
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        ).write(tuned_path)
    result = run.finish(
        [*sections, compared, section],
        title=f"Tuned for {ctx.label}",
        settings={"questions": f"{len(dataset.instances)} questions after the first {skip}"},
    )
    return result


def check_candidates(strategies: Sequence[str] | None) -> list[str]:
    """The candidates (default :data:`TUNE_STRATEGIES`), the retriever's order first:
    rows of the strategy table with a framework component, which order or select
    passages (not those that answer by themselves, nor the query-aware prompts, which a
    retriever or postprocessor cannot pass on).

    Example:
        >>> check_candidates(["edge", "passage_likelihood:placement=last"])
        ['retriever', 'edge', 'passage_likelihood:placement=last']
        >>> check_candidates(["recite"])
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: --strategies: recite: not an ordering; tune chooses what a retriever or postprocessor returns (not rows that answer, nor query-aware prompts)
    """  # noqa: E501
    candidates = list(strategies or TUNE_STRATEGIES)
    for name in candidates:
        base = split_variant(name)[0]
        row = STRATEGIES.get(base)
        if row is None:
            raise EvalConfigError(
                f"--strategies: unknown {base!r}; candidates are rows of the strategy table: "
                f"{', '.join(strategy_components())}"
            )
        if row.answers or not (component_of(base) or base == RETRIEVER):
            raise EvalConfigError(
                f"--strategies: {name}: not an ordering; tune chooses what a retriever or "
                "postprocessor returns (not rows that answer, nor query-aware prompts)"
            )
        options = split_variant(name)[1]
        if options:  # checked now, not when the candidate first runs (after the sweep)
            from rag_position.tuned import check_options

            try:
                check_options(row, options)
            except ValueError as exc:
                raise EvalConfigError(f"--strategies: {name}: {exc}") from None
    if TUNE_REFERENCE in candidates:
        candidates.remove(TUNE_REFERENCE)
    return [TUNE_REFERENCE, *candidates]  # the reference every candidate is paired with
