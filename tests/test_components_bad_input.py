"""A query that is not a string reaches every ordering component, in both frameworks, as
a TypeError naming the component, whatever the strategy and however many items; one that
is not valid Unicode is a ValueError naming it. Nothing is scored: the scorer here fails
the test if it is called.

Every test runs once per framework (:data:`framework_adapters.FRAMEWORKS`); the query
goes in as the framework carries it (LangChain's ``query``, LlamaIndex's
``QueryBundle.query_str``: :meth:`Framework.ask`). LangChain's retriever and LlamaIndex's
``query_bundle`` of another type and ``query_str=`` keyword are in their own tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from framework_adapters import FRAMEWORKS, Framework

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
    cls, component = build(fw, name)
    with pytest.raises(TypeError, match=fw.query_type.format(name=cls)):
        fw.ask(component, fw.items(n), query, False)


@pytest.mark.parametrize("name", [*SCORING, "EdgeReorder"])
def test_the_async_path_refuses_it_too(fw: Framework, name: str) -> None:
    cls, component = build(fw, name)
    with pytest.raises(TypeError, match=fw.query_type.format(name=cls) + " None"):
        fw.ask(component, fw.items(), None, True)


@pytest.mark.parametrize("name", [*SCORING, "ProfileReorder"])
def test_a_query_that_is_not_valid_unicode_is_a_value_error(fw: Framework, name: str) -> None:
    _, component = build(fw, name)
    with pytest.raises(ValueError, match=r"`question` is not valid Unicode.*character 8"):
        fw.compress(component, fw.items(), "what is \ud800?")
