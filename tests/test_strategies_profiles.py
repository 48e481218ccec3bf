"""Position profiles, the strategy table's rows and the score definitions' properties,
pinned with test_strategies_ordering's scripted scorers (no model)."""

from __future__ import annotations

import inspect
import itertools
import json
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from test_passage_likelihood import PASSAGES
from test_passage_likelihood import QUESTION as CARMEN
from test_strategies_ordering import QUESTION, PositionScorer, Scored, passages_with_gold, u_curve

from rag_position import _integration as adapters
from rag_position.cost import Cost
from rag_position.data import QAInstance
from rag_position.passages import Passage
from rag_position.prompts import question_span, render_qa
from rag_position.strategies import (
    STRATEGIES,
    ConvexScoreResult,
    PositionProfile,
    convex_score,
    edge_reorder,
    estimate_profile,
    get_strategy,
    likelihood_selection,
    passage_likelihood,
    profile_reorder,
    question_likelihood,
    sandwich_prompt,
    select_and_place,
)
from rag_position.strategies._convex_score import (
    authors_scores,
    convex_design,
    convex_scores,
    likelihood_table,
)
from rag_position.testing.scripted import ClosenessEmbedder, HashScorer, OnePassageScorer
from rag_position.testing.strategies import texts

ALONE = {"alpha": -3.0, "bravo": -0.5, "charlie": -2.0, "delta": -1.0}


class Alone(OnePassageScorer):
    """The question's mean likelihood after one passage alone: ``ALONE[text]``; metered."""

    def __init__(self) -> None:
        super().__init__(QUESTION, {t: 2 * v for t, v in ALONE.items()}, n_tokens=2)

    @property
    def usage(self) -> Cost:
        n = sum(map(len, self.calls))
        return Cost(lm_calls=n, prompt_tokens=5 * n)


INSTANCES: list[Any] = [
    (QUESTION, passages_with_gold(5, 0), 0),
    QAInstance(
        question=QUESTION, answers=("x",), passages=tuple(passages_with_gold(5, 3)), gold_index=3
    ),
]
ABC = ["a", "b", "c"]
P3 = [0.1, 0.2, 0.3]
BOTH = "{question}{search_results}"
EXACTLY = "pass a `profile` exactly when"
SIX = [f"passage {i}" for i in range(6)]


def plain(scorer: HashScorer | None = None, **options: Any) -> object:
    return profile_reorder(QUESTION, ABC, profile=P3, scorer=scorer, **options)


