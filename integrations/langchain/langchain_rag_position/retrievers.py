"""``PositionAwareRetriever``: any retriever plus one of our orderings, as one object."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer, Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from langchain_rag_position import compressors
from langchain_rag_position._adapters import check_query
from rag_position._integration import check_tuned_strategy, strategy_components
from rag_position.strategies import STRATEGIES
from rag_position.tuned import as_tuned

COMPONENTS: dict[str, type[BaseDocumentCompressor]] = {
    name: getattr(compressors, made.name) for name, made in strategy_components().items()
}
"""Strategy name -> compressor class, for ``PositionAwareRetriever(strategy=<name>)``: every
row of the strategy table with a ``component`` (``passage_likelihood_profile`` builds
``PassageLikelihoodReorder`` with the ``placement="profile"`` its row fixes)."""


def _tuned_error(exc: ValidationError) -> Exception | None:
    """The one error a validator raised building from a tuned file, if that is all."""
    errors = exc.errors()
    if len(errors) != 1:
        return None
    cause = (errors[0].get("ctx") or {}).get("error")
    return cause if isinstance(cause, (ValueError, TypeError)) else None


class PositionAwareRetriever(BaseRetriever):
    """Retrieve with ``retriever``, keep the first ``k`` results, put them in order.

    ``strategy`` is a name of :data:`COMPONENTS` (``"edge"``, the default; any row of the
    strategy table with a component; a name that fixes options, such as a ``_profile``
    variant, needs ``{"profile": ...}``), built with
    ``scorer=`` and ``strategy_options`` (the compressor's other fields, e.g.
    ``{"n_orders": 4}`` or ``{"profile": "profile.json"}``), or a ready compressor or document
    transformer (ours or any other). ``k`` (also per call: ``invoke(query, k=3)``)
    is how many of the base retriever's results are kept, in its order, before
    reordering; ``None`` keeps them all. The base retriever's results are never
    mutated: see the compressors for the metadata written.

    ``tuned``: a tuned file (``rag-position tune --model SPEC --out tuned.json``; read and
    checked at construction, the field then holds its ``rag_position.TunedChoice``) sets
    the strategy, its options and its profile (see ``compressors.from_tuned``); a
    ``strategy`` other than the file's is an error, ``strategy_options`` may add
    framework-side options (``metadata_key``, ``title_key``), and ``scorer`` (default: the
    file's own model spec, loaded with its dtype on first use) is used only when the
    file's strategy scores. A scorer whose model has another name than the file's gives
    a ``UserWarning`` naming both. The file's own ``openai:`` or ``hf:`` spec loads only
    with ``trust_spec=True`` (a ``ModelSpecError`` otherwise; a packaged model's loads).

    Example:
        >>> retriever = PositionAwareRetriever(
        ...     retriever=store.as_retriever(search_kwargs={"k": 10}),
        ...     strategy="convex_score", scorer="embedded", k=5)
        >>> docs = retriever.invoke("Who wrote Hamlet?")
        >>> tuned = PositionAwareRetriever(retriever=base, tuned="tuned.json", k=5)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    retriever: BaseRetriever = Field(description="The retriever whose results are reordered.")
    strategy: Any = Field(
        default="edge", description="A strategy name, or a compressor or document transformer."
    )
    scorer: Any = Field(default=None, description="The scorer for a scoring strategy name.")
    strategy_options: dict[str, Any] = Field(
        default_factory=dict, description="Other options of the named strategy's compressor."
    )
    k: int | None = Field(default=None, ge=1, description="How many retrieved documents to keep.")
    tuned: Any = Field(
        default=None,
        description=(
            "A tuned file's path (rag-position tune --out) or its TunedChoice: sets the "
            "strategy, its options and profile."
        ),
    )
    trust_spec: bool = Field(
        default=False,
        description=(
            "Load a tuned file's openai: or hf: model spec when no scorer is given (else "
            "refused: only packaged models load from a file)."
        ),
    )

    _reorderer: BaseDocumentCompressor | BaseDocumentTransformer = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        if data.get("tuned") is not None:  # read now: read_tuned's own error, not wrapped
            data["tuned"] = as_tuned(data["tuned"])
        try:
            super().__init__(**data)
        except ValidationError as exc:
            # the tuned file's own error (its spec, its strategy), not wrapped by pydantic
            cause = _tuned_error(exc) if data.get("tuned") is not None else None
            if cause is None:
                raise
            raise cause from None

    @model_validator(mode="before")
    @classmethod
    def _read_tuned(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("tuned") is not None:
            data = {**data, "tuned": as_tuned(data["tuned"])}
        return data

    @model_validator(mode="after")
    def _build(self) -> PositionAwareRetriever:
        strategy = self.strategy
        if self.tuned is not None:
            check_tuned_strategy(
                self.tuned, strategy if "strategy" in self.model_fields_set else None
            )
            self._reorderer = compressors.from_tuned(
                self.tuned, self.scorer, trust_spec=self.trust_spec, **self.strategy_options
            )
        elif isinstance(strategy, str):
            if strategy not in COMPONENTS:
                raise ValueError(
                    f"unknown strategy {strategy!r}; known: {', '.join(sorted(COMPONENTS))} "
                    "(or pass a compressor or document transformer)"
                )
            options = dict(self.strategy_options)
            if self.scorer is not None:
                if not {"scorer"} & {*STRATEGIES[strategy].needs, *STRATEGIES[strategy].uses}:
                    raise ValueError(f"strategy {strategy!r} uses no model: leave out `scorer`")
                options["scorer"] = self.scorer
            options = STRATEGIES[strategy].component_options(options)
            self._reorderer = COMPONENTS[strategy](**options)
        elif isinstance(strategy, (BaseDocumentCompressor, BaseDocumentTransformer)):
            if self.scorer is not None or self.strategy_options:
                raise ValueError(
                    "`scorer` and `strategy_options` build a named strategy; configure the "
                    f"{type(strategy).__name__} you passed instead"
                )
            self._reorderer = strategy
        else:
            raise TypeError(
                f"`strategy` must be one of {sorted(COMPONENTS)}, a BaseDocumentCompressor or a "
                f"BaseDocumentTransformer, got a {type(strategy).__name__}"
            )
        return self

    @property
    def reorderer(self) -> BaseDocumentCompressor | BaseDocumentTransformer:
        """The compressor or transformer that orders the documents."""
        return self._reorderer

    def _keep(self, docs: list[Document], k: int | None) -> list[Document]:
        k = self.k if k is None else k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"`k` must be an int >= 1, got {k!r}")
        return list(docs) if k is None else list(docs)[:k]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        if kwargs:
            raise TypeError(f"PositionAwareRetriever got unexpected arguments {sorted(kwargs)}")
        check_query(query, "PositionAwareRetriever")
        docs = self.retriever.invoke(query, config={"callbacks": run_manager.get_child()})
        docs = self._keep(docs, k)
        if not docs:
            return []
        reorderer = self._reorderer
        if isinstance(reorderer, BaseDocumentCompressor):
            out = reorderer.compress_documents(docs, query, callbacks=run_manager.get_child())
        else:
            out = reorderer.transform_documents(docs)
        return list(out)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        if kwargs:
            raise TypeError(f"PositionAwareRetriever got unexpected arguments {sorted(kwargs)}")
        check_query(query, "PositionAwareRetriever")
        docs = await self.retriever.ainvoke(query, config={"callbacks": run_manager.get_child()})
        docs = self._keep(docs, k)
        if not docs:
            return []
        reorderer = self._reorderer
        if isinstance(reorderer, BaseDocumentCompressor):
            out = await reorderer.acompress_documents(
                docs, query, callbacks=run_manager.get_child()
            )
        else:
            out = await reorderer.atransform_documents(docs)
        return list(out)
