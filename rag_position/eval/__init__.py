"""The eval suite: position sweeps, baselines and strategy comparisons on any model.

Tasks: :func:`run_multidoc` (position sweep, closed-book and oracle),
:func:`run_compare` (every strategy, with costs), :func:`run_quick` (the 10-minute
run), :func:`run_kv`, :func:`run_gauge`, :func:`run_open_domain`, :func:`run_swim`;
the generation-side tasks :func:`run_multifact` (FACT), :func:`run_length`
(recite-then-solve) and :func:`run_voting` (medoid voting).
Every task is a function taking a model (any Generator; the gauge also needs a
Scorer, swim a ``count_tokens``) and writing an output folder: ``predictions.jsonl``
(every prediction, appended as it is made, so a rerun resumes), ``summary.json``,
``summary.csv``, PNG plots, ``report.md`` and ``run.json`` (which run the folder holds:
a run into a folder holding another run is refused before it generates,
:mod:`rag_position.eval.engine.marker`). The ``rag-position eval`` command is a thin wrapper.

Every task has one shape (:mod:`rag_position.eval.engine.task`): a
:class:`~rag_position.eval.engine.task.TaskSpec` declares its parameters once, as
:class:`~rag_position.eval.engine.params.Param` data, beside the
parameters all tasks share (:data:`~rag_position.eval.engine.params.COMMON`); the CLI options, the
run's plumbing and the command each report records (every parameter that changes
results, so that a report can be re-run) all come from it.

``compare`` runs every row of the strategy table ``rag_position.STRATEGIES``
beside the eval's own baselines (random, gold first, gold last, the frameworks'
``LongContextReorder``); a strategy of your own implements :class:`EvalStrategy`
(``name`` and ``prepare(instance, model, seed=) -> Prepared``).

Public here: the ``run_*`` tasks, :class:`EvalResult`, the two errors, the data
loader :func:`load_multidoc`, :func:`available_strategies`, :class:`EvalStrategy`
and :class:`Prepared`. The rest is internal, in three sub-packages: ``engine`` (a task's
declaration and run: the runner, its executor and worker processes, the prediction
store, the run folder's marker and lock, reports), ``tasks`` (one module per task) and
``rows`` (the row table and what each row does to an instance).

Example::

    from rag_position.models import load_model
    from rag_position.eval import run_multidoc
    result = run_multidoc(load_model("embedded"), docs=10, questions=20, out="runs/md")
    print(result.report.read_text())
"""

from __future__ import annotations

from rag_position.eval.engine.common import EvalConfigError, EvalRunError, Prepared
from rag_position.eval.engine.report import EvalResult
from rag_position.eval.rows.catalog import EvalStrategy, available_strategies
from rag_position.eval.tasks.compare import run_compare
from rag_position.eval.tasks.datasets import MultidocData, load_multidoc
from rag_position.eval.tasks.gauge import run_gauge
from rag_position.eval.tasks.kv import run_kv
from rag_position.eval.tasks.length import run_length
from rag_position.eval.tasks.multidoc import run_multidoc
from rag_position.eval.tasks.multifact import run_multifact
from rag_position.eval.tasks.open_domain import run_open_domain
from rag_position.eval.tasks.quick import run_quick
from rag_position.eval.tasks.swim import run_swim
from rag_position.eval.tasks.tune import run_tune
from rag_position.eval.tasks.voting import run_voting

__all__ = [
    "EvalConfigError",
    "EvalResult",
    "EvalRunError",
    "EvalStrategy",
    "MultidocData",
    "Prepared",
    "available_strategies",
    "load_multidoc",
    "run_compare",
    "run_gauge",
    "run_kv",
    "run_length",
    "run_multidoc",
    "run_multifact",
    "run_open_domain",
    "run_quick",
    "run_swim",
    "run_tune",
    "run_voting",
]
