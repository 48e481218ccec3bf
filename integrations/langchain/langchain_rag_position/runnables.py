"""Runnables for the generation side: query sandwich, recite-then-solve, FACT, medoid voting.

Each takes ``{"question": str, "documents": list[Document]}`` (or ``"context"``: a
string) and is a ``RunnableSerializable``: ``invoke``/``ainvoke``/``batch``/
``abatch``/``stream`` come from LangChain (the async forms run the blocking model
calls in an executor thread; ``stream`` yields the one final output).
:class:`QuerySandwich` returns a prompt to pipe into any chat model or LLM; the
others return a dict with ``"answer"``, ``"documents"`` (the source documents, the
caller's objects), ``"trace"`` (the core result's trace) and ``"cost"``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.prompt_values import ChatPromptValue, PromptValue, StringPromptValue
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from langchain_rag_position._adapters import (
    EmbeddingsFields,
    LazyModel,
    read_input,
    resolve_embedder,
    resolve_generator,
    to_passage,
)
from rag_position._integration import (
    FactOptions,
    GeneratorOptions,
    MedoidOptions,
    ReciteOptions,
    core_options,
)
from rag_position.prompts import QA_QUERY_AWARE_TEMPLATE, fill_template
from rag_position.strategies import (
    embedding_retrieve,
    fact,
    medoid_vote,
    recite_then_solve,
    sandwich_prompt,
)
from rag_position.strategies._sandwich import CHAT_SANDWICH_TEMPLATE


class QuerySandwich(RunnableSerializable[dict[str, Any], PromptValue]):
    """The query before and after the documents ("Lost in the Middle", query-aware prompt).

    Turns ``{"question", "documents"}`` (or ``"context"``, a string) into a prompt:
    with ``chat=True`` (default) a one-message chat prompt, the published
    query-aware prompt without its ``Answer:`` cue; with ``chat=False`` the published
    prompt byte for byte, as a string prompt. ``template`` replaces either (it needs
    ``{question}`` and ``{search_results}``). The documents keep their order.

    Example:
        >>> chain = ({"documents": retriever, "question": RunnablePassthrough()}
        ...          | QuerySandwich() | llm | StrOutputParser())
        >>> chain.invoke("Who wrote Hamlet?")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    chat: bool = Field(default=True, description="A chat message (True) or a string prompt.")
    template: str | None = Field(default=None, description="A custom QA template.")
    title_key: str | None = Field(default="title", description="Metadata key of the title.")

    @model_validator(mode="after")
    def _check(self) -> QuerySandwich:
        if self.template is not None and (
            "{question}" not in self.template or "{search_results}" not in self.template
        ):
            raise ValueError("`template` needs both {question} and {search_results}")
        return self

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> PromptValue:
        """The sandwich prompt for one input."""
        return self._call_with_config(self._render, input, config, **kwargs)

    def _render(self, value: dict[str, Any]) -> PromptValue:
        question, docs, context = read_input(value, "QuerySandwich")
        if docs is not None:
            template = self.template
            chat = self.chat and template is None
            text = sandwich_prompt(
                question,
                [to_passage(d, self.title_key) for d in docs],
                chat=chat,
                template=template,
            )
        else:
            default = CHAT_SANDWICH_TEMPLATE if self.chat else QA_QUERY_AWARE_TEMPLATE
            text = fill_template(
                self.template or default, question=question, search_results=str(context)
            )
        if self.chat:
            return ChatPromptValue(messages=[HumanMessage(content=text)])
        return StringPromptValue(text=text)


