"""The strategies ``compare`` ranks: the core strategy table plus the eval's own baselines.

An :class:`EvalStrategy` turns one instance into the prompt to answer from (or the
answer itself) and says what that cost. The eval's own: ``random`` (a seeded
shuffle of all passages), ``gold_first``, ``gold_last`` and ``gold_alone`` (bounds: they
know the gold passage), and, when the frameworks are installed,
``langchain_reorder`` / ``llamaindex_reorder`` (the frameworks' own
``LongContextReorder`` classes run on the same inputs), and, when ``llmlingua``
is installed, ``longllmlingua`` / ``longllmlingua_last`` (LongLLMLingua's ranking
by name: :mod:`rag_position.eval.rows.lingua`), and ``attention_sort`` (attention sorting by
its recipe, on a local model: :mod:`rag_position.eval.rows.attention_sort`). Every row of
:data:`rag_position.strategies.STRATEGIES` runs as a :class:`TableStrategy`,
called with the run's model as scorer and generator and the question's seed; a
row added to that table appears in ``compare`` with no change here.
"""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rag_position.cost import Cost, spent_by
from rag_position.data import QAInstance, place_gold
from rag_position.eval.engine.common import EvalConfigError, Prepared, gold_info
from rag_position.eval.engine.params import names
from rag_position.eval.rows import (
    FRAMEWORK_ROWS,
    GOLD_ALONE,
    NOT_COMPARED,
    RETRIEVER,
    SEED_GROUPS,
)
from rag_position.eval.rows.attention_sort import attention_strategies
from rag_position.eval.rows.lingua import lingua_strategies
from rag_position.eval.rows.peers import PEER_ROWS, peer_strategies
from rag_position.passages import Passage
from rag_position.prompts import render_qa
from rag_position.strategies import registry


class EvalStrategy(Protocol):
    """Given an instance (gold placed, passages in retriever order) and the model.

    Example::

        for name, strategy in available_strategies().items():
            prepared = strategy.prepare(instance, load_model("embedded"), seed=0)
            name, prepared.prompt or prepared.answer, prepared.cost
    """

    @property
    def name(self) -> str:
        """The strategy's name in keys, tables and ``--strategies``."""
        ...

    def prepare(self, instance: QAInstance, model: Any, *, seed: int) -> Prepared:
        """The prompt to answer from (or the answer), with the cost of choosing it."""
        ...


@dataclass(frozen=True)
class OrderStrategy:
    """A zero-cost strategy that only reorders passages (no model call).

    Example:
        >>> from rag_position.passages import Passage
        >>> docs = (Passage("Rome is in Italy."), Passage("Paris is in France."))
        >>> inst = QAInstance("Where is Paris?", ("France",), docs, gold_index=1)
        >>> flip = OrderStrategy("reversed", lambda instance, seed: list(instance.passages)[::-1])
        >>> flip.prepare(inst, model=None, seed=0).info
        {'gold_at': 0}
    """

    name: str
    order: Callable[[QAInstance, int], list[Passage]]

    def prepare(self, instance: QAInstance, model: Any, *, seed: int) -> Prepared:
        passages = self.order(instance, seed)
        return Prepared(
            prompt=render_qa(instance.question, passages), info=gold_info(instance.gold, passages)
        )


@dataclass(frozen=True)
class TableStrategy:
    """A row of the core strategy table, run on an eval instance with the run's model.

    Example:
        >>> from rag_position.passages import Passage
        >>> from rag_position.strategies import STRATEGIES
        >>> docs = tuple(Passage(t) for t in ("Paris is in France.", "Rome.", "Oslo."))
        >>> inst = QAInstance("Where is Paris?", ("France",), docs, gold_index=0)
        >>> prepared = TableStrategy("edge", STRATEGIES["edge"]).prepare(inst, None, seed=0)
        >>> prepared.info, prepared.cost.lm_calls
        ({'gold_at': 0}, 0)
    """

    name: str
    spec: registry.StrategySpec
    options: Mapping[str, Any] = field(default_factory=dict)

    def prepare(self, instance: QAInstance, model: Any, *, seed: int) -> Prepared:
        with spent_by(model) as spend:
            result = self.spec(
                instance.question,
                list(instance.passages),
                scorer=model,
                generator=model,
                seed=seed,
                **self.options,
            )
        cost = getattr(result, "cost", None)
        if not isinstance(cost, Cost):
            cost = spend.cost or Cost()
        answer = getattr(result, "answer", None)
        if isinstance(answer, str):
            return Prepared(answer=answer, cost=cost)
        passages = list(getattr(result, "passages", instance.passages))
        prompt = getattr(result, "prompt", None)
        if not isinstance(prompt, str):
            prompt = render_qa(instance.question, passages)
        info = gold_info(instance.gold, passages, selects=self.spec.selects)
        return Prepared(prompt=prompt, cost=cost, info=info)


