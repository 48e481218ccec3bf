"""The strategies ``compare`` ranks: the core strategy table plus the eval's own baselines.

An :class:`EvalStrategy` turns one instance into the prompt to answer from (or the
answer itself) and says what that cost. The eval's own: ``random`` (a seeded
shuffle of all passages), ``gold_first``, ``gold_last`` and ``gold_alone`` (bounds: they
know the gold passage), and, when the frameworks are installed,
``langchain_reorder`` / ``llamaindex_reorder`` (the frameworks' own
``LongContextReorder`` classes run on the same inputs), and, when ``llmlingua``
is installed, ``longllmlingua`` / ``longllmlingua_last`` (LongLLMLingua's ranking
by name: :mod:`rag_position.eval.lingua`), and ``attention_sort`` (attention sorting by
its recipe, on a local model: :mod:`rag_position.eval.attention_sort`). Every row of
:data:`rag_position.strategies.STRATEGIES` runs as a :class:`TableStrategy`,
called with the run's model as scorer and generator and the question's seed; a
row added to that table appears in ``compare`` with no change here.
"""

from __future__ import annotations

import importlib.util
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rag_position.cost import Cost, record, spent_by, spent_or_sent
from rag_position.data import QAInstance, place_gold
from rag_position.errors import BackendError
from rag_position.eval.attention_sort import attention_strategies
from rag_position.eval.common import EvalConfigError, Prepared, gold_info
from rag_position.eval.lingua import lingua_strategies
from rag_position.eval.peers import PEER_ROWS, peer_strategies
from rag_position.eval.rows import (
    FRAMEWORK_ROWS,
    GOLD_ALONE,
    NOT_COMPARED,
    RETRIEVER,
    SEED_GROUPS,
)
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
        rag_position.eval.common.EvalConfigError: strategy 'medoid': ... takes no option 'seed'; ...
    """
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


class SharedScoring:
    """A model whose ``score_spans`` answers a repeated request from memory.

    Strategies of one seed group (:func:`seed_name`) score the same prompts for
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
        if hit is not None:
            record(hit[1])
            return list(hit[0])
        start = time.perf_counter()
        with spent_by(self._model) as spend:
            results = list(self._model.score_spans(prompts, spans))
        cost = spent_or_sent(spend.cost, len(prompts), time.perf_counter() - start)
        if spend.cost is None:  # a model that keeps no usage: count it here
            with self._lock:
                self._extra = self._extra + cost
            record(cost)
        elif not spend.reported:  # a model of the caller's own: count it where we are
            record(cost)
        with self._lock:
            self._memo[key] = (results, cost)
            while len(self._memo) > self._size:
                del self._memo[next(iter(self._memo))]
        return list(results)


class PromptScores(SharedScoring):
    """A model whose ``score_spans`` computes each (prompt, span) once, whatever the request.

    Where :class:`SharedScoring` replays a whole repeated request, this replays single
    prompts: the open-domain reader scores the top 5, 10, 20... chunks of a question,
    and each larger k repeats the smaller one's one-chunk prompts. A computed prompt is
    charged its share of the call that computed it (one LM call, the call's tokens and
    seconds split by prompt length); a replayed one is charged that share again, so each
    strategy still reports what it would cost on its own. The memory keeps the last
    ``size`` prompts.

    Example:
        >>> from rag_position.models.protocols import SpanScore
        >>> class Counting:
        ...     sent = 0
        ...     def score_spans(self, prompts, spans):
        ...         self.sent += len(prompts)
        ...         return [SpanScore(-1.0, -1.0, 1) for _ in prompts]
        >>> model = Counting()
        >>> cached = PromptScores(model)
        >>> _ = cached.score_spans(["a b", "c d"], [(2, 3), (2, 3)])
        >>> _ = cached.score_spans(["a b", "c d", "e f"], [(2, 3), (2, 3), (2, 3)])
        >>> model.sent, cached.usage.lm_calls
        (3, 5)
    """

    def __init__(self, model: Any, size: int = 4096) -> None:
        super().__init__(model, size)
        self._prompts: dict[tuple[str, tuple[Any, ...]], tuple[Any, Cost]] = {}

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        keys = [(p, tuple(s)) for p, s in zip(prompts, spans, strict=True)]
        with self._lock:
            missing = list(dict.fromkeys(k for k in keys if k not in self._prompts))
        if missing:
            start = time.perf_counter()
            with spent_by(self._model) as spend:
                results = list(self._model.score_spans([k[0] for k in missing],
                                                       [k[1] for k in missing]))  # fmt: skip
            if len(results) != len(missing):
                raise BackendError(
                    f"the scorer returned {len(results)} scores for {len(missing)} prompts"
                )
            cost = spent_or_sent(spend.cost, len(missing), time.perf_counter() - start)
            if spend.cost is None:
                with self._lock:
                    self._extra = self._extra + cost
                record(cost)
            elif not spend.reported:
                record(cost)
            shares = _shares(cost, [len(k[0]) for k in missing])
            with self._lock:
                for key, result, share in zip(missing, results, shares, strict=True):
                    self._prompts[key] = (result, share)
                while len(self._prompts) > self._size:
                    del self._prompts[next(iter(self._prompts))]
        fresh = set(missing)
        out = []
        replayed = Cost()
        with self._lock:
            for key in keys:
                result, share = self._prompts[key]
                out.append(result)
                if key in fresh:
                    fresh.discard(key)  # computed now: already counted
                else:
                    replayed = replayed + share
            self._extra = self._extra + replayed
        if replayed != Cost():
            record(replayed)
        return out


def _shares(cost: Cost, lengths: Sequence[int]) -> list[Cost]:
    """``cost`` split over prompts of these lengths: one LM call each, the tokens (whole,
    summing to the total) and seconds by length."""
    total = sum(lengths) or 1
    tokens = [cost.prompt_tokens * n // total for n in lengths]
    for i in range(cost.prompt_tokens - sum(tokens)):
        tokens[i % len(tokens)] += 1
    return [
        Cost(lm_calls=1, prompt_tokens=t, seconds=cost.seconds * n / total)
        for t, n in zip(tokens, lengths, strict=True)
    ]
