"""The ordering strategies, pinned with scripted scorers (no model).

``PositionScorer`` makes the question's likelihood depend only on where the gold
passage sits, so the algorithms' answers are known exactly. The edge-placement
outputs below were produced by running the frameworks' own code (langchain-community
0.4.2 ``_litm_reordering``, llama-index-core 0.14.25 ``LongContextReorder._postprocess_nodes``,
haystack-ai 3.4.1 ``LostInTheMiddleRanker.run``) on the same inputs, and are
written out as literals.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import json
import math
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_position.cost import Cost
from rag_position.data import QAInstance
from rag_position.models.protocols import Span, SpanScore
from rag_position.passages import Passage
from rag_position.prompts import question_span, render_qa
from rag_position.strategies import (
    STRATEGIES,
    ConvexScoreResult,
    OrderingResult,
    PositionProfile,
    convex_score,
    edge_reorder,
    estimate_profile,
    get_strategy,
    likelihood_selection,
    passage_likelihood,
    profile_reorder,
    question_likelihood,
    sandwich,
    sandwich_prompt,
)
from rag_position.strategies._convex_score import (
    authors_scores,
    convex_design,
    convex_scores,
    likelihood_table,
)
from rag_position.strategies._sandwich import CHAT_SANDWICH_TEMPLATE

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


class HashScorer:
    """Deterministic pseudo-random likelihoods from the prompt text; no ``usage``."""

    def __init__(self) -> None:
        self.calls = 0

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        self.calls += 1
        out = []
        for prompt, (start, end) in zip(prompts, spans, strict=True):
            assert 0 <= start < end <= len(prompt)
            value = -(zlib.crc32(prompt.encode("utf-8")) % 10_000) / 1000
            out.append(SpanScore(value, value, 1))
        return out


def passages_with_gold(n: int, gold: int) -> list[Passage]:
    return [
        Passage(GOLD if i == gold else f"distractor {i}", title=f"t{i}", metadata={"i": i})
        for i in range(n)
    ]


# --------------------------------------------------------------------------- gauge


def test_gauge_scores_every_order_in_one_batch() -> None:
    docs = passages_with_gold(4, 1)
    scorer = PositionScorer()
    orders = [[0, 1, 2, 3], [1, 0, 2, 3], [0, 2, 3, 1]]
    g = question_likelihood(QUESTION, docs, scorer, orders=orders)
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 3
    assert g.scores == [u_curve(1, 4), u_curve(0, 4), u_curve(3, 4)]
    assert g.best == 2
    assert g.prompts[0] == render_qa(QUESTION, docs)
    assert g.spans[0] == question_span(g.prompts[0], QUESTION)
    assert g.cost == Cost(lm_calls=3, prompt_tokens=21)  # the scorer's usage delta


def test_gauge_default_order_and_unmetered_cost() -> None:
    scorer = HashScorer()
    g = question_likelihood(QUESTION, ["a", "b"], scorer)
    assert g.orders == [[0, 1]] and len(g.scores) == 1
    assert g.cost.lm_calls == 1 and g.cost.prompt_tokens == 0 and g.cost.seconds >= 0


def test_gauge_query_aware_scores_the_question_after_the_passages() -> None:
    g = question_likelihood(QUESTION, ["a", "b"], HashScorer(), query_aware=True)
    prompt = g.prompts[0]
    assert prompt.count(QUESTION) == 2
    assert g.spans[0][0] > prompt.index("Document [2]")


def test_gauge_custom_template() -> None:
    template = "Context:\n{search_results}\nQ: {question}"
    g = question_likelihood(QUESTION, ["a"], HashScorer(), template=template)
    assert g.prompts == ["Context:\nDocument [1](Title: ) a\nQ: " + QUESTION]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{search_results} only", r"\{question\}"),
        ("Q: {question}", r"\{search_results\}"),
        ("no placeholders", r"\{question\}, \{search_results\}"),
        ("Q: {question}\n{search_results}", "before"),
    ],
)
def test_gauge_rejects_templates(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        question_likelihood(QUESTION, ["a"], HashScorer(), template=template)


def test_gauge_bad_input() -> None:
    scorer = HashScorer()
    empty = question_likelihood(QUESTION, [], scorer)
    assert empty.scores == [] and empty.cost == Cost() and empty.best is None
    assert scorer.calls == 0
    with pytest.raises(ValueError, match="question"):
        question_likelihood("  ", ["a"], scorer)
    with pytest.raises(ValueError, match="permutation"):
        question_likelihood(QUESTION, ["a", "b"], scorer, orders=[[0, 0]])
    with pytest.raises(ValueError, match="template"):
        question_likelihood(QUESTION, ["a"], scorer, template="{question}", query_aware=True)
    with pytest.raises(TypeError):
        question_likelihood(QUESTION, "ab", scorer)


# --------------------------------------------------------------------------- selection


def test_selection_with_every_order_picks_the_best_position() -> None:
    docs = passages_with_gold(4, 1)
    scorer = PositionScorer()
    r = likelihood_selection(QUESTION, docs, scorer, n_orders=24)
    assert len(r.orders) == 24 and len({tuple(o) for o in r.orders}) == 24
    assert r.passages[-1].text == GOLD  # u_curve is best at the last position
    assert r.scores[r.best or 0] == max(r.scores) == u_curve(3, 4)
    assert r.cost.lm_calls == 24 and len(scorer.batches) == 1


def test_selection_defaults_and_seed() -> None:
    docs = passages_with_gold(5, 2)
    r = likelihood_selection(QUESTION, docs, PositionScorer(), seed=3)
    assert len(r.orders) == 5 and r.orders[0] == [0, 1, 2, 3, 4]  # the given order first
    assert r.order == r.orders[r.best or 0] and r.scores[r.best or 0] == max(r.scores)
    again = likelihood_selection(QUESTION, docs, PositionScorer(), seed=3)
    other = likelihood_selection(QUESTION, docs, PositionScorer(), seed=4)
    assert again.orders == r.orders and other.orders != r.orders
    random_only = likelihood_selection(QUESTION, docs, PositionScorer(), include_given=False)
    assert len(random_only.orders) == 5


def test_selection_ties_keep_the_given_order() -> None:
    flat = PositionScorer(curve=lambda p, n: -1.0)
    r = likelihood_selection(QUESTION, passages_with_gold(4, 0), flat, n_orders=6)
    assert r.order == [0, 1, 2, 3] and r.best == 0


def test_selection_bad_input() -> None:
    for bad in (0, -1):
        with pytest.raises(ValueError, match="n_orders"):
            likelihood_selection(QUESTION, ["a", "b"], HashScorer(), n_orders=bad)
    scorer = HashScorer()
    assert likelihood_selection(QUESTION, [], scorer).passages == []
    one = ["only"]
    r = likelihood_selection(QUESTION, one, scorer)
    assert r.passages == one and r.cost == Cost() and scorer.calls == 0


# --------------------------------------------------------------------------- ConvexScore design


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_rotations_put_every_passage_at_every_position_once(n: int) -> None:
    orders = convex_design(n, seed=7)
    assert len(orders) == n
    for p in range(n):
        assert sorted(o[p] for o in orders) == list(range(n))
    assert all(sorted(o) == list(range(n)) for o in orders)


def test_design_sizes() -> None:
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


def test_design_bad_input() -> None:
    with pytest.raises(ValueError, match="n_rotations"):
        convex_design(4, n_rotations=5)
    with pytest.raises(ValueError, match="n_rotations"):
        convex_design(4, n_rotations=0)
    with pytest.raises(ValueError, match="n_base_orders"):
        convex_design(4, n_base_orders=0)
    with pytest.raises(ValueError, match="authors"):
        convex_design(4, design="authors", n_base_orders=2)


# --------------------------------------------------------------------------- ConvexScore


@pytest.mark.parametrize("n", [3, 4, 5, 7, 10])
@pytest.mark.parametrize("variant", ["convex", "authors"])
def test_convex_score_finds_the_gold_every_time(n: int, variant: str) -> None:
    for gold, seed in itertools.product(range(n), range(3)):
        docs = passages_with_gold(n, gold)
        scorer = PositionScorer()
        r = convex_score(QUESTION, docs, scorer, seed=seed, variant=variant)  # type: ignore[arg-type]
        assert r.gold == gold, (n, gold, seed)
        assert r.passages[0] is docs[gold]
        assert r.passages[1:] == [d for i, d in enumerate(docs) if i != gold]
        assert r.cost.lm_calls == n and len(scorer.batches) == 1
        assert r.likelihoods[gold] == [u_curve(p, n) for p in range(n)]


def test_convex_score_more_base_orders_and_weights() -> None:
    docs = passages_with_gold(6, 4)
    for kwargs in (
        {"n_base_orders": 2},
        {"n_base_orders": 4, "seed": 9},
        {"edge_weight": 0.0},
        {"curvature_weight": 0.0},
        {"edge_weight": 0.3, "curvature_weight": 2.0},
    ):
        r = convex_score(QUESTION, docs, PositionScorer(), **kwargs)
        assert r.gold == 4, kwargs
        assert r.cost.lm_calls == 6 * int(kwargs.get("n_base_orders", 1))


def test_n_pass_equals_n_squared_pass() -> None:
    for n, gold, seed in itertools.product([3, 5, 8], [0, 1], [0, 1]):
        docs = passages_with_gold(n, gold if gold == 0 else n // 2)
        fast = convex_score(QUESTION, docs, PositionScorer(), seed=seed)
        slow_scorer = PositionScorer()
        slow = convex_score(QUESTION, docs, slow_scorer, seed=seed, design="authors")
        assert slow.cost.lm_calls == n * n and fast.cost.lm_calls == n
        assert fast.order == slow.order and fast.gold == slow.gold
        g = fast.gold or 0
        assert fast.scores[g] == pytest.approx(slow.scores[g])
        assert fast.likelihoods[g] == pytest.approx(slow.likelihoods[g])


def test_convex_score_formula() -> None:
    docs = passages_with_gold(5, 2)
    r = convex_score(QUESTION, docs, PositionScorer(), edge_weight=2.0, curvature_weight=0.5)
    row = r.likelihoods[2]
    edge = row[0] + row[4]
    curvature = edge / 2 - sum(row[1:4]) / 3
    assert r.edge[2] == pytest.approx(edge) and r.curvature[2] == pytest.approx(curvature)
    assert r.scores[2] == pytest.approx(2.0 * edge + 0.5 * curvature)
    authors = convex_score(QUESTION, docs, PositionScorer(), variant="authors")
    pairs = zip(authors.orders, authors.prompt_scores, strict=True)
    expected = sum(s if o.index(2) in (0, 4) else -s for o, s in pairs) / 5
    assert authors.scores[2] == pytest.approx(expected)
    assert all(math.isnan(v) for v in authors.edge)


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
    prof = convex_score(QUESTION, docs, PositionScorer(), placement="profile", profile=middle)
    assert prof.passages[2] is docs[1]
    assert prof.order == [follow.order[k] for k in (4, 3, 0, 2, 1)]  # ranking [2, 4, 3, 1, 0]
    keep = convex_score(
        QUESTION, docs, PositionScorer(), placement="profile", profile=middle, rest="keep"
    )
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


def test_convex_score_bad_input() -> None:
    scorer = HashScorer()
    with pytest.raises(ValueError, match="n_rotations"):
        convex_score(QUESTION, ["a", "b"], scorer, n_rotations=0)
    with pytest.raises(ValueError, match="n_base_orders"):
        convex_score(QUESTION, ["a", "b"], scorer, n_base_orders=0)
    with pytest.raises(ValueError, match="profile"):
        convex_score(QUESTION, ["a", "b"], scorer, placement="profile")
    with pytest.raises(ValueError, match="variant"):
        convex_score(QUESTION, ["a", "b"], scorer, variant="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="edge_weight"):
        convex_score(QUESTION, ["a", "b"], scorer, edge_weight=math.nan)
    assert convex_score(QUESTION, ["a", "b"], scorer).order == [0, 1]  # 2 passages: a tie
    assert convex_score(QUESTION, [], scorer).passages == []
    one = convex_score(QUESTION, ["x"], scorer)
    assert one.passages == ["x"] and one.cost == Cost() and one.gold == 0
    assert scorer.calls == 1


# --------------------------------------------------------------------------- edge placement

LETTERS = list("abcdef")


@pytest.mark.parametrize(
    ("n", "expected"), [(2, "ba"), (3, "acb"), (4, "bdca"), (5, "acedb"), (6, "bdfeca")]
)
def test_edge_langchain_parity(n: int, expected: str) -> None:
    assert "".join(edge_reorder(LETTERS[:n]).passages) == expected


@pytest.mark.parametrize(
    ("n", "expected"), [(2, "ab"), (3, "acb"), (4, "acdb"), (5, "acedb"), (6, "acefdb")]
)
def test_edge_haystack_parity(n: int, expected: str) -> None:
    assert "".join(edge_reorder(LETTERS[:n], mode="haystack").passages) == expected


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
    assert (
        "".join(edge_reorder(LETTERS[: len(scores)], scores=scores, mode="llamaindex").passages)
        == expected
    )

    class Node:
        def __init__(self, name: str, score: float | None) -> None:
            self.name, self.score = name, score

    nodes = [Node(LETTERS[i], s) for i, s in enumerate(scores)]
    assert "".join(x.name for x in edge_reorder(nodes, mode="llamaindex").passages) == expected


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"top_k": 3}, "acb"),
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


def test_edge_haystack_skips_empty_texts_when_counting() -> None:
    out = edge_reorder(["", "x y z", "p q", "r"], mode="haystack", word_count_threshold=4)
    assert "".join(LETTERS[i] for i in out.order) == "acb"


def test_edge_scores_sort_before_the_frameworks_layout() -> None:
    out = edge_reorder(["low", "high", "mid", "none"], scores=[0.1, 0.9, 0.5, None])
    # relevance order high, mid, low, none -> LangChain layout of 4: [2nd, 4th, 3rd, 1st]
    assert out.passages == ["mid", "none", "low", "high"]
    assert out.scores[:3] == [0.1, 0.9, 0.5] and math.isnan(out.scores[3])
    hs = edge_reorder(["low", "high", "mid"], scores=[0.1, 0.9, 0.5], mode="haystack")
    assert hs.passages == ["high", "low", "mid"]


def test_edge_bad_input() -> None:
    with pytest.raises(ValueError, match="haystack"):
        edge_reorder(["a"], top_k=2)
    with pytest.raises(ValueError, match="top_k"):
        edge_reorder(["a"], mode="haystack", top_k=0)
    with pytest.raises(ValueError, match="scores"):
        edge_reorder(["a", "b"], scores=[1.0])
    with pytest.raises(ValueError, match="mode"):
        edge_reorder(["a"], mode="other")  # type: ignore[arg-type]
    assert edge_reorder([]).passages == []


class Scored:
    """A framework object with a ``.score`` attribute (as LlamaIndex's ``NodeWithScore``)."""

    def __init__(self, name: str, score: float | None) -> None:
        self.name, self.score = name, score


def test_edge_refuses_a_nan_score_naming_the_passage() -> None:
    """Issue 30: a NaN in the scores used is a ValueError naming the passage, in every mode."""
    for mode in ("langchain", "llamaindex", "haystack"):
        with pytest.raises(
            ValueError,
            match=r"^`scores\[1\]` is NaN: give every passage a number; None for a missing score",
        ):
            edge_reorder(["a", "b", "c"], scores=[0.3, math.nan, 0.1], mode=mode)  # type: ignore[arg-type]
    records: list[dict[str, Any]] = [
        {"text": "a", "score": 0.3},
        {"text": "b", "score": math.nan},
        {"text": "c"},
    ]
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
    with pytest.raises(ValueError, match="got 2 scores for 1 passages"):
        edge_reorder(["a"], scores=[1.0, math.nan])


# --------------------------------------------------------------------------- sandwich


def test_sandwich_prompt_published_and_chat() -> None:
    docs = [Passage("first text", title="first"), "second text"]
    assert sandwich_prompt(QUESTION, docs) == (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n\n"
        f"Question: {QUESTION}\n\n"
        "Document [1](Title: first) first text\n"
        "Document [2](Title: ) second text\n\n"
        f"Question: {QUESTION}\nAnswer:"
    )
    assert sandwich_prompt(QUESTION, docs, chat=True) == (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n\n"
        f"Question: {QUESTION}\n\n"
        "Document [1](Title: first) first text\n"
        "Document [2](Title: ) second text\n\n"
        f"Question: {QUESTION}"
    )
    assert CHAT_SANDWICH_TEMPLATE.count("{question}") == 2
    custom = sandwich_prompt(QUESTION, ["x"], template="{question}|{search_results}|{question}")
    assert custom == f"{QUESTION}|Document [1](Title: ) x|{QUESTION}"
    with pytest.raises(ValueError, match="chat"):
        sandwich_prompt(QUESTION, ["x"], chat=True, template="{question}{search_results}")
    with pytest.raises(ValueError, match="passages"):
        sandwich_prompt(QUESTION, [])
    with pytest.raises(ValueError, match=r"\{search_results\}"):
        sandwich_prompt(QUESTION, ["x"], template="{question}")


def test_sandwich_strategy() -> None:
    docs = ["a", "b"]
    r = sandwich(QUESTION, docs)
    assert r.passages == docs and r.prompt == sandwich_prompt(QUESTION, docs)
    assert sandwich(QUESTION, []).prompt is None


# --------------------------------------------------------------------------- profiles


def test_profile_ranking_interpolation_and_json(tmp_path: Any) -> None:
    p = PositionProfile((0.17, 0.12, 0.12, 0.40), model_name="embedded", source="eval")
    assert p.ranking() == [3, 0, 1, 2]
    assert p.interpolate(4) is p
    assert p.interpolate(7).values == pytest.approx((0.17, 0.145, 0.12, 0.12, 0.12, 0.26, 0.40))
    assert PositionProfile(tuple(range(10))).interpolate(4).values == (0.0, 3.0, 6.0, 9.0)
    assert PositionProfile((1.0, 3.0)).interpolate(1).values == (2.0,)
    assert PositionProfile((5.0,)).interpolate(3).values == (5.0, 5.0, 5.0)
    path = tmp_path / "embedded.json"
    p.save(path)
    assert json.loads(path.read_text()) == {
        "model": "embedded",
        "n_positions": 4,
        "values": [0.17, 0.12, 0.12, 0.40],
        "source": "eval",
    }
    assert PositionProfile.load(path) == p
    with pytest.raises(ValueError, match="n_positions"):
        PositionProfile.from_dict(
            {"model": "m", "n_positions": 3, "values": [1, 2], "source": "eval"}
        )
    with pytest.raises(ValueError, match="keys"):
        PositionProfile.from_dict({"values": [1]})
    with pytest.raises(ValueError, match="source"):
        PositionProfile((1.0,), source="guess")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        PositionProfile((1.0, math.inf))


def test_estimate_profile_recovers_the_curve() -> None:
    instances: list[Any] = [
        (QUESTION, passages_with_gold(5, 0), 0),
        QAInstance(
            question=QUESTION,
            answers=("x",),
            passages=tuple(passages_with_gold(5, 3)),
            gold_index=3,
        ),
    ]
    scorer = PositionScorer()
    prof = estimate_profile(scorer, instances, model_name="scripted")
    assert prof.values == tuple(u_curve(p, 5) for p in range(5))
    assert prof.ranking()[0] == 4 and prof.model_name == "scripted" and prof.source == "likelihood"
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 10
    shown = PositionScorer()  # with a progress bar: one call per instance, the same profile
    assert estimate_profile(shown, instances, model_name="scripted", progress=True) == prof
    assert [len(b) for b in shown.batches] == [5, 5]
    partial = estimate_profile(PositionScorer(), instances, positions=[0, 2, 4])
    assert partial.values[1] == pytest.approx((u_curve(0, 5) + u_curve(2, 5)) / 2)
    with pytest.raises(ValueError, match="passages"):
        estimate_profile(scorer, [instances[0], (QUESTION, passages_with_gold(4, 0), 0)])
    with pytest.raises(ValueError, match="empty"):
        estimate_profile(scorer, [])
    with pytest.raises(ValueError, match="positions"):
        estimate_profile(scorer, instances, positions=[7])


def test_profile_reorder_relevance_sources(tmp_path: Any) -> None:
    last_best = PositionProfile((0.2, 0.1, 0.0, 0.5), source="eval")
    docs = ["a", "b", "c", "d"]
    by_scores = profile_reorder(QUESTION, docs, profile=last_best, scores=[0.1, 0.9, 0.5, 0.3])
    assert by_scores.passages == ["c", "d", "a", "b"] and by_scores.details["relevance"] == "scores"
    by_order = profile_reorder(QUESTION, docs, profile=last_best)
    assert by_order.passages == ["b", "c", "d", "a"] and by_order.scores == []
    records = [{"text": t, "score": s} for t, s in zip(docs, [0.1, 0.9, 0.5, 0.3], strict=True)]
    by_own = profile_reorder(QUESTION, records, profile=last_best)
    assert [r["text"] for r in by_own.passages] == ["c", "d", "a", "b"]
    path = tmp_path / "p.json"
    last_best.save(path)
    gold_docs = passages_with_gold(4, 1)
    by_model = profile_reorder(
        QUESTION, gold_docs, profile=str(path), scorer=PositionScorer(), relevance="convex_score"
    )
    assert by_model.passages[3] is gold_docs[1] and by_model.cost.lm_calls == 4
    assert by_model.details["relevance"] == "convex_score"
    with pytest.raises(ValueError, match="scorer"):
        profile_reorder(QUESTION, docs, profile=last_best, n_rotations=2)


def test_profile_reorder_refuses_a_nan_score_naming_the_passage() -> None:
    """Issue 30: a NaN own score was "no score" (the given order, silently); now refused."""
    profile = [0.1, 0.2, 0.9]  # reads the last position best
    with pytest.raises(
        ValueError, match=r"^`scores\[2\]` is NaN: give every passage a number; -inf to rank"
    ):
        profile_reorder(QUESTION, ["a", "b", "c"], profile=profile, scores=[0.1, 0.2, math.nan])
    records = [{"text": "a", "score": 0.3}, {"text": "b", "score": math.nan}, {"text": "c"}]
    for own in (
        records,  # a NaN next to a missing score: still refused (NaN is never "missing")
        [Passage("a", score=0.3), Passage("b", score=math.nan), Passage("c", score=0.1)],
        [Scored("a", 0.3), Scored("b", math.nan), Scored("c", 0.1)],
    ):
        with pytest.raises(
            ValueError,
            match=r"^the own score of passages\[1\] is NaN: give every passage a number; "
            r"None for a missing score",
        ):
            profile_reorder(QUESTION, own, profile=profile)
    assert [r.get("score", "-") for r in records][::2] == [0.3, "-"]  # nothing changed
    # own scores not read: with `scores`, or with a scorer
    given = profile_reorder(QUESTION, records, profile=profile, scores=[3.0, 2.0, 1.0])
    assert given.order == [2, 1, 0] and given.details["relevance"] == "scores"
    scorer = HashScorer()
    scored = profile_reorder(QUESTION, records, profile=profile, scorer=scorer)
    assert scored.details["relevance"] == "passage_likelihood" and scorer.calls == 1
    # infinities are numbers; 0 or 1 passages come back as given, nothing read
    inf = [Passage("a", score=-math.inf), Passage("b", score=math.inf), Passage("c", score=0.0)]
    by_own = profile_reorder(QUESTION, inf, profile=profile)
    assert by_own.details["relevance"] == "passage_scores" and by_own.passages[-1] is inf[1]
    one = profile_reorder(QUESTION, [{"text": "a", "score": math.nan}], profile=profile)
    assert one.order == [0] and one.scores == []
    assert profile_reorder(QUESTION, ["a"], profile=profile, scores=[math.nan]).order == [0]


class AloneScorer(PositionScorer):
    """Question likelihood = the sum of ``values[text]`` over the texts in the prompt
    (one passage alone: its own value); ``usage`` and ``batches`` as PositionScorer's."""

    def __init__(self, values: dict[str, float]) -> None:
        super().__init__()
        self.values = values

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Span]) -> list[SpanScore]:
        self.batches.append(list(prompts))
        self._usage = self._usage + Cost(lm_calls=len(prompts), prompt_tokens=5 * len(prompts))
        out = []
        for prompt, (start, end) in zip(prompts, spans, strict=True):
            assert prompt[start:end] == QUESTION
            value = sum(v for t, v in self.values.items() if t in prompt)
            out.append(SpanScore(value, value * 2, 2))
        return out


