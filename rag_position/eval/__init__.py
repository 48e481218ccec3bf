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
:mod:`rag_position.eval.marker`). The ``rag-position eval`` command is a thin wrapper.

Every task has one shape (:mod:`rag_position.eval.task`): a
:class:`~rag_position.eval.task.TaskSpec` declares its parameters once, as
:class:`~rag_position.eval.task.Param` data, beside the
parameters all tasks share (:data:`~rag_position.eval.task.COMMON`); the CLI options, the
run's plumbing and the command each report records (every parameter that changes
results, so that a report can be re-run) all come from it.

``compare`` runs every row of the strategy table ``rag_position.STRATEGIES``
beside the eval's own baselines (random, gold first, gold last, the frameworks'
``LongContextReorder``); a strategy of your own implements :class:`EvalStrategy`
(``name`` and ``prepare(instance, model, seed=) -> Prepared``).

Public here: the ``run_*`` tasks, :class:`EvalResult`, the two errors, the data
loader :func:`load_multidoc`, :func:`available_strategies`, :class:`EvalStrategy`
and :class:`Prepared`. The runner, store and report modules are internal.

Example::

    from rag_position.models import load_model
    from rag_position.eval import run_multidoc
    result = run_multidoc(load_model("embedded"), docs=10, questions=20, out="runs/md")
    print(result.report.read_text())
"""

from __future__ import annotations

from rag_position.eval.common import EvalConfigError, EvalRunError, Prepared
from rag_position.eval.compare import run_compare
from rag_position.eval.datasets import MultidocData, load_multidoc
from rag_position.eval.gauge import run_gauge
from rag_position.eval.kv import run_kv
from rag_position.eval.length import run_length
from rag_position.eval.multidoc import run_multidoc
from rag_position.eval.multifact import run_multifact
from rag_position.eval.open_domain import run_open_domain
from rag_position.eval.quick import run_quick
from rag_position.eval.report import EvalResult
from rag_position.eval.strategies import EvalStrategy, available_strategies
from rag_position.eval.swim import run_swim
from rag_position.eval.tune import run_tune
from rag_position.eval.voting import run_voting

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
