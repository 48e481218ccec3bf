"""Property tests (hypothesis) for every core reorderer: a permutation of the caller's objects.

The contract (README "Ordering strategies", ``rag_position.strategies._base``): a
reorderer's ``result.passages`` holds "your own objects, in the new order: never
copied, dropped or mutated", and ``result.passages[i] is passages[result.order[i]]``.
Pinned here for every reordering function and every reordering row of
``rag_position.STRATEGIES``, on generated inputs: 0 to 30 passages (strings,
``Passage`` objects, ``ctxs`` dicts with nested metadata), empty and blank texts,
emoji, long texts, the same object passed more than once, retriever scores and
``scores=`` holding NaN and infinities, and scripted scorers (a hash of the prompt,
a constant, and one that answers NaN/inf):

- the output is a permutation of the input by identity, counting multiplicity: each
  output element ``is`` an input element, ``order`` lists each input position once;
- the caller's sequence, its items (text, title, id, score, metadata, nested values)
  and any ``scores=``/``profile=`` list are unchanged, and the result list is a new list;
- a scorer answering NaN or an infinity: either a clear ``BackendError`` naming it,
  or still a permutation (both leave the inputs unchanged);
- 0 passages are not refused: an empty result at zero cost, no model call (so is 1,
  for the scoring strategies);
- the only documented drop: Haystack's ``top_k``/``word_count_threshold`` in
  ``edge_reorder(mode="haystack")`` return a selection (no copies, no repeats).

Nothing here loads a model.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_position.cost import Cost
from rag_position.passages import Passage
from rag_position.strategies import (
    STRATEGIES,
    OrderingResult,
    PositionProfile,
    convex_score,
    edge_reorder,
    likelihood_selection,
    passage_likelihood,
    profile_reorder,
    sandwich,
)
from rag_position.strategies.registry import given_order
from rag_position.testing.scripted import HashScorer, ScriptedScorer, tolerating_nonfinite
from rag_position.testing.strategies import nested, scorers, texts

T = TypeVar("T")
QUESTIONS = ["Who wrote Hamlet?", "¿Quién escribió 🎭 Hamlet?", "q"]

# --------------------------------------------------------------------------- inputs

own_scores = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0]),
    st.integers(-3, 3),
)
passage_objects = st.builds(
    Passage,
    texts,
    title=st.text(max_size=8),
    id=st.one_of(st.none(), st.text(max_size=4)),
    score=own_scores,
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
    score = draw(own_scores)
    if score is not None:
        record["score"] = score
    record.update(draw(st.dictionaries(st.sampled_from(["meta", "hasanswer", "🙂"]), nested)))
    return record


items = st.one_of(texts, passage_objects, ctxs_dicts())


@st.composite
def passage_lists(draw: st.DrawFn, max_size: int = 30) -> list[Any]:
    """0..max_size items, some of them the very same object more than once, shuffled."""
    pool = draw(st.lists(items, max_size=max_size))
    if pool and len(pool) < max_size:
        repeats = draw(st.lists(st.integers(0, len(pool) - 1), max_size=max_size - len(pool)))
        pool += [pool[i] for i in repeats]
    return draw(st.permutations(pool))


# --------------------------------------------------------------------------- scripted scorers


class Forbidden:
    """A generator and embedder no reorderer may call (the table passes every model)."""

    def generate(self, *args: Any, **kwargs: Any) -> list[str]:
        raise AssertionError("a reorderer called the generator")

    def embed(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a reorderer called the embedder")


PROFILES: list[Any] = [
    PositionProfile((0.3, 0.1, 0.5)),
    PositionProfile((0.7,)),
    PositionProfile((0.2, 0.2, 0.1, 0.4, 0.9, 0.3, 0.3)),
    [0.4, 0.1, 0.6],  # a list of values (ProfileLike)
]

# --------------------------------------------------------------------------- the reorderers


@dataclass(frozen=True)
class Reorderer:
    """``call(question, passages, scorer, options)``; ``takes``: the options drawn for it.

    ``scores``: it calls the scorer (once, batched; never for 0 or 1 passages).
    ``max_n``: the most passages it is given (N² designs are kept small).
    """

    call: Callable[[str, Sequence[Any], Any, dict[str, Any]], OrderingResult[Any]]
    takes: tuple[str, ...] = ()
    scores: bool = False
    max_n: int = 30


profile_score_values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=True), st.integers(-3, 3), st.just(math.nan)
)
OPTION_STRATEGIES: dict[str, Callable[[int], st.SearchStrategy[Any]]] = {
    "seed": lambda n: st.integers(0, 2**16),
    "profile": lambda n: st.sampled_from(PROFILES),
    "edge_scores": lambda n: st.lists(own_scores, min_size=n, max_size=n),
    "profile_scores": lambda n: st.lists(profile_score_values, min_size=n, max_size=n),
}
PLAIN_OPTIONS: dict[str, Callable[[int], Any]] = {
    "seed": lambda n: 3,
    "profile": lambda n: PROFILES[0],
    "edge_scores": lambda n: [None if i % 3 == 0 else float(i) for i in range(n)],
    "profile_scores": lambda n: [float(-i) for i in range(n)],
}


def option_strategy(spec: Reorderer, n: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({k: OPTION_STRATEGIES[k](n) for k in spec.takes})


def plain_options(spec: Reorderer, n: int) -> dict[str, Any]:
    return {k: PLAIN_OPTIONS[k](n) for k in spec.takes}


def expected_error(options: dict[str, Any]) -> type[Exception] | None:
    """``profile_reorder(scores=...)`` refuses NaN (documented): ``ValueError``."""
    scores = options.get("profile_scores")
    return ValueError if scores and any(math.isnan(s) for s in scores) else None


REORDERERS: dict[str, Reorderer] = {
    # edge placement: no model
    **{
        f"edge_{mode}": Reorderer(lambda q, xs, s, o, mode=mode: edge_reorder(xs, mode=mode))
        for mode in ("langchain", "llamaindex", "haystack")
    },
    **{
        f"edge_{mode}_scores": Reorderer(
            lambda q, xs, s, o, mode=mode: edge_reorder(xs, mode=mode, scores=o["edge_scores"]),
            takes=("edge_scores",),
        )
        for mode in ("langchain", "llamaindex", "haystack")
    },
    # likelihood selection
    "likelihood_selection": Reorderer(
        lambda q, xs, s, o: likelihood_selection(q, xs, s, seed=o["seed"]),
        takes=("seed",),
        scores=True,
    ),
    "likelihood_selection_options": Reorderer(
        lambda q, xs, s, o: likelihood_selection(
            q, xs, s, n_orders=3, include_given=False, query_aware=True, seed=7
        ),
        scores=True,
    ),
    # ConvexScore
    "convex_score": Reorderer(
        lambda q, xs, s, o: convex_score(q, xs, s, seed=o["seed"]), takes=("seed",), scores=True
    ),
    "convex_score_last_scores": Reorderer(
        lambda q, xs, s, o: convex_score(
            q, xs, s, placement="last", rest="scores", n_base_orders=2, query_aware=True
        ),
        scores=True,
    ),
    "convex_score_authors_variant": Reorderer(
        lambda q, xs, s, o: convex_score(
            q, xs, s, variant="authors", n_rotations=max(1, len(xs) // 3), edge_weight=0.0
        ),
        scores=True,
    ),
    "convex_score_authors_design": Reorderer(  # N^2 prompts: N kept small
        lambda q, xs, s, o: convex_score(q, xs, s, design="authors", rest="scores"),
        scores=True,
        max_n=8,
    ),
    "convex_score_profile": Reorderer(
        lambda q, xs, s, o: convex_score(q, xs, s, placement="profile", profile=o["profile"]),
        takes=("profile",),
        scores=True,
    ),
    "convex_score_profile_keep": Reorderer(
        lambda q, xs, s, o: convex_score(
            q, xs, s, placement="profile", profile=o["profile"], rest="keep"
        ),
        takes=("profile",),
        scores=True,
    ),
    "convex_score_template": Reorderer(
        lambda q, xs, s, o: convex_score(
            q, xs, s, template="Context:\n{search_results}\nQ: {question}", n_rotations=2
        ),
        scores=True,
    ),
    # passage likelihood (each passage alone)
    "passage_likelihood": Reorderer(lambda q, xs, s, o: passage_likelihood(q, xs, s), scores=True),
    "passage_likelihood_last_scores": Reorderer(
        lambda q, xs, s, o: passage_likelihood(q, xs, s, placement="last", rest="scores"),
        scores=True,
    ),
    "passage_likelihood_profile": Reorderer(
        lambda q, xs, s, o: passage_likelihood(q, xs, s, placement="profile", profile=o["profile"]),
        takes=("profile",),
        scores=True,
    ),
    # profile placement, from each relevance source
    "profile_order_or_own_scores": Reorderer(
        lambda q, xs, s, o: profile_reorder(q, xs, profile=o["profile"]), takes=("profile",)
    ),
    "profile_scores": Reorderer(
        lambda q, xs, s, o: profile_reorder(
            q, xs, profile=o["profile"], scores=o["profile_scores"]
        ),
        takes=("profile", "profile_scores"),
    ),
    "profile_scorer": Reorderer(  # passage likelihood (the default relevance)
        lambda q, xs, s, o: profile_reorder(q, xs, profile=o["profile"], scorer=s),
        takes=("profile",),
        scores=True,
    ),
    "profile_scorer_convex": Reorderer(
        lambda q, xs, s, o: profile_reorder(
            q,
            xs,
            profile=o["profile"],
            scorer=s,
            relevance="convex_score",
            n_base_orders=2,
            rest="keep",
        ),
        takes=("profile",),
        scores=True,
    ),
    # the order unchanged
    "sandwich": Reorderer(lambda q, xs, s, o: sandwich(q, xs)),
    "sandwich_chat": Reorderer(lambda q, xs, s, o: sandwich(q, xs, chat=True)),
    "given_order": Reorderer(lambda q, xs, s, o: given_order(q, xs)),
}

REORDERING_ROWS = {
    "retriever",
    "likelihood_selection",
    "convex_score",
    "convex_score_profile",
    "convex_score_sandwich",
    "passage_likelihood",
    "passage_likelihood_profile",
    "profile",
    "edge",
    "sandwich",
}
"""The rows of ``rag_position.STRATEGIES`` that reorder (the others answer by themselves)."""


def _row(name: str) -> Reorderer:
    spec = STRATEGIES[name]

    def call(q: str, xs: Sequence[Any], s: Any, o: dict[str, Any]) -> OrderingResult[Any]:
        result = spec(q, xs, scorer=s, generator=Forbidden(), embedder=Forbidden(), **o)
        assert isinstance(result, OrderingResult)
        return result

    takes = ("seed",) + (("profile",) if "profile" in spec.requires else ())
    return Reorderer(call, takes=takes, scores="scorer" in spec.needs + spec.uses)


for _name in sorted(REORDERING_ROWS):
    REORDERERS[f"STRATEGIES[{_name!r}]"] = _row(_name)

# --------------------------------------------------------------------------- the checks


def deep_equal(a: Any, b: Any) -> bool:
    """Structural equality with NaN equal to NaN, types and key order included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, Passage):
        return all(
            deep_equal(getattr(a, f), getattr(b, f))
            for f in ("text", "title", "id", "score", "metadata")
        )
    if isinstance(a, Mapping):
        return list(a) == list(b) and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def containers(x: Any) -> list[int]:
    """The ids of every container inside ``x``: a replaced dict or list shows up here."""
    found: list[int] = []
    if isinstance(x, Passage):
        x = x.metadata
    if isinstance(x, Mapping):
        found.append(id(x))
        for v in x.values():
            found += containers(v)
    elif isinstance(x, (list, tuple)):
        found.append(id(x))
        for v in x:
            found += containers(v)
    return found