class _Generating(RunnableSerializable[dict[str, Any], dict[str, Any]], GeneratorOptions):
    """Shared plumbing for the runnables that answer with a generator."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    max_concurrency: int | None = Field(
        default=None, ge=1, description="Concurrent calls to a LangChain model's batch()."
    )

    _generator: LazyModel[Any] = PrivateAttr()

    @model_validator(mode="after")
    def _resolve_llm(self) -> _Generating:
        self._generator = resolve_generator(
            self.llm, self.llm_kwargs, max_concurrency=self.max_concurrency
        )
        return self

    @property
    def core_generator(self) -> Any:
        """The rag-position Generator this runnable calls."""
        return self._generator.get()

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the strategy on one ``{"question", "documents"}`` input."""
        return self._call_with_config(self._run, input, config, **kwargs)

    def _run(self, value: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _source(self, docs: list[Document] | None, context: str | None) -> Any:
        return [to_passage(d, self.title_key) for d in docs] if docs is not None else context


class _Embedding(_Generating, EmbeddingsFields):
    """A generating runnable that also embeds (``embeddings=``, loaded on first use)."""

    _embedder: LazyModel[Any] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve_embeddings(self) -> _Embedding:
        if self._needs_embeddings():  # ValueError naming the forms when missing
            self._embedder = resolve_embedder(self.embeddings, self.embeddings_kwargs)
        else:
            self._embedder = self.resolve_embeddings()
        return self

    def _needs_embeddings(self) -> bool:
        return True

    @property
    def core_embedder(self) -> Any:
        """The rag-position Embedder in use (``None`` without ``embeddings``)."""
        return None if self._embedder is None else self._embedder.get()


class ReciteThenSolve(_Generating, ReciteOptions):
    """Recite the relevant evidence verbatim, ground it in the documents, answer from it alone.

    Du, Tian et al. ("Context length alone hurts"), with every recited block aligned
    to its source document and dropped when it matches none; nothing usable falls
    back to the full context (``fallback="context"``) or returns ``answer=""``
    (``"none"``). Output: ``answer``, ``documents``, ``recited`` (the source
    Documents recited, in context order; for a context string, new Documents of the
    recited sentences), ``trace`` (``ReciteTrace``), ``cost``.

    Example:
        >>> out = ReciteThenSolve(llm=llm).invoke({"question": q, "documents": docs})
        >>> out["answer"], [d.id for d in out["recited"]]
    """

    def _run(self, value: dict[str, Any]) -> dict[str, Any]:
        question, docs, context = read_input(value, "ReciteThenSolve")
        source = self._source(docs, context)
        options = core_options(self, recite_then_solve)
        result = recite_then_solve(question, source, self.core_generator, **options)
        if docs is not None:
            index = {id(p): i for i, p in enumerate(source)}
            recited = [docs[index[id(p)]] for p in result.recited]
        else:
            recited = [Document(page_content=p.text) for p in result.recited]
        return {
            "answer": result.answer,
            "documents": docs if docs is not None else [],
            "recited": recited,
            "trace": result.trace,
            "cost": result.cost,
        }


class FactRewriter(_Embedding, FactOptions):
    """FACT: collect the facts in passes, cutting each found fact out of the context.

    Wang, Wang et al.: each pass asks ``llm`` for the relevant facts (or, with
    ``embeddings``, takes the ``top_k`` sentences closest to the question), removes
    (``rewrite="remove"``) or masks them, and repeats until nothing new is found or
    ``max_iterations``; the answer is generated from the facts (``answer=False``
    skips it). Output: ``answer``, ``documents``, ``facts`` (in context order),
    ``trace`` (``FactTrace``), ``cost``.

    Example:
        >>> out = FactRewriter(llm=llm, max_iterations=2).invoke(
        ...     {"question": q, "documents": docs})
        >>> out["facts"]
    """

    def _needs_embeddings(self) -> bool:
        return False

    def _run(self, value: dict[str, Any]) -> dict[str, Any]:
        question, docs, context = read_input(value, "FactRewriter")
        retrieve = None
        if self._embedder is not None:
            retrieve = embedding_retrieve(self._embedder.get(), top_k=self.top_k)
        options = core_options(self, fact, retrieve=retrieve)
        result = fact(question, self._source(docs, context), self.core_generator, **options)
        return {
            "answer": result.answer,
            "documents": docs if docs is not None else [],
            "facts": list(result.facts),
            "trace": result.trace,
            "cost": result.cost,
        }


class MedoidVoting(_Embedding, MedoidOptions):
    """Medoid voting (SWiM): answer once per order of the documents, keep the central answer.

    ``n_orders`` orders (the given one first, the others seeded permutations), one batched
    generation, the answers embedded with ``embeddings``; the answer with the largest
    summed cosine similarity to the others wins, answers saying the context lacks the
    information are left out of the vote when others remain. Output: ``answer``,
    ``documents``, ``answers`` (one per order), ``orders``, ``similarities`` (each
    answer's summed cosine similarity to the other voters, ``None`` for non-voters), ``trace``
    (``MedoidTrace``), ``cost``. Needs a list of documents, not a context string.

    Example:
        >>> out = MedoidVoting(llm=llm, embeddings=embeddings, n_orders=3).invoke(
        ...     {"question": q, "documents": docs})
        >>> out["answer"] in out["answers"]
        True
    """

    embeddings: Any = Field(description="LangChain Embeddings, 'embedded', or an Embedder.")

    def _run(self, value: dict[str, Any]) -> dict[str, Any]:
        question, docs, _ = read_input(value, "MedoidVoting")
        if docs is None:
            raise TypeError(
                "MedoidVoting permutes documents: pass 'documents' as a list, not a string"
            )
        result = medoid_vote(
            question,
            self._source(docs, None),
            self.core_generator,
            self.core_embedder,
            **core_options(self, medoid_vote),
        )
        return {
            "answer": result.answer,
            "documents": docs,
            "answers": list(result.answers),
            "orders": [list(o) for o in result.orders],
            "similarities": list(result.similarities),
            "trace": result.trace,
            "cost": result.cost,
        }
