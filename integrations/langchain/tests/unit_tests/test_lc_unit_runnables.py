"""Runnables and ChatRagPosition on scripted models, inside LCEL chains (FakeListChatModel)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompt_values import ChatPromptValue, StringPromptValue
from langchain_core.runnables import ConfigurableField, RunnableLambda, RunnablePassthrough
from langchain_rag_position import (
    ChatRagPosition,
    FactRewriter,
    MedoidVoting,
    QuerySandwich,
    ReciteThenSolve,
)
from langchain_rag_position._adapters import to_passage
from lc_testkit import QUESTION, RecordingGenerator, make_docs

import rag_position.models
from rag_position.prompts import render_qa
from rag_position.strategies import StrategyError, sandwich_prompt


# ---------------------------------------------------------------------- sandwich
def test_query_sandwich_in_a_chain() -> None:
    docs = make_docs(3)
    seen: list[Any] = []
    llm = FakeListChatModel(responses=["Paris"])
    spy = RunnableLambda(lambda p: seen.append(p) or p)
    chain = (
        {"documents": RunnableLambda(lambda _q: list(docs)), "question": RunnablePassthrough()}
        | QuerySandwich()
        | spy
        | llm
        | StrOutputParser()
    )
    assert chain.invoke(QUESTION) == "Paris"
    (prompt,) = seen
    assert isinstance(prompt, ChatPromptValue) and len(prompt.messages) == 1
    text = prompt.messages[0].content
    assert text == sandwich_prompt(QUESTION, [to_passage(d) for d in docs], chat=True)
    assert text.count(f"Question: {QUESTION}") == 2
    assert text.index("Document [1](Title: Lyon)") < text.index("Document [3](Title: Berlin)")


def test_query_sandwich_string_prompt_and_context() -> None:
    docs = make_docs(2)
    value = QuerySandwich(chat=False).invoke({"question": QUESTION, "documents": docs})
    assert isinstance(value, StringPromptValue)
    assert value.text == render_qa(QUESTION, [to_passage(d) for d in docs], query_aware=True)
    assert value.text.endswith("Answer:")
    ctx = QuerySandwich().invoke({"question": QUESTION, "context": "Paris is big."})
    assert ctx.to_string().count(QUESTION) == 2 and "Paris is big." in ctx.to_string()
    custom = QuerySandwich(template="Q: {question}\n{search_results}\nQ: {question}")
    assert custom.invoke({"question": "q?", "documents": ["a"]}).to_string().startswith("Human: Q:")
    with pytest.raises(ValueError, match="search_results"):
        QuerySandwich(template="{question}")
    batch = QuerySandwich().batch([{"question": "a?", "documents": docs}] * 2)
    assert len(batch) == 2 and batch[0] == batch[1]
    assert asyncio.run(QuerySandwich().ainvoke({"question": "a?", "documents": docs})) == batch[0]


# ---------------------------------------------------------------------- recite
def test_recite_then_solve_recites_or_falls_back_sync_and_async() -> None:
    docs = make_docs(3)
    llm = FakeListChatModel(responses=["# Document 2\nParis is the capital of France.", "Paris"])
    out = ReciteThenSolve(llm=llm).invoke({"question": QUESTION, "documents": docs})
    assert out["answer"] == "Paris"
    assert [d is docs[1] for d in out["recited"]] == [True]  # the caller's Document
    assert out["documents"] == docs and out["documents"][0] is docs[0]
    assert out["trace"].outcome == "recited" and out["trace"].blocks[0].status == "kept"
    assert out["trace"].answer_prompt == render_qa(QUESTION, [to_passage(docs[1])])
    two = {"question": QUESTION, "documents": docs[:2]}
    runnable = ReciteThenSolve(llm=FakeListChatModel(responses=["nothing relevant", "dunno"]))
    out = runnable.invoke(two)
    assert out["trace"].outcome == "fell_back" and out["recited"] == []
    again = ReciteThenSolve(llm=FakeListChatModel(responses=["nothing relevant", "dunno"]))
    aout = asyncio.run(again.ainvoke(two))
    assert (aout["answer"], aout["trace"]) == (out["answer"], out["trace"])


def test_strategy_errors_propagate_with_trace() -> None:
    class Broken(RecordingGenerator):
        def generate(self, prompts: Any, **kwargs: Any) -> list[str]:
            raise RuntimeError("model down")

    with pytest.raises(StrategyError, match="model down") as info:
        ReciteThenSolve(llm=Broken()).invoke({"question": QUESTION, "documents": make_docs(2)})
    assert info.value.trace is not None


# ---------------------------------------------------------------------- FACT
def test_fact_rewriter_collects_facts_in_passes() -> None:
    docs = make_docs(3)
    llm = FakeListChatModel(
        responses=[
            "- Paris is the capital of France.",
            "- Berlin is the capital of Germany.\n- Tokyo is the capital of Mars.",
            "- Paris is the capital of France.",
            "Paris",
        ]
    )
    out = FactRewriter(llm=llm, max_iterations=4).invoke({"question": QUESTION, "documents": docs})
    assert out["facts"] == ["Paris is the capital of France.", "Berlin is the capital of Germany."]
    assert out["answer"] == "Paris"
    trace = out["trace"]
    assert trace.stopped_because == "nothing_new" and trace.hallucinations == 1
    assert out["documents"] == docs


def test_fact_rewriter_with_embeddings_retrieve() -> None:
    llm = FakeListChatModel(responses=["answer"])
    runnable = FactRewriter(
        llm=llm, embeddings=DeterministicFakeEmbedding(size=32), top_k=1, max_iterations=2
    )
    out = runnable.invoke({"question": QUESTION, "context": "One fact. Two facts. Three facts."})
    assert len(out["facts"]) == 2 and out["answer"] == "answer"
    assert all(f in "One fact. Two facts. Three facts." for f in out["facts"])


# ---------------------------------------------------------------------- medoid
def test_medoid_voting_picks_the_central_answer_and_forwards_settings() -> None:
    docs = make_docs(3)
    llm = FakeListChatModel(responses=["Paris", "Paris", "Lyon", "I don't know"])
    emb = DeterministicFakeEmbedding(size=64)  # equal texts, equal vectors
    out = MedoidVoting(llm=llm, embeddings=emb, n_orders=4, max_concurrency=1).invoke(
        {"question": QUESTION, "documents": docs}
    )
    assert out["answers"] == ["Paris", "Paris", "Lyon", "I don't know"]
    assert out["answer"] == "Paris" and out["trace"].absent == [3]
    assert out["orders"][0] == [0, 1, 2] and len({tuple(o) for o in out["orders"]}) == 4
    with pytest.raises(TypeError, match="list"):
        MedoidVoting(llm=llm, embeddings=emb).invoke({"question": QUESTION, "context": "x"})
    gen = RecordingGenerator("- Paris is the capital of France.")
    MedoidVoting(llm=gen, embeddings=DeterministicFakeEmbedding(size=8), n_orders=2, seed=5,
                 temperature=0.3, max_new_tokens=7).invoke(
        {"question": QUESTION, "documents": make_docs(2)}
    )  # fmt: skip
    assert gen.calls[-1]["max_new_tokens"] == 7 and gen.calls[-1]["seed"] == 5
    assert gen.calls[-1]["temperature"] == 0.3 and len(gen.calls[-1]["prompts"]) == 2


# ---------------------------------------------------------------------- ChatRagPosition
def test_chat_rag_position_loads_a_spec_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []
    monkeypatch.setattr(
        rag_position.models,
        "load_model",
        lambda spec, **_: loads.append(spec) or RecordingGenerator(),
    )
    chat = ChatRagPosition(model="embedded", model_kwargs={"dtype": "x"})  # x: no real one
    configured = chat.configurable_fields(temperature=ConfigurableField(id="temperature"))
    for t in (0.0, 0.5):  # LangChain builds a new ChatRagPosition for each
        configured.invoke("q", config={"configurable": {"temperature": t}})
    assert chat.invoke("q").content == "Paris" and loads == ["embedded"]
    ChatRagPosition(model="embedded", model_kwargs={"dtype": "y"}).invoke("q")
    assert loads == ["embedded"] * 2  # other load keywords, another model


def test_chat_rag_position_over_a_scripted_generator() -> None:
    gen = RecordingGenerator("Paris. And more")
    chat = ChatRagPosition(model=gen, max_tokens=9, temperature=0.5, seed=2, stop=["."])
    reply = chat.invoke("Capital of France?")
    assert isinstance(reply, AIMessage) and reply.content == "Paris"
    call = gen.calls[-1]
    assert call["prompts"] == ["Capital of France?"]
    assert (call["max_new_tokens"], call["temperature"], call["seed"]) == (9, 0.5, 2)
    chat.invoke("q", stop=["And"], max_tokens=3)
    assert gen.calls[-1]["stop"] == ["And"] and gen.calls[-1]["max_new_tokens"] == 3
    chat.invoke("q", max_tokens=None, temperature=None)  # None: the model's own
    assert (gen.calls[-1]["max_new_tokens"], gen.calls[-1]["temperature"]) == (9, 0.5)
    plain, secret = ChatRagPosition(model=gen), {"api_key": "sk-SECRET"}  # the cache key:
    assert plain._get_llm_string() != ChatRagPosition(model=gen, stop=["."])._get_llm_string()
    assert "SECRET" not in ChatRagPosition(model_kwargs=secret)._get_llm_string()
    chunks = list(chat.stream("q"))
    assert len(chunks) == 1 and chunks[0].chunk_position == "last"
    with pytest.raises(ValueError, match="one human message"):
        chat.invoke([SystemMessage("be brief"), HumanMessage("q")])
    assert chat._get_ls_params()["ls_model_name"] == "recording"
    lazy = ChatRagPosition(model="embedded", timeout=60, max_retries=2)  # standard params
    assert not lazy.is_loaded


def test_instances_over_one_local_model_take_turns() -> None:
    class TransformersModel(RecordingGenerator):  # the local backend's name: one call at a time
        running = peak = 0

        def generate(self, prompts: Sequence[str], **options: Any) -> list[str]:
            kind = type(self)
            kind.running += 1
            kind.peak = max(kind.peak, kind.running)
            time.sleep(0.05)
            kind.running -= 1
            return super().generate(prompts, **options)

    model = TransformersModel()
    chats = [ChatRagPosition(model=model, temperature=0.5) for _ in range(2)]
    chats += [chats[0].model_copy(update={"temperature": t}) for t in (0.0, 0.7)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda chat: chat.invoke("q"), chats))
    assert TransformersModel.peak == 1
