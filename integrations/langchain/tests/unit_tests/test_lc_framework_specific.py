"""What LangChain alone has, of the components whose behaviour is tested once for both
frameworks (``tests/test_components_*.py``): ``SelectAndPlace`` as the compressor of a
``ContextualCompressionRetriever``, the retriever's ``k`` with a tuned file, and a
profile file read into the component's ``profile`` field.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_rag_position import (
    METADATA_KEY,
    PassageLikelihoodReorder,
    PositionAwareRetriever,
    PositionProfile,
    SelectAndPlace,
)
from lc_testkit import FACTS, QUESTION, make_docs

from rag_position.testing.scripted import OnePassageScorer
from rag_position.testing.tuned import example_file

GOLD = FACTS[1][1]  # Paris
# The question's likelihood after each document alone: Paris best, Madrid next.
VALUES = {text: v for (_, text), v in zip(FACTS, [-2.0, -0.5, -3.0, -1.0, -2.5], strict=True)}


def scorer() -> OnePassageScorer:
    return OnePassageScorer(QUESTION, VALUES)


class ListRetriever(BaseRetriever):
    docs: Any

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return list(self.docs)


def test_select_and_place_is_the_base_compressor_of_a_contextual_compression_retriever() -> None:
    docs = make_docs(5)
    before = copy.deepcopy(docs)
    compressor = SelectAndPlace(scorer=scorer())
    retriever = ContextualCompressionRetriever(
        base_compressor=compressor, base_retriever=ListRetriever(docs=docs)
    )
    out = retriever.invoke(QUESTION)
    direct = compressor.compress_documents(docs, QUESTION)
    assert [(d.id, d.page_content, d.metadata) for d in out] == [
        (d.id, d.page_content, d.metadata) for d in direct
    ]
    # posteriors .49 .30 .11 .07 .04: mass 0.9 keeps four, the likeliest last
    assert [d.id for d in out] == ["id-4", "id-0", "id-3", "id-1"] and out[-1].page_content == GOLD
    asyn = asyncio.run(retriever.ainvoke(QUESTION))
    assert [(d.id, d.metadata) for d in asyn] == [(d.id, d.metadata) for d in out]
    one = ContextualCompressionRetriever(
        base_compressor=SelectAndPlace(scorer=scorer(), top_n=1),
        base_retriever=ListRetriever(docs=docs),
    ).invoke(QUESTION)
    assert [d.page_content for d in one] == [GOLD]
    assert docs == before


def test_a_tuned_retriever_keeps_the_first_k(tmp_path: Path) -> None:
    docs = make_docs(4)
    aware = PositionAwareRetriever(
        retriever=ListRetriever(docs=docs), tuned=example_file(tmp_path, "retriever"), k=3
    )
    out = aware.invoke(QUESTION)
    assert [d.id for d in out] == ["id-0", "id-1", "id-2"]
    assert [d.metadata[METADATA_KEY] for d in out] == [
        {"strategy": "retriever", "score": None, "rank": i, "original_rank": i} for i in range(3)
    ]


def test_a_profile_file_becomes_the_profile_field(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    PositionProfile((0.1, 0.9, 0.2)).save(path)
    reorder = PassageLikelihoodReorder(scorer=scorer(), placement="profile", profile=path)
    assert isinstance(reorder.profile, PositionProfile)
    assert reorder.profile.values == (0.1, 0.9, 0.2)