ALONE = {"alpha": -3.0, "bravo": -0.5, "charlie": -2.0, "delta": -1.0}


def test_profile_reorder_ranks_by_passage_likelihood_with_a_scorer_by_default() -> None:
    profile = PositionProfile((0.2, 0.1, 0.0, 0.5))  # positions best first: 3, 0, 1, 2
    docs = list(ALONE)
    scorer = AloneScorer(ALONE)
    r = profile_reorder(QUESTION, docs, profile=profile, scorer=scorer)
    alone = passage_likelihood(QUESTION, docs, AloneScorer(ALONE))
    assert r.details["relevance"] == "passage_likelihood"
    assert r.scores == alone.scores == [-3.0, -0.5, -2.0, -1.0]
    assert r.cost == alone.cost and r.cost.lm_calls == 4  # N one-passage prompts
    assert len(scorer.batches) == 1 and scorer.batches[0] == [
        render_qa(QUESTION, [d]) for d in docs
    ]
    # ranked by the passage-alone scores (bravo, delta, charlie, alpha), down the profile
    assert r.passages == ["delta", "charlie", "alpha", "bravo"] and r.order == [3, 2, 0, 1]
    same = passage_likelihood(
        QUESTION, docs, AloneScorer(ALONE), placement="profile", rest="scores", profile=profile
    )
    assert r.order == same.order
    explicit = profile_reorder(
        QUESTION, docs, profile=profile, scorer=AloneScorer(ALONE), relevance="passage_likelihood"
    )
    assert explicit.order == r.order and explicit.scores == r.scores
    # the seed is ConvexScore's: passage likelihood does not depend on it
    assert profile_reorder(QUESTION, docs, profile=profile, scorer=scorer, seed=7).order == r.order
    # scores given still win over the scorer; no model call
    unused = AloneScorer(ALONE)
    by_scores = profile_reorder(
        QUESTION, docs, profile=profile, scores=[4.0, 3.0, 2.0, 1.0], scorer=unused
    )
    assert by_scores.details["relevance"] == "scores" and unused.batches == []
    # 0 or 1 passages: nothing scored
    assert profile_reorder(QUESTION, ["a"], profile=profile, scorer=unused).cost == Cost()
    assert unused.batches == []


