"""The conformance kit on every core reorderer and table row (hypothesis, no model), on
strings, ``Passage`` objects and ``ctxs`` dicts: ``result.passages[i] is
passages[result.order[i]]``, never copied, dropped or mutated (README "Ordering strategies");
0 or 1 passages as given, at zero cost. Haystack's options and ``select_and_place`` select."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_position.cost import Cost
from rag_position.passages import Passage
from rag_position.strategies import (
    STRATEGIES,
    OrderingResult,
    convex_score,
    edge_reorder,
    likelihood_selection,
    passage_likelihood,
    profile_reorder,
    sandwich,
    select_and_place,
)
from rag_position.testing.conformance import (
    Case,
    ReordererConformance,
    Snapshot,
    always,
    check_permutation,
    containers,
    never,
)
from rag_position.testing.strategies import nested, retriever_scores, texts, with_repeats

passage_objects = st.builds(
    Passage,
    texts,
    title=st.text(max_size=8),
    id=st.one_of(st.none(), st.text(max_size=4)),
    score=retriever_scores,
    metadata=st.dictionaries(st.sampled_from(["isgold", "hasanswer", "k", "é", "🙂"]), nested,
                             max_size=3),
)  # fmt: skip


@st.composite
def ctxs_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """A "Lost in the Middle" ``ctxs`` record: text, title, id, score and nested extras."""
    record: dict[str, Any] = {"text": draw(texts)}
    if draw(st.booleans()):
        record["title"] = draw(st.text(max_size=8))
    if draw(st.booleans()):
        record["id"] = draw(st.one_of(st.integers(0, 99), st.text(max_size=4)))
    score = draw(retriever_scores)
    if score is not None:
        record["score"] = score
    record.update(draw(st.dictionaries(st.sampled_from(["meta", "hasanswer", "🙂"]), nested)))
    return record


items = st.one_of(texts, passage_objects, ctxs_dicts())


class Forbidden:
    """A generator and embedder no reorderer may call (the table passes every model)."""

    def generate(self, *args: Any, **kwargs: Any) -> list[str]:
        raise AssertionError("a reorderer called the generator")

    def embed(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a reorderer called the embedder")


ARGS = {"edge_scores": "scores", "profile_scores": "scores"}
MODES = ("langchain", "llamaindex", "haystack")


def r(
    fn: Callable[..., Any],
    *takes: str,
    scores: bool = False,
    max_n: int = 30,
    own: bool = False,
    **fixed: Any,
) -> Case:
    """``fn(question, passages, **fixed, **options)``; ``own``: it ranks by own scores."""

    def build(s: Any, o: dict[str, Any]) -> Any:
        drawn = {ARGS.get(k, k): value for k, value in o.items()}
        return partial(fn, **fixed, **drawn, **({"scorer": s} if scores else {}))

    selects = fn is select_and_place
    own_scores = always if own else never
    return Case(build, takes, scores=scores, max_n=max_n, selects=selects, own_scores=own_scores)


def edge(q: str, xs: Sequence[Any], **options: Any) -> Any:
    return edge_reorder(xs, **options)


def authors(q: str, xs: Sequence[Any], **options: Any) -> Any:
    return convex_score(q, xs, n_rotations=max(1, len(xs) // 3), **options)


REORDERERS: dict[str, Case] = {
    **{f"edge_{m}": r(edge, mode=m, own=m == "llamaindex") for m in MODES},
    **{f"edge_{m}_scores": r(edge, "edge_scores", mode=m) for m in MODES},
    "likelihood_selection_options": r(likelihood_selection, scores=True, n_orders=3,
                                      include_given=False, query_aware=True, seed=7),
    "convex_score_last_scores": r(convex_score, scores=True, placement="last", rest="scores",
                                  n_base_orders=2, query_aware=True),
    "convex_score_authors_variant": r(authors, scores=True, variant="authors", edge_weight=0.0),
    "convex_score_authors_design": r(convex_score, scores=True, max_n=8, design="authors",
                                     rest="scores"),  # N^2 prompts: N kept small
    "convex_score_profile_keep": r(convex_score, "profile", scores=True, placement="profile",
                                   rest="keep"),
    "convex_score_template": r(convex_score, scores=True, n_rotations=2,
                               template="Context:\n{search_results}\nQ: {question}"),
    "passage_likelihood_last_scores": r(passage_likelihood, scores=True, placement="last",
                                        rest="scores"),
    "profile_order_or_own_scores": r(profile_reorder, "profile", own=True),
    "profile_scores": r(profile_reorder, "profile", "profile_scores"),
    "profile_scorer_convex": r(profile_reorder, "profile", scores=True,
                               relevance="convex_score", n_base_orders=2, rest="keep"),
    "select_and_place": r(select_and_place, "mass", "top_n", scores=True),
    "select_and_place_profile": r(select_and_place, "profile", scores=True, placement="profile",
                                  mass=0.5),
    "select_and_place_first_all": r(select_and_place, scores=True, placement="first", mass=None),
    "sandwich_chat": r(sandwich, chat=True),
}  # fmt: skip
"""Options and entry points beyond the table's rows (which are added below)."""


def _row(name: str) -> Case:
    """A row of the table, given every model: it calls those it needs, ``scorer`` at most."""
    spec = STRATEGIES[name]
    models = {"generator": Forbidden(), "embedder": Forbidden()}
    takes = ("seed",) + (("profile",) if "profile" in spec.requires else ())
    scores = "scorer" in spec.needs + spec.uses
    return Case(
        lambda s, o: partial(spec, scorer=s, **models, **o),
        takes,
        scores=scores,
        selects=spec.selects,
    )


