"""The strategies ``compare`` ranks: built-in baselines plus whatever is registered.

A :class:`Strategy` turns one instance into the prompt to answer from (or the
answer itself) and says what that cost. Built in: ``retriever`` (the order given),
``random`` (a seeded shuffle of all passages), ``gold_first`` and ``gold_last``
(upper bounds: they know the gold passage), and, when the frameworks are installed,
``langchain_reorder`` / ``llamaindex_reorder`` (the frameworks' own
``LongContextReorder`` classes run on the same inputs).

**The hook.** At call time (never at import) :func:`available_strategies` imports
``rag_position.strategies`` if it exists and adds every entry of its
``STRATEGIES`` mapping (name -> callable). Each is called as
``fn(question, passages, scorer=model, generator=model, seed=..., **options)``
(``seed`` only where the callable names it as a parameter) and must return an object with
``.passages`` (the new order) and ``.cost`` (a ``Cost``); the answer is generated
from ``.prompt`` when that is a string, else from the ``qa`` prompt of
``.passages``; an ``.answer`` string is taken as the answer without generating.
So a strategy added to that registry appears in ``compare`` with no change here.
Built-in names win over registered ones of the same name.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rag_position.cost import Cost
from rag_position.data import QAInstance, place_gold
from rag_position.eval.common import EvalConfigError, Prepared
from rag_position.passages import Passage
from rag_position.prompts import render_qa

REGISTRY_MODULE = "rag_position.strategies"
REGISTRY_ATTRIBUTE = "STRATEGIES"


class Strategy(Protocol):
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
            prompt=render_qa(instance.question, passages), info=_gold_at(instance, passages)
        )


@dataclass(frozen=True)
class RegisteredStrategy:
    """A strategy from the ``rag_position.strategies`` registry, called as documented above.

    Example:
        >>> from rag_position.passages import Passage
        >>> from rag_position.strategies import STRATEGIES
        >>> docs = tuple(Passage(t) for t in ("Paris is in France.", "Rome.", "Oslo."))
        >>> inst = QAInstance("Where is Paris?", ("France",), docs, gold_index=0)
        >>> prepared = RegisteredStrategy("edge", STRATEGIES["edge"]).prepare(inst, None, seed=0)
        >>> prepared.info, prepared.cost.lm_calls
        ({'gold_at': 0}, 0)
    """

    name: str
    function: Callable[..., Any]
    options: Mapping[str, Any] = field(default_factory=dict)

    def prepare(self, instance: QAInstance, model: Any, *, seed: int) -> Prepared:
        kwargs: dict[str, Any] = {"scorer": model, "generator": model, **self.options}
        if _accepts(self.function, "seed"):
            kwargs.setdefault("seed", seed)
        before = getattr(model, "usage", None)
        try:
            result = self.function(instance.question, list(instance.passages), **kwargs)
        except TypeError as exc:
            named = [k for k in self.options if f"argument '{k}'" in str(exc)]
            if "unexpected keyword argument" not in str(exc) or not named:
                raise
            raise EvalConfigError(
                f"strategy {self.name!r}: an option it does not take: {exc}"
            ) from None
        cost = getattr(result, "cost", None)
        if not isinstance(cost, Cost):
            after = getattr(model, "usage", None)
            cost = (
                after - before if isinstance(before, Cost) and isinstance(after, Cost) else Cost()
            )
        answer = getattr(result, "answer", None)
        if isinstance(answer, str):
            return Prepared(answer=answer, cost=cost)
        passages = list(getattr(result, "passages", instance.passages))
        prompt = getattr(result, "prompt", None)
        if not isinstance(prompt, str):
            prompt = render_qa(instance.question, passages)
        return Prepared(prompt=prompt, cost=cost, info=_gold_at(instance, passages))


def builtin_strategies() -> dict[str, Strategy]:
    """The baselines: retriever order, random order, gold first, gold last.

    Example:
        >>> sorted(builtin_strategies())
        ['gold_first', 'gold_last', 'random', 'retriever']
    """
    return {
        "retriever": OrderStrategy("retriever", lambda inst, seed: list(inst.passages)),
        "random": OrderStrategy("random", _random_order),
        "gold_first": OrderStrategy("gold_first", lambda inst, seed: _moved(inst, 0)),
        "gold_last": OrderStrategy("gold_last", lambda inst, seed: _moved(inst, inst.k - 1)),
    }


def available_strategies(
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Strategy]:
    """Built-ins, the installed frameworks' reorders, then the registry's (import at call time).

    ``options[name]`` are passed to a registered strategy on every call.

    Example:
        >>> found = available_strategies({"medoid": {"k": 5}})
        >>> {"retriever", "gold_first", "edge", "medoid"} <= set(found)
        True
        >>> found["medoid"].options
        {'k': 5}
    """
    found: dict[str, Strategy] = builtin_strategies()
    found.update(framework_strategies())
    for name, function in registered_functions().items():
        if name not in found:
            found[name] = RegisteredStrategy(name, function, dict((options or {}).get(name, {})))
    return found


def registered_functions() -> dict[str, Callable[..., Any]]:
    """``rag_position.strategies.STRATEGIES`` when that package exists, else ``{}``."""
    try:
        module = importlib.import_module(REGISTRY_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name is not None and REGISTRY_MODULE.startswith(exc.name):
            return {}
        raise
    registry = getattr(module, REGISTRY_ATTRIBUTE, None)
    if not isinstance(registry, Mapping):
        return {}
    return {str(name): fn for name, fn in registry.items() if callable(fn)}


def select_strategies(
    names: list[str] | None, options: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Strategy]:
    """The strategies named (all available when ``None``), in the order given.

    A name may carry options for a registered strategy, ``NAME:KEY=VALUE[:KEY=VALUE...]``
    (:func:`split_variant`): a variant, run and reported under that whole name, with
    ``options[NAME]`` and its own on top.

    Example:
        >>> [s.name for s in select_strategies(["retriever", "medoid:k=5"])]
        ['retriever', 'medoid:k=5']
        >>> select_strategies(["medoid:k=5"], {"medoid": {"k": 3, "seed": 1}})[0].options
        {'k': 5, 'seed': 1}
    """
    found = available_strategies(options)
    if names is None:
        return list(found.values())
    unknown = [n for n in names if split_variant(n)[0] not in found]
    if unknown:
        raise EvalConfigError(
            f"--strategies: unknown {unknown}; available here: {', '.join(found)}"
        )
    chosen: list[Strategy] = []
    for name in names:
        base, own = split_variant(name)
        strategy = found[base]
        if own:
            if not isinstance(strategy, RegisteredStrategy):
                raise EvalConfigError(
                    f"--strategies: {name!r}: {base!r} is a built-in order and takes no options"
                )
            _check_options(name, base, own)
            strategy = RegisteredStrategy(name, strategy.function, {**strategy.options, **own})
        chosen.append(strategy)
    return chosen


def _check_options(name: str, base: str, own: Mapping[str, Any]) -> None:
    try:
        from rag_position.strategies.registry import strategy_options
    except ImportError:
        return
    try:
        known = strategy_options(base)
    except ValueError:  # not one of ours: its own call will say
        return
    if "seed" in own:
        raise EvalConfigError(
            f"--strategies: {name!r}: the seed is the run's (--seed): each question gets its own"
        )
    unknown = sorted(set(own) - known)
    if unknown:
        raise EvalConfigError(
            f"--strategies: {name!r}: {base!r} takes no option {', '.join(map(repr, unknown))}; "
            f"its options: {', '.join(sorted(known)) or 'none'}"
        )


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


def framework_strategies() -> dict[str, Strategy]:
    """LangChain's and LlamaIndex's ``LongContextReorder``, where the package is installed."""
    found: dict[str, Strategy] = {}
    if importlib.util.find_spec("langchain_community") is not None:
        found["langchain_reorder"] = OrderStrategy("langchain_reorder", _langchain_reorder)
    if importlib.util.find_spec("llama_index") is not None and _has_llamaindex_core():
        found["llamaindex_reorder"] = OrderStrategy("llamaindex_reorder", _llamaindex_reorder)
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


def _moved(instance: QAInstance, position: int) -> list[Passage]:
    return list(place_gold(instance, position).passages)


def _gold_at(instance: QAInstance, passages: list[Any]) -> dict[str, Any]:
    gold = instance.gold
    for i, p in enumerate(passages):
        if gold is not None and (p is gold or p == gold):
            return {"gold_at": i}
    return {}


def _accepts(function: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name and p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters)


SEED_GROUPS: Mapping[str, str] = {
    "convex_score_profile": "convex_score",
    "convex_score_sandwich": "convex_score",
}
"""Strategies that draw their random choices from another's seed: the ConvexScore
variants use ``convex_score``'s base order, so they differ only in placement (or
prompt), a paired comparison, and can share its scoring (:class:`SharedScoring`)."""


def seed_name(strategy: str) -> str:
    """The name a strategy's per-instance seed is derived from (its group, else itself).

    Example:
        >>> seed_name("convex_score_profile"), seed_name("likelihood_selection")
        ('convex_score', 'likelihood_selection')
        >>> seed_name("convex_score_profile:n_base_orders=4")  # a variant: its base's group
        'convex_score'
    """
    base = strategy.split(":", 1)[0].strip()
    return SEED_GROUPS.get(base, base)


class SharedScoring:
    """A model whose ``score_spans`` answers a repeated request from memory.

    Strategies of one seed group (:data:`SEED_GROUPS`) score the same prompts for
    the same instance; the eval computes them once. A replayed call is charged what
    the original call cost: ``usage`` is the model's own plus every replayed cost,
    so each strategy still reports what it would cost on its own. Everything else
    (``generate``, ``name``, ...) is the wrapped model's. The memory keeps the last
    ``size`` requests (one instance's, in practice).

    Example:
        >>> from rag_position.models.protocols import SpanScore
        >>> class Counting:
        ...     calls = 0
        ...     def score_spans(self, prompts, spans):
        ...         self.calls += 1
        ...         return [SpanScore(-1.0, -1.0, 1) for _ in prompts]
        >>> model = Counting()
        >>> shared = SharedScoring(model)
        >>> shared.score_spans(["a b"], [(2, 3)]) == shared.score_spans(["a b"], [(2, 3)])
        True
        >>> model.calls, shared.usage.lm_calls
        (1, 2)
    """

    def __init__(self, model: Any, size: int = 8) -> None:
        self._model = model
        self._size = size
        self._memo: dict[tuple[tuple[str, ...], tuple[Any, ...]], tuple[list[Any], Cost]] = {}
        self._extra = Cost()  # replayed calls, and computed ones of an unmetered model
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    @property
    def usage(self) -> Cost:
        own = getattr(self._model, "usage", None)
        return (own if isinstance(own, Cost) else Cost()) + self._extra

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        key = (tuple(prompts), tuple(tuple(s) for s in spans))
        with self._lock:
            hit = self._memo.get(key)
            if hit is not None:
                self._extra = self._extra + hit[1]
                return list(hit[0])
        metered = isinstance(getattr(self._model, "usage", None), Cost)
        before = self._model.usage if metered else Cost()
        start = time.perf_counter()
        results = list(self._model.score_spans(prompts, spans))
        if metered:
            cost = self._model.usage - before
        else:
            cost = Cost(lm_calls=len(prompts), seconds=time.perf_counter() - start)
            with self._lock:
                self._extra = self._extra + cost
        with self._lock:
            self._memo[key] = (results, cost)
            while len(self._memo) > self._size:
                del self._memo[next(iter(self._memo))]
        return list(results)