def test_profile_reorder_convex_score_relevance_is_the_old_behaviour() -> None:
    profile = PositionProfile((0.3, 0.1, 0.5, 0.0, 0.2))
    docs = [f"passage {i}" for i in range(5)]
    for options in ({}, {"n_base_orders": 2, "seed": 3}, {"n_rotations": 3, "seed": 1}):
        r = profile_reorder(
            QUESTION, docs, profile=profile, scorer=HashScorer(), relevance="convex_score",
            **options,
        )  # fmt: skip
        convex = convex_score(QUESTION, docs, HashScorer(), **options)
        assert r.details["relevance"] == "convex_score"
        assert r.scores == convex.scores
        assert r.cost.lm_calls == convex.cost.lm_calls
        ranked = sorted(range(5), key=lambda i: (-convex.scores[i], i))
        expected = [0] * 5
        for rank, position in enumerate(profile.ranking()):
            expected[position] = ranked[rank]
        assert r.order == expected
    gold_docs = passages_with_gold(4, 1)
    scorer = PositionScorer()
    r = profile_reorder(
        QUESTION, gold_docs, profile=[0.2, 0.1, 0.0, 0.5], scorer=scorer, relevance="convex_score"
    )
    assert r.passages[3] is gold_docs[1]  # ConvexScore's gold at the best-read position
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 4  # N full prompts


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"n_rotations": 2},
            r"\['n_rotations'\] go to convex_score.*relevance='passage_likelihood'",
        ),
        (
            {"relevance": "passage_likelihood", "seed_orders": 1},
            r"relevance='passage_likelihood'",
        ),
        ({"relevance": "convex_score", "n_rotations": 2, "scores": [1.0, 2.0, 3.0]}, "`scores`"),
        (
            {"relevance": "likelihood"},
            r"unknown relevance 'likelihood'; known: 'passage_likelihood'",
        ),
        ({"relevance": None}, "unknown relevance None"),
    ],
)
def test_profile_reorder_bad_relevance_combinations(kwargs: dict[str, Any], message: str) -> None:
    scorer = AloneScorer(ALONE)
    with pytest.raises(ValueError, match=message):
        profile_reorder(QUESTION, ["a", "b", "c"], profile=[0.1, 0.2, 0.3], scorer=scorer, **kwargs)
    assert scorer.batches == []  # refused before scoring
    with pytest.raises(ValueError, match=r"no `scorer` was given"):  # as before: no scorer
        profile_reorder(
            QUESTION, ["a", "b"], profile=[0.1, 0.2], relevance="convex_score", n_rotations=2
        )
    with pytest.raises(ValueError, match="unknown relevance"):  # even without a scorer
        profile_reorder(QUESTION, ["a", "b"], profile=[0.1, 0.2], relevance="convex")  # type: ignore[arg-type]


