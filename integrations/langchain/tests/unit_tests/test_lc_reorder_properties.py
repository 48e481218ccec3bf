"""Property tests (hypothesis) for every LangChain reorderer: nothing lost, copied twice or mutated.

The contract (integrations/langchain/README.md "The metadata key", the compressors'
and ``EdgeReorderTransformer``'s docstrings): a reordering component returns each
input document once, as a shallow copy (``model_copy``) whose metadata is a NEW dict,
the caller's metadata plus one record under ``metadata_key``
(``{"strategy", "score", "rank", "original_rank", **extras}``); ``metadata_key=None``
returns the caller's very Document objects, reordered. Inputs are never mutated; no
documents in gives no documents out. Pinned for ``LikelihoodReorder``,
``ConvexScoreReorder``, ``PassageLikelihoodReorder``, ``ProfileReorder``, ``EdgeReorder``,
``EdgeReorderTransformer``
(sync and async) and ``PositionAwareRetriever``, on generated documents: 0 to 30 of
them, empty texts, emoji, long texts, the same Document passed more than once,
nested metadata, a record already there (chained reorderers), scores under
``score_key`` holding infinities, NaN, missing values and non-numbers, and scripted
scorers (a hash of the prompt, a constant, one that answers NaN/inf):

- each input position comes out exactly once (``original_rank``), each output is a
  copy of that very input (``is not`` it; text, id and type equal; metadata
  ``{**caller's, key: record}``, other values shared, not copied), or, with
  ``metadata_key=None``, the caller's own object;
- the caller's list, Documents, metadata dicts and nested values are unchanged;
- the record: the one schema (``RECORD_KEYS`` plus ``EXTRA_KEYS[strategy]``), ``rank``
  its new position, ``score`` a number or ``None``, never NaN;
- a scorer answering NaN or an infinity: either a clear ``BackendError`` naming it,
  or every document once as above (both leave the inputs unchanged);
- documented refusals: a NaN, a non-number or no value at all under ``score_key``
  (and, for ``ProfileReorder``, any document without one) is a ``ValueError`` that
  changes nothing; Haystack's ``top_k``/``word_count_threshold`` keep a selection.
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
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    EdgeReorder,
    EdgeReorderTransformer,
    LikelihoodReorder,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    PositionProfile,
    ProfileReorder,
)
from langchain_rag_position.retrievers import STRATEGIES as RETRIEVER_STRATEGIES

from rag_position.adapters import EXTRA_KEYS, NAMED_VARIANTS, RECORD_KEYS
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

# ---------------------------------------------------------------------- inputs

# texts, nested metadata values, score_key values and scorers: rag_position.testing.strategies


@st.composite
def documents(draw: st.DrawFn, scores: st.SearchStrategy[Any]) -> Document:
    metadata: dict[str, Any] = draw(
        st.dictionaries(st.sampled_from(["source", "tags", "nested", "🙂", "page"]), nested)
    )
    title = draw(st.one_of(st.just(MISSING), st.text(max_size=8), st.integers(), st.none()))
    if title is not MISSING:
        metadata["title"] = title
    score = draw(scores)
    if score is not MISSING:
        metadata[SCORE_KEY] = score
    if draw(st.integers(0, 9)) == 0:  # a record from an earlier reorderer (chained)
        metadata[METADATA_KEY] = {"strategy": "edge", "rank": 0, "nested": [1]}
    doc_id = draw(st.one_of(st.none(), st.text(max_size=5)))
    return Document(page_content=draw(texts), metadata=metadata, id=doc_id)


@st.composite
def document_lists(draw: st.DrawFn, max_size: int = 30, bad_scores: bool = False) -> list[Document]:
    """0..max_size Documents, some of them the very same object more than once, shuffled."""
    scores = st.one_of(score_values, bad_score_values) if bad_scores else score_values
    pool = draw(st.lists(documents(scores), max_size=max_size))
    if pool and len(pool) < max_size:
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
    """``build(scorer, options)`` makes the component; ``options`` drawn per example.

    ``strategy``: the record's name; ``scores``: it calls the scorer (once, batched,
    from 2 documents on); ``score_key``: it reads ``metadata[score_key]``
    (``all_scores``: every document needs one); ``drops``: a documented selection.
    """

    build: Callable[[Any, dict[str, Any]], Any]
    strategy: str
    options: st.SearchStrategy[dict[str, Any]] = field(default_factory=lambda: st.just({}))
    scores: bool = False
    score_key: bool = False
    all_scores: bool = False
    drops: bool = False
    max_n: int = 30


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
        lambda s, o: ConvexScoreReorder(scorer=s, seed=o["seed"], metadata_key=o["key"]),
        "convex_score",
        st.fixed_dictionaries({"seed": st.integers(0, 2**16), "key": metadata_keys}),
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
        lambda s, o: ConvexScoreReorder(scorer=s, placement="profile", profile=o["profile"]),
        "convex_score",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES)}),
        scores=True,
    ),
    "PassageLikelihoodReorder": Component(
        lambda s, o: PassageLikelihoodReorder(scorer=s, metadata_key=o["key"]),
        "passage_likelihood",
        st.fixed_dictionaries({"key": metadata_keys}),
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
            scorer=s, placement="profile", profile=o["profile"], rest=o.get("rest")
        ),
        "passage_likelihood",
        st.fixed_dictionaries(
            {"profile": st.sampled_from(PROFILES), "rest": st.sampled_from([None, "keep"])}
        ),
        scores=True,
    ),
    "ProfileReorder": Component(
        lambda s, o: ProfileReorder(profile=o["profile"], metadata_key=o["key"]),
        "profile",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES), "key": metadata_keys}),
    ),
    "ProfileReorder_score_key": Component(
        lambda s, o: ProfileReorder(profile=o["profile"], score_key=SCORE_KEY),
        "profile",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES)}),
        score_key=True,
        all_scores=True,
    ),
    "ProfileReorder_scorer": Component(  # passage likelihood (the default relevance)
        lambda s, o: ProfileReorder(profile=o["profile"], scorer=s),
        "profile",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES)}),
        scores=True,
    ),
    "ProfileReorder_scorer_convex": Component(
        lambda s, o: ProfileReorder(
            profile=o["profile"],
            scorer=s,
            relevance="convex_score",
            convex_options={"n_rotations": 2, "seed": 5},
        ),
        "profile",
        st.fixed_dictionaries({"profile": st.sampled_from(PROFILES)}),
        scores=True,
    ),
    "EdgeReorder": Component(
        lambda s, o: EdgeReorder(mode=o["mode"], metadata_key=o["key"]),
        "edge",
        st.fixed_dictionaries({"mode": edge_modes, "key": metadata_keys}),
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
    "EdgeReorderTransformer": Component(
        lambda s, o: EdgeReorderTransformer(mode=o["mode"], metadata_key=o["key"]),
        "edge",
        st.fixed_dictionaries({"mode": edge_modes, "key": metadata_keys}),
    ),
    "EdgeReorderTransformer_score_key": Component(
        lambda s, o: EdgeReorderTransformer(score_key=SCORE_KEY, metadata_key=o["key"]),
        "edge",
        st.fixed_dictionaries({"key": metadata_keys}),
        score_key=True,
    ),
    "EdgeReorderTransformer_haystack_options": Component(
        lambda s, o: EdgeReorderTransformer(
            mode="haystack", top_k=o["top_k"], word_count_threshold=o["threshold"]
        ),
        "edge",
        haystack_options,
        drops=True,
    ),
}


def run(component: Any, docs: Sequence[Document], question: str, use_async: bool) -> list[Any]:
    if isinstance(component, BaseDocumentCompressor):
        if use_async:
            return list(asyncio.run(component.acompress_documents(docs, question)))
        return list(component.compress_documents(docs, question))
    if use_async:
        return list(asyncio.run(component.atransform_documents(docs)))
    return list(component.transform_documents(docs))


def expected_error(docs: Sequence[Document], spec: Component) -> bool:
    """Whether ``metadata[score_key]`` makes the documented ``ValueError``."""
    if not spec.score_key or not docs:
        return False
    values = [d.metadata.get(SCORE_KEY) for d in docs]
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


def fields(doc: Document) -> tuple[Any, ...]:
    return (doc.page_content, doc.id, doc.type, doc.metadata)


class Snapshot:
    """The caller's list, its Documents, their fields, metadata dicts and nested values."""

    def __init__(self, docs: Sequence[Document], *others: Any) -> None:
        self.docs, self.others = docs, others
        self.ids = [id(d) for d in docs]
        self.deep = copy.deepcopy(([fields(d) for d in docs], others))
        self.inner = [containers(d.metadata) for d in docs]

    def check(self) -> None:
        assert [id(d) for d in self.docs] == self.ids, "the caller's list was reordered"
        now = ([fields(d) for d in self.docs], self.others)
        assert deep_equal(now, self.deep), "a Document (text, id, metadata) was mutated"
        assert [containers(d.metadata) for d in self.docs] == self.inner, "metadata replaced"