def builtin_strategies() -> dict[str, EvalStrategy]:
    """The eval's own orders: random, and the gold-aware bounds gold first, gold last and
    the gold passage alone (the oracle: what a perfect one-passage selection gives).

    Example:
        >>> sorted(builtin_strategies())
        ['gold_alone', 'gold_first', 'gold_last', 'random']
    """
    return {
        "random": OrderStrategy("random", _random_order),
        "gold_first": OrderStrategy("gold_first", lambda inst, seed: _moved(inst, 0)),
        "gold_last": OrderStrategy("gold_last", lambda inst, seed: _moved(inst, inst.k - 1)),
        GOLD_ALONE: OrderStrategy(GOLD_ALONE, _gold_alone),
    }


def available_strategies(
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, EvalStrategy]:
    """What ``compare`` runs when no strategies are named, in its report's order.

    The retriever's order, the eval's own orders, the installed frameworks' reorders,
    then every row of the strategy table but those in
    :data:`~rag_position.eval.rows.NOT_COMPARED`. ``options[name]`` are passed to a table
    row on every call.

    Example:
        >>> found = available_strategies({"medoid": {"n_orders": 5}})
        >>> {"retriever", "gold_first", "edge", "medoid"} <= set(found), "profile" in found
        (True, False)
        >>> found["medoid"].options
        {'n_orders': 5}
    """
    return {
        name: strategy
        for name, strategy in _every_strategy(options).items()
        if (not isinstance(strategy, TableStrategy) or name not in NOT_COMPARED)
        and name not in PEER_ROWS  # the peers run when named (llm_rerank generates)
    }


def _every_strategy(
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, EvalStrategy]:
    table = registry.STRATEGIES
    found: dict[str, EvalStrategy] = {}
    if RETRIEVER in table:
        found[RETRIEVER] = _table_strategy(RETRIEVER, table[RETRIEVER], options)
    found.update(builtin_strategies())
    found.update(framework_strategies())
    found.update(lingua_strategies())
    found.update(attention_strategies())
    found.update(peer_strategies())
    for name, spec in table.items():
        if name not in found:
            found[name] = _table_strategy(name, spec, options)
    return found


def _table_strategy(
    name: str, spec: registry.StrategySpec, options: Mapping[str, Mapping[str, Any]] | None
) -> TableStrategy:
    own = dict((options or {}).get(name, {}))
    try:
        spec.check_options(own)
    except TypeError as exc:
        raise EvalConfigError(f"strategy {name!r}: {exc}") from None
    return TableStrategy(name, spec, own)


def select_strategies(
    names: list[str] | None, options: Mapping[str, Mapping[str, Any]] | None = None
) -> list[EvalStrategy]:
    """The strategies named (``compare``'s default set when ``None``), in the order given.

    A name may carry options for a table row, ``NAME:KEY=VALUE[:KEY=VALUE...]``
    (:func:`split_variant`): a variant, run and reported under that whole name, with
    ``options[NAME]`` and its own on top.

    Example:
        >>> [s.name for s in select_strategies(["retriever", "medoid:n_orders=5"])]
        ['retriever', 'medoid:n_orders=5']
        >>> select_strategies(["medoid:n_orders=5"], {"medoid": {"n_orders": 3, "seed": 1}})
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: strategy 'medoid': ... takes no option 'seed'; ...
    """  # noqa: E501
    if names is None:
        return list(available_strategies(options).values())
    found = _every_strategy(options)
    unknown = [n for n in names if split_variant(n)[0] not in found]
    if unknown:
        raise EvalConfigError(
            f"--strategies: unknown {unknown}; available here: {', '.join(found)}"
        )
    chosen: list[EvalStrategy] = []
    for name in names:
        base, own = split_variant(name)
        strategy = found[base]
        if own:
            if not isinstance(strategy, TableStrategy):
                raise EvalConfigError(
                    f"--strategies: {name!r}: {base!r} is a built-in order and takes no options"
                )
            if "seed" in own:
                raise EvalConfigError(
                    f"--strategies: {name!r}: the seed is the run's (--seed): each question "
                    "gets its own"
                )
            try:
                strategy.spec.check_options(own)
            except TypeError as exc:
                raise EvalConfigError(f"--strategies: {name!r}: {exc}") from None
            strategy = TableStrategy(name, strategy.spec, {**strategy.options, **own})
        chosen.append(strategy)
    return chosen


def strategy_names(text: str | None) -> list[str] | None:
    """``--strategies`` of ``compare`` and ``open-domain``: the names (:func:`names`), each
    a known row with options it takes, checked when the option is read, before the model
    loads (the options given apart, ``--profile``, are the task's to merge).

    Example:
        >>> strategy_names("retriever, select_and_place:mass=0.99")
        ['retriever', 'select_and_place:mass=0.99']
        >>> strategy_names("nosuch")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: --strategies: unknown ['nosuch']; ...
    """
    found = names(text)
    if found is not None:
        select_strategies(found)
    return found


