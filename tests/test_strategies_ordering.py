"""The ordering strategies, pinned with scripted scorers (no model): ``PositionScorer``'s
likelihood depends only on where the gold passage sits. The edge literals are the frameworks'
own outputs (langchain-community 0.4.2, llama-index-core 0.14.25, haystack-ai 3.4.1)."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from rag_position.cost import Cost
from rag_position.models.protocols import Span, SpanScore
from rag_position.passages import Passage
from rag_position.prompts import question_span, render_qa
from rag_position.strategies import (
    PositionProfile,
    convex_score,
    edge_reorder,
    likelihood_selection,
    passage_likelihood,
    question_likelihood,
    sandwich,
    sandwich_prompt,
    select_and_place,
)
from rag_position.strategies._convex_score import convex_design
from rag_position.strategies._sandwich import CHAT_SANDWICH_TEMPLATE
from rag_position.testing.scripted import HashScorer

QUESTION = "who wrote the play?"
GOLD = "GOLD passage"


def u_curve(p: int, n: int) -> float:
    """U-shaped, ends strictly above the interior, the last end best (as the embedded model)."""
    x = 2 * p / (n - 1) - 1 if n > 1 else 0.0
    return -3.0 + 2.0 * abs(x) + (0.25 if p == n - 1 else 0.0)


class PositionScorer:
    """Question likelihood = ``curve(position of the gold passage, N)``; records its calls."""

    def __init__(self, curve: Callable[[int, int], float] = u_curve, marker: str = GOLD) -> None:
        self.curve = curve
        self.marker = marker
        self.batches: list[list[str]] = []
        self._usage = Cost()

    @property
    def usage(self) -> Cost:
        return self._usage

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        self.batches.append(list(prompts))
        self._usage = self._usage + Cost(lm_calls=len(prompts), prompt_tokens=7 * len(prompts))
        out = []
        for prompt, (start, end) in zip(prompts, spans, strict=True):
            assert prompt[start:end] == QUESTION
            docs = [line for line in prompt.split("\n") if line.startswith("Document [")]
            position = next(i for i, line in enumerate(docs) if self.marker in line)
            value = self.curve(position, len(docs))
            out.append(SpanScore(value, value * 3, 3))
        return out


class Scored:
    """A framework object with a ``.score`` attribute (as LlamaIndex's ``NodeWithScore``)."""

    def __init__(self, name: str, score: float | None) -> None:
        self.name, self.score = name, score


def passages_with_gold(n: int, gold: int) -> list[Passage]:
    return [
        Passage(GOLD if i == gold else f"distractor {i}", title=f"t{i}", metadata={"i": i})
        for i in range(n)
    ]


def test_zero_one_or_two_passages() -> None:
    scorer = HashScorer()
    with pytest.raises(TypeError):
        question_likelihood(QUESTION, "ab", scorer)
    empty = question_likelihood(QUESTION, [], scorer)
    assert empty.scores == [] and empty.cost == Cost() and empty.best is None
    assert likelihood_selection(QUESTION, [], scorer).passages == []
    one = likelihood_selection(QUESTION, ["only"], scorer)
    assert one.passages == ["only"] and one.cost == Cost()
    assert convex_score(QUESTION, [], scorer).passages == []
    one = convex_score(QUESTION, ["x"], scorer)
    assert one.passages == ["x"] and one.cost == Cost() and one.gold == 0
    assert edge_reorder([]).passages == [] and sandwich(QUESTION, []).prompt is None
    for fn in (passage_likelihood, select_and_place):
        assert fn(QUESTION, [], scorer).passages == []
        single = fn(QUESTION, ["only"], scorer)
        assert single.passages == ["only"] and single.details["gold"] == 0
    assert scorer.calls == 0
    assert convex_score(QUESTION, ["a", "b"], scorer).order == [0, 1]  # 2 passages: a tie
    assert scorer.calls == 1


def test_gauge_orders_cost_query_aware_and_template() -> None:
    docs = passages_with_gold(4, 1)
    scorer = PositionScorer()
    orders = [[0, 1, 2, 3], [1, 0, 2, 3], [0, 2, 3, 1]]
    g = question_likelihood(QUESTION, docs, scorer, orders=orders)
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 3  # every order, one batch
    assert g.scores == [u_curve(1, 4), u_curve(0, 4), u_curve(3, 4)] and g.best == 2
    assert g.prompts[0] == render_qa(QUESTION, docs)
    assert g.spans[0] == question_span(g.prompts[0], QUESTION)
    assert g.cost == Cost(lm_calls=3, prompt_tokens=21)  # the scorer's usage delta
    g = question_likelihood(QUESTION, ["a", "b"], HashScorer())
    assert g.orders == [[0, 1]] and len(g.scores) == 1
    assert g.cost.lm_calls == 1 and g.cost.prompt_tokens == 0 and g.cost.seconds >= 0
    g = question_likelihood(QUESTION, ["a", "b"], HashScorer(), query_aware=True)
    prompt = g.prompts[0]  # the question scored after the passages
    assert prompt.count(QUESTION) == 2
    assert g.spans[0][0] > prompt.index("Document [2]")
    template = "Context:\n{search_results}\nQ: {question}"
    g = question_likelihood(QUESTION, ["a"], HashScorer(), template=template)
    assert g.prompts == ["Context:\nDocument [1](Title: ) a\nQ: " + QUESTION]


def test_selection_orders_seed_and_ties() -> None:
    scorer = PositionScorer()
    r = likelihood_selection(QUESTION, passages_with_gold(4, 1), scorer, n_orders=24)
    assert len(r.orders) == 24 and len({tuple(o) for o in r.orders}) == 24
    assert r.passages[-1].text == GOLD  # u_curve is best at the last position
    assert r.scores[r.best or 0] == max(r.scores) == u_curve(3, 4)
    assert r.cost.lm_calls == 24 and len(scorer.batches) == 1
    docs = passages_with_gold(5, 2)
    r = likelihood_selection(QUESTION, docs, PositionScorer(), seed=3)
    assert len(r.orders) == 5 and r.orders[0] == [0, 1, 2, 3, 4]  # the given order first
    assert r.order == r.orders[r.best or 0] and r.scores[r.best or 0] == max(r.scores)
    again = likelihood_selection(QUESTION, docs, PositionScorer(), seed=3)
    other = likelihood_selection(QUESTION, docs, PositionScorer(), seed=4)
    assert again.orders == r.orders and other.orders != r.orders
    random_only = likelihood_selection(QUESTION, docs, PositionScorer(), include_given=False)
    assert len(random_only.orders) == 5
    flat = PositionScorer(curve=lambda p, n: -1.0)  # ties keep the given order
    r = likelihood_selection(QUESTION, passages_with_gold(4, 0), flat, n_orders=6)
    assert r.order == [0, 1, 2, 3] and r.best == 0


def test_design_sizes() -> None:
    for n in (2, 3, 5, 10):  # rotations put every passage at every position once
        orders = convex_design(n, seed=7)
        assert len(orders) == n and all(sorted(o) == list(range(n)) for o in orders)
        assert all(sorted(o[p] for o in orders) == list(range(n)) for p in range(n))
    assert len(convex_design(6, n_base_orders=3)) == 18
    authors = convex_design(6, design="authors")
    assert len(authors) == 36 and len({tuple(o) for o in authors}) == 36
    # every (passage, position) pair measured N times under different arrangements
    for d, p in itertools.product(range(6), range(6)):
        assert sum(o[p] == d for o in authors) == 6
    few = convex_design(10, n_rotations=3, seed=1)
    assert len(few) == 3
    at_ends = {o[0] for o in few} | {o[-1] for o in few}
    assert len(at_ends) == 6  # evenly spaced rotations: 2M distinct passages at the ends
    assert convex_design(5, seed=2) == convex_design(5, seed=2) != convex_design(5, seed=3)


@pytest.mark.parametrize("n", [3, 4, 5, 7, 10])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"variant": "authors"},
        {"n_base_orders": 2},
        {"n_base_orders": 4},
        {"edge_weight": 0.0},
        {"curvature_weight": 0.0},
        {"edge_weight": 0.3, "curvature_weight": 2.0},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default",
)
def test_convex_score_finds_the_gold_every_time(n: int, options: dict[str, Any]) -> None:
    for gold, seed in itertools.product(range(n), range(3)):
        docs = passages_with_gold(n, gold)
        scorer = PositionScorer()
        r = convex_score(QUESTION, docs, scorer, seed=seed, **options)
        assert r.gold == gold, (n, gold, seed)
        assert r.passages[0] is docs[gold]
        assert r.passages[1:] == [d for i, d in enumerate(docs) if i != gold]
        assert r.cost.lm_calls == n * options.get("n_base_orders", 1)
        assert len(scorer.batches) == 1
        assert r.likelihoods[gold] == [u_curve(p, n) for p in range(n)]


