"""What LlamaIndex alone has of a malformed query (a query that is not a str, in
``QueryBundle.query_str``, is tested for both frameworks in
``tests/test_components_bad_input.py``): ``query_bundle`` must be a ``QueryBundle`` (a
string passed in its place is refused and the message says to use ``query_str=``), and the
``query_str=`` keyword is checked too. Nothing is scored: the scorer fails the test if it
is called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from li_testkit import make_nodes
from llama_index.core.postprocessor.types import BaseNodePostprocessor
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


@pytest.mark.parametrize("bundle", ["Who wrote Hamlet?", 42])
@pytest.mark.parametrize("name", sorted(POSTPROCESSORS))
def test_query_bundle_that_is_not_a_query_bundle_is_a_type_error(name: str, bundle: Any) -> None:
    postprocessor = POSTPROCESSORS[name]()
    with pytest.raises(TypeError, match=r"query_bundle must be a QueryBundle.*query_str="):
        postprocessor.postprocess_nodes(make_nodes(), bundle)  # the query where the bundle goes


def test_query_str_keyword_that_is_not_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"ProfileReorder: query_bundle\.query_str .* int 7"):
        ProfileReorder(profile=PROFILE).postprocess_nodes(make_nodes(), query_str=7)  # type: ignore[arg-type]
