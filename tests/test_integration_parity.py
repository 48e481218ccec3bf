"""The LangChain and LlamaIndex integrations expose the same options (the core function's
defaults), know the same strategy names and write the same metadata."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from framework_adapters import FRAMEWORKS, Framework, LangChain, LlamaIndex, lc, li
from langchain_core.documents import BaseDocumentCompressor
from langchain_core.runnables import RunnableSerializable
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import CustomQueryEngine

import rag_position.strategies as core
from rag_position import STRATEGIES
from rag_position._integration import component_rows
from rag_position.testing.scripted import HashScorer

LC_STRATEGIES, LI_STRATEGIES = LangChain.components, LlamaIndex.components

REORDER_NAMES = {
    "likelihood_selection",
    "convex_score",
    "passage_likelihood",
    "passage_likelihood_profile",
    "profile",
    "edge",
    "select_and_place",
    "select_and_place_profile",
}
# Retriever names that build another strategy's component with options fixed.
VARIANTS = {
    "passage_likelihood_profile": "passage_likelihood",
    "select_and_place_profile": "select_and_place",
}

# (strategy, LangChain class, LlamaIndex class): the strategy row's function gives the
# defaults (profile's: only its relevance)
PAIRS: list[tuple[str, str, str]] = [
    ("likelihood_selection", "LikelihoodReorder", "LikelihoodReorder"),
    ("convex_score", "ConvexScoreReorder", "ConvexScoreReorder"),
    ("passage_likelihood", "PassageLikelihoodReorder", "PassageLikelihoodReorder"),
    ("select_and_place", "SelectAndPlace", "SelectAndPlace"),
    ("profile", "ProfileReorder", "ProfileReorder"),
    ("edge", "EdgeReorder", "EdgeReorder"),
    ("edge", "EdgeReorderTransformer", "EdgeReorder"),
    ("recite", "ReciteThenSolve", "ReciteThenSolveQueryEngine"),
    ("fact", "FactRewriter", "FactQueryEngine"),
    ("medoid", "MedoidVoting", "MedoidVotingQueryEngine"),
]

# Each framework's own plumbing, which has no counterpart by nature: LangChain's batch
# concurrency; LlamaIndex's NodeWithScore.score (replace_score, use_scores) and a query
# engine's retrieval (retriever, node_postprocessors).
FRAMEWORK_ONLY = {
    "langchain": {"max_concurrency"},
    "llama_index": {"replace_score", "use_scores", "retriever", "node_postprocessors"},
}
# Each framework's own word for its embeddings argument.
LI_NAMES = {"embed_model": "embeddings", "embed_kwargs": "embeddings_kwargs"}
REQUIRED = "<required>"


def _framework_fields(cls: type[Any]) -> set[str]:
    for base in (BaseDocumentCompressor, RunnableSerializable, BaseNodePostprocessor):
        if issubclass(cls, base):
            return set(base.model_fields)
    if issubclass(cls, CustomQueryEngine):
        return set(CustomQueryEngine.model_fields)
    return set()  # EdgeReorderTransformer: BaseDocumentTransformer has no fields


def options(cls: type[Any], framework: str) -> dict[str, Any]:
    """The public options of a component and their defaults (factories called)."""
    out: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        if name in _framework_fields(cls) or name in FRAMEWORK_ONLY[framework]:
            continue
        if info.is_required():
            default: Any = REQUIRED
        elif info.default_factory is not None:
            default = info.default_factory()  # type: ignore[call-arg]
        else:
            default = info.default
        out[LI_NAMES.get(name, name) if framework == "llama_index" else name] = default
    return out


def core_defaults(function: Callable[..., Any]) -> dict[str, Any]:
    params = inspect.signature(function).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


@pytest.mark.parametrize(("strategy", "lc_name", "li_name"), PAIRS, ids=[p[1] for p in PAIRS])
def test_counterparts_have_the_same_options_and_defaults(
    strategy: str, lc_name: str, li_name: str
) -> None:
    lc_options = options(getattr(lc, lc_name), "langchain")
    li_options = options(getattr(li, li_name), "llama_index")
    assert sorted(lc_options) == sorted(li_options)
    assert lc_options == li_options
    if strategy == "profile":  # the relevance is the core function's default
        relevance = core_defaults(core.profile_reorder)["relevance"]
        assert lc_options["relevance"] == relevance == "passage_likelihood"
        return
    defaults = core_defaults(STRATEGIES[strategy].function)  # its own names and defaults
    if strategy == "fact":
        defaults["top_k"] = core_defaults(core.embedding_retrieve)["top_k"]
    for name, default in defaults.items():
        if name in lc_options:
            assert lc_options[name] == default, name
    used = {n for n in defaults if n in lc_options}
    expected = set(defaults) - {"retrieve", "stop", "permute", "scores", "embedder"}
    assert used == expected, f"{strategy}: core options not exposed: {expected - used}"


def test_the_named_strategies_are_the_reordering_rows_of_the_core_table() -> None:
    """One table: both PositionAwareRetrievers know the same names, each a row of
    rag_position.STRATEGIES that reorders, built by its counterpart components."""
    assert set(LC_STRATEGIES) == set(LI_STRATEGIES) == REORDER_NAMES
    rows = component_rows()
    assert set(rows) == REORDER_NAMES
    assert {name: row.name for name, row in rows.items() if row.name != name} == VARIANTS
    by_strategy = {s: (a, b) for s, a, b in PAIRS if a != "EdgeReorderTransformer"}
    for name in REORDER_NAMES:
        assert name in STRATEGIES and not STRATEGIES[name].answers, name
        lc_name, li_name = by_strategy[VARIANTS.get(name, name)]
        assert LC_STRATEGIES[name] is getattr(lc, lc_name), name
        assert LI_STRATEGIES[name] is getattr(li, li_name), name


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_a_variant_name_builds_its_component_with_the_core_rows_fixed_options(
    fw: Framework,
) -> None:
    """``passage_likelihood_profile`` is ``passage_likelihood`` with the core row's fixed
    ``placement="profile"`` (that it cannot be overridden: test_components_passage_likelihood)."""
    for name, component in VARIANTS.items():
        fixed = dict(STRATEGIES[name].fixed)
        assert fixed and STRATEGIES[name].function is STRATEGIES[component].function
        built = fw.reorderer(fw.retriever([], name, scorer=HashScorer(), profile=[0.1]))
        assert type(built).strategy_name == component
        assert {k: getattr(built, k) for k in fixed} == fixed


SCORED = ("LikelihoodReorder", "ConvexScoreReorder", "PassageLikelihoodReorder", "ProfileReorder")


@pytest.mark.parametrize(
    ("accessor", "lc_name", "li_name"),
    [
        *(("core_scorer", name, name) for name in SCORED),
        ("core_generator", "ReciteThenSolve", "ReciteThenSolveQueryEngine"),
        ("core_generator", "FactRewriter", "FactQueryEngine"),
        ("core_generator", "MedoidVoting", "MedoidVotingQueryEngine"),
        ("core_embedder", "FactRewriter", "FactQueryEngine"),
        ("core_embedder", "MedoidVoting", "MedoidVotingQueryEngine"),
        ("core_embedder", "RagPositionEmbeddings", "RagPositionEmbedding"),
        ("core_model", "ChatRagPosition", "RagPositionLLM"),
    ],
)
def test_model_accessors_have_the_same_names(accessor: str, lc_name: str, li_name: str) -> None:
    for package, name in ((lc, lc_name), (li, li_name)):
        assert isinstance(inspect.getattr_static(getattr(package, name), accessor), property)


# ---------------------------------------------------------------------- metadata written
TEXTS = [
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600.", 0.4),
    ("Paris", "Paris is the capital and largest city of France.", 0.9),
    ("Macbeth", "Macbeth is a play by Shakespeare about a Scottish general.", 0.2),
    ("Tokyo", "Tokyo is the capital of Japan.", 0.7),
]
QUESTION = "Who wrote Hamlet?"


def _configs(model: object, profile: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("likelihood_selection", {"scorer": model, "n_orders": 3}),
        ("convex_score", {"scorer": model}),
        ("convex_score", {"scorer": model, "placement": "profile", "profile": profile}),
        ("passage_likelihood", {"scorer": model}),
        ("passage_likelihood", {"scorer": model, "placement": "profile", "profile": profile}),
        ("profile", {"profile": profile}),
        ("profile", {"profile": profile, "score_key": "relevance_score"}),
        ("profile", {"profile": profile, "scorer": model}),
        ("profile", {"profile": profile, "scorer": model, "relevance": "convex_score"}),
        ("edge", {}),
        ("edge", {"score_key": "relevance_score"}),
        ("edge", {"mode": "haystack", "score_key": "relevance_score"}),
        ("edge", {"mode": "llamaindex", "score_key": "relevance_score"}),
    ]


def test_the_same_reorder_writes_the_same_records(embedded_fp32: object) -> None:
    """Same input, same model: the same keys everywhere; with the same relevance source
    (a scorer, or score_key), the same order and the same values."""
    for name, config in _configs(embedded_fp32, [0.17, 0.12, 0.40, 0.30]):
        records = []
        for fw in (LangChain(), LlamaIndex()):
            items = [
                fw.wrap(t, {"title": h, "relevance_score": s}, f"d{i}", s)
                for i, (h, t, s) in enumerate(TEXTS)
            ]
            before = fw.snapshot(items)
            out = fw.compress(fw.components[name](**config), items, QUESTION)
            before.check()  # nothing mutated
            every = sorted(f"d{i}" for i in range(len(TEXTS)))  # none lost, none twice
            assert sorted(fw.ident(x) for x in out) == every
            records.append(fw.records(out))
        lc_records, li_records = records
        assert [set(r) for r in lc_records] == [set(r) for r in li_records], (name, config)
        # LlamaIndex has its own relevance (NodeWithScore.score) where LangChain has
        # only the given order: without a scorer or a score_key the values may differ.
        if "scorer" in config or "score_key" in config:
            assert [r["original_rank"] for r in lc_records] == [
                r["original_rank"] for r in li_records
            ]
            for a, b in zip(lc_records, li_records, strict=True):
                for key, value in a.items():
                    if isinstance(value, float):
                        assert b[key] == pytest.approx(value, abs=1e-4), (name, key)
                    else:
                        assert b[key] == value, (name, key)