def check_reordered(
    docs: Sequence[Document], out: list[Any], strategy: str, key: str | None, drops: bool = False
) -> None:
    """Each input once (a selection if ``drops``), as the documented copy or itself."""
    assert isinstance(out, list) and out is not docs
    if key is None:  # the caller's very objects
        assert all(isinstance(d, Document) for d in out)
        if drops:
            assert not Counter(map(id, out)) - Counter(map(id, docs))
        else:
            assert Counter(map(id, out)) == Counter(map(id, docs)), "lost, copied or duplicated"
        return
    assert all(isinstance(d.metadata.get(key), dict) for d in out), "a document without a record"
    ranks = [d.metadata[key]["original_rank"] for d in out]
    assert len(set(ranks)) == len(ranks) and all(0 <= i < len(docs) for i in ranks)
    if not drops:
        assert sorted(ranks) == list(range(len(docs))), f"ranks {ranks}: lost or duplicated"
    for rank, (d, i) in enumerate(zip(out, ranks, strict=True)):
        src = docs[i]
        assert type(d) is type(src) and d is not src, "not a copy"
        assert d.page_content == src.page_content and d.id == src.id and d.type == src.type
        assert d.metadata is not src.metadata, "the caller's metadata dict was reused"
        assert list(d.metadata) == list({**src.metadata, key: None}), "keys lost or added"
        for k, v in src.metadata.items():
            if k != key:
                assert d.metadata[k] is v, f"metadata[{k!r}] copied, not shared"
        record = d.metadata[key]
        assert set(record) == {*RECORD_KEYS, *EXTRA_KEYS[strategy]}
        assert record["strategy"] == strategy and record["rank"] == rank
        assert record["original_rank"] == i
        score = record["score"]
        assert score is None or (isinstance(score, float) and not math.isnan(score))
    ids = Counter(id(d) for d in out)
    assert all(n == 1 for n in ids.values()), "the same copy returned twice"
    assert not set(ids) & {id(d) for d in docs}, "a caller's object returned, not a copy"


