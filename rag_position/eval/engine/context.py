"""What every task of one run shares (:class:`RunContext`): the model, the prediction file,
the settings; its :meth:`RunContext.run` is
:func:`~rag_position.eval.engine.runner.run_jobs` with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_position.eval.engine.common import (
    Decoding,
    Key,
    Prepared,
    run_label,
)
from rag_position.eval.engine.pair import ReaderScorer
from rag_position.eval.engine.runner import Job, run_jobs
from rag_position.eval.engine.store import PredictionStore


@dataclass
class RunContext:
    """What every task of one run shares: the model, the prediction file, the settings.

    Example::

        ctx = open_context(load_model("embedded"), "runs/demo", seed=0)
        ctx.label, ctx.decoding, ctx.batch_size, ctx.store.path
        records = ctx.run(jobs, desc="demo")  # run_jobs with these settings
    """

    model: Any
    store: PredictionStore
    decoding: Decoding
    seed: int = 0
    batch_size: int = 8
    concurrency: int = 1
    shard: tuple[int, int] | None = None
    workers: int = 1
    progress: bool | None = None
    scorer: Any = None
    """The model strategies score with, when not the reader (``--scorer``)."""

    @property
    def label(self) -> str:
        """The run's name in prediction keys: the reader's, and the scorer's when set."""
        return run_label(self.model, self.scorer)

    def scoring(self, wrap: Callable[[Any], Any] = lambda model: model) -> Any:
        """The model to hand the strategies: ``wrap(model)``, or with a separate scorer a
        :class:`~rag_position.eval.engine.pair.ReaderScorer` of the reader and ``wrap(scorer)``
        (``wrap``: e.g. :class:`~rag_position.eval.rows.scoring.SharedScoring`)."""
        if self.scorer is None:
            return wrap(self.model)
        return ReaderScorer(self.model, wrap(self.scorer))

    def job(
        self,
        key: tuple[str, str, object, str],
        answers: tuple[str, ...],
        prepare: Callable[[], Prepared],
        fields: Mapping[str, Any],
    ) -> Job:
        """A job keyed ``(task, strategy, instance, setting)`` for this context's model."""
        task, strategy, instance, setting = key
        return Job(
            Key(task, self.label, strategy, str(instance), setting), answers, prepare, fields
        )

    def run(self, jobs: Sequence[Job], desc: str) -> list[dict[str, Any]]:
        """:func:`run_jobs` with this context's settings."""
        return run_jobs(
            self.model,
            jobs,
            self.store,
            decoding=self.decoding,
            batch_size=self.batch_size,
            concurrency=self.concurrency,
            shard=self.shard,
            workers=self.workers,
            progress=self.progress,
            desc=desc,
            label=self.label,
            split_scorer=self.scorer is not None,
        )