def test_n_pass_equals_n_squared_pass() -> None:
    for n, gold, seed in itertools.product([3, 5, 8], [0, 1], [0, 1]):
        docs = passages_with_gold(n, gold if gold == 0 else n // 2)
        fast = convex_score(QUESTION, docs, PositionScorer(), seed=seed)
        slow = convex_score(QUESTION, docs, PositionScorer(), seed=seed, design="authors")
        assert slow.cost.lm_calls == n * n and fast.cost.lm_calls == n
        assert fast.order == slow.order and fast.gold == slow.gold
        g = fast.gold or 0
        assert fast.scores[g] == pytest.approx(slow.scores[g])
        assert fast.likelihoods[g] == pytest.approx(slow.likelihoods[g])


def test_convex_score_placements() -> None:
    docs = passages_with_gold(5, 1)
    last = convex_score(QUESTION, docs, PositionScorer(), placement="last")
    assert last.passages[-1] is docs[1]
    assert last.passages[:-1] == [docs[0], docs[2], docs[3], docs[4]]
    follow = convex_score(QUESTION, docs, PositionScorer(), rest="scores")
    assert follow.order == sorted(range(5), key=lambda d: (-follow.scores[d], d))
    follow_last = convex_score(QUESTION, docs, PositionScorer(), placement="last", rest="scores")
    assert follow_last.order == follow.order[::-1]
    middle = PositionProfile((0.1, 0.2, 0.9, 0.3, 0.4), model_name="m", source="eval")
    on = {"placement": "profile", "profile": middle}
    prof = convex_score(QUESTION, docs, PositionScorer(), **on)  # type: ignore[arg-type]
    assert prof.passages[2] is docs[1]
    assert prof.order == [follow.order[k] for k in (4, 3, 0, 2, 1)]  # ranking [2, 4, 3, 1, 0]
    keep = convex_score(QUESTION, docs, PositionScorer(), rest="keep", **on)  # type: ignore[arg-type]
    assert keep.order == [0, 2, 1, 3, 4]


def test_convex_score_few_orders() -> None:
    docs = passages_with_gold(10, 0)
    r = convex_score(QUESTION, docs, PositionScorer(), n_rotations=3, seed=1)
    assert r.cost.lm_calls == 3
    measured = [sum(not math.isnan(v) for v in row) for row in r.likelihoods]
    assert measured == [3] * 10
    never_at_end = [
        d for d, row in enumerate(r.likelihoods) if math.isnan(row[0]) and math.isnan(row[-1])
    ]
    assert len(never_at_end) == 4
    assert all(r.scores[d] == -math.inf for d in never_at_end)
    assert sorted(r.order) == list(range(10))


LETTERS = list("abcdef")


@pytest.mark.parametrize(
    ("mode", "n", "expected"),
    [
        *zip(["langchain"] * 5, range(2, 7), ["ba", "acb", "bdca", "acedb", "bdfeca"], strict=True),
        *zip(["haystack"] * 5, range(2, 7), ["ab", "acb", "acdb", "acedb", "acefdb"], strict=True),
    ],
)
def test_edge_langchain_and_haystack_parity(mode: Any, n: int, expected: str) -> None:
    assert "".join(edge_reorder(LETTERS[:n], mode=mode).passages) == expected


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.9, 0.8, 0.7, 0.6, 0.5], "acedb"),
        ([0.5, None, -0.2, 0.9], "acbd"),  # missing counts as 0: above -0.2, below 0.5
        ([None] * 4, "cabd"),
        ([0.5, 0.9, 0.5, None, 0.5], "bcdae"),  # ties: the later passage counts as more relevant
        ([None] * 5, "ecabd"),
    ],
)
def test_edge_llamaindex_parity(scores: list[float | None], expected: str) -> None:
    records: list[dict[str, Any]] = [{"text": LETTERS[i], "score": s} for i, s in enumerate(scores)]
    out = edge_reorder(records, mode="llamaindex")
    assert "".join(r["text"] for r in out.passages) == expected
    # the same through explicit scores, on plain strings and on score-carrying objects
    out = edge_reorder(LETTERS[: len(scores)], scores=scores, mode="llamaindex")
    assert "".join(out.passages) == expected
    nodes = [Scored(LETTERS[i], s) for i, s in enumerate(scores)]
    assert "".join(x.name for x in edge_reorder(nodes, mode="llamaindex").passages) == expected


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"top_k": 3}, "acb"),
        ({"top_k": 1}, "a"),
        ({"word_count_threshold": 5}, "ab"),
        ({"word_count_threshold": 2}, "a"),
        ({"word_count_threshold": 6}, "acb"),
        ({"word_count_threshold": 100}, "acedb"),
        ({"top_k": 4, "word_count_threshold": 6}, "acb"),
    ],
)
def test_edge_haystack_options_parity(options: dict[str, int], expected: str) -> None:
    texts = ["one two", "three four five", "six", "seven eight", "nine"]
    out = edge_reorder(texts, mode="haystack", **options)  # type: ignore[arg-type]
    assert "".join(LETTERS[i] for i in out.order) == expected
    assert all(out.passages[k] is texts[i] for k, i in enumerate(out.order))
    # empty texts are skipped when counting
    out = edge_reorder(["", "x y z", "p q", "r"], mode="haystack", word_count_threshold=4)
    assert "".join(LETTERS[i] for i in out.order) == "acb"