def key_of(component: Any) -> str | None:
    key: str | None = component.metadata_key
    return key


# ---------------------------------------------------------------------- properties


@pytest.mark.parametrize("name", sorted(COMPONENTS))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_component_returns_every_document_once_and_changes_nothing(
    name: str, data: st.DataObject
) -> None:
    spec = COMPONENTS[name]
    docs = data.draw(document_lists(spec.max_n, bad_scores=spec.score_key), label="documents")
    given_as = data.draw(st.sampled_from([list, tuple]), label="container")(docs)
    options = data.draw(spec.options, label="options")
    scorer = data.draw(scorers, label="scorer")
    question = data.draw(st.sampled_from(QUESTIONS), label="question")
    use_async = data.draw(st.integers(0, 7), label="async") == 0
    component = spec.build(scorer, options)
    before = Snapshot(given_as, options)
    if expected_error(given_as, spec):
        with pytest.raises(ValueError, match=SCORE_KEY):
            run(component, given_as, question, use_async)
        before.check()
        return
    out = tolerating_nonfinite(scorer, lambda: run(component, given_as, question, use_async))
    before.check()
    assert scorer.calls == (1 if spec.scores and len(docs) >= 2 else 0), "one batched call"
    if out is not None:  # else the scorer's NaN/inf was refused
        check_reordered(given_as, out, spec.strategy, key_of(component), drops=spec.drops)


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_no_documents_give_no_documents(name: str) -> None:
    spec = COMPONENTS[name]
    scorer = HashScorer()
    options = {"seed": 0, "key": METADATA_KEY, "profile": PROFILES[0], "mode": "langchain",
               "top_k": 2, "threshold": 3}  # fmt: skip
    component = spec.build(scorer, options)
    for empty in ([], ()):
        assert run(component, empty, QUESTIONS[0], use_async=False) == []
    assert scorer.calls == 0


