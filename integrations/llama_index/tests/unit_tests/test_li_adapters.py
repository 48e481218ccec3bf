"""Adapters both ways, and what scorer= / llm= / embed_model= accept, with scripted models."""

from __future__ import annotations

from typing import Any

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
    LikelihoodReorder,
    LlamaIndexEmbedder,
    LlamaIndexGenerator,
    MedoidVotingQueryEngine,
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
        return self.table[query]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self.table[query]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.table[text]


# ---------------------------------------------------------------------------- scorer=
def test_what_cannot_score_says_so_at_construction() -> None:
    for cls, extra in (
        (LikelihoodReorder, {}),
        (ConvexScoreReorder, {}),
        (ProfileReorder, {"profile": [1.0, 0.0]}),
    ):
        with pytest.raises(TypeError, match=r"MockLLM object .* cannot score .*OpenAILike"):
            cls(scorer=MockLLM(), **extra)
    with pytest.raises(TypeError, match="object object"):
        resolve_scorer(object())
    with pytest.raises(TypeError, match="cannot score"):
        resolve_scorer(GenerateOnly())
    with pytest.raises(TypeError, match="RagPositionLLM over GenerateOnly cannot score"):
        resolve_scorer(RagPositionLLM(GenerateOnly()))
    with pytest.raises(ModelSpecError, match="accepted"):
        resolve_scorer("")
    with pytest.raises(ModelSpecError, match="accepted"):
        resolve_scorer("hf:")


def test_spec_strings_load_on_first_use_only() -> None:
    slot = resolve_scorer("hf:/nonexistent/model")
    assert not slot.loaded  # nothing loaded at construction
    with pytest.raises((OSError, ValueError)):
        slot.get()  # the loader's own error, unchanged
    assert not resolve_generator("embedded").loaded
    assert not resolve_embedder("embedded").loaded


def test_scorer_objects_are_used_as_they_are() -> None:
    scorer = GoldAtEdgesScorer(["a"], "a")
    assert resolve_scorer(scorer).get() is scorer
    model = EchoModel()
    assert resolve_scorer(RagPositionLLM(model)).get() is model  # unwrapped: one model, two roles
    with pytest.raises(ValueError, match="scorer_kwargs"):
        resolve_scorer(_openai_like(), {"model": "other"})
    assert isinstance(EchoModel(), Scorer) and isinstance(EchoModel(), Generator)
    assert not isinstance(MockLLM(), (Scorer, Generator, Embedder))


def _openai_like(**kwargs: Any) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    options = {"api_base": "http://127.0.0.1:9/v1", "model": "served", "api_key": "k"}
    return OpenAILike(**{**options, **kwargs})


def test_openai_compatible_llm_becomes_our_openai_backend_without_a_request() -> None:
    from rag_position.models.openai_backend import OpenAICompatibleModel

    llm = _openai_like(is_chat_model=True, timeout=12.0, max_retries=1)
    scorer = ConvexScoreReorder(scorer=llm).core_scorer
    assert isinstance(scorer, OpenAICompatibleModel)
    assert scorer.base_url == "http://127.0.0.1:9/v1" and scorer.name == "served"
    assert scorer.timeout == 12.0 and scorer.max_retries == 1
    assert scorer.use_chat_template is True
    assert openai_scorer(_openai_like(is_chat_model=False)).use_chat_template is False
    with pytest.raises(TypeError, match="not an OpenAI-compatible"):
        openai_scorer(MockLLM())


