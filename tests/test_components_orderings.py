"""The ordering components in both frameworks (:data:`framework_adapters.FRAMEWORKS`): each
input once, in the core function's order; the record, copies, async and malformed input."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from framework_adapters import FRAMEWORKS, GOLD, QUESTION, Framework

from rag_position._integration import METADATA_KEY
from rag_position.models import SpanScore
from rag_position.strategies import PositionProfile, convex_score, likelihood_selection

pytestmark = pytest.mark.parametrize("fw", FRAMEWORKS)


class SlotScorer:
    """A prompt's value is ``value(slot, slots)``, the gold in the ``slot``-th of its
    ``Document [i]`` lines; -2 without the gold. ``prompts``: every prompt scored."""

    def __init__(self, value: Callable[[int, int], float]) -> None:
        self.value = value
        self.prompts: list[str] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[SpanScore]:
        self.prompts += prompts
        values = []
        for prompt in prompts:
            lines = [x for x in prompt.splitlines() if x.startswith("Document [")]
            where = [k for k, line in enumerate(lines) if GOLD in line]
            values.append(self.value(where[0], len(lines)) if where else -2.0)
        return [SpanScore(v, v, 1) for v in values]


def at_edges() -> SlotScorer:
    """The question likeliest (0) with the gold first or last, else -1 - 0.01 * slot."""
    return SlotScorer(lambda k, n: 0.0 if k in (0, n - 1) else -1.0 - 0.01 * k)


def earliest() -> SlotScorer:
    """The question likelier the earlier the gold: -slot."""
    return SlotScorer(lambda k, n: -float(k))


# name -> (class, its strategy in the record, options); the gold (Paris) is item 1
REORDERERS: dict[str, tuple[str, str, Callable[[], dict[str, Any]]]] = {
    "likelihood": ("LikelihoodReorder", "likelihood_selection",
                   lambda: {"scorer": earliest(), "n_orders": 6}),
    "convex": ("ConvexScoreReorder", "convex_score", lambda: {"scorer": at_edges()}),
    "convex-last": ("ConvexScoreReorder", "convex_score",
                    lambda: {"scorer": at_edges(), "placement": "last"}),
    "profile": ("ProfileReorder", "profile", lambda: {"profile": [0.2, 0.1, 0.3, 0.4]}),
    "profile-scorer": ("ProfileReorder", "profile",
                       lambda: {"profile": [0.2, 0.1, 0.3, 0.4], "scorer": at_edges()}),
    "profile-score_key": ("ProfileReorder", "profile",
                          lambda: {"profile": [0.1, 0.2, 0.9], "score_key": "relevance_score"}),
    "edge": ("EdgeReorder", "edge", dict),
    "edge-score_key": ("EdgeReorder", "edge", lambda: {"score_key": "relevance_score"}),
    "edge-llamaindex": ("EdgeReorder", "edge", lambda: {"mode": "llamaindex"}),
    "edge-langchain": ("EdgeReorder", "edge", lambda: {"mode": "langchain"}),
    "passage": ("PassageLikelihoodReorder", "passage_likelihood",
                lambda: {"scorer": at_edges(), "rest": "scores"}),
    "select": ("SelectAndPlace", "select_and_place", lambda: {"scorer": at_edges()}),
    "select-top_n": ("SelectAndPlace", "select_and_place",
                     lambda: {"scorer": at_edges(), "top_n": 1}),
    "select-first": ("SelectAndPlace", "select_and_place",
                     lambda: {"scorer": at_edges(), "mass": None, "placement": "first"}),
}  # fmt: skip
by_reorderer = pytest.mark.parametrize("name", sorted(REORDERERS))


def build(fw: Framework, name: str, **options: Any) -> Any:
    cls, _, defaults = REORDERERS[name]
    return fw.component(cls, **defaults(), **options)


# ---------------------------------------------------------------------- likelihood selection
@pytest.mark.parametrize("n", [3, 4])
def test_likelihood_reorder_picks_the_most_likely_order(fw: Framework, n: int) -> None:
    items = fw.items(n)
    before = fw.snapshot(items)
    scorer = earliest()
    every = math.factorial(n)  # all orders are candidates
    out = fw.compress(fw.component("LikelihoodReorder", scorer=scorer, n_orders=every), items)
    order = fw.check_record(out, items, "likelihood_selection")
    assert fw.text(out[0]) == GOLD and len(scorer.prompts) == every
    # the winning order's likelihood (the gold first: 0) on every item
    assert all(r["score"] == r["question_loglik"] == 0.0 for r in fw.records(out))
    core = likelihood_selection(QUESTION, fw.passages(items), earliest(), n_orders=every)
    assert order == core.order
    before.check()  # inputs untouched
    items[0], items[1] = items[1], items[0]  # the gold already first: ties keep the given order
    out = fw.compress(fw.component("LikelihoodReorder", scorer=earliest(), n_orders=5), items)
    assert [fw.ident(x) for x in out] == [fw.ident(x) for x in items]


# ---------------------------------------------------------------------- ConvexScore
@pytest.mark.parametrize("n", [3, 4, 5])
def test_convex_score_reorder_moves_the_gold_first_and_keeps_the_rest(
    fw: Framework, n: int
) -> None:
    items = fw.items(n)
    before = fw.snapshot(items)
    scorer = at_edges()
    out = fw.compress(fw.component("ConvexScoreReorder", scorer=scorer), items)
    order = fw.check_record(out, items, "convex_score")
    rest = [i for i in range(n) if i != 1]
    assert fw.text(out[0]) == GOLD and order == [1, *rest]  # rest="keep"
    assert len(scorer.prompts) == n  # N rotations
    core = convex_score(QUESTION, fw.passages(items), at_edges())
    assert order == core.order
    assert [r["score"] for r in fw.records(out)] == [core.scores[i] for i in order]
    assert [r["gold"] for r in fw.records(out)] == [True] + [False] * (n - 1)
    for rest in ("keep", "scores"):
        last = fw.component("ConvexScoreReorder", scorer=at_edges(), placement="last", rest=rest)
        out = fw.compress(last, items)
        assert fw.check_record(out, items, "convex_score")[-1] == 1 and fw.text(out[-1]) == GOLD
    profiled = fw.component("ConvexScoreReorder", scorer=at_edges(), placement="profile",
                            profile=[0, 0, 1] + [0] * (n - 3))  # fmt: skip
    assert fw.text(fw.compress(profiled, items)[2]) == GOLD  # the profile's best slot: 2
    before.check()


def test_every_permutation_of_the_input_maps_back(fw: Framework) -> None:
    base = fw.items(4)
    for perm in itertools.permutations(range(4)):
        items = [base[i] for i in perm]
        out = fw.compress(fw.component("ConvexScoreReorder", scorer=at_edges()), items)
        assert fw.ident(out[0]) == "id-1"  # the gold, wherever it came
        for r, x in zip(fw.records(out), out, strict=True):
            assert fw.ident(items[r["original_rank"]]) == fw.ident(x)


# ---------------------------------------------------------------------- every reorderer
@by_reorderer
def test_copies_with_the_record_or_the_callers_items_and_nothing_mutated(
    fw: Framework, name: str
) -> None:
    items = fw.items(4)
    before = fw.snapshot(items)
    reorder = build(fw, name)
    out = fw.compress(reorder, items)
    fw.check_record(out, items, REORDERERS[name][1])
    assert reorder.strategy_name == REORDERERS[name][1]
    plain = fw.compress(build(fw, name, metadata_key=None), items)  # in the same order
    assert [id(x) for x in plain] == [id(items[r["original_rank"]]) for r in fw.records(out)]
    assert all(METADATA_KEY not in fw.metadata(x) for x in plain)
    before.check()


@by_reorderer
def test_async_equals_sync_and_zero_and_one_item(fw: Framework, name: str) -> None:
    items = fw.items(5)
    reorder = build(fw, name)
    sync = fw.run(reorder, items, QUESTION, False)
    assert fw.outcome(sync) == fw.outcome(fw.run(reorder, items, QUESTION, True))
    assert fw.compress(reorder, []) == []
    one = fw.compress(reorder, fw.items(1))
    assert [fw.ident(x) for x in one] == ["id-0"] and fw.records(one)[0]["rank"] == 0


def test_custom_metadata_key_and_chaining(fw: Framework) -> None:
    items = fw.items(5)
    out = fw.compress(fw.component("EdgeReorder", metadata_key="pos"), items)
    assert all("pos" in fw.metadata(x) and METADATA_KEY not in fw.metadata(x) for x in out)
    once = fw.compress(fw.component("EdgeReorder"), items)
    twice = fw.compress(fw.component("EdgeReorder", mode="langchain"), once)
    source = {fw.ident(x): x for x in items}
    for rank, x in enumerate(twice):  # the second reorderer overwrites the key on its copy
        assert fw.metadata(x)[METADATA_KEY]["rank"] == rank
        fw.check_copy(source[fw.ident(x)], x)


# ---------------------------------------------------------------------- malformed input
def test_bad_items_and_a_blank_question_are_refused(fw: Framework) -> None:
    items = fw.items(3)
    for cls, options in (("EdgeReorder", {}), ("ConvexScoreReorder", {"scorer": at_edges()})):
        reorder = fw.component(cls, **options)
        with pytest.raises(TypeError, match=fw.wrong_item):
            fw.compress(reorder, [items[0], fw.unwrapped(items[1])])
        with pytest.raises(TypeError, match=fw.lone_item):
            fw.compress(reorder, items[0])
    with pytest.raises(ValueError, match=fw.blank_query):
        fw.compress(fw.component("ConvexScoreReorder", scorer=at_edges()), items, "  ")


# ---------------------------------------------------------------------- profile placement
def test_profile_reorder_by_a_score_key(fw: Framework, tmp_path: Path) -> None:
    items = fw.items(3)
    path = tmp_path / "profile.json"
    PositionProfile([0.17, 0.12, 0.40], model_name="embedded", source="eval").save(path)
    keyed = [fw.with_metadata(x, s=i) for i, x in enumerate(items)]  # item 2 the best
    out = fw.compress(fw.component("ProfileReorder", profile=str(path), score_key="s"), keyed)
    assert fw.check_record(out, keyed, "profile") == [1, 0, 2]
    assert [r["score"] for r in fw.records(out)] == [1.0, 0.0, 2.0]


@pytest.mark.parametrize("relevance", ["passage_likelihood", "convex_score"])
def test_profile_reorder_by_a_scorer_and_its_relevance(
    fw: Framework, relevance: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_position._integration.reorder as adapters

    seen: list[dict[str, Any]] = []
    real = adapters.profile_reorder

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(dict(kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(adapters, "profile_reorder", spy)
    profile = PositionProfile([0.17, 0.12, 0.40], model_name="embedded", source="eval")
    options: dict[str, Any] = {"profile": profile}  # passage_likelihood: the default
    if relevance == "convex_score":  # the profile from a file, ConvexScore's own options
        profile.save(tmp_path / "profile.json")
        options = {"profile": tmp_path / "profile.json", "relevance": relevance,
                   "convex_options": {"seed": 4}}  # fmt: skip
    scorer = at_edges()
    reorder = fw.component("ProfileReorder", scorer=scorer, **options)
    assert reorder.relevance == relevance
    out = fw.compress(reorder, fw.items(3))
    assert len(seen) == 1 and seen[0]["relevance"] == relevance
    assert seen[0].get("seed") == options.get("convex_options", {}).get("seed")
    assert {r["relevance"] for r in fw.records(out)} == {relevance}
    assert fw.text(out[2]) == GOLD  # the likeliest item, or ConvexScore's gold, best read
    if relevance == "passage_likelihood":  # one prompt per item, each alone
        assert len(scorer.prompts) == 3 and all(p.count("Document [") == 1 for p in scorer.prompts)


def test_profile_reorder_needs_the_score_key_on_every_item(fw: Framework) -> None:
    items = fw.items(3)
    partial = [items[0], fw.wrap("x", {}, "x", 0.5), items[2]]
    reorder = fw.component("ProfileReorder", profile=[0.1, 0.5], score_key="relevance_score")
    with pytest.raises(ValueError, match=r"documents \[1\] have no 'relevance_score'"):
        fw.compress(reorder, partial)


# ---------------------------------------------------------------------- edge placement
def test_edge_reorder_by_a_score_key_and_its_modes(fw: Framework) -> None:
    items = fw.items(5)
    shuffled = [items[i] for i in (3, 0, 4, 1, 2)]  # relevance_score: 0.7 1.0 0.6 0.9 0.8
    by_score = fw.compress(fw.component("EdgeReorder", score_key="relevance_score"), shuffled)
    by_order = fw.compress(fw.component("EdgeReorder"), items)
    assert [fw.ident(x) for x in by_score] == [fw.ident(x) for x in by_order]  # sorted first
    assert fw.records(by_score)[0]["score"] == pytest.approx(1.0)
    llama = fw.component("EdgeReorder", mode="llamaindex", score_key="relevance_score")
    assert fw.ident(fw.compress(llama, items)[0]) == "id-0"  # odd count: the best first
    haystack = fw.compress(fw.component("EdgeReorder", mode="haystack", top_k=3), items)
    assert [fw.ident(x) for x in haystack] == ["id-0", "id-2", "id-1"]  # the only way to drop
    with pytest.raises(ValueError, match="no document has the score key 'score'"):
        fw.compress(fw.component("EdgeReorder", score_key="score"), items)
    bad = [fw.with_metadata(x, relevance_score="high") for x in items]
    with pytest.raises(ValueError, match=r"\[0\]\.metadata\['relevance_score'\] must be a number"):
        fw.compress(fw.component("EdgeReorder", score_key="relevance_score"), bad)
