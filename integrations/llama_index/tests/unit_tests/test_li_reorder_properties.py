"""Property tests (hypothesis) for every LlamaIndex reorderer: nothing lost, copied or mutated.

The contract (integrations/llama_index/README.md "The metadata key", ``_nodes.reorder_nodes``):
each reordering postprocessor returns NEW ``NodeWithScore`` objects around shallow copies
of the nodes, whose metadata is a new dict, the caller's plus one record under
``metadata_key`` (``{"strategy", "score", "rank", "original_rank", **extras}``), the key
added to the copy's ``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys``;
ids, text and the other metadata kept; ``NodeWithScore.score`` as the retriever gave it
unless ``replace_score=True``; ``metadata_key=None`` returns the caller's own
``NodeWithScore`` objects (with ``replace_score``, new wrappers around the caller's own
nodes where the score changes). The caller's nodes, their metadata and the input list
are never mutated; nothing is lost or duplicated. Pinned for ``LikelihoodReorder``,
``ConvexScoreReorder``, ``PassageLikelihoodReorder``, ``ProfileReorder``, ``EdgeReorder``
(sync and async) and
``PositionAwareRetriever``, on generated nodes: 0 to 30, empty texts, emoji, long
texts, the same ``NodeWithScore`` passed twice and the same node in two wrappers, nested
metadata, a record already there (chained postprocessors), retriever scores holding
NaN/inf/None, values under ``score_key`` holding infinities, NaN, missing values and
non-numbers, and scripted scorers (a hash of the prompt, a constant, one that answers
NaN/inf):

- each input position comes out exactly once (``original_rank``), as the documented copy
  of that very input, or, with ``metadata_key=None``, the caller's own object;
- the caller's list, ``NodeWithScore`` objects (their ``node`` and ``score``), nodes
  (every field), metadata dicts, excluded-key lists and nested values are unchanged;
- the record: the one schema, ``rank`` its new position, ``score`` a number or ``None``;
- a scorer's NaN/inf: a clear ``BackendError`` naming it, or every node once as above;
- documented refusals: a NaN, a non-number or no value at all under ``score_key`` (and,
  for ``ProfileReorder``, any node without one) is a ``ValueError`` that changes
  nothing; Haystack's ``top_k``/``word_count_threshold`` keep a selection.
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    STRATEGY_CLASSES,
    ConvexScoreReorder,
    EdgeReorder,
    LikelihoodReorder,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    ProfileReorder,
)

from rag_position.adapters import EXTRA_KEYS, NAMED_VARIANTS, RECORD_KEYS
from rag_position.strategies import PositionProfile
from rag_position.testing.scripted import HashScorer, ScriptedScorer, tolerating_nonfinite
from rag_position.testing.strategies import (
    MISSING,
    bad_score_values,
    edge_modes,
    haystack_options,
    nested,
    score_values,
    scorers,
    texts,
)

T = TypeVar("T")
QUESTIONS = ["Who wrote Hamlet?", "¿Quién escribió 🎭 Hamlet?", "q"]
SCORE_KEY = "relevance_score"
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# ---------------------------------------------------------------------- inputs

# texts, nested metadata values, score_key values and scorers: rag_position.testing.strategies

retriever_scores = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0]),
)


@st.composite
def text_nodes(draw: st.DrawFn, scores: st.SearchStrategy[Any]) -> TextNode:
    metadata: dict[str, Any] = draw(
        st.dictionaries(st.sampled_from(["source", "tags", "nested", "🙂", "page"]), nested)
    )
    title = draw(st.one_of(st.just(MISSING), st.text(max_size=8), st.integers(), st.none()))
    if title is not MISSING:
        metadata["title"] = title
    score = draw(scores)
    if score is not MISSING:
        metadata[SCORE_KEY] = score
    if draw(st.integers(0, 9)) == 0:  # a record from an earlier postprocessor (chained)
        metadata[METADATA_KEY] = {"strategy": "edge", "rank": 0, "nested": [1]}
    excluded = draw(st.lists(st.sampled_from(["source", "page", METADATA_KEY]), unique=True))
    options: dict[str, Any] = {}
    if draw(st.booleans()):
        options["id_"] = draw(st.text(min_size=1, max_size=5))
    return TextNode(
        text=draw(texts),
        metadata=metadata,
        excluded_llm_metadata_keys=excluded,
        excluded_embed_metadata_keys=list(reversed(excluded)),
        **options,
    )


@st.composite
def node_lists(draw: st.DrawFn, max_size: int = 30, bad_scores: bool = False) -> list[Any]:
    """0..max_size NodeWithScore: the same object twice, the same node in two wrappers."""
    scores = st.one_of(score_values, bad_score_values) if bad_scores else score_values
    nodes = draw(st.lists(text_nodes(scores), max_size=max_size))
    pool = [NodeWithScore(node=n, score=draw(retriever_scores)) for n in nodes]
    if pool and len(pool) < max_size:
        room = max_size - len(pool)
        wrapped = draw(st.lists(st.integers(0, len(pool) - 1), max_size=room // 2))
        pool += [NodeWithScore(node=pool[i].node, score=draw(retriever_scores)) for i in wrapped]
        repeats = draw(st.lists(st.integers(0, len(pool) - 1), max_size=max_size - len(pool)))
        pool += [pool[i] for i in repeats]
    return draw(st.permutations(pool))


# ---------------------------------------------------------------------- options

PROFILES: list[Any] = [
    PositionProfile((0.3, 0.1, 0.5)),
    PositionProfile((0.7,)),
    [0.2, 0.2, 0.1, 0.4, 0.9, 0.3, 0.3],  # a list of values
]
metadata_keys = st.sampled_from([METADATA_KEY, METADATA_KEY, "pos", None])

# ---------------------------------------------------------------------- the reorderers


@dataclass(frozen=True)
class Component:
    """``build(scorer, options)`` makes the postprocessor; ``options`` drawn per example.

    ``strategy``: the record's name; ``scores``: it calls the scorer (once, batched,
    from 2 nodes on); ``score_key``: it reads ``metadata[score_key]`` (``all_scores``:
    every node needs one); ``drops``: a documented selection.
    """

    build: Callable[[Any, dict[str, Any]], BaseNodePostprocessor]
    strategy: str
    options: st.SearchStrategy[dict[str, Any]] = field(default_factory=lambda: st.just({}))
    scores: bool = False
    score_key: bool = False
    all_scores: bool = False
    drops: bool = False


keyed = {"key": metadata_keys, "replace": st.booleans()}

COMPONENTS: dict[str, Component] = {
    "LikelihoodReorder": Component(
        lambda s, o: LikelihoodReorder(scorer=s, seed=o["seed"], metadata_key=o["key"]),
        "likelihood_selection",
        st.fixed_dictionaries({"seed": st.integers(0, 2**16), "key": metadata_keys}),
        scores=True,
    ),
    "LikelihoodReorder_options": Component(
        lambda s, o: LikelihoodReorder(
            scorer=s, n_orders=3, include_given=False, query_aware=True, title_key=None
        ),
        "likelihood_selection",
        scores=True,
    ),
    "ConvexScoreReorder": Component(
        lambda s, o: ConvexScoreReorder(
            scorer=s, seed=o["seed"], metadata_key=o["key"], replace_score=o["replace"]
        ),
        "convex_score",
        st.fixed_dictionaries({"seed": st.integers(0, 2**16), **keyed}),
        scores=True,
    ),
    "ConvexScoreReorder_last_authors": Component(
        lambda s, o: ConvexScoreReorder(
            scorer=s, placement="last", rest="scores", variant="authors", n_base_orders=2
        ),
        "convex_score",
        scores=True,
    ),
    "ConvexScoreReorder_profile": Component(
        lambda s, o: ConvexScoreReorder(
            scorer=s, placement="profile", profile=o["profile"], replace_score=o["replace"]
        ),
        "convex_score",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES), "replace": st.booleans()}),
        scores=True,
    ),
    "PassageLikelihoodReorder": Component(
        lambda s, o: PassageLikelihoodReorder(
            scorer=s, metadata_key=o["key"], replace_score=o["replace"]
        ),
        "passage_likelihood",
        st.fixed_dictionaries(keyed),
        scores=True,
    ),
    "PassageLikelihoodReorder_last_scores": Component(
        lambda s, o: PassageLikelihoodReorder(
            scorer=s, placement="last", rest="scores", title_key=None
        ),
        "passage_likelihood",
        scores=True,
    ),
    "PassageLikelihoodReorder_profile": Component(
        lambda s, o: PassageLikelihoodReorder(
            scorer=s,
            placement="profile",
            profile=o["profile"],
            rest=o.get("rest"),
            replace_score=o["replace"],
        ),
        "passage_likelihood",
        st.fixed_dictionaries(
            {
                "profile": st.sampled_from(PROFILES),
                "rest": st.sampled_from([None, "keep"]),
                "replace": st.booleans(),
            }
        ),
        scores=True,
    ),
    "ProfileReorder": Component(  # the retriever's scores where all have one, else the order
        lambda s, o: ProfileReorder(
            profile=o["profile"], metadata_key=o["key"], replace_score=o["replace"]
        ),
        "profile",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES), **keyed}),
    ),
    "ProfileReorder_score_key": Component(
        lambda s, o: ProfileReorder(
            profile=o["profile"],
            score_key=SCORE_KEY,
            metadata_key=o["key"],
            replace_score=o["replace"],
        ),
        "profile",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES), **keyed}),
        score_key=True,
        all_scores=True,
    ),
    "ProfileReorder_scorer": Component(  # passage likelihood (the default relevance)
        lambda s, o: ProfileReorder(
            profile=o["profile"], scorer=s, metadata_key=o["key"], replace_score=o["replace"]
        ),
        "profile",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES), **keyed}),
        scores=True,
    ),
    "ProfileReorder_scorer_convex": Component(
        lambda s, o: ProfileReorder(
            profile=o["profile"],
            scorer=s,
            relevance="convex_score",
            convex_options={"n_rotations": 2, "seed": 5},
            metadata_key=o["key"],
            replace_score=o["replace"],
        ),
        "profile",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES), **keyed}),
        scores=True,
    ),
    "EdgeReorder": Component(
        lambda s, o: EdgeReorder(mode=o["mode"], metadata_key=o["key"], use_scores=o["use"]),
        "edge",
        st.fixed_dictionaries({"mode": edge_modes, "key": metadata_keys, "use": st.booleans()}),
    ),
    "EdgeReorder_score_key": Component(
        lambda s, o: EdgeReorder(mode=o["mode"], score_key=SCORE_KEY, metadata_key=o["key"]),
        "edge",
        st.fixed_dictionaries({"mode": edge_modes, "key": metadata_keys}),
        score_key=True,
    ),
    "EdgeReorder_haystack_options": Component(
        lambda s, o: EdgeReorder(
            mode="haystack", top_k=o["top_k"], word_count_threshold=o["threshold"]
        ),
        "edge",
        haystack_options,
        drops=True,
    ),
}


def run(
    component: BaseNodePostprocessor, nodes: Sequence[Any], question: str | None, use_async: bool
) -> list[NodeWithScore]:
    if use_async:
        return asyncio.run(component.apostprocess_nodes(nodes, query_str=question))  # type: ignore[arg-type]
    return component.postprocess_nodes(nodes, query_str=question)  # type: ignore[arg-type]


def expected_error(nodes: Sequence[NodeWithScore], spec: Component) -> bool:
    """Whether ``metadata[score_key]`` makes the documented ``ValueError``."""
    if not spec.score_key or not nodes:
        return False
    values = [n.node.metadata.get(SCORE_KEY) for n in nodes]
    for v in values:
        if v is None:
            continue
        try:
            if math.isnan(float(v)):
                return True
        except (TypeError, ValueError):
            return True
    if all(v is None for v in values):
        return True
    return spec.all_scores and any(v is None for v in values)


# ---------------------------------------------------------------------- the checks


def deep_equal(a: Any, b: Any) -> bool:
    """Structural equality with NaN equal to NaN, types and key order included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, Mapping):
        return list(a) == list(b) and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def containers(x: Any) -> list[int]:
    """The ids of every dict and list inside ``x``: a replaced one shows up here."""
    found: list[int] = []
    if isinstance(x, Mapping):
        found.append(id(x))
        for v in x.values():
            found += containers(v)
    elif isinstance(x, list):
        found.append(id(x))
        for v in x:
            found += containers(v)
    return found