class Snapshot:
    """What the caller holds before the call: the sequence, its items, their insides."""

    def __init__(self, *held: Any) -> None:
        self.held = held
        self.ids = [[id(x) for x in h] if isinstance(h, (list, tuple)) else id(h) for h in held]
        self.deep = copy.deepcopy(held)
        self.inner = [containers(h) for h in held]

    def check(self) -> None:
        now = [[id(x) for x in h] if isinstance(h, (list, tuple)) else id(h) for h in self.held]
        assert now == self.ids, "the caller's sequence was reordered, or an item replaced"
        assert deep_equal(self.held, self.deep), "an input (text, metadata, score) was mutated"
        assert [containers(h) for h in self.held] == self.inner, "a nested value was replaced"


def check_permutation(given: Sequence[Any], result: OrderingResult[Any]) -> None:
    """``result.passages``: the caller's own objects, each input position exactly once."""
    out, order = result.passages, result.order
    assert isinstance(out, list) and out is not given, "the result must be a new list"
    assert len(out) == len(given), f"{len(given)} passages in, {len(out)} out"
    assert sorted(order) == list(range(len(given))), f"order {order} is not a permutation"
    for k, i in enumerate(order):
        assert out[k] is given[i], f"passages[{k}] is not the caller's object #{i} (a copy?)"
    assert Counter(map(id, out)) == Counter(map(id, given)), "lost, copied or duplicated"