REORDERERS |= {f"STRATEGIES[{n!r}]": _row(n) for n, row in STRATEGIES.items() if not row.answers}
"""Every row of the table that reorders (the others answer by themselves)."""


def inner(x: Any) -> list[int]:
    return containers(x.metadata if isinstance(x, Passage) else x)


def state(x: Any) -> Any:
    """A ``Passage``'s fields (its metadata a read-only view: compared as a dict)."""
    if isinstance(x, Passage):
        return (Passage, x.text, x.title, x.id, x.score, dict(x.metadata))
    return x


class TestCoreReorderers(ReordererConformance):
    inner = staticmethod(inner)
    state = staticmethod(state)

    def cases(self) -> dict[str, Case]:
        return REORDERERS

    def items(self, max_n: int, scores: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
        return with_repeats(items, max_n)

    def nonfinite_items(self) -> list[Any]:
        xs: list[Any] = ["a", Passage("b", metadata={"m": [1]}), {"text": "c", "score": math.nan}]
        return [*xs, xs[0], "", "🙂"]

    def run(self, reorderer: Any, items: Sequence[Any], question: Any, use_async: bool) -> Any:
        return reorderer(question, items)

    def check_output(
        self, given: Sequence[Any], out: Any, case: Case, key: str | None, replace: bool = False
    ) -> None:
        assert isinstance(out, OrderingResult)
        check_permutation(given, out.passages, out.order, drops=case.drops)
        if case.selects:  # kept and dropped: every input position exactly once
            assert out.passages or not given, "a selection kept nothing"
            dropped = list(out.details["dropped"])
            assert sorted([*out.order, *dropped]) == list(range(len(given)))
        if len(given) <= 1:  # returned as given, at zero cost
            assert out.order == list(range(len(given))) and out.cost == Cost()


@settings(max_examples=60, deadline=None)
@given(
    xs=with_repeats(items),
    top_k=st.one_of(st.none(), st.integers(1, 32)),
    threshold=st.one_of(st.none(), st.integers(1, 40)),
    with_scores=st.booleans(),
    data=st.data(),
)
def test_haystack_options_select_without_copies(
    xs: list[Any], top_k: int | None, threshold: int | None, with_scores: bool, data: st.DataObject
) -> None:
    """The one documented drop: ``top_k``/``word_count_threshold`` keep a selection."""
    scores = data.draw(st.lists(retriever_scores, min_size=len(xs), max_size=len(xs)))
    before = Snapshot(xs, scores, state=state, inner=inner)
    options = {"top_k": top_k, "word_count_threshold": threshold}
    given = scores if with_scores else None
    if given and len(xs) >= 2 and any(s is not None and math.isnan(s) for s in given):
        i = next(k for k, s in enumerate(given) if s is not None and math.isnan(s))
        with pytest.raises(ValueError, match=rf"`scores\[{i}\]` is NaN"):
            edge_reorder(xs, mode="haystack", scores=given, **options)
        before.check()
        return
    result = edge_reorder(xs, mode="haystack", scores=given, **options)
    before.check()
    check_permutation(xs, result.passages, result.order, drops=True)
    if xs:
        assert result.passages, "at least the most relevant passage is kept"
    if top_k is not None:
        assert len(result.passages) <= top_k
        if threshold is None:
            assert len(result.passages) == min(top_k, len(xs))
    if top_k is None and threshold is None:
        check_permutation(xs, result.passages, result.order)


def _caller() -> list[Any]:
    return [{"text": "a", "meta": {"n": [1]}}, "b", Passage("c", metadata={"k": [2]})]


def test_the_permutation_check_catches_a_lost_copied_or_duplicated_passage() -> None:
    xs = _caller()
    check_permutation(xs, [xs[2], xs[0], xs[1]], [2, 0, 1])
    for passages, order in (
        ([xs[2], xs[0]], [2, 0]),  # lost
        ([xs[2], copy.deepcopy(xs[0]), xs[1]], [2, 0, 1]),  # copied
        ([xs[2], copy.copy(xs[2]), xs[1]], [2, 0, 1]),  # another's copy
        ([xs[2], xs[0], xs[0]], [2, 0, 0]),  # duplicated
        (xs, [0, 1, 2]),  # the caller's own list
    ):
        with pytest.raises(AssertionError):
            check_permutation(xs, passages, order)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda xs: xs[0]["meta"]["n"].append(2),  # a nested value mutated
        lambda xs: xs[0].__setitem__("meta", {"n": [1]}),  # replaced by an equal copy
        lambda xs: xs[0].__setitem__("score", math.nan),  # a key added
        lambda xs: xs[2].metadata["k"].append(3),  # inside a Passage's metadata
        lambda xs: xs.reverse(),  # the caller's list reordered in place
        lambda xs: xs.__setitem__(0, copy.deepcopy(xs[0])),  # an item replaced by a copy
    ],
)
def test_the_snapshot_catches_a_mutated_input(mutate: Callable[[list[Any]], Any]) -> None:
    xs = _caller()
    before = Snapshot(xs, state=state, inner=inner)
    before.check()
    mutate(xs)
    with pytest.raises(AssertionError):
        before.check()