def inner(n: NodeWithScore) -> list[int]:
    node = n.node
    return [
        id(node),
        *containers(node.metadata),
        id(node.excluded_llm_metadata_keys),
        id(node.excluded_embed_metadata_keys),
    ]


class Snapshot:
    """The caller's list, its NodeWithScore objects, their nodes and everything inside."""

    def __init__(self, nodes: Sequence[NodeWithScore], *others: Any) -> None:
        self.nodes, self.others = nodes, others
        self.ids = [id(n) for n in nodes]
        self.deep = copy.deepcopy(([(n.score, n.node.model_dump()) for n in nodes], others))
        self.inner = [inner(n) for n in nodes]

    def check(self) -> None:
        assert [id(n) for n in self.nodes] == self.ids, "the caller's list was reordered"
        now = ([(n.score, n.node.model_dump()) for n in self.nodes], self.others)
        assert deep_equal(now, self.deep), "a node (text, id, metadata, score) was mutated"
        assert [inner(n) for n in self.nodes] == self.inner, "a node or its metadata replaced"


def _plain(node: TextNode) -> dict[str, Any]:
    dump = node.model_dump()
    for name in ("metadata", "excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        dump.pop(name)
    return dump


def check_reordered(
    nodes: Sequence[NodeWithScore],
    out: list[NodeWithScore],
    strategy: str,
    key: str | None,
    replace_score: bool = False,
    drops: bool = False,
) -> None:
    """Each input once (a selection if ``drops``), as the documented copy or itself."""
    assert isinstance(out, list) and out is not nodes
    assert all(isinstance(n, NodeWithScore) for n in out)
    if key is None:  # the caller's own NodeWithScore, or a new one around the caller's node
        given = {id(n) for n in nodes}
        for n in out:
            assert id(n) in given or replace_score, "a new NodeWithScore without replace_score"
        counted = Counter(id(n.node) for n in out)
        if drops:
            assert not counted - Counter(id(n.node) for n in nodes)
        else:
            assert counted == Counter(id(n.node) for n in nodes), "lost, copied or duplicated"
        return
    assert all(isinstance(n.node.metadata.get(key), dict) for n in out), "a node without a record"
    ranks = [n.node.metadata[key]["original_rank"] for n in out]
    assert len(set(ranks)) == len(ranks) and all(0 <= i < len(nodes) for i in ranks)
    if not drops:
        assert sorted(ranks) == list(range(len(nodes))), f"ranks {ranks}: lost or duplicated"
    for rank, (n, i) in enumerate(zip(out, ranks, strict=True)):
        src, node = nodes[i], n.node
        assert n is not src and node is not src.node, "not a new wrapper around a copy"
        assert type(node) is type(src.node) and node.node_id == src.node.node_id
        assert deep_equal(_plain(node), _plain(src.node)), "text or another field changed"
        assert node.metadata is not src.node.metadata, "the caller's metadata dict was reused"
        assert list(node.metadata) == list({**src.node.metadata, key: None}), "keys lost/added"
        for k, v in src.node.metadata.items():
            if k != key:
                assert node.metadata[k] is v, f"metadata[{k!r}] copied, not shared"
        for name in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
            keys, before = getattr(node, name), getattr(src.node, name)
            assert keys is not before and keys == (before if key in before else [*before, key])
        record = node.metadata[key]
        assert set(record) == {*RECORD_KEYS, *EXTRA_KEYS[strategy]}
        assert record["strategy"] == strategy and record["rank"] == rank
        assert record["original_rank"] == i
        score = record["score"]
        assert score is None or (isinstance(score, float) and not math.isnan(score))
        expected = score if replace_score and score is not None else src.score
        assert deep_equal(n.score, expected), "NodeWithScore.score changed"
    ids = Counter(id(n) for n in out) + Counter(id(n.node) for n in out)
    assert all(c == 1 for c in ids.values()), "the same copy returned twice"
    callers = {id(n) for n in nodes} | {id(n.node) for n in nodes}
    assert not set(ids) & callers, "a caller's object returned, not a copy"


# ---------------------------------------------------------------------- properties


@pytest.mark.parametrize("name", sorted(COMPONENTS))
@settings(SETTINGS, max_examples=80)
@given(data=st.data())
def test_a_postprocessor_returns_every_node_once_and_changes_nothing(
    name: str, data: st.DataObject
) -> None:
    spec = COMPONENTS[name]
    nodes = data.draw(node_lists(bad_scores=spec.score_key), label="nodes")
    options = data.draw(spec.options, label="options")
    scorer = data.draw(scorers, label="scorer")
    # No query at all: only a scoring postprocessor needs one.
    asked = QUESTIONS if spec.scores else [*QUESTIONS, None]
    question = data.draw(st.sampled_from(asked), label="question")
    use_async = data.draw(st.integers(0, 7), label="async") == 0
    component = spec.build(scorer, options)
    before = Snapshot(nodes, options)
    if expected_error(nodes, spec):
        with pytest.raises(ValueError, match=SCORE_KEY):
            run(component, nodes, question, use_async)
        before.check()
        return
    out = tolerating_nonfinite(scorer, lambda: run(component, nodes, question, use_async))
    before.check()
    assert scorer.calls == (1 if spec.scores and len(nodes) >= 2 else 0), "one batched call"
    if out is not None:  # else the scorer's NaN/inf was refused
        key = component.metadata_key  # type: ignore[attr-defined]
        replace = bool(getattr(component, "replace_score", False))
        check_reordered(nodes, out, spec.strategy, key, replace, drops=spec.drops)


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_no_nodes_give_no_nodes(name: str) -> None:
    spec = COMPONENTS[name]
    scorer = HashScorer()
    options = {"seed": 0, "key": METADATA_KEY, "profile": PROFILES[0], "mode": "langchain",
               "top_k": 2, "threshold": 3, "replace": True, "use": True}  # fmt: skip
    component = spec.build(scorer, options)
    assert run(component, [], QUESTIONS[0], use_async=False) == []
    assert run(component, [], QUESTIONS[0], use_async=True) == []
    assert scorer.calls == 0


@pytest.mark.parametrize(
    ("name", "values"),
    [
        (name, values)
        for name in sorted(n for n, c in COMPONENTS.items() if c.scores)
        for values in ([math.nan], [math.inf], [-math.inf], [math.nan, math.inf, -math.inf, 1.0])
    ],
)
def test_nan_and_infinite_likelihoods_still_give_every_node_once(
    name: str, values: list[float]
) -> None:
    """A scorer answering NaN/inf: a clear ``BackendError``, or every node once (a NaN
    score written as ``None`` and, with ``replace_score``, not put on the node)."""
    nodes = [
        NodeWithScore(node=TextNode(text=t, metadata={"tags": [i]}), score=0.5)
        for i, t in enumerate("abcde")
    ]
    nodes.append(nodes[0])
    spec = COMPONENTS[name]
    options = {"seed": 1, "key": METADATA_KEY, "profile": PROFILES[0], "replace": True}
    before = Snapshot(nodes)
    scorer = ScriptedScorer(values)
    component = spec.build(scorer, options)
    out = tolerating_nonfinite(scorer, lambda: run(component, nodes, QUESTIONS[0], False))
    before.check()
    assert scorer.calls == 1
    if out is not None:
        replace = bool(getattr(component, "replace_score", False))
        check_reordered(nodes, out, spec.strategy, METADATA_KEY, replace)


class ListRetriever(BaseRetriever):
    """Returns its nodes, the very list, as a vector store might."""

    def __init__(self, nodes: list[NodeWithScore]) -> None:
        self.nodes = nodes
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.nodes


def first_of_each_id(nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
    """LlamaIndex's ``BaseRetriever.retrieve`` keeps the first node of each node_id."""
    seen: set[str] = set()
    kept = []
    for n in nodes:
        if n.node.node_id not in seen:
            seen.add(n.node.node_id)
            kept.append(n)
    return kept


@settings(SETTINGS, max_examples=80)
@given(
    nodes=node_lists(),
    strategy=st.sampled_from(sorted(STRATEGY_CLASSES)),
    scorer=scorers,
    use_async=st.booleans(),
)
def test_position_aware_retriever_returns_the_retrieved_nodes_once(
    nodes: list[NodeWithScore], strategy: str, scorer: HashScorer, use_async: bool
) -> None:
    options: dict[str, Any] = {}
    if strategy in ("profile", "passage_likelihood_profile"):
        options["profile"] = [0.2, 0.1, 0.6]
    if strategy not in ("edge", "profile"):
        options["scorer"] = scorer
    retriever = PositionAwareRetriever(ListRetriever(nodes), strategy, **options)
    before = Snapshot(nodes)
    question = QUESTIONS[0]
    out = tolerating_nonfinite(
        scorer,
        lambda: (
            asyncio.run(retriever.aretrieve(question))
            if use_async
            else retriever.retrieve(question)
        ),
    )
    before.check()
    if out is not None:
        recorded = NAMED_VARIANTS.get(strategy, strategy)  # the record names the postprocessor
        check_reordered(first_of_each_id(nodes), out, recorded, METADATA_KEY)


def test_every_reordering_postprocessor_is_covered() -> None:
    """A new postprocessor of the package must be added to these properties."""
    import llama_index.postprocessor.rag_position as li

    postprocessors = {
        name
        for name in li.__all__
        if isinstance(getattr(li, name), type)
        and issubclass(getattr(li, name), BaseNodePostprocessor)
    }
    assert postprocessors == {name.split("_")[0] for name in COMPONENTS}


# ---------------------------------------------------------------------- the checks can fail


def test_the_checks_catch_a_lost_shared_or_deep_copied_node() -> None:
    nodes = [
        NodeWithScore(node=TextNode(text=t, id_=t, metadata={"tags": [t]}), score=0.1)
        for t in "abc"
    ]
    out = EdgeReorder().postprocess_nodes(nodes)
    check_reordered(nodes, out, "edge", METADATA_KEY)
    deep = [NodeWithScore(node=n.node.model_copy(deep=True), score=n.score) for n in out]
    same_node = [NodeWithScore(node=nodes[0].node, score=0.1), *out[1:]]  # the caller's node
    rescored = [NodeWithScore(node=n.node, score=0.9) for n in out]
    for broken in (out[:2], [out[0], out[0], out[2]], [nodes[0], *out[1:]], deep, same_node,
                   rescored):  # fmt: skip
        with pytest.raises(AssertionError):
            check_reordered(nodes, broken, "edge", METADATA_KEY)
    with pytest.raises(AssertionError):
        check_reordered(nodes, [nodes[0], nodes[0], nodes[2]], "edge", None)  # duplicated
    with pytest.raises(AssertionError):
        copied = NodeWithScore(node=nodes[0].node.model_copy(), score=0.1)
        check_reordered(nodes, [copied, nodes[1], nodes[2]], "edge", None, replace_score=True)
    for mutate in (
        lambda: nodes[0].node.metadata["tags"].append("x"),
        lambda: nodes[1].node.metadata.__setitem__("tags", ["b"]),  # an equal new list
        lambda: setattr(nodes[2].node, "metadata", dict(nodes[2].node.metadata)),
        lambda: nodes[0].node.excluded_llm_metadata_keys.append(METADATA_KEY),
        lambda: setattr(nodes[1], "score", 0.2),
        lambda: setattr(nodes[2], "node", nodes[2].node.model_copy()),
        lambda: nodes.reverse(),
    ):
        before = Snapshot(nodes)
        mutate()
        with pytest.raises(AssertionError):
            before.check()