@pytest.mark.parametrize(
    ("name", "values"),
    [
        (name, values)
        for name in sorted(n for n, c in COMPONENTS.items() if c.scores)
        for values in ([math.nan], [math.inf], [-math.inf], [math.nan, math.inf, -math.inf, 1.0])
    ],
)
def test_nan_and_infinite_likelihoods_still_give_every_document_once(
    name: str, values: list[float]
) -> None:
    """A scorer answering NaN/inf: a clear ``BackendError``, or every document once (a
    NaN score written as ``None``)."""
    docs = [Document(page_content=t, metadata={"tags": [i]}) for i, t in enumerate("abcde")]
    docs.append(docs[0])
    spec = COMPONENTS[name]
    options = {"seed": 1, "key": METADATA_KEY, "profile": PROFILES[0]}
    before = Snapshot(docs)
    scorer = ScriptedScorer(values)
    component = spec.build(scorer, options)
    out = tolerating_nonfinite(scorer, lambda: run(component, docs, QUESTIONS[0], False))
    before.check()
    assert scorer.calls == 1
    if out is not None:
        check_reordered(docs, out, spec.strategy, METADATA_KEY)


class ListRetriever(BaseRetriever):
    """Returns its documents, the very list, as a vector store might."""

    docs: Any

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        out: list[Document] = self.docs
        return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=document_lists(),
    strategy=st.sampled_from(sorted(RETRIEVER_STRATEGIES)),
    k=st.one_of(st.none(), st.integers(1, 32)),
    scorer=scorers,
    use_async=st.booleans(),
)
def test_position_aware_retriever_returns_the_kept_documents_once(
    docs: list[Document], strategy: str, k: int | None, scorer: HashScorer, use_async: bool
) -> None:
    profiled = ("profile", "passage_likelihood_profile")
    options: dict[str, Any] = {"profile": [0.2, 0.1, 0.6]} if strategy in profiled else {}
    retriever = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs),
        strategy=strategy,
        scorer=None if strategy in ("edge", "profile") else scorer,
        strategy_options=options,
        k=k,
    )
    before = Snapshot(docs)
    question = QUESTIONS[0]
    out = tolerating_nonfinite(
        scorer,
        lambda: (
            asyncio.run(retriever.ainvoke(question)) if use_async else retriever.invoke(question)
        ),
    )
    before.check()
    if out is not None:
        kept = docs if k is None else docs[:k]
        recorded = NAMED_VARIANTS.get(strategy, strategy)  # the record names the reorderer
        check_reordered(kept, list(out), recorded, METADATA_KEY)


def test_every_reordering_component_is_covered() -> None:
    """A new reorderer of the package must be added to these properties."""
    import langchain_rag_position as lc
    from langchain_core.documents import BaseDocumentTransformer

    reorderers = {
        name
        for name in lc.__all__
        if isinstance(getattr(lc, name), type)
        and issubclass(getattr(lc, name), (BaseDocumentCompressor, BaseDocumentTransformer))
    }
    assert reorderers == {name.split("_")[0] for name in COMPONENTS}


# ---------------------------------------------------------------------- the checks can fail


def test_the_checks_catch_a_lost_shared_or_deep_copied_document() -> None:
    docs = [Document(page_content=t, metadata={"tags": [t]}, id=t) for t in "abc"]
    out = list(EdgeReorder().compress_documents(docs, "q"))
    check_reordered(docs, out, "edge", METADATA_KEY)
    deep = [d.model_copy(deep=True) for d in out]  # metadata values copied, not shared
    renamed = [
        d.model_copy(update={"metadata": {**d.metadata, "extra": 1}}) for d in out
    ]  # a key added
    for broken in (out[:2], [out[0], out[0], out[2]], [docs[0], *out[1:]], deep, renamed):
        with pytest.raises(AssertionError):
            check_reordered(docs, broken, "edge", METADATA_KEY)
    with pytest.raises(AssertionError):
        check_reordered(docs, [docs[0], docs[0], docs[2]], "edge", None)  # duplicated
    with pytest.raises(AssertionError):
        check_reordered(docs, [copy.copy(docs[0]), docs[1], docs[2]], "edge", None)  # copied
    for mutate in (
        lambda: docs[0].metadata["tags"].append("x"),
        lambda: docs[1].metadata.__setitem__("tags", ["b"]),  # replaced by an equal list
        lambda: setattr(docs[2], "metadata", dict(docs[2].metadata)),  # an equal new dict
        lambda: docs.reverse(),
    ):
        before = Snapshot(docs)
        mutate()
        with pytest.raises(AssertionError):
            before.check()