def test_adapter_profile_reordering_passes_relevance_to_the_core() -> None:
    from pydantic import ValidationError

    from rag_position import _integration as adapters

    default = inspect.signature(profile_reorder).parameters["relevance"].default
    assert adapters.ProfileOptions.model_fields["relevance"].default == default
    assert adapters.ProfileOptions(profile=[0.1, 0.2]).relevance == "passage_likelihood"
    with pytest.raises(ValidationError, match="relevance"):
        adapters.ProfileOptions(profile=[0.1, 0.2], relevance="likelihood")
    profile = PositionProfile((0.2, 0.1, 0.0, 0.5))
    docs = list(ALONE)
    lazy = adapters.LazyModel(AloneScorer(ALONE))
    by_default = adapters.profile_reordering(QUESTION, docs, profile, scorer=lazy)
    core = profile_reorder(QUESTION, docs, profile=profile, scorer=AloneScorer(ALONE))
    assert by_default.order == core.order == [3, 2, 0, 1]
    assert by_default.scores == core.scores
    assert {e["relevance"] for e in by_default.extras} == {"passage_likelihood"}
    hashed = adapters.LazyModel(HashScorer())
    convex = adapters.profile_reordering(
        QUESTION, docs, profile, scorer=hashed, relevance="convex_score", convex_options={"seed": 3}
    )
    assert {e["relevance"] for e in convex.extras} == {"convex_score"}
    assert convex.scores == convex_score(QUESTION, docs, HashScorer(), seed=3).scores
    with pytest.raises(ValueError, match=r"`convex_options` \(seed\) go to convex_score"):
        adapters.profile_reordering(
            QUESTION, docs, profile, scorer=hashed, convex_options={"seed": 3}
        )
    adapters.check_profile_options(None, HashScorer(), {"seed": 3}, "convex_score")
    with pytest.raises(ValueError, match="relevance='convex_score'"):
        adapters.check_profile_options(None, HashScorer(), {"seed": 3})
    with pytest.raises(ValueError, match="unknown relevance 'order'"):
        adapters.check_profile_options(None, HashScorer(), {}, "order")
    with pytest.raises(ValueError, match="pass a `scorer`"):
        adapters.check_profile_options(None, None, {"seed": 3}, "convex_score")