def check_selection(given: Sequence[Any], result: OrderingResult[Any]) -> None:
    """A documented drop (Haystack's options): distinct input positions, no copies."""
    out, order = result.passages, result.order
    assert isinstance(out, list) and out is not given
    assert len(out) == len(order) <= len(given)
    assert len(set(order)) == len(order) and all(0 <= i < len(given) for i in order)
    for k, i in enumerate(order):
        assert out[k] is given[i]
    assert not Counter(map(id, out)) - Counter(map(id, given))


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("name", sorted(REORDERERS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_reorderer_returns_the_callers_objects_permuted_and_changes_nothing(
    name: str, data: st.DataObject
) -> None:
    spec = REORDERERS[name]
    xs = data.draw(passage_lists(spec.max_n), label="passages")
    given_as = data.draw(st.sampled_from([list, tuple]), label="container")(xs)
    options = data.draw(option_strategy(spec, len(xs)), label="options")
    scorer = data.draw(scorers, label="scorer")
    question = data.draw(st.sampled_from(QUESTIONS), label="question")
    before = Snapshot(given_as, options)
    error = expected_error(options)
    if error is not None and len(xs) >= 2:
        with pytest.raises(error, match="NaN"):
            spec.call(question, given_as, scorer, options)
        before.check()
        return
    # (0 or 1 passages come back as given before `scores` is read: a NaN passes unseen.)
    result = tolerating_nonfinite(scorer, lambda: spec.call(question, given_as, scorer, options))
    before.check()
    assert scorer.calls == (1 if spec.scores and len(xs) >= 2 else 0), "one batched call"
    if result is None:  # the scorer's NaN/inf refused
        return
    check_permutation(given_as, result)
    if len(xs) <= 1:  # returned as given, at zero cost
        assert result.order == list(range(len(xs))) and result.cost == Cost()


@pytest.mark.parametrize("name", sorted(REORDERERS))
def test_no_passages_is_an_empty_result_not_an_error(name: str) -> None:
    spec = REORDERERS[name]
    scorer = HashScorer()
    for empty in ([], ()):
        result = spec.call(QUESTIONS[0], empty, scorer, plain_options(spec, 0))
        assert result.passages == [] and result.order == [] and result.cost == Cost()
    assert scorer.calls == 0


@pytest.mark.parametrize(
    ("name", "values"),
    [
        (name, values)
        for name in sorted(n for n, r in REORDERERS.items() if r.scores)
        for values in ([math.nan], [math.inf], [-math.inf], [math.nan, math.inf, -math.inf, 1.0])
    ],
)
def test_nan_and_infinite_likelihoods_still_give_a_permutation(
    name: str, values: list[float]
) -> None:
    """A scorer answering NaN/inf: a clear ``BackendError``, or still a permutation."""
    xs: list[Any] = ["a", Passage("b", metadata={"m": [1]}), {"text": "c", "score": math.nan}]
    xs += [xs[0], "", "🙂"]
    spec = REORDERERS[name]
    options = plain_options(spec, len(xs))
    before = Snapshot(xs, options)
    scorer = ScriptedScorer(values)
    result = tolerating_nonfinite(scorer, lambda: spec.call(QUESTIONS[0], xs, scorer, options))
    before.check()
    assert scorer.calls == 1
    if result is not None:
        check_permutation(xs, result)


@settings(max_examples=60, deadline=None)
@given(
    xs=passage_lists(),
    top_k=st.one_of(st.none(), st.integers(1, 32)),
    threshold=st.one_of(st.none(), st.integers(1, 40)),
    with_scores=st.booleans(),
    data=st.data(),
)
def test_haystack_options_select_without_copies(
    xs: list[Any],
    top_k: int | None,
    threshold: int | None,
    with_scores: bool,
    data: st.DataObject,
) -> None:
    """The one documented drop: ``top_k``/``word_count_threshold`` keep a selection."""
    scores = data.draw(st.lists(own_scores, min_size=len(xs), max_size=len(xs)))
    before = Snapshot(xs, scores)
    result = edge_reorder(
        xs,
        mode="haystack",
        top_k=top_k,
        word_count_threshold=threshold,
        scores=scores if with_scores else None,
    )
    before.check()
    check_selection(xs, result)
    if xs:
        assert result.passages, "at least the most relevant passage is kept"
    if top_k is not None:
        assert len(result.passages) <= top_k
        if threshold is None:
            assert len(result.passages) == min(top_k, len(xs))
    if top_k is None and threshold is None:
        check_permutation(xs, result)


def test_every_reordering_row_of_the_table_is_covered() -> None:
    """A new reordering row must be added to these properties (answering rows excluded)."""
    assert {name for name, spec in STRATEGIES.items() if not spec.answers} == REORDERING_ROWS


# --------------------------------------------------------------------------- the checks can fail


def _caller() -> list[Any]:
    return [{"text": "a", "meta": {"n": [1]}}, "b", Passage("c", metadata={"k": [2]})]


def test_the_permutation_check_catches_a_lost_copied_or_duplicated_passage() -> None:
    xs = _caller()

    def result(passages: list[Any], order: list[int]) -> OrderingResult[Any]:
        return OrderingResult(passages=passages, order=order, scores=[], cost=Cost())

    check_permutation(xs, result([xs[2], xs[0], xs[1]], [2, 0, 1]))
    for broken in (
        result([xs[2], xs[0]], [2, 0]),  # lost
        result([xs[2], copy.deepcopy(xs[0]), xs[1]], [2, 0, 1]),  # copied
        result([xs[2], copy.copy(xs[2]), xs[1]], [2, 0, 1]),  # another's copy
        result([xs[2], xs[0], xs[0]], [2, 0, 0]),  # duplicated
        result(xs, [0, 1, 2]),  # the caller's own list
    ):
        with pytest.raises(AssertionError):
            check_permutation(xs, broken)


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
    before = Snapshot(xs)
    before.check()
    mutate(xs)
    with pytest.raises(AssertionError):
        before.check()


def test_a_nan_retriever_score_is_no_score_for_profile_placement() -> None:
    """Own scores with a NaN: the given order (a NaN in the sort scrambled the others).

    Before: scores [1.0, NaN, 2.0] put the 2.0 passage at the profile's WORST position.
    """
    xs = [Passage("b", score=1.0), Passage("a", score=math.nan), Passage("c", score=2.0)]
    profile = [0.1, 0.2, 0.9]  # reads the last position best
    result = profile_reorder(QUESTIONS[0], xs, profile=profile)
    assert result.details["relevance"] == "order" and result.scores == []
    assert result.order == profile_reorder(QUESTIONS[0], ["b", "a", "c"], profile=profile).order
    check_permutation(xs, result)
    finite = profile_reorder(QUESTIONS[0], [xs[0], Passage("a", score=0.0), xs[2]], profile=profile)
    assert finite.details["relevance"] == "passage_scores" and finite.passages[-1] is xs[2]
