"""Test helpers of langchain-rag-position (on sys.path through tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from rag_position.models import SpanScore

SUITE_MARKS = [
    pytest.mark.asyncio,  # the standard suites' async tests are unmarked; pytest-asyncio is strict
    pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning"),
]
"""The marks every langchain-tests standard suite class here carries (``slow`` added
where it runs the embedded model)."""

FACTS = [
    ("Lyon", "Lyon is a large city in France, known for its cuisine."),
    ("Paris", "Paris is the capital of France."),
    ("Berlin", "Berlin is the capital of Germany."),
    ("Madrid", "Madrid is the capital of Spain."),
    ("Rome", "Rome is the capital of Italy."),
]
QUESTION = "What is the capital of France?"


def make_docs(n: int = 5) -> list[Document]:
    """``n`` Documents with titles, ids, nested metadata and a descending retriever score."""
    return [
        Document(
            page_content=FACTS[i % len(FACTS)][1],
            metadata={
                "title": FACTS[i % len(FACTS)][0],
                "source": f"doc-{i}",
                "tags": ["geo", str(i)],
                "relevance_score": 1.0 - i / 10,
            },
            id=f"id-{i}",
        )
        for i in range(n)
    ]


class ListRetriever(BaseRetriever):
    """Returns its documents, the very list, as a vector store might."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return self.docs


class GoldScorer:
    """A scripted Scorer: 0 with ``gold`` in the first or last ``Document [i]`` slot,
    -1 - 0.01 * slot elsewhere, -2 without it. Records the prompts it scored."""

    def __init__(self, gold: str) -> None:
        self.gold = gold
        self.prompts: list[str] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[SpanScore]:
        out = []
        for prompt in prompts:
            self.prompts.append(prompt)
            slots = [line for line in prompt.split("\n") if line.startswith("Document [")]
            where = next((i for i, line in enumerate(slots) if self.gold in line), None)
            if where is None:
                value = -2.0
            else:
                value = 0.0 if where in (0, len(slots) - 1) else -1.0 - 0.01 * where
            out.append(SpanScore(value, value, 1))
        return out


class RecordingGenerator:
    """A scripted rag-position Generator that records its calls (prompts and options)."""

    def __init__(self, reply: str = "Paris") -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []
        self.name = "recording"

    def generate(self, prompts: Sequence[str], **options: Any) -> list[str]:
        self.calls.append({"prompts": list(prompts), **options})
        return [self.reply for _ in prompts]
