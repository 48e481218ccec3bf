"""rag-position: make retrieval-augmented generation read its context better.

The public API is what this module exports (``rag_position.__all__``: the models, the
strategy table, the result types, the errors and the tuned files of ``rag-position
tune``: :func:`load_tuned`, :func:`read_tuned`, :class:`TunedChoice`), the strategies
(:mod:`rag_position.strategies`), the eval suite's ``run_*`` functions
(:mod:`rag_position.eval`), the data loaders (:mod:`rag_position.data`), the test kits
(:mod:`rag_position.testing`) and the two framework packages. Everything else may change
without notice.

Example::

    from rag_position import STRATEGIES, load_model, load_tuned
    from rag_position.strategies import passage_likelihood

    model = load_model("embedded")              # or "openai:http://host:8000/v1/NAME"
    result = passage_likelihood("Who wrote Hamlet?", passages, model)
    result.passages, result.cost                # your passages in the new order; what it cost
    STRATEGIES["passage_likelihood"]("Who wrote Hamlet?", passages, scorer=model)  # by name
    reorder = load_tuned("tuned.json")          # what `rag-position tune` chose for a model

Importing this package loads no torch: local models need the ``[local]`` extra,
which :func:`load_model` and :func:`load_embedder` import when first called.
"""

from __future__ import annotations

from rag_position._version import __version__
from rag_position.cost import Cost
from rag_position.errors import (
    BackendError,
    BackendUnavailableError,
    ContextLengthError,
    DataFormatError,
    ModelSpecError,
    RagPositionError,
    ScoringUnsupportedError,
)
from rag_position.models import Embedder, Generator, Scorer, load_embedder, load_model
from rag_position.passages import Passage
from rag_position.strategies import (
    STRATEGIES,
    AnswerResult,
    OrderingResult,
    PositionProfile,
    StrategyError,
    StrategySpec,
    estimate_profile,
    get_strategy,
)
from rag_position.tuned import TunedChoice, load_tuned, read_tuned

__all__ = [
    "STRATEGIES",
    "AnswerResult",
    "BackendError",
    "BackendUnavailableError",
    "ContextLengthError",
    "Cost",
    "DataFormatError",
    "Embedder",
    "Generator",
    "ModelSpecError",
    "OrderingResult",
    "Passage",
    "PositionProfile",
    "RagPositionError",
    "Scorer",
    "ScoringUnsupportedError",
    "StrategyError",
    "StrategySpec",
    "TunedChoice",
    "__version__",
    "estimate_profile",
    "get_strategy",
    "load_embedder",
    "load_model",
    "load_tuned",
    "read_tuned",
]
