"""The eval suite: position sweeps, baselines and strategy comparisons on any model.

Tasks: :func:`run_multidoc` (position sweep, closed-book and oracle),
:func:`run_compare` (every strategy, with costs), :func:`run_quick` (the 10-minute
run), :func:`run_kv`, :func:`run_gauge`, :func:`run_open_domain`, :func:`run_swim`;
the generation-side tasks :func:`run_multifact` (FACT), :func:`run_length`
(recite-then-solve) and :func:`run_voting` (medoid voting).
Every task is a function taking a model (any Generator; the gauge also needs a
Scorer, swim a ``count_tokens``) and writing an output folder: ``predictions.jsonl``
(every prediction, appended as it is made, so a rerun resumes), ``summary.json``,
``summary.csv``, PNG plots and ``report.md``. The ``rag-position eval`` command is a thin wrapper.

Strategies for ``compare`` implement :class:`Strategy` (``name`` and
``prepare(instance, model, seed=) -> Prepared``); besides the built-in baselines,
every entry of ``rag_position.strategies.STRATEGIES`` is picked up at call time
(see :mod:`rag_position.eval.strategies` for the calling convention), so a new
strategy registered there needs no change here.

Example:
    >>> from rag_position.models import load_model
    >>> from rag_position.eval import run_multidoc
    >>> result = run_multidoc(load_model("embedded"), docs=10, questions=20, out="runs/md")
    >>> print(result.report.read_text())
"""

from __future__ import annotations

from rag_position.eval.common import (
    Decoding,
    EvalConfigError,
    EvalRunError,
    Key,
    Prepared,
    derive_seed,
    model_label,
    paper_positions,
)
from rag_position.eval.compare import compare_section, run_compare
from rag_position.eval.datasets import MultidocData, load_multidoc
from rag_position.eval.gauge import run_gauge
from rag_position.eval.kv import generate_kv, run_kv
from rag_position.eval.length import run_length
from rag_position.eval.multidoc import multidoc_jobs, multidoc_section, run_multidoc
from rag_position.eval.multifact import run_multifact
from rag_position.eval.open_domain import run_open_domain
from rag_position.eval.quick import QUICK_QUESTIONS, run_quick
from rag_position.eval.report import EvalResult, Section, Table, write_report
from rag_position.eval.runner import Job, RunContext, default_batch_size, run_jobs
from rag_position.eval.session import open_context
from rag_position.eval.stats import bootstrap_ci, summarize
from rag_position.eval.store import PredictionStore
from rag_position.eval.strategies import (
    OrderStrategy,
    RegisteredStrategy,
    Strategy,
    available_strategies,
    builtin_strategies,
)
from rag_position.eval.swim import run_swim
from rag_position.eval.voting import run_voting

__all__ = [
    "QUICK_QUESTIONS",
    "Decoding",
    "EvalConfigError",
    "EvalResult",
    "EvalRunError",
    "Job",
    "Key",
    "MultidocData",
    "OrderStrategy",
    "PredictionStore",
    "Prepared",
    "RegisteredStrategy",
    "RunContext",
    "Section",
    "Strategy",
    "Table",
    "available_strategies",
    "bootstrap_ci",
    "builtin_strategies",
    "compare_section",
    "default_batch_size",
    "derive_seed",
    "generate_kv",
    "load_multidoc",
    "model_label",
    "multidoc_jobs",
    "multidoc_section",
    "open_context",
    "paper_positions",
    "run_compare",
    "run_gauge",
    "run_jobs",
    "run_kv",
    "run_length",
    "run_multidoc",
    "run_multifact",
    "run_open_domain",
    "run_quick",
    "run_swim",
    "run_voting",
    "summarize",
    "write_report",
]