def gauge(scorer: HashScorer, **options: Any) -> object:
    return question_likelihood(QUESTION, ["a"], scorer, **options)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: PositionProfile.from_dict({"values": [1]}), "keys"),
        (lambda s: PositionProfile((1.0,), source="guess"), "source"),
        (lambda s: PositionProfile((1.0, math.inf)), "finite"),
        (lambda s: estimate_profile(s, [INSTANCES[0], (QUESTION, ABC, 0)]), "passages"),
        (lambda s: estimate_profile(s, []), "empty"),
        (lambda s: estimate_profile(s, INSTANCES, positions=[7]), "positions"),
        (lambda s: plain(n_rotations=2), "scorer"),
        (lambda s: plain(relevance="convex_score", n_rotations=2), r"no `scorer` was given"),
        (lambda s: plain(relevance="convex"), "unknown relevance"),  # even without a scorer
        (
            lambda s: plain(scorer=s, n_rotations=2),
            r"\['n_rotations'\] go to convex_score.*relevance='passage_likelihood'",
        ),
        (
            lambda s: plain(scorer=s, relevance="passage_likelihood", seed_orders=1),
            r"relevance='passage_likelihood'",
        ),
        (
            partial(plain, relevance="convex_score", n_rotations=2, scores=[1.0, 2.0, 3.0]),
            "`scores`",
        ),
        (
            lambda s: plain(scorer=s, relevance="likelihood"),
            r"unknown relevance 'likelihood'; known: 'passage_likelihood'",
        ),
        (lambda s: plain(scorer=s, relevance=None), "unknown relevance None"),
        (lambda s: get_strategy("nope"), "known"),
        (lambda s: STRATEGIES["convex_score"](QUESTION, SIX), "scorer"),
        (lambda s: STRATEGIES["convex_score_profile"](QUESTION, SIX, scorer=s), "profile"),
        (lambda s: question_likelihood("  ", ["a"], s), "question"),
        (lambda s: question_likelihood(QUESTION, ["a", "b"], s, orders=[[0, 0]]), "permutation"),
        (lambda s: gauge(s, template="{search_results} only"), r"\{question\}"),
        (lambda s: gauge(s, template="Q: {question}"), r"\{search_results\}"),
        (lambda s: gauge(s, template="no placeholders"), r"\{question\}, \{search_results\}"),
        (lambda s: gauge(s, template="Q: {question}\n{search_results}"), "before"),
        (lambda s: gauge(s, template="{question}", query_aware=True), "template"),
        (lambda s: likelihood_selection(QUESTION, ["a", "b"], s, n_orders=0), "n_orders"),
        (lambda s: likelihood_selection(QUESTION, ["a", "b"], s, n_orders=-1), "n_orders"),
        (lambda s: convex_design(4, n_rotations=5), "n_rotations"),
        (lambda s: convex_design(4, n_rotations=0), "n_rotations"),
        (lambda s: convex_design(4, n_base_orders=0), "n_base_orders"),
        (lambda s: convex_design(4, design="authors", n_base_orders=2), "authors"),
        (lambda s: convex_score(QUESTION, ["a", "b"], s, n_rotations=0), "n_rotations"),
        (lambda s: convex_score(QUESTION, ["a", "b"], s, n_base_orders=0), "n_base_orders"),
        (lambda s: convex_score(QUESTION, ["a", "b"], s, placement="profile"), "profile"),
        (lambda s: convex_score(QUESTION, ["a", "b"], s, variant="nope"), "variant"),
        (lambda s: convex_score(QUESTION, ["a", "b"], s, edge_weight=math.nan), "edge_weight"),
        (lambda s: edge_reorder(["a"], top_k=2), "haystack"),
        (lambda s: edge_reorder(["a"], mode="haystack", top_k=0), "top_k"),
        (lambda s: edge_reorder(["a", "b"], scores=[1.0]), "scores"),
        (lambda s: edge_reorder(["a"], scores=[1.0, math.nan]), "got 2 scores for 1 passages"),
        (lambda s: edge_reorder(["a"], mode="other"), "mode"),
        (lambda s: sandwich_prompt(QUESTION, ["x"], chat=True, template=BOTH), "chat"),
        (lambda s: sandwich_prompt(QUESTION, []), "passages"),
        (lambda s: sandwich_prompt(QUESTION, ["x"], template="{question}"), r"\{search_results\}"),
        *(
            (partial(fn, CARMEN, PASSAGES, **o), message)
            for fn in (passage_likelihood, select_and_place)
            for o, message in (
                ({"placement": "middle"}, "`placement` must be"),
                ({"placement": "profile"}, EXACTLY),
                ({"template": "no placeholders"}, "template"),
            )
        ),
        (lambda s: passage_likelihood(CARMEN, PASSAGES, s, profile=P3), EXACTLY),
        (lambda s: passage_likelihood(CARMEN, PASSAGES, s, rest="random"), "`rest` must be"),
        (lambda s: select_and_place(CARMEN, PASSAGES, s, mass=0.0), "`mass` must be"),
        (lambda s: select_and_place(CARMEN, PASSAGES, s, mass=1.5), "`mass` must be"),
        (lambda s: select_and_place(CARMEN, PASSAGES, s, mass="most"), "`mass` must be"),
        (lambda s: select_and_place(CARMEN, PASSAGES, s, top_n=0), "`top_n` must be"),
        (lambda s: select_and_place(CARMEN, PASSAGES, s, top_n=True), "`top_n` must be"),
        *(
            (partial(select_and_place, CARMEN, PASSAGES, **o), message)
            for o, message in (
                ({"similar": 1}, "`similar` needs an embedder"),
                ({"similar": -1, "embedder": ClosenessEmbedder([])}, "`similar` must be"),
                ({"similar": True, "embedder": ClosenessEmbedder([])}, "`similar` must be"),
                ({"similar": 1, "embedder": ClosenessEmbedder([0.1], rows=2)}, r"shape \(2, 2\)"),
                ({"similar": 1, "embedder": ClosenessEmbedder([math.nan] * 4)}, "not finite"),
            )
        ),
    ],
)
def test_bad_input_is_refused_before_scoring(
    call: Callable[[HashScorer], object], message: str
) -> None:
    """Every ordering strategy's documented refusals, before the scorer is asked."""
    scorer = HashScorer()
    with pytest.raises(ValueError, match=message):
        call(scorer)
    assert scorer.calls == 0