def one_strategy_name(text: str) -> str:
    """``--versus``: one strategy of the catalog (a typo refused before the model loads)."""
    try:
        found = strategy_names(text) or []
    except EvalConfigError as exc:
        raise EvalConfigError(str(exc).replace("--strategies", "--versus", 1)) from None
    if len(found) != 1:
        raise EvalConfigError(f"--versus: name one strategy, got {text!r}")
    return found[0]


def split_variant(name: str) -> tuple[str, dict[str, Any]]:
    """``"NAME:KEY=VALUE:..."`` -> ``(NAME, {KEY: VALUE, ...})``; values parsed as numbers,
    ``true``/``false``/``none`` (``None``), else kept as text (which cannot hold ``:``,
    nor ``,`` on the command line, where it separates strategies).

    Example:
        >>> split_variant("convex_score_profile:n_base_orders=4")
        ('convex_score_profile', {'n_base_orders': 4})
        >>> split_variant("edge:mode=llamaindex:top_k=5")
        ('edge', {'mode': 'llamaindex', 'top_k': 5})
        >>> split_variant("retriever")
        ('retriever', {})
    """
    base, *parts = name.split(":")
    options: dict[str, Any] = {}
    for part in parts:
        key, sep, raw = part.partition("=")
        if not sep or not key.strip() or not raw.strip():
            raise EvalConfigError(
                f"--strategies: {name!r}: option {part!r} is not KEY=VALUE "
                "(a variant is NAME:KEY=VALUE[:KEY=VALUE...])"
            )
        if key.strip() in options:
            raise EvalConfigError(f"--strategies: {name!r}: option {key.strip()!r} given twice")
        options[key.strip()] = _option_value(raw.strip())
    return base.strip(), options


def _option_value(raw: str) -> Any:
    words = {"true": True, "false": False, "none": None}
    if raw.lower() in words:
        return words[raw.lower()]
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def framework_strategies() -> dict[str, EvalStrategy]:
    """LangChain's and LlamaIndex's ``LongContextReorder``, where the package is installed."""
    langchain, llamaindex = FRAMEWORK_ROWS
    found: dict[str, EvalStrategy] = {}
    if importlib.util.find_spec("langchain_community") is not None:
        found[langchain] = OrderStrategy(langchain, _langchain_reorder)
    if importlib.util.find_spec("llama_index") is not None and _has_llamaindex_core():
        found[llamaindex] = OrderStrategy(llamaindex, _llamaindex_reorder)
    return found


def _langchain_reorder(instance: QAInstance, seed: int) -> list[Passage]:
    from langchain_community.document_transformers import LongContextReorder
    from langchain_core.documents import Document

    docs = [
        Document(page_content=p.text, metadata={"i": i}) for i, p in enumerate(instance.passages)
    ]
    out = LongContextReorder().transform_documents(docs)
    return [instance.passages[d.metadata["i"]] for d in out]


def _llamaindex_reorder(instance: QAInstance, seed: int) -> list[Passage]:
    from llama_index.core.postprocessor import LongContextReorder
    from llama_index.core.schema import NodeWithScore, TextNode

    # The given order is the retriever's: score by rank (the gold passage of a built
    # instance has no retrieval score of its own).
    k = instance.k
    nodes = [
        NodeWithScore(node=TextNode(text=p.text, id_=str(i)), score=float(k - i))
        for i, p in enumerate(instance.passages)
    ]
    out = LongContextReorder().postprocess_nodes(nodes)
    return [instance.passages[int(n.node.node_id)] for n in out]


def _has_llamaindex_core() -> bool:
    try:
        return importlib.util.find_spec("llama_index.core") is not None
    except ModuleNotFoundError:
        return False


def _random_order(instance: QAInstance, seed: int) -> list[Passage]:
    # Shuffle a canonical list (gold first, then the distractors in order), so the
    # result does not depend on where the setting put the gold passage.
    canonical = list(place_gold(instance, 0).passages)
    random.Random(seed).shuffle(canonical)
    return canonical


def _gold_alone(instance: QAInstance, seed: int) -> list[Passage]:
    if instance.gold is None:
        raise EvalConfigError("gold_alone needs instances with a gold passage")
    return [instance.gold]


def _moved(instance: QAInstance, position: int) -> list[Passage]:
    return list(place_gold(instance, position).passages)


def seed_name(strategy: str) -> str:
    """The name a strategy's per-instance seed is derived from: its group in
    :data:`~rag_position.eval.rows.SEED_GROUPS` (the ConvexScore variants use
    ``convex_score``'s base order, so they differ only in placement or prompt, a paired
    comparison, and share its scoring), else itself.

    Example:
        >>> seed_name("convex_score_profile"), seed_name("likelihood_selection")
        ('convex_score', 'likelihood_selection')
        >>> seed_name("convex_score_profile:n_base_orders=4")  # a variant: its base's group
        'convex_score'
    """
    base = strategy.split(":", 1)[0].strip()
    return SEED_GROUPS.get(base, base)