def test_edge_scores_sort_before_the_frameworks_layout() -> None:
    out = edge_reorder(["low", "high", "mid", "none"], scores=[0.1, 0.9, 0.5, None])
    # relevance order high, mid, low, none -> LangChain layout of 4: [2nd, 4th, 3rd, 1st]
    assert out.passages == ["mid", "none", "low", "high"]
    assert out.scores[:3] == [0.1, 0.9, 0.5] and math.isnan(out.scores[3])
    hs = edge_reorder(["low", "high", "mid"], scores=[0.1, 0.9, 0.5], mode="haystack")
    assert hs.passages == ["high", "low", "mid"]


def test_edge_refuses_a_nan_score_naming_the_passage() -> None:
    """Issue 30: a NaN in the scores used is a ValueError naming the passage, in every mode."""
    for mode in ("langchain", "llamaindex", "haystack"):
        with pytest.raises(
            ValueError,
            match=r"^`scores\[1\]` is NaN: give every passage a number; None for a missing score",
        ):
            edge_reorder(["a", "b", "c"], scores=[0.3, math.nan, 0.1], mode=mode)  # type: ignore[arg-type]
    records = [{"text": "a", "score": 0.3}, {"text": "b", "score": math.nan}, {"text": "c"}]
    before = copy.deepcopy(records)
    for own in (records, [Passage("a", score=0.3), Passage("b", score=math.nan), "c"],
                [Scored("a", 0.3), Scored("b", math.nan), Scored("c", None)]):  # fmt: skip
        with pytest.raises(ValueError, match=r"^the own score of passages\[1\] is NaN: give"):
            edge_reorder(own, mode="llamaindex")
    assert [r["text"] for r in records] == [r["text"] for r in before]
    assert math.isnan(records[1]["score"]) and records[0] == before[0] and records[2] == before[2]
    # scores given: the own NaN is not read; langchain and haystack never read own scores
    assert edge_reorder(records, scores=[0.1, 0.2, 0.3], mode="llamaindex").order == [2, 0, 1]
    assert edge_reorder(records).order == [0, 2, 1]
    assert edge_reorder(records, mode="haystack").order == [0, 2, 1]


