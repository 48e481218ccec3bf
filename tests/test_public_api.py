"""The public API is small, deliberate and documented: growing it is a decision, not an accident."""

from __future__ import annotations

import importlib
import inspect

import pytest

import rag_position

TOP_LEVEL = {
    "STRATEGIES", "AnswerResult", "BackendError", "BackendUnavailableError",
    "ContextLengthError", "Cost", "DataFormatError", "Embedder", "Generator",
    "ModelSpecError", "OrderingResult", "Passage", "PositionProfile", "RagPositionError",
    "Scorer", "ScoringUnsupportedError", "StrategyError", "StrategySpec", "TunedChoice",
    "__version__", "estimate_profile", "get_strategy", "load_embedder", "load_model",
    "load_tuned", "read_tuned",
}  # fmt: skip


def test_the_top_level_exports_exactly_the_documented_names() -> None:
    assert set(rag_position.__all__) == TOP_LEVEL
    for name in rag_position.__all__:
        assert hasattr(rag_position, name), name
        if name not in ("__version__", "STRATEGIES"):  # every other one is documented
            assert inspect.getdoc(getattr(rag_position, name)), f"rag_position.{name}: no doc"


def test_every_strategy_function_is_a_row_of_the_table() -> None:
    import rag_position.strategies as strategies

    functions = {spec.function for spec in rag_position.STRATEGIES.values()}
    for name in ("likelihood_selection", "convex_score", "profile_reorder", "edge_reorder",
                 "sandwich", "fact", "recite_then_solve", "medoid_vote",
                 "passage_likelihood"):  # fmt: skip
        assert getattr(strategies, name) in functions, name


@pytest.mark.parametrize(
    "module",
    ["rag_position", "rag_position.strategies", "rag_position.strategies.results",
     "rag_position.models", "rag_position.data", "rag_position.eval", "langchain_rag_position",
     "llama_index.postprocessor.rag_position"],
)  # fmt: skip
def test_no_public_module_exports_more_than_30_names_or_a_private_one(module: str) -> None:
    exported = importlib.import_module(module).__all__
    assert len(exported) <= 30, (module, len(exported))
    private = [n for n in exported if n.startswith("_")]
    assert private == (["__version__"] if module == "rag_position" else [])


def test_the_strategies_leave_room_to_grow() -> None:
    """``rag_position.strategies`` exports the strategies and their table (24 names at most);
    the result types are ``rag_position.strategies.results``."""
    import rag_position.strategies as strategies
    import rag_position.strategies.results as results

    assert len(strategies.__all__) <= 24, len(strategies.__all__)
    assert not set(strategies.__all__) & set(results.__all__)
    for name in results.__all__:  # still importable where they were
        assert getattr(strategies, name) is getattr(results, name), name