@pytest.mark.parametrize(
    ("row", "options", "message"),
    [
        ("profile", {"profile": P3, "n_rotation": 2}, "no option 'n_rotation'"),  # ConvexScore's
        ("convex_score_profile", {"scorer": None, "placement": "first"}, "sets placement itself"),
        ("convex_score", {"scorer": None, "n_rotation": 2}, r"no option 'n_rotation'.*n_rotations"),
    ],
)
def test_a_row_refuses_an_option_it_has_not(row: str, options: Any, message: str) -> None:
    if "scorer" in options:
        options = {**options, "scorer": PositionScorer()}
    with pytest.raises(TypeError, match=message):
        STRATEGIES[row](QUESTION, SIX, **options)


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


def test_profile_ranking_interpolation_and_json(tmp_path: Path) -> None:
    p = PositionProfile((0.17, 0.12, 0.12, 0.40), model_name="embedded", source="eval")
    assert p.ranking() == [3, 0, 1, 2] and p.interpolate(4) is p
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
    bad = {"model": "m", "n_positions": 3, "values": [1, 2], "source": "eval"}
    with pytest.raises(ValueError, match="n_positions"):
        PositionProfile.from_dict(bad)


def test_estimate_profile_recovers_the_curve() -> None:
    scorer = PositionScorer()
    prof = estimate_profile(scorer, INSTANCES, model_name="scripted")
    assert prof.values == tuple(u_curve(p, 5) for p in range(5))
    assert prof.ranking()[0] == 4 and prof.model_name == "scripted" and prof.source == "likelihood"
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 10
    shown = PositionScorer()  # with a progress bar: one call per instance, the same profile
    assert estimate_profile(shown, INSTANCES, model_name="scripted", progress=True) == prof
    assert [len(b) for b in shown.batches] == [5, 5]
    some = estimate_profile(PositionScorer(), INSTANCES, positions=[0, 2, 4])
    assert some.values[1] == pytest.approx((u_curve(0, 5) + u_curve(2, 5)) / 2)


def test_profile_reorder_relevance_sources() -> None:
    last_best = PositionProfile((0.2, 0.1, 0.0, 0.5), source="eval")
    docs = ["a", "b", "c", "d"]
    by_scores = profile_reorder(QUESTION, docs, profile=last_best, scores=[0.1, 0.9, 0.5, 0.3])
    assert by_scores.passages == ["c", "d", "a", "b"] and by_scores.details["relevance"] == "scores"
    by_order = profile_reorder(QUESTION, docs, profile=last_best)
    assert by_order.passages == ["b", "c", "d", "a"] and by_order.scores == []
    records = [{"text": t, "score": s} for t, s in zip(docs, [0.1, 0.9, 0.5, 0.3], strict=True)]
    by_own = profile_reorder(QUESTION, records, profile=last_best)
    assert [r["text"] for r in by_own.passages] == ["c", "d", "a", "b"]