def test_edge_takes_infinite_scores_and_leaves_one_passage_unread() -> None:
    inf = edge_reorder(["a", "b", "c"], scores=[-math.inf, math.inf, None], mode="haystack")
    assert inf.passages == ["b", "c", "a"] and inf.scores[:2] == [-math.inf, math.inf]
    own = [{"text": "a", "score": math.inf}, {"text": "b", "score": -math.inf}, {"text": "c"}]
    assert edge_reorder(own, mode="llamaindex").order == [0, 1, 2]
    # 0 or 1 passages come back as given, their scores not read (but counted)
    for mode in ("langchain", "llamaindex", "haystack"):
        one = edge_reorder([{"text": "a", "score": math.nan}], scores=[math.nan], mode=mode)  # type: ignore[arg-type]
        assert one.order == [0] and one.scores == [] and one.cost == Cost()
        assert edge_reorder([], scores=[], mode=mode).order == []  # type: ignore[arg-type]
    assert edge_reorder([Scored("a", math.nan)], mode="llamaindex").order == [0]


def test_sandwich_prompt_published_and_chat() -> None:
    docs = [Passage("first text", title="first"), "second text"]
    chat = (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n\n"
        f"Question: {QUESTION}\n\n"
        "Document [1](Title: first) first text\n"
        "Document [2](Title: ) second text\n\n"
        f"Question: {QUESTION}"
    )
    assert sandwich_prompt(QUESTION, docs, chat=True) == chat
    assert sandwich_prompt(QUESTION, docs) == chat + "\nAnswer:"
    assert CHAT_SANDWICH_TEMPLATE.count("{question}") == 2
    custom = sandwich_prompt(QUESTION, ["x"], template="{question}|{search_results}|{question}")
    assert custom == f"{QUESTION}|Document [1](Title: ) x|{QUESTION}"
    r = sandwich(QUESTION, ["a", "b"])
    assert r.passages == ["a", "b"] and r.prompt == sandwich_prompt(QUESTION, ["a", "b"])
