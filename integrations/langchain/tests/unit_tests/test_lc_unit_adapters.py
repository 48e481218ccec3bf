"""Argument adapters: scorer / llm / embeddings resolution, errors at construction, lazy loads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.language_models import FakeListChatModel, FakeListLLM
from langchain_openai import ChatOpenAI, OpenAI
from langchain_rag_position import (
    ChatRagPosition,
    ConvexScoreReorder,
    FactRewriter,
    LangChainEmbedder,
    LangChainGenerator,
    LikelihoodReorder,
    MedoidVoting,
    RagPositionEmbeddings,
    ReciteThenSolve,
    _adapters,
)
from lc_testkit import GoldScorer, RecordingGenerator
from pydantic import Field

from rag_position.errors import ModelSpecError
from rag_position.models.openai_backend import OpenAICompatibleModel


class FieldsChatModel(FakeListChatModel):
    """A fake chat model with the usual generation fields, recording what it ran with."""

    max_tokens: int | None = None
    temperature: float | None = 0.7
    seed: int | None = None
    seen: list[tuple[Any, Any, Any]] = Field(default_factory=list)

    def _call(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> str:
        self.seen.append((self.max_tokens, self.temperature, self.seed))
        return super()._call(messages, stop=stop, run_manager=run_manager, **kw)


CHAT, LLM = FakeListChatModel(responses=["a"]), FakeListLLM(responses=["a"])
EMB, DTYPE = DeterministicFakeEmbedding(size=4), {"dtype": "float32"}
# class -> (options, the error, its message pattern), all refused at construction
REFUSED: dict[type, list[tuple[dict[str, Any], type[Exception], str]]] = {
    ConvexScoreReorder: [
        ({"scorer": CHAT}, TypeError, "FakeListChatModel object cannot score"),
        ({"scorer": 3}, TypeError, "int object cannot score"),
        ({}, ValueError, "`scorer` is required"),
        ({"scorer": "embeded"}, ValueError, "unknown model spec 'embeded'"),
        ({"scorer": ChatOpenAI(model="gpt-4o-mini", api_key="x")}, ValueError, "hosted API"),
        ({"scorer": GoldScorer("x"), "scorer_kwargs": DTYPE}, ValueError, "scorer_kwargs"),
        ({"scorer": ChatRagPosition(model=RecordingGenerator())}, TypeError, "cannot score"),
    ],
    LikelihoodReorder: [({"scorer": LLM}, TypeError, "FakeListLLM object cannot score")],
    ReciteThenSolve: [({"llm": object()}, TypeError, "cannot generate")],
    FactRewriter: [
        ({"llm": "gpt-4"}, ValueError, "unknown model spec"),
        ({"llm": CHAT, "llm_kwargs": DTYPE}, ValueError, "llm_kwargs"),
    ],
    MedoidVoting: [({"llm": CHAT, "embeddings": 42}, TypeError, "cannot embed")],
    RagPositionEmbeddings: [({"embedder": EMB}, TypeError, "wraps a rag-position embedder")],
    ChatRagPosition: [
        ({"model": "smollm"}, ValueError, "unknown model spec"),
        ({"model": CHAT}, TypeError, "wraps a rag-position model"),
        ({"model": RecordingGenerator(), "model_kwargs": DTYPE}, ValueError, "model_kwargs"),
    ],
}


@pytest.mark.parametrize(
    ("cls", "options", "error", "match"),
    [(cls, *row) for cls, rows in REFUSED.items() for row in rows],
    ids=[f"{cls.__name__}-{i}" for cls, rows in REFUSED.items() for i in range(len(rows))],
)
def test_refused_at_construction(
    cls: type, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        cls(**options)


def test_openai_compatible_models_become_our_backend() -> None:
    chat = ChatOpenAI(
        base_url="http://127.0.0.1:9/v1", model="served", api_key="k", timeout=7, max_retries=1
    )
    scorer = ConvexScoreReorder(scorer=chat).core_scorer
    assert isinstance(scorer, OpenAICompatibleModel)
    assert (scorer.base_url, scorer.name, scorer.timeout, scorer.max_retries) == (
        "http://127.0.0.1:9/v1", "served", 7.0, 1,
    )  # fmt: skip
    assert scorer._http.api_key == "k"
    llm = OpenAI(base_url="http://127.0.0.1:9/v1", model="served", api_key="k")
    assert isinstance(LikelihoodReorder(scorer=llm).core_scorer, OpenAICompatibleModel)


def test_spec_strings_load_lazily_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def fake_load(spec: str, **kwargs: Any) -> GoldScorer:
        calls.append((spec, kwargs))
        return GoldScorer("x")

    monkeypatch.setattr("rag_position.models.load_model", fake_load)
    comp = ConvexScoreReorder(scorer="hf:/models/x", scorer_kwargs={"dtype": "float32"})
    assert calls == []  # nothing loaded at construction
    first = comp.core_scorer
    assert comp.core_scorer is first and calls == [("hf:/models/x", {"dtype": "float32"})]
    chat = ChatRagPosition(model="embedded")  # as a scorer: shares its model
    comp = ConvexScoreReorder(scorer=chat)
    assert len(calls) == 1
    assert comp.core_scorer is chat.core_model and [c[0] for c in calls[1:]] == ["embedded"]
    monkeypatch.setattr("rag_position.models.load_model", lambda spec, **kw: RecordingGenerator())
    with pytest.raises(TypeError, match="cannot score spans"):
        ConvexScoreReorder(scorer="embedded").core_scorer  # noqa: B018


# ---------------------------------------------------------------------- generator
def test_generator_resolution() -> None:
    ours = RecordingGenerator()
    assert ReciteThenSolve(llm=ours).core_generator is ours
    fake = FakeListChatModel(responses=["a"])
    adapted = ReciteThenSolve(llm=fake).core_generator
    assert isinstance(adapted, LangChainGenerator) and adapted.llm is fake  # not its generate()
    assert ReciteThenSolve(llm=ChatRagPosition(model=ours)).core_generator is ours
    bound = FakeListChatModel(responses=["Paris. x"]).bind(stop=["."])  # forwards getattr
    via_binding = ReciteThenSolve(llm=bound).core_generator
    assert isinstance(via_binding, LangChainGenerator)
    assert via_binding.generate(["q"], stop=["."]) == ["Paris"]


WRAPS = [lambda m: m, lambda m: m.bind(foo=1).with_retry(), lambda m: m.with_fallbacks([m])]


@pytest.mark.parametrize("wrap", WRAPS)  # a wrapper's model is the one copied
def test_langchain_generator_sets_fields_on_a_copy_and_stops(wrap: Callable[..., Any]) -> None:
    model = FieldsChatModel(responses=["Paris. Then more", "Rome"])
    gen = LangChainGenerator(wrap(model), max_concurrency=1)
    out = gen.generate(["q1", "q2"], max_new_tokens=5, temperature=0.0, seed=3, stop=["."])
    assert out == ["Paris", "Rome"]
    assert model.seen == [(5, 0.0, 3), (5, 0.0, 3)]
    assert (model.max_tokens, model.temperature, model.seed) == (None, 0.7, None)  # untouched
    assert gen.generate([]) == []
    with pytest.raises(ValueError, match="max_new_tokens"):
        gen.generate(["q"], max_new_tokens=0)
    llm = LangChainGenerator(FakeListLLM(responses=["one\nDocument", "two"]))  # a string LLM
    assert llm.generate(["a", "b"], stop=["\nDocument"]) == ["one", "two"]


# ---------------------------------------------------------------------- embedder
class RawEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[3.0, 4.0] if t else [0.0, 0.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [-4.0, -3.0]  # a question embedded unlike a document


def test_embedders_both_ways() -> None:
    rows = LangChainEmbedder(RawEmbeddings()).embed(["a", "b"])
    assert rows.dtype == np.float32
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.6, 0.8]], rtol=1e-6)
    np.testing.assert_allclose(LangChainEmbedder(RawEmbeddings()).embed_query("a"), [-0.8, -0.6])
    wrapped = RagPositionEmbeddings(embedder=LangChainEmbedder(RawEmbeddings()))  # its own
    assert wrapped.embed_query("a") == pytest.approx([-0.8, -0.6])
    with pytest.raises(ValueError, match="zero"):
        LangChainEmbedder(RawEmbeddings()).embed(["a", ""])
    fake = LangChainEmbedder(DeterministicFakeEmbedding(size=16)).embed(["x", "y"])
    np.testing.assert_allclose(np.linalg.norm(fake, axis=1), 1.0, rtol=1e-5)
    assert RagPositionEmbeddings().embed_documents([]) == []  # nothing loaded for nothing


# ---------------------------------------------------------------------- inputs
def test_read_input_errors() -> None:
    read = _adapters.read_input
    with pytest.raises(TypeError, match="takes a dict"):
        read("question", "X")
    with pytest.raises(ValueError, match="'question'"):
        read({"question": " ", "documents": ["a"]}, "X")
    with pytest.raises(ValueError, match="exactly one"):
        read({"question": "q", "documents": ["a"], "context": "c"}, "X")
    with pytest.raises(ValueError, match="exactly one"):
        read({"question": "q"}, "X")
    with pytest.raises(ValueError, match="empty"):
        read({"question": "q", "documents": []}, "X")
    with pytest.raises(TypeError, match=r"documents\[0\] is a int"):
        read({"question": "q", "documents": [1]}, "X")
    q, docs, ctx = read({"question": "q", "context": "some text"}, "X")
    assert (q, docs, ctx) == ("q", None, "some text")


def test_spec_check() -> None:
    for good in ("embedded", "hf:/x", "openai:http://127.0.0.1:1/v1"):
        _adapters.check_spec(good, "scorer")
    for bad in ("", "hf:", "openai:", "gpt-4"):
        with pytest.raises(ModelSpecError):
            _adapters.check_spec(bad, "scorer")