def test_profile_reorder_refuses_a_nan_score_naming_the_passage() -> None:
    """Issue 30: a NaN score (it scrambled the sort, then meant "no score") is refused."""
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
    missing = [Passage("b", score=1.0), Passage("a"), Passage("c", score=2.0)]
    by_order = profile_reorder(QUESTION, missing, profile=profile)
    assert by_order.details["relevance"] == "order" and by_order.scores == []
    one = profile_reorder(QUESTION, [{"text": "a", "score": math.nan}], profile=profile)
    assert one.order == [0] and one.scores == []
    assert profile_reorder(QUESTION, ["a"], profile=profile, scores=[math.nan]).order == [0]


def test_profile_reorder_ranks_by_passage_likelihood_with_a_scorer_by_default() -> None:
    profile = PositionProfile((0.2, 0.1, 0.0, 0.5))  # positions best first: 3, 0, 1, 2
    docs = list(ALONE)
    scorer = Alone()
    r = profile_reorder(QUESTION, docs, profile=profile, scorer=scorer)
    each = passage_likelihood(QUESTION, docs, Alone())
    assert r.details["relevance"] == "passage_likelihood"
    assert r.scores == each.scores == [-3.0, -0.5, -2.0, -1.0]
    assert r.cost == each.cost and r.cost.lm_calls == 4  # N one-passage prompts
    assert scorer.calls == [[render_qa(QUESTION, [d]) for d in docs]]
    # ranked by the passage-alone scores (bravo, delta, charlie, alpha), down the profile
    assert r.passages == ["delta", "charlie", "alpha", "bravo"] and r.order == [3, 2, 0, 1]
    on = {"profile": profile, "scorer": Alone()}
    same = passage_likelihood(QUESTION, docs, placement="profile", rest="scores", **on)  # type: ignore[arg-type]
    assert r.order == same.order
    explicit = profile_reorder(QUESTION, docs, relevance="passage_likelihood", **on)  # type: ignore[arg-type]
    assert explicit.order == r.order and explicit.scores == r.scores
    # the seed is ConvexScore's: passage likelihood does not depend on it
    assert profile_reorder(QUESTION, docs, profile=profile, scorer=scorer, seed=7).order == r.order
    # scores given still win over the scorer; no model call
    unused = Alone()
    four = [4.0, 3.0, 2.0, 1.0]
    by_scores = profile_reorder(QUESTION, docs, profile=profile, scores=four, scorer=unused)
    assert by_scores.details["relevance"] == "scores"
    # 0 or 1 passages: nothing scored
    assert profile_reorder(QUESTION, ["a"], profile=profile, scorer=unused).cost == Cost()
    assert unused.calls == []


def test_profile_reorder_convex_score_relevance_is_the_old_behaviour(tmp_path: Path) -> None:
    profile = PositionProfile((0.3, 0.1, 0.5, 0.0, 0.2))
    docs = [f"passage {i}" for i in range(5)]
    for options in ({}, {"n_base_orders": 2, "seed": 3}, {"n_rotations": 3, "seed": 1}):
        r = profile_reorder(
            QUESTION, docs, profile=profile, scorer=HashScorer(), relevance="convex_score",
            **options,
        )  # fmt: skip
        convex = convex_score(QUESTION, docs, HashScorer(), **options)
        assert r.details["relevance"] == "convex_score" and r.scores == convex.scores
        assert r.cost.lm_calls == convex.cost.lm_calls
        ranked = sorted(range(5), key=lambda i: (-convex.scores[i], i))
        expected = [0] * 5
        for rank, position in enumerate(profile.ranking()):
            expected[position] = ranked[rank]
        assert r.order == expected
    path = tmp_path / "p.json"  # a profile file's path
    PositionProfile((0.2, 0.1, 0.0, 0.5), source="eval").save(path)
    gold_docs = passages_with_gold(4, 1)
    scorer = PositionScorer()
    r = profile_reorder(
        QUESTION, gold_docs, profile=str(path), scorer=scorer, relevance="convex_score"
    )
    assert r.passages[3] is gold_docs[1]  # ConvexScore's gold at the best-read position
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 4 == r.cost.lm_calls