# ---------------------------------------------------------------------------- llm=
def test_resolve_generator_accepts_llms_specs_and_generators() -> None:
    model = EchoModel()
    assert resolve_generator(model).get() is model
    assert resolve_generator(RagPositionLLM(model)).get() is model
    wrapped = resolve_generator(MockLLM()).get()
    assert isinstance(wrapped, LlamaIndexGenerator) and isinstance(wrapped, Generator)
    with pytest.raises(TypeError, match="cannot generate"):
        resolve_generator(GoldAtEdgesScorer(["a"], "a"))
    with pytest.raises(TypeError, match="cannot generate"):
        QuerySandwichQueryEngine(retriever=ListRetriever(make_nodes()), llm=object())
    with pytest.raises(ValueError, match="llm_kwargs"):
        resolve_generator(MockLLM(), {"dtype": "float32"})


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
    assert {k: v for k, v in llm.seen[0].items() if k != "prompt"} == {
        "num_predict": 5,
        "temperature": 0.0,
    }
    with pytest.raises(ValueError, match="unknown generation options"):
        LlamaIndexGenerator(llm, param_names={"top_p": "top_p"})
    with pytest.raises(ValueError, match="max_new_tokens"):
        gen.generate(["p"], max_new_tokens=0)
    with pytest.raises(TypeError, match="single str"):
        gen.generate("p")
    with pytest.raises(TypeError, match="wraps a LlamaIndex LLM"):
        LlamaIndexGenerator(EchoModel())  # type: ignore[arg-type]
    assert LlamaIndexGenerator(MockLLM()).generate(["Say hi"], max_new_tokens=4) == ["Say hi"]
    assert LlamaIndexGenerator(MockLLM(max_tokens=3)).generate(["x"]) == ["text text text"]


# ---------------------------------------------------------------------------- embed_model=
def test_llamaindex_embedder_normalises_rows() -> None:
    emb = RawEmbedding(table={"a": [3.0, 4.0], "b": [0.0, -2.0], "z": [0.0, 0.0]})
    ours = LlamaIndexEmbedder(emb)
    assert isinstance(ours, Embedder)
    rows = ours.embed(["a", "b"])
    assert rows.dtype == np.float32 and rows.shape == (2, 2)
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, -1.0]], atol=1e-6)
    assert ours.embed([]).shape[0] == 0
    with pytest.raises(ValueError, match=r"zero or non-finite embedding for text\(s\) \[1\]"):
        ours.embed(["a", "z"])
    assert isinstance(resolve_embedder(emb).get(), LlamaIndexEmbedder)


def test_resolve_embedder_unwraps_and_refuses() -> None:
    words = WordEmbedder(["paris", "france"])
    assert resolve_embedder(words).get() is words
    assert resolve_embedder(RagPositionEmbedding(words)).get() is words
    with pytest.raises(TypeError, match="cannot embed"):
        resolve_embedder(MockLLM())
    with pytest.raises(ModelSpecError):
        resolve_embedder("  ")
    with pytest.raises(TypeError, match="cannot embed"):
        MedoidVotingQueryEngine(
            retriever=ListRetriever(make_nodes()), llm=MockLLM(), embed_model=object()
        )


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
    with pytest.raises(TypeError, match="unsupported options"):
        llm.complete("hello", top_p=0.9)
    with pytest.raises(ValueError, match="not both"):
        llm.complete("hello", max_tokens=3, max_new_tokens=4)
    assert llm.to_dict()["model_name"] == "echo-model"


def test_rag_position_llm_refuses_what_cannot_generate() -> None:
    with pytest.raises(TypeError, match="wraps a rag-position Generator"):
        RagPositionLLM(GoldAtEdgesScorer(["a"], "a"))
    with pytest.raises(TypeError, match="wraps a rag-position Generator"):
        RagPositionLLM(MockLLM())
    with pytest.raises(ValueError, match="load_kwargs"):
        RagPositionLLM(EchoModel(), load_kwargs={"dtype": "float32"})
    with pytest.raises(ModelSpecError):
        RagPositionLLM("gpt-4")


def test_rag_position_embedding_wraps_an_embedder() -> None:
    embed_model = RagPositionEmbedding(WordEmbedder(["paris", "france", "hamlet"]))
    v = embed_model.get_text_embedding("Paris France")
    q = embed_model.get_query_embedding("Hamlet")
    assert len(v) == len(q) == 4
    assert np.isclose(np.linalg.norm(v), 1.0)
    assert embed_model.get_text_embedding_batch(["Paris", "Hamlet"])[1] == q
    with pytest.raises(TypeError, match="wraps a rag-position Embedder"):
        RagPositionEmbedding(MockEmbedding(embed_dim=3))