# --------------------------------------------------------------------------- registry


def test_table_rows_pass_the_seed_on_and_name_what_they_need() -> None:
    docs = [f"passage {i}" for i in range(6)]
    profile = [0.1, 0.2, 0.3, 0.4, 0.5, 0.9]  # a list of values is a profile too
    runs = {
        seed: STRATEGIES["profile"](
            QUESTION,
            docs,
            scorer=HashScorer(),
            profile=profile,
            seed=seed,
            relevance="convex_score",
        )
        for seed in (0, 3)
    }
    for seed, r in runs.items():  # the seed reaches ConvexScore through profile_reorder
        assert r.scores == convex_score(QUESTION, docs, HashScorer(), seed=seed).scores
    assert runs[0].scores != runs[3].scores
    row = STRATEGIES["profile"]  # by default the row ranks by passage likelihood
    assert "relevance" in row.options and row.defaults["relevance"] == "passage_likelihood"
    default = row(QUESTION, docs, scorer=HashScorer(), profile=profile, seed=3)
    assert default.details["relevance"] == "passage_likelihood"
    assert default.scores == passage_likelihood(QUESTION, docs, HashScorer()).scores
    with pytest.raises(ValueError, match="relevance='convex_score'"):
        row(QUESTION, docs, scorer=HashScorer(), profile=profile, n_rotations=2)
    with pytest.raises(ValueError, match=r"'profile' needs profile= \(a PositionProfile"):
        STRATEGIES["profile"](QUESTION, docs)
    with pytest.raises(TypeError, match="no option 'n_rotation'"):  # checked against ConvexScore's
        STRATEGIES["profile"](QUESTION, docs, profile=profile, n_rotation=2)


