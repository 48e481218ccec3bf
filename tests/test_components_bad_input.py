"""Malformed input to every ordering component, in both frameworks: bad options refused at
construction, a bad query refused before anything is scored."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from framework_adapters import FRAMEWORKS, Framework
from pydantic import ValidationError

from rag_position.strategies import PositionProfile

pytestmark = pytest.mark.parametrize("fw", FRAMEWORKS)


class Untouchable:
    """A scorer that must not be called."""

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        raise AssertionError("the scorer was called with a malformed query")


PROFILE = [0.2, 0.1, 0.3, 0.4, 0.5]
# name -> (class, whether it takes a scorer, its other options)
COMPONENTS: dict[str, tuple[str, bool, dict[str, Any]]] = {
    "ProfileReorder": ("ProfileReorder", False, {"profile": PROFILE}),
    "ProfileReorder+scorer": ("ProfileReorder", True, {"profile": PROFILE}),
    "LikelihoodReorder": ("LikelihoodReorder", True, {}),
    "ConvexScoreReorder": ("ConvexScoreReorder", True, {}),
    "PassageLikelihoodReorder": ("PassageLikelihoodReorder", True, {}),
    "EdgeReorder": ("EdgeReorder", False, {}),
}
SCORING = sorted(name for name, (_, scored, _) in COMPONENTS.items() if scored)


def build(fw: Framework, name: str) -> tuple[str, Any]:
    """The component's class name and the component."""
    cls, scored, options = COMPONENTS[name]
    return cls, fw.component(cls, **({"scorer": Untouchable()} if scored else {}), **options)


@pytest.mark.parametrize("n", [1, 5])
@pytest.mark.parametrize("query", [None, 42, b"Who?", ["Who?"]])
@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_a_query_that_is_not_a_string_is_a_type_error(
    fw: Framework, name: str, query: Any, n: int
) -> None:
    """Sync and async, whatever the strategy and however many items."""
    cls, component = build(fw, name)
    got = "None" if query is None else f"{type(query).__name__} {query!r}"
    for use_async in (False, True):
        with pytest.raises(TypeError, match=fw.query_type.format(name=cls) + " " + re.escape(got)):
            fw.ask(component, fw.items(n), query, use_async)


@pytest.mark.parametrize("name", [*SCORING, "ProfileReorder"])
def test_a_query_that_is_not_valid_unicode_is_a_value_error(fw: Framework, name: str) -> None:
    _, component = build(fw, name)
    with pytest.raises(ValueError, match=r"`question` is not valid Unicode.*character 8"):
        fw.compress(component, fw.items(), "what is \ud800?")


S = Untouchable()
P = PositionProfile([0.1, 0.5])
CONVEX = {"profile": P, "scorer": S, "relevance": "convex_score"}
# class -> (options, the error, its message pattern): "unknown" and "spec" stand for the
# framework's own error of an option the component lacks and of an unknown model spec
REFUSED: dict[str, list[tuple[dict[str, Any], Any, str | None]]] = {
    "LikelihoodReorder": [
        ({"scorer": "gpt-4"}, "spec", "unknown model spec 'gpt-4'"),
        ({"scorer": S, "n_orders": 0}, ValueError, "n_orders"),
        ({"scorer": S, "template": "no placeholders"}, ValueError, "placeholder"),
    ],
    "EdgeReorder": [
        ({"mode": "middle"}, ValueError, "mode"),
        ({"top_k": 3}, ValueError, "Haystack options"),
    ],
    "ConvexScoreReorder": [
        ({"scorer": S, "placement": "profile"}, ValueError, "profile"),
        ({"scorer": S, "profile": [1.0, 0.0]}, ValueError, "profile"),  # placement="first"
        ({"scorer": S, "n_rotations": 0}, ValueError, "n_rotations"),
        ({"scorer": S, "n_order": 3}, "unknown", "n_order"),  # a typo is refused
    ],
    "ProfileReorder": [
        ({"profile": {"values": [1]}}, ValueError, "needs the keys"),  # a to_dict() record
        ({"profile": ["a", "b"]}, TypeError, "numbers"),
        ({"profile": "no-such-folder/missing.json"}, FileNotFoundError, None),
        ({"profile": P, "score_key": "s", "scorer": S}, ValueError, "not both"),
        ({"profile": P, "convex_options": {"n_rotations": 2}}, ValueError, "convex_score"),
        (
            {"profile": P, "scorer": S, "convex_options": {"n_rotations": 2}},
            ValueError,
            r"relevance='convex_score' \(got relevance='passage_",
        ),
        ({"profile": P, "relevance": "order"}, ValueError, "relevance"),
        ({**CONVEX, "convex_options": {"seeed": 1}}, TypeError, "seeed"),  # now, not at a query
        ({**CONVEX, "convex_options": {"n_rotations": 0}}, ValueError, "options`: n_rotations"),
        ({"profile": P, "scorer": S, "relevance": "order"}, ValueError, "relevance"),
    ],
    "PassageLikelihoodReorder": [
        ({"scorer": S, "placement": "profile"}, ValueError, "profile"),
        ({"scorer": S, "template": "{question}"}, ValueError, r"\{search_results\}"),
        ({"scorer": S, "profile": [0.1, 0.2]}, ValueError, "profile"),  # placement="first"
        ({"scorer": S, "placement": "profile", "profile": ["high", "low"]}, TypeError, "numbers"),
        ({"scorer": S, "placement": "middle"}, ValidationError, None),
        ({"scorer": S, "rest": "shuffle"}, ValidationError, None),
        ({"scorer": S, "n_rotations": 3}, "unknown", "n_rotations"),  # ConvexScore's
        ({}, ValueError, "scorer"),
        ({"scorer": object()}, TypeError, "score"),
    ],
    "SelectAndPlace": [
        *(({"scorer": S, "mass": m}, ValidationError, None) for m in (0, 0.0, 1.5, -0.1, "most")),
        ({"scorer": S, "top_n": 0}, ValidationError, None),
        ({"scorer": S, "top_n": -1}, ValidationError, None),
        ({"scorer": S, "placement": "middle"}, ValidationError, None),
        ({"scorer": S, "rest": "scores"}, "unknown", "rest"),  # not ours
        ({"scorer": S, "placement": "profile"}, ValueError, "profile"),
        ({"scorer": S, "profile": [0.1, 0.2]}, ValueError, "profile"),  # placement="last"
        ({}, ValueError, "scorer"),
        ({"scorer": object()}, TypeError, "score"),
    ],
}


@pytest.mark.parametrize(
    ("cls", "options", "error", "match"),
    [(cls, *row) for cls, rows in REFUSED.items() for row in rows],
)
def test_bad_options_are_refused_at_construction(
    fw: Framework, cls: str, options: dict[str, Any], error: Any, match: str | None
) -> None:
    if error == "unknown":
        error, match = fw.unknown_option(match)
    elif error == "spec":
        error = fw.spec_error
    with pytest.raises(error, match=match):
        fw.component(cls, **options)
