"""Many pipeline calls at once (``ainvoke``, ``aretrieve``, ``aquery`` in a web service).

Every call made while 17 others are in flight returns exactly what it returns alone (the
double answers one request at a time), its metered cost its own, the shared inputs unchanged.
The correctness half of ``benchmarks/load.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever as LCBaseRetriever
from langchain_rag_position import PositionAwareRetriever as LCRetriever
from llama_index.core.base.base_retriever import BaseRetriever as LIBaseRetriever
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.rag_position import PositionAwareRetriever as LIRetriever

from rag_position.cost import metered
from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.testing.openai_double import serve
from rag_position.testing.tiny_model import tiny_random_model

pytestmark = pytest.mark.slow

QUERIES = 6  # distinct questions, each with its own 3 passages
REPEATS = 3  # each asked this often at once: 18 calls in flight
Call = Callable[[int], Awaitable[dict[str, Any]]]


@pytest.fixture(scope="module")
def spec() -> Iterator[str]:
    """The double over a tiny random-weight model, as ``benchmarks/load.py`` serves it:
    what is checked is the client keeping calls apart, not the model (the embedded
    model's scores through the same backend: tests/test_openai_backend.py, and through
    vLLM: tests/test_vllm_server.py). The embedded model took 100 s for these three tests."""
    with serve(tiny_random_model(seed=0)) as srv:
        yield f"openai:{srv.url}/{srv.model_name}"


@pytest.fixture(scope="module")
def corpus() -> tuple[list[str], list[list[tuple[str, str]]]]:
    """The first QUERIES questions, each with its gold passage and the next two's (title, text
    cut to 40 words)."""
    records = load_qa(default_data_dir() / ORACLE_FILE, limit=QUERIES + 2)
    gold = [(r.passages[0].title, " ".join(r.passages[0].text.split()[:40])) for r in records]
    return [r.question for r in records[:QUERIES]], [gold[i : i + 3] for i in range(QUERIES)]


def _langchain(spec: str, corpus: Any) -> tuple[Call, dict[str, Any]]:
    questions, passages = corpus
    shared = {
        q: [
            Document(page_content=text, metadata={"title": title, "n": j}, id=f"d{i}-{j}")
            for j, (title, text) in enumerate(passages[i])
        ]
        for i, q in enumerate(questions)
    }

    class Fixed(LCBaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return list(shared[query])

        async def _aget_relevant_documents(
            self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
        ) -> list[Document]:
            return list(shared[query])

    retriever = LCRetriever(
        retriever=Fixed(),
        strategy="passage_likelihood",
        scorer=spec,
        strategy_options={"scorer_kwargs": {"chat_template": False}},
    )

    async def call(q: int) -> dict[str, Any]:
        with metered() as tally:
            docs = await retriever.ainvoke(questions[q])
        return {
            "ids": [d.id for d in docs],
            "texts": [d.page_content for d in docs],
            "metadata": [d.metadata for d in docs],
            "cost": (tally.total.lm_calls, tally.total.prompt_tokens),
        }

    return call, shared


def _llama_index(spec: str, corpus: Any, query: bool) -> tuple[Call, dict[str, Any]]:
    questions, passages = corpus
    shared = {
        q: [
            TextNode(text=text, id_=f"n{i}-{j}", metadata={"title": title, "n": j})
            for j, (title, text) in enumerate(passages[i])
        ]
        for i, q in enumerate(questions)
    }

    class Fixed(LIBaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            nodes = shared[query_bundle.query_str]
            return [NodeWithScore(node=n, score=1.0 - 0.1 * j) for j, n in enumerate(nodes)]

    retriever = LIRetriever(
        Fixed(), "passage_likelihood", scorer=spec, scorer_kwargs={"chat_template": False}
    )
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=4))

    async def call(q: int) -> dict[str, Any]:
        with metered() as tally:
            if query:
                nodes = (await engine.aquery(questions[q])).source_nodes
            else:
                nodes = await retriever.aretrieve(questions[q])
        return {
            "ids": [n.node.node_id for n in nodes],
            "texts": [n.node.get_content() for n in nodes],
            "metadata": [dict(n.node.metadata) for n in nodes],
            "scores": [n.score for n in nodes],
            "cost": (tally.total.lm_calls, tally.total.prompt_tokens),
        }

    return call, shared


def _state(shared: dict[str, Any]) -> str:
    """Every shared document or node, all its fields."""
    return json.dumps(shared, default=lambda item: item.model_dump(), sort_keys=True)


def _check_overlapping_calls(call: Call, shared: dict[str, Any]) -> None:
    before = _state(shared)

    async def alone() -> list[dict[str, Any]]:
        return [await call(q) for q in range(QUERIES)]

    async def at_once() -> list[dict[str, Any]]:
        order = [q for _ in range(REPEATS) for q in range(QUERIES)]
        return list(await asyncio.gather(*(call(q) for q in order)))

    reference = asyncio.run(alone())
    assert all(r["cost"][0] == 3 and r["cost"][1] > 0 for r in reference)  # 3 passages scored
    assert len({json.dumps(r["ids"]) for r in reference}) == QUERIES  # each its own passages
    overlapped = asyncio.run(at_once())
    for i, got in enumerate(overlapped):
        assert got == reference[i % QUERIES], f"call {i} (question {i % QUERIES})"
    assert _state(shared) == before  # no shared document or node was written on


def test_langchain_ainvoke_calls_at_once_get_their_own_results(spec: str, corpus: Any) -> None:
    _check_overlapping_calls(*_langchain(spec, corpus))


@pytest.mark.parametrize("query", [False, True], ids=["aretrieve", "aquery"])
def test_llama_index_calls_at_once_get_their_own_results(
    spec: str, corpus: Any, query: bool
) -> None:
    _check_overlapping_calls(*_llama_index(spec, corpus, query))


def test_the_load_benchmarks_double_starts_and_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split out of ``benchmarks/load.py``, the double's child ran a module without its
    entry point: it exited at once and every ``--quick`` run failed before its first call."""
    import importlib.util
    import sys
    from pathlib import Path

    import httpx

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "load_support.py"
    found = importlib.util.spec_from_file_location("load_support", path)
    assert found is not None and found.loader is not None
    support = importlib.util.module_from_spec(found)
    monkeypatch.setitem(sys.modules, "load_support", support)  # its dataclasses look it up
    found.loader.exec_module(support)
    double = support.DoubleProcess("tiny", 0).start(timeout=120)
    try:
        assert double.spec.startswith("openai:http://127.0.0.1:")
        reply = httpx.get(f"{double.url}/models", timeout=30).json()
        assert [entry["id"] for entry in reply["data"]] == [double.name]
    finally:
        double.stop()