def test_adapter_profile_reordering_passes_relevance_to_the_core() -> None:
    default = inspect.signature(profile_reorder).parameters["relevance"].default
    assert adapters.ProfileOptions.model_fields["relevance"].default == default
    assert adapters.ProfileOptions(profile=[0.1, 0.2]).relevance == "passage_likelihood"
    with pytest.raises(ValidationError, match="relevance"):
        adapters.ProfileOptions(profile=[0.1, 0.2], relevance="likelihood")
    profile = PositionProfile((0.2, 0.1, 0.0, 0.5))
    docs = list(ALONE)
    lazy = adapters.LazyModel(Alone())
    by_default = adapters.profile_reordering(QUESTION, docs, profile, scorer=lazy)
    core = profile_reorder(QUESTION, docs, profile=profile, scorer=Alone())
    assert by_default.order == core.order == [3, 2, 0, 1] and by_default.scores == core.scores
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


def test_table_rows_pass_the_seed_on_and_name_what_they_need() -> None:
    profile = [0.1, 0.2, 0.3, 0.4, 0.5, 0.9]  # a list of values is a profile too
    row = STRATEGIES["profile"]
    for seed in (0, 3):  # the seed reaches ConvexScore through profile_reorder
        r = row(
            QUESTION, SIX, scorer=HashScorer(), profile=profile, seed=seed, relevance="convex_score"
        )
        assert r.scores == convex_score(QUESTION, SIX, HashScorer(), seed=seed).scores
        assert r.scores != convex_score(QUESTION, SIX, HashScorer(), seed=3 - seed).scores
    # by default the row ranks by passage likelihood
    assert "relevance" in row.options and row.defaults["relevance"] == "passage_likelihood"
    default = row(QUESTION, SIX, scorer=HashScorer(), profile=profile, seed=3)
    assert default.details["relevance"] == "passage_likelihood"
    assert default.scores == passage_likelihood(QUESTION, SIX, HashScorer()).scores
    with pytest.raises(ValueError, match="relevance='convex_score'"):
        row(QUESTION, SIX, scorer=HashScorer(), profile=profile, n_rotations=2)
    with pytest.raises(ValueError, match=r"'profile' needs profile= \(a PositionProfile"):
        row(QUESTION, SIX)


def test_registry_names_and_rows() -> None:
    """Each ordering row's output is checked by test_reorder_properties' conformance kit."""
    ordering = {
        "retriever", "likelihood_selection", "convex_score", "convex_score_profile",
        "convex_score_sandwich", "passage_likelihood", "passage_likelihood_profile",
        "select_and_place", "select_and_place_profile", "edge", "sandwich", "profile",
    }  # fmt: skip
    assert set(STRATEGIES) == ordering | {"fact", "recite", "medoid"}  # generation: elsewhere
    assert {n for n, spec in STRATEGIES.items() if not spec.answers} == ordering
    docs = passages_with_gold(4, 2)
    convex = get_strategy("convex_score")
    assert convex(QUESTION, docs, scorer=PositionScorer()).passages[0] is docs[2]
    profile = PositionProfile((0.0, 0.0, 0.0, 1.0))
    cp = STRATEGIES["convex_score_profile"](
        QUESTION, docs, scorer=PositionScorer(), profile=profile
    )
    assert isinstance(cp, ConvexScoreResult) and cp.passages[3] is docs[2]
    assert get_strategy("sandwich")(QUESTION, docs).prompt == sandwich_prompt(QUESTION, docs)
    cs = get_strategy("convex_score_sandwich")(QUESTION, docs, scorer=PositionScorer(), seed=3)
    alone = convex(QUESTION, docs, scorer=PositionScorer(), seed=3)
    assert cs.passages == alone.passages and cs.passages[0] is docs[2]
    assert cs.prompt == sandwich_prompt(QUESTION, cs.passages)
    assert cs.cost.lm_calls == alone.cost.lm_calls == 4
    # the same model may go to every row: rows ignore the ones they do not need
    assert STRATEGIES["edge"](QUESTION, docs, scorer=PositionScorer()).order == [1, 3, 2, 0]


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
