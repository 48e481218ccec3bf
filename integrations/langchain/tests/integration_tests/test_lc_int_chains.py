"""Every reordering component in a real chain: InMemoryVectorStore with the embedded embedder,
retrieval, our component, a prompt, then a fake chat model or the embedded model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_rag_position import (
    METADATA_KEY,
    ConvexScoreReorder,
    EdgeReorder,
    EdgeReorderTransformer,
    LikelihoodReorder,
    PositionAwareRetriever,
    ProfileReorder,
)
from langchain_rag_position._adapters import to_passage
from langchain_tests.integration_tests import RetrieversIntegrationTests
from lc_testkit import QUESTION, SUITE_MARKS, GoldScorer

from rag_position.strategies import PositionProfile, convex_score, likelihood_selection

pytestmark = pytest.mark.slow

PROMPT = ChatPromptTemplate.from_template(
    "Answer the question using the documents.\n\n{context}\n\nQuestion: {question}"
)
GOLD = "Paris is the capital of France."
PROFILE = PositionProfile([0.17, 0.12, 0.13, 0.40], model_name="embedded", source="eval")


def format_docs(docs: list[Document]) -> str:
    return "\n".join(f"[{d.metadata['title']}] {d.page_content}" for d in docs)


def build(name: str, base: BaseRetriever, scorer: Any) -> Runnable[str, list[Document]]:
    """The retrieval step with component ``name`` on top of ``base``."""
    if name == "transformer":
        return base | RunnableLambda(EdgeReorderTransformer().transform_documents)
    if name == "retriever":
        return PositionAwareRetriever(retriever=base, strategy="convex_score", scorer=scorer)
    compressors: dict[str, Callable[[], Any]] = {
        "likelihood": lambda: LikelihoodReorder(scorer=scorer, n_orders=4),
        "convex": lambda: ConvexScoreReorder(scorer=scorer),
        "profile": lambda: ProfileReorder(profile=PROFILE, scorer=scorer),
        "edge": lambda: EdgeReorder(score_key="relevance_score"),
    }
    return ContextualCompressionRetriever(base_compressor=compressors[name](), base_retriever=base)


NAMES = ["likelihood", "convex", "profile", "edge", "transformer", "retriever"]


def check_reordered(docs: list[Document], retrieved: list[Document]) -> None:
    """Every retrieved document once, content, id and metadata kept, plus our record."""
    assert sorted(d.id for d in docs) == sorted(d.id for d in retrieved)
    for rank, d in enumerate(docs):
        record = d.metadata[METADATA_KEY]
        assert record["rank"] == rank
        src = retrieved[record["original_rank"]]
        assert (src.id, src.page_content) == (d.id, d.page_content)
        assert {k: v for k, v in d.metadata.items() if k != METADATA_KEY} == src.metadata


@pytest.mark.parametrize("real", [False, True], ids=["fake_llm", "embedded"])
@pytest.mark.parametrize("name", NAMES)
def test_component_in_a_chain(
    name: str, real: bool, lc_store: Any, request: pytest.FixtureRequest
) -> None:
    """Real retrieval, the component, a prompt, then a fake chat model (the scripted scorer)
    or the embedded model, scoring and answering through ChatRagPosition."""
    base = lc_store.as_retriever(search_kwargs={"k": 3 if real else 4})
    retrieved = base.invoke(QUESTION)
    scorer = request.getfixturevalue("lc_model") if real else GoldScorer(GOLD)
    llm = request.getfixturevalue("lc_chat") if real else FakeListChatModel(responses=["Paris"])
    seen: list[Any] = []
    keep = RunnableLambda(lambda docs: seen.append(docs) or docs)
    spy = RunnableLambda(lambda p: seen.append(p) or p)
    chain = (
        {"context": build(name, base, scorer) | keep | format_docs,
         "question": RunnablePassthrough()}
        | PROMPT
        | spy
        | llm
        | StrOutputParser()
    )  # fmt: skip
    answer = chain.invoke(QUESTION)
    docs, prompt = seen
    check_reordered(docs, retrieved)
    text = prompt.to_string()
    positions = [text.index(d.page_content) for d in docs]
    assert positions == sorted(positions)  # the prompt reads the documents in our order
    if real:  # exactly what the core model answers to the same user turn (greedy decoding)
        assert answer.strip()
        user_turn = prompt.to_messages()[0].content
        assert answer == scorer.generate([user_turn], max_new_tokens=llm.max_tokens)[0]
        if name in ("retriever", "transformer"):  # their async twins
            asyn = asyncio.run(build(name, base, scorer).ainvoke(QUESTION))
            assert [(d.id, d.metadata) for d in asyn] == [(d.id, d.metadata) for d in docs]
        return
    assert answer == "Paris"
    assert len(retrieved) == 4 and retrieved[0].page_content == GOLD  # real embeddings
    if name in ("convex", "retriever"):
        assert docs[0].page_content == GOLD  # the scripted scorer's gold


def test_scoring_compressors_equal_the_core(lc_store: Any, lc_model: Any) -> None:
    docs = lc_store.as_retriever(search_kwargs={"k": 3}).invoke(QUESTION)
    passages = [to_passage(d) for d in docs]
    out = ConvexScoreReorder(scorer=lc_model).compress_documents(docs, QUESTION)
    core = convex_score(QUESTION, passages, lc_model)
    assert [d.metadata[METADATA_KEY]["original_rank"] for d in out] == core.order
    assert [d.metadata[METADATA_KEY]["score"] for d in out] == [core.scores[i] for i in core.order]
    out = LikelihoodReorder(scorer=lc_model, n_orders=2, seed=2).compress_documents(docs, QUESTION)
    sel = likelihood_selection(QUESTION, passages, lc_model, n_orders=2, seed=2)
    assert [d.metadata[METADATA_KEY]["original_rank"] for d in out] == sel.order
    assert sel.best is not None
    assert out[0].metadata[METADATA_KEY]["score"] == pytest.approx(max(sel.scores))


class TestPositionAwareRetrieverConvexScore(RetrieversIntegrationTests):
    """The standard retriever suite with ConvexScore on the embedded model."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.slow, *SUITE_MARKS]

    @pytest.fixture(autouse=True)
    def _models(self, lc_store: Any, lc_model: Any) -> None:
        self.store, self.model = lc_store, lc_model

    @property
    def retriever_constructor(self) -> type[PositionAwareRetriever]:
        return PositionAwareRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {
            "retriever": self.store.as_retriever(search_kwargs={"k": 3}),
            "strategy": "convex_score",
            "scorer": self.model,
        }

    @property
    def retriever_query_example(self) -> str:
        return QUESTION