def test_registry_names_and_uniform_calls() -> None:
    ordering = {
        "retriever",
        "likelihood_selection",
        "convex_score",
        "convex_score_profile",
        "convex_score_sandwich",
        "passage_likelihood",
        "passage_likelihood_profile",
        "select_and_place",
        "select_and_place_profile",
        "edge",
        "sandwich",
        "profile",
    }
    assert set(STRATEGIES) == ordering | {"fact", "recite", "medoid"}  # generation: elsewhere
    assert {n for n, spec in STRATEGIES.items() if not spec.answers} == ordering
    docs = passages_with_gold(4, 2)
    profile = PositionProfile((0.0, 0.0, 0.0, 1.0))
    for name in sorted(ordering):
        strategy = STRATEGIES[name]
        options = {"profile": profile} if "profile" in name else {}
        # PositionScorer reads where the gold sits among several passages; one passage alone
        # has no position
        alone = name.startswith(("passage_likelihood", "select_and_place")) or name == "profile"
        scorer = HashScorer() if alone else PositionScorer()
        r = strategy(QUESTION, docs, scorer=scorer, generator=None, **options)
        assert isinstance(r, OrderingResult)
        if strategy.selects:  # a selection; the rest listed as dropped
            kept = [docs[i] for i in r.order] + [docs[i] for i in r.details["dropped"]]
            assert [id(p) for p in r.passages] == [id(docs[i]) for i in r.order]
            assert sorted(map(id, kept)) == sorted(map(id, docs))
        else:
            assert sorted(map(id, r.passages)) == sorted(map(id, docs))
    assert (
        get_strategy("convex_score")(QUESTION, docs, scorer=PositionScorer()).passages[0] is docs[2]
    )
    cp = get_strategy("convex_score_profile")(
        QUESTION, docs, scorer=PositionScorer(), profile=profile
    )
    assert isinstance(cp, ConvexScoreResult) and cp.passages[3] is docs[2]
    assert get_strategy("sandwich")(QUESTION, docs).prompt == sandwich_prompt(QUESTION, docs)
    cs = get_strategy("convex_score_sandwich")(QUESTION, docs, scorer=PositionScorer(), seed=3)
    alone = get_strategy("convex_score")(QUESTION, docs, scorer=PositionScorer(), seed=3)
    assert cs.passages == alone.passages and cs.passages[0] is docs[2]
    assert cs.prompt == sandwich_prompt(QUESTION, cs.passages)
    assert cs.cost.lm_calls == alone.cost.lm_calls == 4
    with pytest.raises(ValueError, match="known"):
        get_strategy("nope")
    with pytest.raises(ValueError, match="scorer"):
        STRATEGIES["convex_score"](QUESTION, docs)
    with pytest.raises(ValueError, match="profile"):
        STRATEGIES["convex_score_profile"](QUESTION, docs, scorer=PositionScorer())
    with pytest.raises(TypeError, match="sets placement itself"):
        STRATEGIES["convex_score_profile"](
            QUESTION, docs, scorer=PositionScorer(), placement="first"
        )
    with pytest.raises(TypeError, match=r"no option 'n_rotation'.*n_rotations"):
        STRATEGIES["convex_score"](QUESTION, docs, scorer=PositionScorer(), n_rotation=2)
    # the same model may go to every row: rows ignore the ones they do not need
    assert STRATEGIES["edge"](QUESTION, docs, scorer=PositionScorer()).order == [1, 3, 2, 0]


