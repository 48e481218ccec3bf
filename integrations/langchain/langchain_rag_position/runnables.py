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

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.prompt_values import ChatPromptValue, PromptValue, StringPromptValue
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from langchain_rag_position._adapters import (
    LazyModel,
    read_input,
    resolve_embedder,
    resolve_generator,
    to_passage,
)
from rag_position.prompts import QA_QUERY_AWARE_TEMPLATE, fill_template
from rag_position.strategies import (
    CHAT_SANDWICH_TEMPLATE,
    DEFAULT_ABSENCE_PHRASES,
    embedding_retrieve,
    fact,
    medoid_vote,
    recite_then_solve,
    sandwich_prompt,
)
from rag_position.strategies._align import FUZZY_THRESHOLD
from rag_position.strategies.recite import RECITE_THRESHOLD


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
                question, [to_passage(d) for d in docs], chat=chat, template=template
            )
        else:
            default = CHAT_SANDWICH_TEMPLATE if self.chat else QA_QUERY_AWARE_TEMPLATE
            text = fill_template(
                self.template or default, question=question, search_results=str(context)
            )
        if self.chat:
            return ChatPromptValue(messages=[HumanMessage(content=text)])
        return StringPromptValue(text=text)


class _Generating(RunnableSerializable[dict[str, Any], dict[str, Any]]):
    """Shared plumbing for the runnables that answer with a generator."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    llm: Any = Field(description="A LangChain chat model or LLM, a load_model spec, a Generator.")
    llm_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="load_model keyword arguments (spec strings only)."
    )
    max_concurrency: int | None = Field(
        default=None, ge=1, description="Concurrent calls to a LangChain model's batch()."
    )

    _generator: LazyModel = PrivateAttr()

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


def _source(docs: list[Document] | None, context: str | None) -> Any:
    return [to_passage(d) for d in docs] if docs is not None else context


class ReciteThenSolve(_Generating):
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

    fallback: Literal["context", "none"] = "context"
    threshold: float = Field(
        default=RECITE_THRESHOLD, gt=0.0, le=1.0, description="Grounding threshold."
    )
    max_new_tokens: int = Field(default=256, ge=1, description="Tokens for the recitation.")
    answer_max_new_tokens: int = Field(default=64, ge=1, description="Tokens for the answer.")

    def _run(self, value: dict[str, Any]) -> dict[str, Any]:
        question, docs, context = read_input(value, "ReciteThenSolve")
        source = _source(docs, context)
        result = recite_then_solve(
            question,
            source,
            self.core_generator,
            fallback=self.fallback,
            threshold=self.threshold,
            max_new_tokens=self.max_new_tokens,
            answer_max_new_tokens=self.answer_max_new_tokens,
        )
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


class FactRewriter(_Generating):
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

    embeddings: Any = Field(
        default=None, description="Embeddings for a vector-search retrieve step (optional)."
    )
    top_k: int = Field(default=3, ge=1, description="Sentences per pass with embeddings.")
    max_iterations: int = Field(default=3, ge=1)
    rewrite: Literal["remove", "mask"] = "remove"
    answer: bool = True
    with_context: bool = False
    threshold: float = Field(
        default=FUZZY_THRESHOLD, gt=0.0, le=1.0, description="Fuzzy match threshold."
    )
    max_new_tokens: int = Field(default=256, ge=1)
    answer_max_new_tokens: int = Field(default=64, ge=1)

    _embedder: LazyModel | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve_embeddings(self) -> FactRewriter:
        if self.embeddings is not None:
            self._embedder = resolve_embedder(self.embeddings)
        return self

    def _run(self, value: dict[str, Any]) -> dict[str, Any]:
        question, docs, context = read_input(value, "FactRewriter")
        retrieve = None
        if self._embedder is not None:
            retrieve = embedding_retrieve(self._embedder.get(), top_k=self.top_k)
        result = fact(
            question,
            _source(docs, context),
            self.core_generator,
            max_iterations=self.max_iterations,
            retrieve=retrieve,
            rewrite=self.rewrite,
            answer=self.answer,
            with_context=self.with_context,
            threshold=self.threshold,
            max_new_tokens=self.max_new_tokens,
            answer_max_new_tokens=self.answer_max_new_tokens,
        )
        return {
            "answer": result.answer,
            "documents": docs if docs is not None else [],
            "facts": list(result.facts),
            "trace": result.trace,
            "cost": result.cost,
        }


class MedoidVoting(_Generating):
    """Medoid voting (SWiM): answer once per order of the documents, keep the central answer.

    ``k`` orders (the given one first, the others seeded permutations), one batched
    generation, the answers embedded with ``embeddings``; the answer with the largest
    summed cosine similarity to the others wins, answers saying the context lacks the
    information are left out of the vote when others remain. Output: ``answer``,
    ``documents``, ``answers`` (one per order), ``orders``, ``similarities`` (each
    answer's summed cosine similarity to the other voters, ``None`` for non-voters), ``trace``
    (``MedoidTrace``), ``cost``. Needs a list of documents, not a context string.

    Example:
        >>> out = MedoidVoting(llm=llm, embeddings=embeddings, k=3).invoke(
        ...     {"question": q, "documents": docs})
        >>> out["answer"] in out["answers"]
        True
    """

    embeddings: Any = Field(description="LangChain Embeddings, 'embedded', or an Embedder.")
    k: int = Field(default=5, ge=1, description="Number of orders, so of answers.")
    seed: int = 0
    temperature: float = Field(default=0.0, ge=0.0)
    absence_phrases: Sequence[str] = DEFAULT_ABSENCE_PHRASES
    max_new_tokens: int = Field(default=64, ge=1)

    _embedder: LazyModel = PrivateAttr()

    @model_validator(mode="after")
    def _resolve_embeddings(self) -> MedoidVoting:
        self._embedder = resolve_embedder(self.embeddings)
        return self

    def _run(self, value: dict[str, Any]) -> dict[str, Any]:
        question, docs, _ = read_input(value, "MedoidVoting")
        if docs is None:
            raise TypeError(
                "MedoidVoting permutes documents: pass 'documents' as a list, not a string"
            )
        result = medoid_vote(
            question,
            [to_passage(d) for d in docs],
            self.core_generator,
            self._embedder.get(),
            k=self.k,
            seed=self.seed,
            temperature=self.temperature,
            absence_phrases=self.absence_phrases,
            max_new_tokens=self.max_new_tokens,
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
