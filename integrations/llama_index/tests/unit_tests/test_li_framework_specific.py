"""What LlamaIndex alone has, of the components whose behaviour is tested once for both
frameworks (``tests/test_components_*.py``): ``replace_score`` (on the components and
with a tuned file), the query a scoring postprocessor needs, and serialisation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from li_testkit import DOCS, make_nodes
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.postprocessor.rag_position import (
    METADATA_KEY,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    SelectAndPlace,
)

from rag_position.strategies import PositionProfile
from rag_position.testing.scripted import OnePassageScorer
from rag_position.testing.tuned import example_file

QUESTION = "Who wrote Hamlet?"
# The question's likelihood after each text alone: Hamlet best, Python next.
LIKELIHOODS = [-2.0, -0.5, -3.0, -1.0]
VALUES = {text: v for (_, text), v in zip(DOCS, LIKELIHOODS, strict=True)}
SCORING = [PassageLikelihoodReorder, SelectAndPlace]


def scorer() -> OnePassageScorer:
    return OnePassageScorer(QUESTION, VALUES)


def records(nodes: list[NodeWithScore]) -> list[dict[str, Any]]:
    return [n.node.metadata[METADATA_KEY] for n in nodes]


class ListRetriever(BaseRetriever):
    def __init__(self, nodes: list[NodeWithScore]) -> None:
        self.nodes = nodes
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self.nodes)


@pytest.mark.parametrize(
    ("cls", "order"),
    # passage likelihood: the likeliest first, the rest kept; select-and-place (posteriors
    # .52 .32 .12 .04): mass 0.9 keeps three, the likeliest last
    [(PassageLikelihoodReorder, [1, 0, 2, 3]), (SelectAndPlace, [0, 3, 1])],
)
def test_replace_score_puts_the_likelihood_on_the_node(cls: type, order: list[int]) -> None:
    nodes = make_nodes()
    scores = [n.score for n in nodes]
    out = cls(scorer=scorer(), replace_score=True).postprocess_nodes(nodes, query_str=QUESTION)
    assert [n.node.node_id for n in out] == [f"node-{i}" for i in order]
    assert [n.score for n in out] == [r["score"] for r in records(out)]
    assert [n.score for n in out] == [LIKELIHOODS[i] for i in order]
    own = cls(scorer=scorer(), replace_score=True, metadata_key=None).postprocess_nodes(
        nodes, query_str=QUESTION
    )
    assert all(n.node is nodes[i].node for n, i in zip(own, order, strict=True))  # the caller's
    assert [n.score for n in own] == [LIKELIHOODS[i] for i in order]  # ... rescored
    assert all(METADATA_KEY not in n.node.metadata for n in own)
    assert [n.score for n in nodes] == scores  # in new wrappers


@pytest.mark.parametrize("cls", SCORING)
def test_replace_score_is_off_by_default_and_the_query_is_needed(cls: Any) -> None:
    assert cls.model_fields["replace_score"].default is False
    with pytest.raises(ValueError, match="query"):
        cls(scorer=scorer()).postprocess_nodes(make_nodes())


def test_a_spec_string_serialises() -> None:
    reorder = PassageLikelihoodReorder(
        scorer="embedded", scorer_kwargs={"dtype": "float32"}, placement="profile",
        profile=PositionProfile((0.1, 0.9, 0.2)),
    )  # fmt: skip
    assert reorder._scorer is not None and not reorder._scorer.loaded
    data = reorder.to_dict()
    assert data["class_name"] == "RagPositionPassageLikelihoodReorder"
    assert data["scorer"] == "embedded" and data["placement"] == "profile"
    assert isinstance(data["profile"], dict)  # the profile as JSON data


def test_a_tuned_file_with_replace_score(tmp_path: Path) -> None:
    path = example_file(tmp_path, "select_and_place", {"top_n": 2})
    aware = PositionAwareRetriever(
        ListRetriever(make_nodes()), tuned=path, scorer=scorer(), metadata_key="pos",
        replace_score=True,
    )  # fmt: skip
    out = aware.retrieve(QUESTION)
    assert [n.node.node_id for n in out] == ["node-3", "node-1"]
    assert [n.score for n in out] == [n.node.metadata["pos"]["score"] for n in out]
