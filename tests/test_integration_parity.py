"""The LangChain and LlamaIndex integrations expose the same options and write the same metadata.

For each pair of counterpart components: the public option names and their defaults are
equal (pydantic ``model_fields`` on both sides, less each framework's own plumbing), the
defaults are the core strategy function's where it has the option, the metadata records
written by a reorder of the same input have the same keys (and, on the same model, the
same order and values), and ``PositionAwareRetriever`` knows the same strategy names.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

lc = pytest.importorskip("langchain_rag_position")
li = pytest.importorskip("llama_index.postprocessor.rag_position")

from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from langchain_core.runnables import RunnableSerializable  # noqa: E402
from langchain_rag_position.retrievers import COMPONENTS as LC_STRATEGIES  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.query_engine import CustomQueryEngine  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.postprocessor.rag_position import COMPONENTS as LI_STRATEGIES  # noqa: E402

import rag_position.strategies as core  # noqa: E402
from rag_position.strategies import PositionProfile  # noqa: E402

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

# (strategy, LangChain class, LlamaIndex class, the core function whose defaults apply)
PAIRS: list[tuple[str, type[Any], type[Any], Callable[..., Any] | None]] = [
    ("likelihood_selection", lc.LikelihoodReorder, li.LikelihoodReorder, core.likelihood_selection),
    ("convex_score", lc.ConvexScoreReorder, li.ConvexScoreReorder, core.convex_score),
    (
        "passage_likelihood",
        lc.PassageLikelihoodReorder,
        li.PassageLikelihoodReorder,
        core.passage_likelihood,
    ),
    ("select_and_place", lc.SelectAndPlace, li.SelectAndPlace, core.select_and_place),
    ("profile", lc.ProfileReorder, li.ProfileReorder, None),
    ("edge", lc.EdgeReorder, li.EdgeReorder, core.edge_reorder),
    ("edge", lc.EdgeReorderTransformer, li.EdgeReorder, core.edge_reorder),
    (
        "recite_then_solve",
        lc.ReciteThenSolve,
        li.ReciteThenSolveQueryEngine,
        core.recite_then_solve,
    ),
    ("fact", lc.FactRewriter, li.FactQueryEngine, core.fact),
    ("medoid_vote", lc.MedoidVoting, li.MedoidVotingQueryEngine, core.medoid_vote),
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


@pytest.mark.parametrize(
    ("strategy", "lc_cls", "li_cls", "function"),
    PAIRS,
    ids=[f"{a.__name__}-{b.__name__}" for _, a, b, _ in PAIRS],
)
def test_counterparts_have_the_same_options_and_defaults(
    strategy: str, lc_cls: type[Any], li_cls: type[Any], function: Callable[..., Any] | None
) -> None:
    lc_options, li_options = options(lc_cls, "langchain"), options(li_cls, "llama_index")
    assert sorted(lc_options) == sorted(li_options)
    assert lc_options == li_options
    if function is not None:  # the core function's own names and defaults
        defaults = core_defaults(function)
        if strategy == "fact":
            defaults["top_k"] = core_defaults(core.embedding_retrieve)["top_k"]
        for name, default in defaults.items():
            if name in lc_options:
                assert lc_options[name] == default, name
        used = {n for n in defaults if n in lc_options}
        expected = set(defaults) - {"retrieve", "stop", "permute", "scores"}
        assert used == expected, f"{strategy}: core options not exposed: {expected - used}"


def test_profile_relevance_is_the_core_default_everywhere() -> None:
    relevance = inspect.signature(core.profile_reorder).parameters["relevance"].default
    assert relevance == "passage_likelihood"
    assert lc.ProfileReorder.model_fields["relevance"].default == relevance
    assert li.ProfileReorder.model_fields["relevance"].default == relevance


def test_medoid_n_orders_is_the_core_default_everywhere() -> None:
    n_orders = inspect.signature(core.medoid_vote).parameters["n_orders"].default
    assert lc.MedoidVoting.model_fields["n_orders"].default == n_orders
    assert li.MedoidVotingQueryEngine.model_fields["n_orders"].default == n_orders


def test_position_aware_retrievers_know_the_same_strategy_names() -> None:
    assert set(LC_STRATEGIES) == set(LI_STRATEGIES) == REORDER_NAMES
    by_strategy = {
        s: (a, b)
        for s, a, b, _ in PAIRS
        if s in REORDER_NAMES and a is not lc.EdgeReorderTransformer
    }
    for name in REORDER_NAMES:
        pair = by_strategy[VARIANTS.get(name, name)]
        assert (LC_STRATEGIES[name], LI_STRATEGIES[name]) == pair


def test_the_named_strategies_are_reordering_rows_of_the_core_table() -> None:
    """One table: every strategy name the integrations know is a row of rag_position.STRATEGIES."""
    from rag_position import STRATEGIES
    from rag_position._integration import component_rows

    rows = component_rows()
    assert set(rows) == REORDER_NAMES
    assert {name: row.name for name, row in rows.items() if row.name != name} == VARIANTS
    for name in REORDER_NAMES:
        assert name in STRATEGIES and not STRATEGIES[name].answers, name


def test_a_variant_name_builds_its_component_with_the_core_rows_fixed_options() -> None:
    """``passage_likelihood_profile`` is ``passage_likelihood`` with the core row's fixed
    ``placement="profile"``, in both retrievers, and the fixed option cannot be overridden."""
    from langchain_core.retrievers import BaseRetriever as LCRetriever
    from llama_index.core.base.base_retriever import BaseRetriever as LIRetriever

    from rag_position import STRATEGIES

    class NoDocs(LCRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return []

    class NoNodes(LIRetriever):
        def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
            return []

    scorer = _ConstantScorer()
    for name, component in VARIANTS.items():
        fixed = dict(STRATEGIES[name].fixed)
        assert fixed and STRATEGIES[name].function is STRATEGIES[component].function
        built_lc = lc.PositionAwareRetriever(
            retriever=NoDocs(), strategy=name, scorer=scorer, strategy_options={"profile": [0.1]}
        ).reorderer
        built_li = li.PositionAwareRetriever(NoNodes(), name, scorer=scorer, profile=[0.1])
        for built in (built_lc, built_li.postprocessor):
            assert type(built).strategy_name == component
            assert {k: getattr(built, k) for k in fixed} == fixed
        with pytest.raises(TypeError, match="itself"):
            li.PositionAwareRetriever(NoNodes(), name, scorer=scorer, placement="first")
        with pytest.raises(ValueError, match="profile="):
            li.PositionAwareRetriever(NoNodes(), name, scorer=scorer)


class _ConstantScorer:
    def score_spans(self, prompts: Any, spans: Any) -> list[Any]:
        from rag_position.models import SpanScore

        return [SpanScore(-1.0, -1.0, 1) for _ in prompts]


def test_model_accessors_have_the_same_names() -> None:
    for cls in (lc.LikelihoodReorder, lc.ConvexScoreReorder, lc.PassageLikelihoodReorder,
                lc.ProfileReorder):  # fmt: skip
        assert isinstance(inspect.getattr_static(cls, "core_scorer"), property)
    for cls in (li.LikelihoodReorder, li.ConvexScoreReorder, li.PassageLikelihoodReorder,
                li.ProfileReorder):  # fmt: skip
        assert isinstance(inspect.getattr_static(cls, "core_scorer"), property)
    for pair in ((lc.ReciteThenSolve, li.ReciteThenSolveQueryEngine),
                 (lc.FactRewriter, li.FactQueryEngine),
                 (lc.MedoidVoting, li.MedoidVotingQueryEngine)):  # fmt: skip
        for cls in pair:
            assert isinstance(inspect.getattr_static(cls, "core_generator"), property)
    for cls in (lc.FactRewriter, li.FactQueryEngine, lc.MedoidVoting, li.MedoidVotingQueryEngine):
        assert isinstance(inspect.getattr_static(cls, "core_embedder"), property)
    assert isinstance(inspect.getattr_static(lc.ChatRagPosition, "core_model"), property)
    assert isinstance(inspect.getattr_static(li.RagPositionLLM, "core_model"), property)
    assert isinstance(inspect.getattr_static(lc.RagPositionEmbeddings, "core_embedder"), property)
    assert isinstance(inspect.getattr_static(li.RagPositionEmbedding, "core_embedder"), property)


# ---------------------------------------------------------------------- metadata written
TEXTS = [
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600.", 0.4),
    ("Paris", "Paris is the capital and largest city of France.", 0.9),
    ("Macbeth", "Macbeth is a play by Shakespeare about a Scottish general.", 0.2),
    ("Tokyo", "Tokyo is the capital of Japan.", 0.7),
]
QUESTION = "Who wrote Hamlet?"


def lc_docs() -> list[Document]:
    return [
        Document(page_content=t, id=f"d{i}", metadata={"title": h, "relevance_score": s})
        for i, (h, t, s) in enumerate(TEXTS)
    ]


def li_nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(text=t, id_=f"d{i}", metadata={"title": h, "relevance_score": s}),
            score=s,
        )
        for i, (h, t, s) in enumerate(TEXTS)
    ]


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
        docs, nodes = lc_docs(), li_nodes()
        before_docs, before_nodes = copy.deepcopy(docs), copy.deepcopy(nodes)
        out_lc = LC_STRATEGIES[name](**config).compress_documents(docs, QUESTION)
        out_li = LI_STRATEGIES[name](**config).postprocess_nodes(nodes, query_str=QUESTION)
        assert docs == before_docs and nodes == before_nodes  # nothing mutated
        lc_records = [d.metadata["rag_position"] for d in out_lc]
        li_records = [n.node.metadata["rag_position"] for n in out_li]
        assert [set(r) for r in lc_records] == [set(r) for r in li_records], (name, config)
        every = sorted(f"d{i}" for i in range(len(TEXTS)))  # none lost, none twice
        assert sorted(d.id for d in out_lc) == every
        assert sorted(n.node.node_id for n in out_li) == every
        # LlamaIndex has its own relevance (NodeWithScore.score) where LangChain has
        # only the given order: without a scorer or a score_key the values may differ.
        same_source = "scorer" in config or "score_key" in config
        if same_source:
            assert [r["original_rank"] for r in lc_records] == [
                r["original_rank"] for r in li_records
            ]
            for a, b in zip(lc_records, li_records, strict=True):
                for key, value in a.items():
                    if isinstance(value, float):
                        assert b[key] == pytest.approx(value, abs=1e-4), (name, key)
                    else:
                        assert b[key] == value, (name, key)


def test_both_accept_a_profile_as_a_list_a_path_or_a_profile(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    PositionProfile((0.1, 0.5, 0.2)).save(path)
    for value in ([0.1, 0.5, 0.2], str(path), path, PositionProfile((0.1, 0.5, 0.2))):
        for cls in (lc.ProfileReorder, li.ProfileReorder):
            reorder = cls(profile=value)
            assert reorder is not None
    for cls in (lc.ProfileReorder, li.ProfileReorder):
        with pytest.raises(TypeError, match="numbers"):
            cls(profile=["high", "low"])
