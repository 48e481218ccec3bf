"""Opening a run (model, output folder, prediction file) and closing it with a report."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_position import __version__
from rag_position.eval.engine._workers import resolve_workers
from rag_position.eval.engine.common import Decoding, answer_stop, check_out_folder, model_label
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.folder_lock import hold_for, let_go, lock_run_folder
from rag_position.eval.engine.report import EvalResult, Section, write_report
from rag_position.eval.engine.runner import default_batch_size
from rag_position.eval.engine.shards import check_shard
from rag_position.eval.engine.store import PREDICTIONS_FILE, PredictionStore

PathLike = str | os.PathLike[str]


def open_context(
    model: Any,
    out: PathLike,
    *,
    seed: int = 0,
    max_new_tokens: int = 100,
    batch_size: int | None = None,
    concurrency: int = 1,
    shard: tuple[int, int] | None = None,
    workers: int | None = 1,
    progress: bool | None = None,
    scorer: Any = None,
) -> RunContext:
    """A run context writing predictions to ``out/predictions.jsonl`` (resumed if present).

    The folder is this run's until :func:`finish` (or until the context is collected,
    or the process ends): a run of another process into it is refused at once
    (:mod:`rag_position.eval.engine.folder_lock`).

    ``shard=(k, n)`` runs only the k-th of n shares of the questions (see :func:`run_jobs`).
    ``workers`` (``None``: one per torch thread for a local model on a CPU) runs the
    model's chunks in that many forked processes (see :func:`run_jobs`). ``scorer``: the
    model strategies score with, when not ``model`` (the reader; see
    :mod:`rag_position.eval.engine.pair`).

    Example::

        ctx = open_context(load_model("embedded"), "runs/demo", max_new_tokens=32)
        dataset = load_multidoc(None, docs=10, questions=5)
        section = multidoc_section(ctx, dataset, positions=[0, 9])
        ctx.store.path  # runs/demo/predictions.jsonl
    """
    check_out_folder(out)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    lock = lock_run_folder(folder)  # refused at once if another run holds the folder
    try:
        ctx = RunContext(
            model=model,
            store=PredictionStore(folder / PREDICTIONS_FILE),
            decoding=Decoding(max_new_tokens=max_new_tokens, seed=seed, stop=answer_stop(model)),
            seed=seed,
            batch_size=batch_size or default_batch_size(model),
            concurrency=concurrency,
            shard=check_shard(shard),
            workers=resolve_workers(workers, model),
            progress=progress,
            scorer=scorer,
        )
    except BaseException:
        lock.release()
        raise
    hold_for(ctx, lock)  # until finish(), or until the context is collected
    return ctx


def finish(
    ctx: RunContext,
    sections: Sequence[Section],
    *,
    title: str,
    command: str,
    settings: Mapping[str, Any] | None = None,
) -> EvalResult:
    """Write the report of ``sections`` next to the run's prediction file."""
    base = {
        "model": ctx.label if ctx.scorer is None else model_label(ctx.model),
        **({} if ctx.scorer is None else {"scorer": model_label(ctx.scorer)}),
        "decoding": ctx.decoding.describe(),
        "seed": ctx.seed,
        "batch size": ctx.batch_size,
        "concurrency": ctx.concurrency,
        "workers": ctx.workers,
        "rag-position": __version__,
        "python": platform.python_version(),
    }
    if ctx.shard is not None:
        base["shard"] = f"{ctx.shard[0]}/{ctx.shard[1]} (this report covers one share of the run)"
    base.update(settings or {})
    try:
        return write_report(
            ctx.store.path.parent, sections, title=title, command=command, settings=base
        )
    finally:
        let_go(ctx)  # the run is over: the folder is free for the next one
