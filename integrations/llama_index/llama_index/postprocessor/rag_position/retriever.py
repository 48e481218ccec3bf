"""A retriever that returns another retriever's nodes in a position-aware order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.settings import Settings
from llama_index.postprocessor.rag_position import base

from rag_position._integration import check_tuned_strategy, strategy_components
from rag_position.strategies import STRATEGIES
from rag_position.tuned import TunedLike, as_tuned

COMPONENTS: Mapping[str, type[BaseNodePostprocessor]] = {
    name: getattr(base, made.name) for name, made in strategy_components().items()
}
"""Strategy name -> postprocessor class, for ``PositionAwareRetriever(strategy=<name>)``:
every row of the strategy table with a ``component`` (``passage_likelihood_profile``
builds ``PassageLikelihoodReorder`` with the ``placement="profile"`` its row fixes)."""


class PositionAwareRetriever(BaseRetriever):
    """Wraps any ``BaseRetriever``: its nodes come back reordered by a chosen strategy.

    ``strategy``: one of our postprocessors (or any ``BaseNodePostprocessor``), or a
    name from :data:`COMPONENTS` (any row of the strategy table with a component; a name
    that fixes options, such as a ``_profile`` variant, needs ``profile=``) built with
    ``**options`` (e.g. ``scorer=``, ``profile=``); ``"edge"`` when neither it nor
    ``tuned`` is given. The query goes to the strategy, so likelihood-based ones score
    the real question. ``aretrieve`` awaits the wrapped retriever and the strategy's
    async path. Without ``callback_manager``, the wrapped retriever's is used (else
    ``Settings.callback_manager``): the events nest in one trace, whose map LlamaIndex
    resets at each call; with another manager, the wrapped retriever's trace map grows
    by an entry a call (LlamaIndex resets it only when a trace starts outside any other).

    ``tuned``: a tuned file (``rag-position tune --model SPEC --out tuned.json``, read and
    checked now) or its ``rag_position.TunedChoice`` sets the strategy, its options and its
    profile (see ``base.from_tuned``); a ``strategy`` other than the file's is an error,
    ``**options`` may add framework-side ones (``metadata_key``, ``title_key``,
    ``replace_score``), and ``scorer=`` (default: the file's own model spec, loaded with its
    dtype on first use) is used only when the file's strategy scores. A scorer whose
    model has another name than the file's gives a ``UserWarning`` naming both. The
    file's own ``openai:`` or ``hf:`` spec loads only with ``trust_spec=True`` among the
    options (a ``ModelSpecError`` otherwise; a packaged model's loads).

    Example:
        >>> retriever = PositionAwareRetriever(
        ...     index.as_retriever(similarity_top_k=5), "convex_score", scorer="embedded")
        >>> nodes = retriever.retrieve("Who wrote Hamlet?")       # gold candidate first
        >>> tuned = PositionAwareRetriever(index.as_retriever(), tuned="tuned.json")
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        strategy: str | BaseNodePostprocessor | None = None,
        *,
        tuned: TunedLike | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **options: Any,
    ) -> None:
        if not isinstance(retriever, BaseRetriever):
            raise TypeError(
                f"PositionAwareRetriever wraps a LlamaIndex BaseRetriever, got "
                f"{type(retriever).__name__}"
            )
        self.tuned = None if tuned is None else as_tuned(tuned)
        if self.tuned is not None:
            check_tuned_strategy(self.tuned, strategy)
            postprocessor = base.from_tuned(self.tuned, **options)
        elif strategy is None or isinstance(strategy, str):
            strategy = "edge" if strategy is None else strategy
            if strategy not in COMPONENTS:
                raise ValueError(
                    f"unknown strategy {strategy!r}; known: {', '.join(sorted(COMPONENTS))}"
                    " (or pass a node postprocessor)"
                )
            options = STRATEGIES[strategy].component_options(options)
            postprocessor = COMPONENTS[strategy](**options)
        elif isinstance(strategy, BaseNodePostprocessor):
            if options:
                raise ValueError(
                    f"options {sorted(options)} are for a strategy given by name; configure the "
                    f"{type(strategy).__name__} you passed instead"
                )
            postprocessor = strategy
        else:
            raise TypeError(
                "`strategy` must be a strategy name or a BaseNodePostprocessor, got "
                f"{type(strategy).__name__}"
            )
        self.retriever = retriever
        self.postprocessor = postprocessor
        if callback_manager is None:  # one manager for both (class doc)
            callback_manager = getattr(retriever, "callback_manager", None)
            callback_manager = callback_manager or Settings.callback_manager
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes = self.retriever.retrieve(query_bundle)
        return self.postprocessor.postprocess_nodes(nodes, query_bundle=query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes = await self.retriever.aretrieve(query_bundle)
        return await self.postprocessor.apostprocess_nodes(nodes, query_bundle=query_bundle)
