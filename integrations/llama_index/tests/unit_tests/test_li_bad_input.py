"""A malformed query reaches every postprocessor as a clear TypeError naming it.

``query_bundle`` must be a ``QueryBundle`` (a string passed in its place, say, is
refused and the message says to use ``query_str=``), and its ``query_str`` must be
a str; a query that is not valid Unicode is a ValueError naming it. Nothing is
scored: the scorers here fail the test if they are called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from li_testkit import make_nodes
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import QueryBundle
from llama_index.postprocessor.rag_position import (
    ConvexScoreReorder,
    EdgeReorder,
    LikelihoodReorder,
    PassageLikelihoodReorder,
    ProfileReorder,
)


class Untouchable:
    """A scorer that must not be called."""

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        raise AssertionError("the scorer was called with a malformed query")


PROFILE = [0.2, 0.1, 0.3, 0.4]
POSTPROCESSORS: dict[str, Callable[[], BaseNodePostprocessor]] = {
    "ProfileReorder": lambda: ProfileReorder(profile=PROFILE),
    "ProfileReorder+scorer": lambda: ProfileReorder(profile=PROFILE, scorer=Untouchable()),
    "LikelihoodReorder": lambda: LikelihoodReorder(scorer=Untouchable()),
    "ConvexScoreReorder": lambda: ConvexScoreReorder(scorer=Untouchable()),
    "PassageLikelihoodReorder": lambda: PassageLikelihoodReorder(scorer=Untouchable()),
    "EdgeReorder": lambda: EdgeReorder(),
}


@pytest.mark.parametrize("query_str", [None, 42, b"Who wrote Hamlet?", ["Who?"]])
@pytest.mark.parametrize("name", sorted(POSTPROCESSORS))
def test_query_str_that_is_not_a_string_is_a_type_error(name: str, query_str: Any) -> None:
    postprocessor = POSTPROCESSORS[name]()
    bundle = QueryBundle(query_str=query_str)
    with pytest.raises(TypeError, match=r"query_bundle\.query_str must be a str, got") as err:
        postprocessor.postprocess_nodes(make_nodes(), query_bundle=bundle)
    assert type(postprocessor).__name__ in str(err.value)


@pytest.mark.parametrize("bundle", ["Who wrote Hamlet?", 42])
@pytest.mark.parametrize("name", sorted(POSTPROCESSORS))
def test_query_bundle_that_is_not_a_query_bundle_is_a_type_error(name: str, bundle: Any) -> None:
    postprocessor = POSTPROCESSORS[name]()
    with pytest.raises(TypeError, match=r"query_bundle must be a QueryBundle.*query_str="):
        postprocessor.postprocess_nodes(make_nodes(), bundle)  # the query where the bundle goes


def test_query_str_keyword_that_is_not_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"ProfileReorder: query_bundle\.query_str .* int 7"):
        ProfileReorder(profile=PROFILE).postprocess_nodes(make_nodes(), query_str=7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["LikelihoodReorder", "ConvexScoreReorder", "PassageLikelihoodReorder"]
)
def test_async_path_checks_the_query_too(name: str) -> None:
    import asyncio

    postprocessor = POSTPROCESSORS[name]()
    with pytest.raises(TypeError, match="query_str must be a str"):
        asyncio.run(
            postprocessor.apostprocess_nodes(make_nodes(), query_bundle=QueryBundle(None))  # type: ignore[arg-type]
        )


@pytest.mark.parametrize(
    "name",
    [
        "LikelihoodReorder",
        "ConvexScoreReorder",
        "PassageLikelihoodReorder",
        "ProfileReorder",
        "ProfileReorder+scorer",
    ],
)
def test_query_that_is_not_valid_unicode_is_a_value_error(name: str) -> None:
    with pytest.raises(ValueError, match=r"`question` is not valid Unicode.*character 8"):
        POSTPROCESSORS[name]().postprocess_nodes(make_nodes(), query_str="what is \ud800?")
