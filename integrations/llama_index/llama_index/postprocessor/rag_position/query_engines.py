"""Query engines for the generation-side strategies: sandwich, recite-then-solve, FACT, medoid.

Each retrieves with a ``BaseRetriever`` (``from_index`` builds one from an index),
applies ``node_postprocessors`` in turn, runs one rag-position strategy on the nodes
with the ``llm`` (a LlamaIndex ``LLM``, a ``load_model`` spec or a rag-position
``Generator``), and returns a ``Response`` whose ``source_nodes`` are the nodes the
strategy read, in the order it read them, and whose ``metadata["rag_position"]`` is
``{"strategy": ..., "trace": <the core's trace>, "cost": Cost, ...}``. Async
(``aquery``) awaits the retriever and postprocessors and runs the strategy in a thread.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar, cast

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_serializer
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.postprocessor.rag_position._nodes import METADATA_KEY, node_passage
from llama_index.postprocessor.rag_position.adapters import (
    EmbedModelFields,
    resolve_embedder,
    resolve_generator,
)

from rag_position import _integration as core
from rag_position._integration import (
    FactOptions,
    GeneratorOptions,
    LazyModel,
    MedoidOptions,
    ReciteOptions,
    core_options,
)
from rag_position.cost import Cost, spent_by, spent_or_sent
from rag_position.errors import BackendError
from rag_position.models import Embedder, Generator
from rag_position.passages import Passage
from rag_position.strategies import (
    embedding_retrieve,
    fact,
    medoid_vote,
    recite_then_solve,
    sandwich,
)

Trace = dict[str, Any]


class _RagPositionQueryEngine(CustomQueryEngine, GeneratorOptions):
    """Shared behaviour: retrieve, postprocess, run the strategy, wrap the answer."""

    strategy_name: ClassVar[str] = ""

    retriever: BaseRetriever = Field(description="Where the nodes come from.")
    node_postprocessors: list[BaseNodePostprocessor] = Field(
        default_factory=list,
        description="Applied in turn to the retrieved nodes before the strategy reads them.",
    )
    _generator: LazyModel[Generator] = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        core.check_option_names(type(self).__name__, data, type(self).model_fields)
        super().__init__(**data)
        # After pydantic's validation, so our errors reach the caller unwrapped.
        self._setup()

    def _setup(self) -> None:
        """Check the llm now (a clear TypeError if it cannot generate); specs load on first use."""
        self._generator = resolve_generator(self.llm, self.llm_kwargs)

    @field_serializer("llm")
    def _serialize_llm(self, llm: Any) -> str:
        return llm if isinstance(llm, str) else f"<{type(llm).__name__}>"

    @classmethod
    def from_index(
        cls, index: Any, *, similarity_top_k: int = 5, **kwargs: Any
    ) -> _RagPositionQueryEngine:
        """The engine over ``index.as_retriever(similarity_top_k=...)``; ``kwargs`` are fields.

        Example:
            >>> engine = QuerySandwichQueryEngine.from_index(index, llm=llm, similarity_top_k=3)
        """
        as_retriever = getattr(index, "as_retriever", None)
        if as_retriever is None:
            raise TypeError(f"from_index needs a LlamaIndex index, got {type(index).__name__}")
        return cls(retriever=as_retriever(similarity_top_k=similarity_top_k), **kwargs)

    @property
    def core_generator(self) -> Generator:
        """The rag-position Generator in use (a spec string is loaded now if it was not yet)."""
        return self._generator.get()

    def query(self, str_or_query_bundle: str | QueryBundle) -> Response:
        """Retrieve with the caller's ``QueryBundle`` (its embedding and custom embedding
        strings; ``CustomQueryEngine.query`` keeps only the string), postprocess, answer."""
        return cast(Response, BaseQueryEngine.query(self, str_or_query_bundle))  # _query's

    async def aquery(self, str_or_query_bundle: str | QueryBundle) -> Response:
        """The async twin of :meth:`query`."""
        return cast(Response, await BaseQueryEngine.aquery(self, str_or_query_bundle))

    def custom_query(self, query_str: str) -> Response:
        """Retrieve, postprocess, answer with the strategy."""
        return self._query(QueryBundle(query_str))

    async def acustom_query(self, query_str: str) -> Response:
        """The async twin of :meth:`custom_query`."""
        return await self._aquery(QueryBundle(query_str))

    def _query(self, query_bundle: QueryBundle) -> Response:
        bundle = self._checked(query_bundle)
        nodes = self.retriever.retrieve(bundle)
        for postprocessor in self.node_postprocessors:
            nodes = postprocessor.postprocess_nodes(nodes, query_bundle=bundle)
        return self._respond(bundle.query_str, list(nodes))

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        """Awaits retrieval and postprocessing, runs the strategy in a thread."""
        bundle = self._checked(query_bundle)
        nodes = await self.retriever.aretrieve(bundle)
        for postprocessor in self.node_postprocessors:
            nodes = await postprocessor.apostprocess_nodes(nodes, query_bundle=bundle)
        return await asyncio.to_thread(self._respond, bundle.query_str, list(nodes))

    def _checked(self, bundle: QueryBundle) -> QueryBundle:
        query_str = bundle.query_str
        if not isinstance(query_str, str) or not query_str.strip():
            raise ValueError(f"{type(self).__name__} needs a non-empty query, got {query_str!r}")
        return bundle

    def _respond(self, query_str: str, nodes: list[NodeWithScore]) -> Response:
        if not nodes:
            raise ValueError(
                f"{type(self).__name__}: the retriever (and postprocessors) returned no nodes "
                f"for {query_str!r}; there is nothing to answer from"
            )
        passages = [node_passage(n, self.title_key) for n in nodes]
        answer, trace = self._answer(query_str, passages)
        metadata = {METADATA_KEY: {"strategy": self.strategy_name, **trace}}
        return Response(response=answer, source_nodes=nodes, metadata=metadata)

    def _answer(self, question: str, passages: list[Passage]) -> tuple[str, Trace]:
        raise NotImplementedError

    @property
    def core_embedder(self) -> Embedder | None:
        """The rag-position Embedder in use (``None`` for an engine without ``embed_model``)."""
        slot: LazyModel[Embedder] | None = getattr(self, "_embedder", None)
        return None if slot is None else slot.get()


class QuerySandwichQueryEngine(_RagPositionQueryEngine):
    """The query sandwich: the question before and after the retrieved passages.

    Builds the published query-aware prompt (``sandwich_prompt``; ``chat=True`` drops
    the trailing ``Answer:`` cue for chat models) over the nodes in their order and
    asks the ``llm`` once. ``metadata["rag_position"]["prompt"]`` is the prompt sent.

    Example:
        >>> engine = QuerySandwichQueryEngine.from_index(index, llm=llm)
        >>> engine.query("Who wrote Hamlet?").response
    """

    strategy_name: ClassVar[str] = "sandwich"

    chat: bool = Field(default=False, description="Use the chat variant (no 'Answer:' cue).")
    template: str | None = Field(
        default=None, description="A custom template with {question} and {search_results}."
    )
    max_new_tokens: int = Field(default=64, ge=1, description="Tokens to generate for the answer.")
    temperature: float = Field(default=0.0, ge=0.0, description="Sampling temperature (0: greedy).")
    seed: int | None = Field(default=None, description="Sampling seed, where the LLM takes one.")

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionQuerySandwichQueryEngine"

    def _answer(self, question: str, passages: list[Passage]) -> tuple[str, Trace]:
        result = sandwich(question, passages, chat=self.chat, template=self.template)
        assert result.prompt is not None
        texts, cost = _generate(
            self._generator.get(),
            [result.prompt],
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            seed=self.seed,
        )
        return texts[0].strip(), {"trace": None, "prompt": result.prompt, "cost": cost}


class ReciteThenSolveQueryEngine(_RagPositionQueryEngine, ReciteOptions):
    """Recite-then-solve: copy the relevant evidence, ground it in the nodes, answer from it.

    Step 1 asks the ``llm`` to recite the relevant documents word for word; each
    recited block is aligned to its source node (or dropped); step 2 answers from the
    grounded evidence alone. ``metadata["rag_position"]``: the core ``ReciteTrace``,
    the cost and ``recited_nodes`` (indices into ``source_nodes``).

    Example:
        >>> engine = ReciteThenSolveQueryEngine.from_index(index, llm=llm)
        >>> engine.query("Who wrote Hamlet?").metadata["rag_position"]["recited_nodes"]
    """

    strategy_name: ClassVar[str] = "recite_then_solve"

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionReciteThenSolveQueryEngine"

    def _answer(self, question: str, passages: list[Passage]) -> tuple[str, Trace]:
        options = core_options(self, recite_then_solve)
        result = recite_then_solve(question, passages, self._generator.get(), **options)
        recited = [i for i, p in enumerate(passages) if any(p is r for r in result.recited)]
        return result.answer, {"trace": result.trace, "cost": result.cost, "recited_nodes": recited}


class FactQueryEngine(_RagPositionQueryEngine, FactOptions, EmbedModelFields):
    """FACT: find the relevant facts in passes, cutting found ones out, then answer from them.

    Each pass asks the ``llm`` for the relevant sentences (or, with ``embed_model``,
    retrieves them by embedding: the ``top_k`` sentences closest to the question), locates them in
    the nodes' text and removes (or masks) them, until a pass finds nothing new or
    ``max_iterations``; the answer is generated from the facts (``answer=False`` skips
    it). ``metadata["rag_position"]``: the core ``FactTrace``, ``facts`` and the cost.

    Example:
        >>> engine = FactQueryEngine.from_index(index, llm=llm, max_iterations=2)
        >>> engine.query("Who wrote Hamlet?").metadata["rag_position"]["facts"]
    """

    strategy_name: ClassVar[str] = "fact"

    _embedder: LazyModel[Embedder] | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionFactQueryEngine"

    def _setup(self) -> None:
        """Check the llm and the optional embed_model now."""
        super()._setup()
        self._embedder = self.resolve_embed_model()

    def _answer(self, question: str, passages: list[Passage]) -> tuple[str, Trace]:
        retrieve = None
        if self._embedder is not None:
            retrieve = embedding_retrieve(self._embedder.get(), top_k=self.top_k)
        options = core_options(self, fact, retrieve=retrieve)
        result = fact(question, passages, self._generator.get(), **options)
        return result.answer, {"trace": result.trace, "cost": result.cost, "facts": result.facts}


class MedoidVotingQueryEngine(_RagPositionQueryEngine, MedoidOptions, EmbedModelFields):
    """Medoid voting: answer once per seeded order of the nodes, return the central answer.

    ``n_orders`` prompts (the retrieved order first, then distinct permutations drawn with
    ``seed``) go to the ``llm``; answers saying the context lacks the information are
    set aside when others remain; the answer with the largest summed cosine similarity
    to the others (by ``embed_model``) wins. ``metadata["rag_position"]``: the core
    ``MedoidTrace``, ``answers``, ``orders``, ``similarities`` and the cost.

    Example:
        >>> engine = MedoidVotingQueryEngine.from_index(
        ...     index, llm=llm, embed_model=embed, n_orders=3)
        >>> engine.query("Who wrote Hamlet?").metadata["rag_position"]["answers"]
    """

    strategy_name: ClassVar[str] = "medoid_vote"

    embed_model: Any = Field(
        description=(
            "Embeds the answers: a LlamaIndex BaseEmbedding, an embedder spec ('embedded'; "
            "loaded on first use) or a rag-position Embedder."
        ),
    )
    _embedder: LazyModel[Embedder] = PrivateAttr()

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex serialisation name."""
        return "RagPositionMedoidVotingQueryEngine"

    def _setup(self) -> None:
        """Check the llm and the embed_model (required here: it embeds the answers) now."""
        super()._setup()
        self._embedder = resolve_embedder(self.embed_model, self.embed_kwargs)

    def _answer(self, question: str, passages: list[Passage]) -> tuple[str, Trace]:
        options = core_options(self, medoid_vote)
        result = medoid_vote(
            question, passages, self._generator.get(), self._embedder.get(), **options
        )
        trace = {
            "trace": result.trace,
            "cost": result.cost,
            "answers": result.answers,
            "orders": result.orders,
            "similarities": result.similarities,
        }
        return result.answer, trace


def _generate(generator: Generator, prompts: list[str], **options: Any) -> tuple[list[str], Cost]:
    """``generator.generate`` and what it spent (its own calls, metered per call
    (:func:`rag_position.cost.spent_by`), else the prompts sent and the wall time:
    :func:`rag_position.cost.spent_or_sent`)."""
    start = time.perf_counter()
    with spent_by(generator) as spend:
        texts = generator.generate(prompts, **options)
    if len(texts) != len(prompts):
        raise BackendError(f"the llm returned {len(texts)} texts for {len(prompts)} prompts")
    return list(texts), spent_or_sent(spend.cost, len(prompts), time.perf_counter() - start)
