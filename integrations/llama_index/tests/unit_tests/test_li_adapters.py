"""Adapters both ways, what scorer= / llm= / embed_model= accept and what every component
refuses at construction or call, with scripted models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import llama_index.postprocessor.rag_position.adapters as li_adapters
import numpy as np
import pytest
from li_testkit import (
    EchoModel,
    GenerateOnly,
    GoldAtEdgesScorer,
    ListRetriever,
    WordEmbedder,
    make_nodes,
)
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata
from llama_index.core.bridge.pydantic import Field
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from llama_index.postprocessor.rag_position import (
    ConvexScoreReorder,
    EdgeReorder,
    LikelihoodReorder,
    LlamaIndexEmbedder,
    LlamaIndexGenerator,
    MedoidVotingQueryEngine,
    PositionAwareRetriever,
    ProfileReorder,
    QuerySandwichQueryEngine,
    RagPositionEmbedding,
    RagPositionLLM,
    openai_scorer,
    resolve_embedder,
    resolve_generator,
    resolve_scorer,
)

from rag_position.errors import ModelSpecError
from rag_position.models import Embedder, Generator, Scorer
from rag_position.strategies._base import closest


class RecordingLLM(CustomLLM):
    """A LlamaIndex LLM that records the keyword arguments of each complete call."""

    reply: str = "Shakespeare wrote it. END and more"
    seen: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.seen.append({"prompt": prompt, **kwargs})
        return CompletionResponse(text=self.reply)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


class RawEmbedding(BaseEmbedding):
    """A LlamaIndex embedding returning fixed, unnormalised vectors per text."""

    table: dict[str, list[float]] = Field(default_factory=dict)

    def _get_query_embedding(self, query: str) -> list[float]:
        return [-v for v in self.table[query]]  # a question embedded unlike a text

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.table[text]


def _openai_like(**kwargs: Any) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    options = {"api_base": "http://127.0.0.1:9/v1", "model": "served", "api_key": "k"}
    return OpenAILike(**{**options, **kwargs})


LLM, R = MockLLM(), ListRetriever(make_nodes())
NOT_GENERATOR = "wraps a rag-position Generator"
# (the error, its message pattern) -> the calls that raise it
REFUSED: dict[tuple[type[Exception], str | None], list[Callable[[], Any]]] = {
    (TypeError, r"MockLLM object .* cannot score .*OpenAILike"): [
        lambda: LikelihoodReorder(scorer=LLM),
        lambda: ConvexScoreReorder(scorer=LLM),
        lambda: ProfileReorder(profile=[1.0, 0.0], scorer=LLM),
    ],
    (TypeError, "object object"): [lambda: resolve_scorer(object())],
    (TypeError, "cannot score"): [lambda: resolve_scorer(GenerateOnly())],
    (TypeError, "RagPositionLLM over GenerateOnly cannot score"): [
        lambda: resolve_scorer(RagPositionLLM(GenerateOnly()))
    ],
    (ModelSpecError, "accepted"): [lambda: resolve_scorer(""), lambda: resolve_scorer("hf:")],
    (ValueError, "scorer_kwargs"): [lambda: resolve_scorer(_openai_like(), {"model": "other"})],
    (TypeError, "not an OpenAI-compatible"): [lambda: openai_scorer(LLM)],
    (TypeError, "cannot generate"): [
        lambda: resolve_generator(GoldAtEdgesScorer(["a"], "a")),
        lambda: QuerySandwichQueryEngine(retriever=R, llm=object()),
    ],
    (ValueError, "llm_kwargs"): [lambda: resolve_generator(LLM, {"dtype": "float32"})],
    (ValueError, "unknown generation options"): [
        lambda: LlamaIndexGenerator(LLM, param_names={"top_p": "top_p"})
    ],
    (ValueError, "max_new_tokens"): [
        lambda: LlamaIndexGenerator(LLM).generate(["p"], max_new_tokens=0)
    ],
    (TypeError, "single str"): [lambda: LlamaIndexGenerator(LLM).generate("p")],
    (TypeError, "wraps a LlamaIndex LLM"): [lambda: LlamaIndexGenerator(EchoModel())],
    (TypeError, "cannot embed"): [
        lambda: resolve_embedder(LLM),
        lambda: MedoidVotingQueryEngine(retriever=R, llm=LLM, embed_model=object()),
    ],
    (ModelSpecError, None): [lambda: resolve_embedder("  "), lambda: RagPositionLLM("gpt-4")],
    (TypeError, "unsupported options"): [
        lambda: RagPositionLLM(EchoModel()).complete("hi", top_p=0.9)
    ],
    (ValueError, "not both"): [
        lambda: RagPositionLLM(EchoModel()).complete("hi", max_tokens=3, max_new_tokens=4)
    ],
    (ValueError, "max_tokens must be an int >= 1, got 0"): [  # not the default in its place
        lambda: RagPositionLLM(EchoModel()).complete("hi", max_tokens=0)
    ],
    (TypeError, NOT_GENERATOR): [
        lambda: RagPositionLLM(GoldAtEdgesScorer(["a"], "a")),
        lambda: RagPositionLLM(LLM),
    ],
    (ValueError, "load_kwargs"): [lambda: RagPositionLLM(EchoModel(), load_kwargs={"dtype": "f"})],
    (TypeError, "serialised around a model object"): [  # its dict cannot hold the object
        lambda: RagPositionLLM.from_dict(RagPositionLLM(EchoModel()).to_dict()),
        lambda: RagPositionEmbedding.from_json(RagPositionEmbedding(WordEmbedder(["a"])).to_json()),
    ],
    (TypeError, "wraps a rag-position Embedder"): [
        lambda: RagPositionEmbedding(MockEmbedding(embed_dim=3))
    ],
    (ValueError, "returned no nodes"): [
        lambda: QuerySandwichQueryEngine(retriever=ListRetriever([]), llm=LLM).query("Who?")
    ],
    (ValueError, "non-empty query"): [
        lambda: QuerySandwichQueryEngine(retriever=R, llm=LLM).query(" ")
    ],
    (ValueError, None): [lambda: MedoidVotingQueryEngine(retriever=R, llm=LLM)],  # no embed_model
    (TypeError, "needs a LlamaIndex index"): [
        lambda: QuerySandwichQueryEngine.from_index(object(), llm=LLM)
    ],
    (ValueError, "unknown strategy 'middle'"): [lambda: PositionAwareRetriever(R, "middle")],
    (ValueError, "configure the EdgeReorder"): [
        lambda: PositionAwareRetriever(R, EdgeReorder(), mode="langchain")
    ],
    (TypeError, "BaseRetriever"): [lambda: PositionAwareRetriever(object(), "edge")],
    (TypeError, "strategy"): [lambda: PositionAwareRetriever(R, 3)],
    (TypeError, "MockLLM"): [lambda: PositionAwareRetriever(R, "convex_score", scorer=LLM)],
}


@pytest.mark.parametrize(
    ("error", "match", "call"),
    [(*key, call) for key, calls in REFUSED.items() for call in calls],
    ids=[f"{key[1]}-{i}" for key, calls in REFUSED.items() for i in range(len(calls))],
)
def test_refused_with_a_message(error: type[Exception], match: str | None, call: Any) -> None:
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------------------- resolvers
def test_resolvers_take_ours_as_they_are_and_wrap_llamaindex_objects() -> None:
    model, words, scorer = EchoModel(), WordEmbedder(["paris", "france"]), GoldAtEdgesScorer([], "")
    for resolve, given, inner in (
        (resolve_scorer, scorer, scorer),
        (resolve_scorer, RagPositionLLM(model), model),  # unwrapped: one model, two roles
        (resolve_generator, model, model),
        (resolve_generator, RagPositionLLM(model), model),
        (resolve_embedder, words, words),
        (resolve_embedder, RagPositionEmbedding(words), words),
    ):
        assert resolve(given).get() is inner
    wrapped = resolve_generator(MockLLM()).get()
    assert isinstance(wrapped, LlamaIndexGenerator) and isinstance(wrapped, Generator)
    assert isinstance(EchoModel(), Scorer) and isinstance(EchoModel(), Generator)
    assert not isinstance(MockLLM(), (Scorer, Generator, Embedder))
    slot = resolve_scorer("hf:/nonexistent/model")
    assert not slot.loaded  # spec strings load on first use only
    with pytest.raises((OSError, ValueError)):
        slot.get()  # the loader's own error, unchanged
    assert not resolve_generator("embedded").loaded
    assert not resolve_embedder("embedded").loaded


def test_openai_compatible_llm_becomes_our_openai_backend_without_a_request() -> None:
    from rag_position.models.openai_backend import OpenAICompatibleModel

    llm = _openai_like(is_chat_model=True, timeout=12.0, max_retries=1)
    scorer = ConvexScoreReorder(scorer=llm).core_scorer
    assert isinstance(scorer, OpenAICompatibleModel)
    assert scorer.base_url == "http://127.0.0.1:9/v1" and scorer.name == "served"
    assert scorer.timeout == 12.0 and scorer.max_retries == 1
    assert scorer.use_chat_template is True
    assert openai_scorer(_openai_like(is_chat_model=False)).use_chat_template is False


# ---------------------------------------------------------------------------- LlamaIndex -> ours
def test_llamaindex_generator_passes_options_and_applies_stop() -> None:
    llm = RecordingLLM(seen=[])
    gen = LlamaIndexGenerator(llm)
    out = gen.generate(["p1", "p2"], max_new_tokens=7, temperature=0.5, seed=3, stop=["END"])
    assert out == ["Shakespeare wrote it. ", "Shakespeare wrote it. "]
    assert [s["prompt"] for s in llm.seen] == ["p1", "p2"]
    expected = {"max_tokens": 7, "temperature": 0.5, "seed": 3, "stop": ["END"]}
    assert {k: v for k, v in llm.seen[0].items() if k != "prompt"} == expected
    llm.seen.clear()
    quiet = LlamaIndexGenerator(llm, param_names={"seed": None, "max_new_tokens": "num_predict"})
    assert quiet.generate(["p"], max_new_tokens=5, seed=1) == [llm.reply]
    expected = {"num_predict": 5, "temperature": 0.0}
    assert {k: v for k, v in llm.seen[0].items() if k != "prompt"} == expected
    assert LlamaIndexGenerator(MockLLM()).generate(["Say hi"], max_new_tokens=4) == ["Say hi"]
    assert LlamaIndexGenerator(MockLLM(max_tokens=3)).generate(["x"]) == ["text text text"]


def test_llamaindex_embedder_normalises_rows() -> None:
    emb = RawEmbedding(table={"a": [3.0, 4.0], "b": [0.0, -2.0], "z": [0.0, 0.0]})
    ours = LlamaIndexEmbedder(emb)
    assert isinstance(ours, Embedder)
    rows = ours.embed(["a", "b"])
    assert rows.dtype == np.float32 and rows.shape == (2, 2)
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, -1.0]], atol=1e-6)
    assert ours.embed([]).shape[0] == 0
    assert closest(ours, "b", ["a", "b"]) == [0, 1]  # the question by get_query_embedding
    with pytest.raises(ValueError, match=r"zero or non-finite embedding for text\(s\) \[1\]"):
        ours.embed(["a", "z"])
    assert isinstance(resolve_embedder(emb).get(), LlamaIndexEmbedder)


# ---------------------------------------------------------------------------- ours -> LlamaIndex
def test_rag_position_llm_honours_generation_options() -> None:
    model = EchoModel(["first", "second", "third END tail"])
    llm = RagPositionLLM(model, max_new_tokens=9, temperature=0.0, seed=5)
    assert llm.metadata.context_window == 1234 and llm.metadata.num_output == 9
    assert llm.metadata.model_name == "echo-model" and not llm.metadata.is_chat_model
    assert llm.complete("hello").text == "first"
    assert model.calls[-1] == {"max_new_tokens": 9, "temperature": 0.0, "seed": 5, "stop": None}
    assert llm.complete("hello", max_tokens=3, temperature=0.7, seed=1).text == "second"
    assert model.calls[-1] == {"max_new_tokens": 3, "temperature": 0.7, "seed": 1, "stop": None}
    chunks = list(llm.stream_complete("hello", stop="END"))
    assert [c.text for c in chunks] == ["third END tail"]  # EchoModel ignores stop itself
    assert model.calls[-1]["stop"] == ["END"]
    assert llm.to_dict()["model_name"] == "echo-model"


def test_a_spec_llm_serialises_no_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(li_adapters, "load_model", lambda spec, **kwargs: EchoModel())
    llm = RagPositionLLM("embedded", load_kwargs={"api_key": "sk-SECRET", "device": object()})
    text = llm.to_json()  # a value that is not JSON as its repr, a credential left out
    assert "SECRET" not in text and "<object object" in text and llm.spec == "embedded"


def test_rag_position_embedding_wraps_an_embedder() -> None:
    embed_model = RagPositionEmbedding(WordEmbedder(["paris", "france", "hamlet"]))
    v = embed_model.get_text_embedding("Paris France")
    q = embed_model.get_query_embedding("Hamlet")
    assert len(v) == len(q) == 4
    assert np.isclose(np.linalg.norm(v), 1.0)
    assert embed_model.get_text_embedding_batch(["Paris", "Hamlet"])[1] == q
    asked = LlamaIndexEmbedder(RawEmbedding(table={"a": [3.0, 4.0]}))  # embed_query of its own
    assert RagPositionEmbedding(asked).get_query_embedding("a") == pytest.approx([-0.6, -0.8])