# --------------------------------------------------------------------------- properties

texts = st.one_of(
    st.sampled_from(["", "same text", "same text", "Ünïcödé ✓ 中文", "Document [1] trick"]),
    st.text(max_size=20),
)
items = st.one_of(
    texts,
    st.builds(
        lambda t, title, meta: Passage(t, title=title, metadata=meta),
        texts,
        st.text(max_size=5),
        st.dictionaries(st.sampled_from(["isgold", "k", "é"]), st.integers(), max_size=2),
    ),
    st.builds(lambda t, m: {"text": t, "meta": m, "score": 0.5}, texts, st.lists(st.integers())),
)
SCORER = HashScorer()
PROFILE = PositionProfile((0.3, 0.1, 0.5))
STRATEGY_CALLS: dict[str, Callable[[list[Any]], OrderingResult[Any]]] = {
    "selection": lambda xs: likelihood_selection(QUESTION, xs, SCORER, seed=1),
    "convex": lambda xs: convex_score(QUESTION, xs, SCORER, n_base_orders=2),
    "convex_authors_few": lambda xs: convex_score(
        QUESTION, xs, SCORER, variant="authors", n_rotations=max(1, len(xs) // 2), placement="last"
    ),
    "convex_profile": lambda xs: convex_score(
        QUESTION, xs, SCORER, placement="profile", profile=PROFILE
    ),
    "edge_langchain": lambda xs: edge_reorder(xs),
    "edge_llamaindex": lambda xs: edge_reorder(xs, mode="llamaindex"),
    "edge_haystack": lambda xs: edge_reorder(xs, mode="haystack"),
    "profile": lambda xs: profile_reorder(QUESTION, xs, profile=PROFILE),
    "profile_scorer": lambda xs: profile_reorder(QUESTION, xs, profile=PROFILE, scorer=SCORER),
    "profile_scorer_convex": lambda xs: profile_reorder(
        QUESTION, xs, profile=PROFILE, scorer=SCORER, relevance="convex_score"
    ),
    "sandwich": lambda xs: sandwich(QUESTION, xs),
}


@pytest.mark.parametrize("name", sorted(STRATEGY_CALLS))
@settings(max_examples=40, deadline=None)
@given(xs=st.lists(items, max_size=8))
def test_every_strategy_returns_a_permutation_of_the_same_objects(name: str, xs: list[Any]) -> None:
    before = list(xs)
    snapshot = [_snapshot(x) for x in xs]
    r = STRATEGY_CALLS[name](xs)
    assert xs == before and all(a is b for a, b in zip(xs, before, strict=True))  # list untouched
    assert [_snapshot(x) for x in xs] == snapshot  # items and their metadata untouched
    assert sorted(r.order) == list(range(len(xs)))
    assert len(r.passages) == len(xs)
    assert all(r.passages[k] is xs[i] for k, i in enumerate(r.order))
    if len(xs) <= 1:
        assert r.cost == Cost() and r.passages == xs


def _snapshot(x: Any) -> Any:
    # (Passage cannot be deep-copied: its metadata is a mappingproxy.)
    if isinstance(x, Passage):
        return (x.text, x.title, x.id, x.score, copy.deepcopy(dict(x.metadata)))
    return copy.deepcopy(x)


@settings(max_examples=30, deadline=None)
@given(xs=st.lists(items, min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_gauge_scores_the_rendered_prompts(xs: list[Any], seed: int) -> None:
    orders = convex_design(len(xs), seed=seed)
    g = question_likelihood(QUESTION, xs, SCORER, orders=orders)
    for order, prompt, span in zip(orders, g.prompts, g.spans, strict=True):
        assert prompt == render_qa(QUESTION, [xs[i] for i in order])
        assert span == question_span(prompt, QUESTION)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(3, 8),
    base_orders=st.integers(1, 3),
    authors=st.booleans(),
    seed=st.integers(0, 10_000),
    data=st.data(),
)
def test_score_definitions_rank_alike_on_complete_designs(
    n: int, base_orders: int, authors: bool, seed: int, data: st.DataObject
) -> None:
    # Every passage sits at every position equally often, so each row of the table has
    # the same total: C, E + C and the authors' +/-LL are increasing affine functions of
    # E, and all four definitions put the passages in one order (benchmarks/README.md).
    if authors:  # N base orders by construction
        orders = convex_design(n, seed=seed, design="authors")
    else:
        orders = convex_design(n, n_base_orders=base_orders, seed=seed)
    scores = data.draw(
        st.lists(st.floats(-8.0, 0.0, allow_nan=False), min_size=len(orders), max_size=len(orders))
    )
    table = likelihood_table(orders, scores, n)
    edge = convex_scores(table, 1.0, 0.0)[0]
    for other in (
        convex_scores(table, 0.0, 1.0)[0],
        convex_scores(table, 1.0, 1.0)[0],
        authors_scores(orders, scores, n),
    ):
        for i, j in itertools.combinations(range(n), 2):
            if abs(edge[i] - edge[j]) > 1e-9:  # a tie in E is a tie (to rounding) in all
                assert (edge[i] > edge[j]) == (other[i] > other[j]), (i, j)


def test_score_definitions_differ_on_partial_designs() -> None:
    # With n_rotations < N a passage is measured at some positions only; then they differ.
    n = 6
    orders = convex_design(n, n_rotations=4, seed=1)
    scores = [-1.0, -2.0, -0.5, -1.5]
    table = likelihood_table(orders, scores, n)
    edge = convex_scores(table, 1.0, 0.0)[0]
    authors = authors_scores(orders, scores, n)
    assert any(
        edge[i] > edge[j] and authors[i] < authors[j]
        for i, j in itertools.permutations(range(n), 2)
    )


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "is not JSON"),
        (b"[0.1, 0.2]", "must hold a JSON object"),
        (b'{"values": [0.1]}', "needs the keys"),
        (b"\xff\xfe", "is not UTF-8"),
    ],
)
def test_a_bad_profile_file_is_named_in_the_error(
    tmp_path: Path, content: bytes, says: str
) -> None:
    """Profile-file errors named the problem but not the file."""
    path = tmp_path / "profile.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=says) as caught:
        PositionProfile.load(path)
    assert str(path) in str(caught.value)
