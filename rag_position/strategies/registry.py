"""The strategy table: every strategy by name, with what it needs and its fixed options.

One table serves the eval suite (``--strategies``), the CLI and both framework
integrations. Each row (:class:`StrategySpec`) names the public function it
calls, the models it needs, the options its name fixes, and whether it answers
by itself. Every row is called the same way::

    STRATEGIES[name](question, passages, scorer=..., generator=..., embedder=..., seed=0, **options)

and returns an :class:`~rag_position.strategies.OrderingResult` (a reorderer:
answer with ``result.prompt`` when it is set, else with the usual prompt of
``result.passages``) or an :class:`~rag_position.strategies.AnswerResult` (it
answered: ``result.answer``). ``result.cost`` is what the strategy spent. Models a
row does not need are ignored, so a caller may pass the same model to every row.
An option the row's function does not take is an error that lists the ones it does.

==============================  ==================================================  ================
name                            calls                                               needs
==============================  ==================================================  ================
``retriever``                   the given order (the baseline), zero cost           --
``likelihood_selection``        :func:`likelihood_selection`                        scorer
``convex_score``                :func:`convex_score` (``placement="first"``)        scorer
``convex_score_profile``        :func:`convex_score` (``placement="profile"``)      scorer, profile=
``convex_score_sandwich``       ``convex_score``'s order, query-aware ``prompt``    scorer
``passage_likelihood``          :func:`passage_likelihood` (``placement="first"``)  scorer
``passage_likelihood_profile``  :func:`passage_likelihood` (``"profile"``)          scorer, profile=
``profile``                     :func:`profile_reorder` (relevance by ``scores``,   profile=
                                a ``scorer``: passage likelihood, or ConvexScore
                                with ``relevance="convex_score"``; the passages'
                                own, else the order)
``select_and_place``            :func:`select_and_place` (keeps the likeliest,      scorer
                                the best last)
``select_and_place_profile``    :func:`select_and_place` (``"profile"``)            scorer, profile=
``edge``                        :func:`edge_reorder` (``mode="langchain"``)         --
``sandwich``                    the given order, query-aware ``prompt``             --
``fact``                        :func:`fact` (answers)                              generator
``recite``                      :func:`recite_then_solve` (answers)                 generator
``medoid``                      :func:`medoid_vote` (answers; n_orders=3)           generator,
                                                                                    embedder
==============================  ==================================================  ================

``medoid``'s embedder defaults to the embedded all-MiniLM-L6-v2, loaded once.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel

from rag_position.models.protocols import Embedder, Generator, Scorer
from rag_position.strategies._base import (
    AnswerResult,
    OrderingResult,
    check_passages,
    check_question,
    unchanged,
)
from rag_position.strategies._convex_score import convex_score
from rag_position.strategies._edge_reorder import edge_reorder
from rag_position.strategies._fact import fact
from rag_position.strategies._likelihood_selection import likelihood_selection
from rag_position.strategies._medoid_vote import medoid_vote
from rag_position.strategies._options import option_model
from rag_position.strategies._passage_likelihood import passage_likelihood
from rag_position.strategies._profile_reorder import profile_reorder
from rag_position.strategies._recite_then_solve import recite_then_solve
from rag_position.strategies._sandwich import sandwich, sandwich_prompt
from rag_position.strategies._select_and_place import select_and_place
from rag_position.strategies.profiles import check_placement

Role = Literal["scorer", "generator", "embedder"]
_ROLES: tuple[Role, ...] = ("scorer", "generator", "embedder")
_NOT_OPTIONS = frozenset({"question", "passages", "passages_or_context", "seed", *_ROLES})

Record = tuple[Sequence[float | None] | None, list[dict[str, Any]]]
"""Per input passage: its score (``None`` for none) and the extras of its metadata record."""


def _likelihood_record(result: Any) -> Record:
    """Every passage: the winning order's mean log-likelihood."""
    n = len(result.order)
    best = None if result.best is None else float(result.scores[result.best])
    return [best] * n, [{"question_loglik": best} for _ in range(n)]


def _gold_record(result: Any, gold: int | None) -> Record:
    """Each passage's own score; ``gold`` marks the candidate."""
    return list(result.scores) or None, [{"gold": i == gold} for i in range(len(result.order))]


def _convex_record(result: Any) -> Record:
    return _gold_record(result, result.gold)


def _passage_record(result: Any) -> Record:
    return _gold_record(result, result.details["gold"])


def _selection_record(result: Any) -> Record:
    """Each passage's own score; its rank by likelihood and share of the posterior; the
    input positions of the dropped passages (most likely first) on every kept one."""
    ranked = result.details["ranked"]
    rank = {d: r for r, d in enumerate(ranked)}
    dropped = list(result.details["dropped"])
    extras = [
        {
            "likelihood_rank": rank[i],
            "posterior": float(result.details["posterior"][i]),
            "dropped": list(dropped),  # each record its own list
        }
        for i in range(len(ranked))
    ]
    return list(result.scores) or None, extras


def _check_placed(options: Mapping[str, Any]) -> dict[str, Any]:
    """The placement rules at construction; the profile, resolved."""
    return {"profile": check_placement(options["placement"], None, options["profile"])}


def _check_convex(options: Mapping[str, Any]) -> dict[str, Any]:
    for name in ("edge_weight", "curvature_weight"):
        if not math.isfinite(options[name]):
            raise ValueError(f"`{name}` must be a finite number")
    return _check_placed(options)


def given_order(question: str, passages: Sequence[Any]) -> OrderingResult[Any]:
    """The passages as given (the retriever's order), at zero cost.

    Example:
        >>> given_order("Who wrote Hamlet?", ["a", "b"]).order
        [0, 1]
    """
    check_question(question)
    return unchanged(check_passages(passages))


@dataclass(frozen=True)
class StrategySpec:
    """One row of the strategy table: call it like the function it names.

    ``needs``: the models the function takes, in its positional order after the
    passages (``uses``: ones it takes when given, by keyword). ``fixed``: options
    the name sets (``convex_score_profile`` places by the profile); ``requires``:
    options a caller must give; ``passes_to``: the function that takes the row's
    further options (``profile`` hands them to ConvexScore, with
    ``relevance="convex_score"``).
    ``sandwich``: the row answers with the query-aware prompt of its order (it
    takes ``chat=``). ``compared``: ``eval compare`` runs it when no
    ``--strategies`` are named.

    What the framework integrations build from the row: ``component``, the class
    name of the reordering component both integrations derive from it (rows that
    fix options, like ``passage_likelihood_profile``, share their base row's
    component); ``record_keys``, the keys the row adds to the metadata record of
    each reordered passage, with their values when nothing is scored (fewer than two
    passages); ``record``, a function of the result giving each input passage's
    score and extras; ``check``, the construction-time check of a component's
    options (it returns the options it resolved, e.g. a profile file read);
    :attr:`option_model`, the component's pydantic options, generated from the
    function's annotated signature. ``seed_group``: the row whose per-question seed
    it shares in the eval (the ConvexScore variants score the same prompts).
    ``selects``: the row may drop passages (``result.passages`` is a subset, in a new
    order; ``result.details["dropped"]`` lists the rest), where every other row
    returns a permutation.

    Example:
        >>> spec = STRATEGIES["edge"]
        >>> spec("Who wrote Hamlet?", ["a", "b", "c"]).passages
        ['a', 'c', 'b']
        >>> spec.answers, sorted(spec.options)
        (False, ['mode', 'scores', 'top_k', 'word_count_threshold'])
        >>> STRATEGIES["medoid"].defaults["n_orders"]
        3
    """

    name: str
    function: Callable[..., Any]
    needs: tuple[Role, ...] = ()
    uses: tuple[Role, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    passes_to: Callable[..., Any] | None = None
    answers: bool = False
    sandwich: bool = False
    compared: bool = True
    summary: str = ""
    component: str = ""
    record_keys: Mapping[str, Any] = field(default_factory=dict)
    record: Callable[[Any], Record] | None = None
    check: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    seed_group: str = ""
    selects: bool = False

    @cached_property
    def _parameters(self) -> dict[str, inspect.Parameter]:
        found: dict[str, inspect.Parameter] = {}
        for function in (self.passes_to, self.function):  # the row's own win
            if function is None:
                continue
            for p in inspect.signature(function).parameters.values():
                if (
                    p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
                    and p.name not in _NOT_OPTIONS
                ):
                    found[p.name] = p
        return found

    @property
    def takes_question(self) -> bool:
        return "question" in inspect.signature(self.function).parameters

    @property
    def options(self) -> frozenset[str]:
        """The options a caller may set (the function's keywords, less what the name fixes)."""
        extra = {"chat"} if self.sandwich else set()
        return frozenset(set(self._parameters) - set(self.fixed) | extra)

    @cached_property
    def option_model(self) -> type[BaseModel]:
        """The options as a pydantic model (names, types, defaults, constraints, descriptions).

        Generated from the annotated signature of the row's function (and of
        ``passes_to``), less what the name fixes; both integrations' components
        inherit it.
        """
        functions = [f for f in (self.passes_to, self.function) if f is not None]
        name = (self.component or self.name.title().replace("_", "")) + "Options"
        doc = f"The options of ``{self.name}`` ({self.function.__name__})."
        # a component's seed is its own option (the eval derives one per question instead)
        exclude = {*_NOT_OPTIONS, *self.fixed, "scores"} - {"seed"}
        return option_model(name, functions, exclude=exclude, doc=doc)

    def component_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options of this row's component: ``options`` plus what the name fixes.

        ``TypeError`` when a fixed option is given too, ``ValueError`` when one the row
        requires (``profile``) is missing.

        Example:
            >>> STRATEGIES["passage_likelihood_profile"].component_options({"profile": [0.2, 0.5]})
            {'profile': [0.2, 0.5], 'placement': 'profile'}
        """
        self._check_fixed(options)
        self._check_required(options)
        return {**options, **self.fixed}

    @property
    def defaults(self) -> dict[str, Any]:
        """Each option's default (options without one are left out)."""
        found = {
            name: p.default
            for name, p in self._parameters.items()
            if name not in self.fixed and p.default is not inspect.Parameter.empty
        }
        if self.sandwich:
            found["chat"] = False
        return found

    def _check_fixed(self, options: Mapping[str, Any]) -> None:
        fixed = sorted(set(options) & set(self.fixed))
        if fixed:
            raise TypeError(
                f"strategy {self.name!r} sets {', '.join(fixed)} itself "
                f"({', '.join(f'{k}={self.fixed[k]!r}' for k in fixed)})"
            )

    def _check_required(self, options: Mapping[str, Any]) -> None:
        missing = [name for name in self.requires if options.get(name) is None]
        if missing:
            raise ValueError(
                f"strategy {self.name!r} needs {', '.join(f'{m}=' for m in missing)}"
                + (
                    " (a PositionProfile, its JSON file or a list of values, e.g. from "
                    "estimate_profile or `rag-position eval multidoc`'s profile.json)"
                    if "profile" in missing
                    else ""
                )
            )

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Refuse an option the row does not take, naming the ones it does."""
        self._check_fixed(options)
        unknown = sorted(set(options) - self.options)
        if unknown:
            raise TypeError(
                f"strategy {self.name!r} takes no option {', '.join(map(repr, unknown))}; "
                f"its options: {', '.join(sorted(self.options)) or 'none'}"
            )

    def __call__(
        self,
        question: str,
        passages: Sequence[Any],
        *,
        scorer: Scorer | None = None,
        generator: Generator | None = None,
        embedder: Embedder | None = None,
        seed: int = 0,
        **options: Any,
    ) -> OrderingResult[Any] | AnswerResult:
        self.check_options(options)
        self._check_required(options)
        check_question(question)
        models: dict[str, Any] = {"scorer": scorer, "generator": generator, "embedder": embedder}
        if "embedder" in self.needs and embedder is None:
            models["embedder"] = _embedded_embedder()
        for role in self.needs:
            if models[role] is None:
                raise ValueError(f"strategy {self.name!r} needs a {role}: pass {role}=")
        chat = bool(options.pop("chat", False)) if self.sandwich else False
        kwargs: dict[str, Any] = {**options, **self.fixed}
        kwargs.update({role: models[role] for role in self.uses if models[role] is not None})
        if "seed" in inspect.signature(self.function).parameters:
            kwargs["seed"] = seed
        lead = (question,) if self.takes_question else ()
        result: OrderingResult[Any] | AnswerResult = self.function(
            *lead, passages, *(models[role] for role in self.needs), **kwargs
        )
        if self.sandwich and isinstance(result, OrderingResult) and result.passages:
            result = replace(result, prompt=sandwich_prompt(question, result.passages, chat=chat))
        return result


@cache
def _embedded_embedder() -> Embedder:
    from rag_position.models.embedders import load_embedder

    return load_embedder("embedded")


STRATEGIES: Mapping[str, StrategySpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            StrategySpec("retriever", given_order, summary="the given order"),
            StrategySpec(
                "likelihood_selection",
                likelihood_selection,
                needs=("scorer",),
                component="LikelihoodReorder",
                record_keys=MappingProxyType({"question_loglik": None}),
                record=_likelihood_record,
                summary="the candidate order whose prompt makes the question most likely",
            ),
            StrategySpec(
                "convex_score",
                convex_score,
                needs=("scorer",),
                summary="ConvexScore's gold candidate first",
                component="ConvexScoreReorder",
                record_keys=MappingProxyType({"gold": False}),
                record=_convex_record,
                check=_check_convex,
            ),
            StrategySpec(
                "convex_score_profile",
                convex_score,
                needs=("scorer",),
                seed_group="convex_score",
                fixed=MappingProxyType({"placement": "profile"}),
                requires=("profile",),
                summary="ConvexScore's ranking placed down the model's position profile",
            ),
            StrategySpec(
                "passage_likelihood",
                passage_likelihood,
                needs=("scorer",),
                summary="the passage that alone makes the question most likely, first",
                component="PassageLikelihoodReorder",
                record_keys=MappingProxyType({"gold": False}),
                record=_passage_record,
                check=_check_placed,
            ),
            StrategySpec(
                "passage_likelihood_profile",
                passage_likelihood,
                needs=("scorer",),
                component="PassageLikelihoodReorder",
                fixed=MappingProxyType({"placement": "profile"}),
                requires=("profile",),
                summary="passages ranked by their own question likelihood, down the profile",
            ),
            StrategySpec(
                "select_and_place",
                select_and_place,
                needs=("scorer",),
                selects=True,
                summary="the passages likeliest to answer, the rest dropped, the best last",
                component="SelectAndPlace",
                record_keys=MappingProxyType(
                    {"likelihood_rank": 0, "posterior": 1.0, "dropped": []}
                ),
                record=_selection_record,
                check=_check_placed,
            ),
            StrategySpec(
                "select_and_place_profile",
                select_and_place,
                needs=("scorer",),
                selects=True,
                component="SelectAndPlace",
                fixed=MappingProxyType({"placement": "profile"}),
                requires=("profile",),
                summary="the passages likeliest to answer, down the position profile",
            ),
            StrategySpec(
                "edge",
                edge_reorder,
                summary="most relevant at the edges (LongContextReorder)",
                component="EdgeReorder",
            ),
            StrategySpec("sandwich", sandwich, summary="the question before and after"),
            StrategySpec(
                "convex_score_sandwich",
                convex_score,
                needs=("scorer",),
                seed_group="convex_score",
                sandwich=True,
                summary="ConvexScore's order in the query sandwich",
            ),
            StrategySpec(
                "profile",
                profile_reorder,
                uses=("scorer",),
                requires=("profile",),
                passes_to=convex_score,
                compared=False,
                component="ProfileReorder",
                record_keys=MappingProxyType({"relevance": "order"}),
                summary="most relevant at the profile's best position",
            ),
            StrategySpec(
                "fact",
                fact,
                needs=("generator",),
                answers=True,
                summary="FACT: find facts, rewrite the context, repeat; then answer",
            ),
            StrategySpec(
                "recite",
                recite_then_solve,
                needs=("generator",),
                answers=True,
                summary="recite the evidence, then answer from it alone",
            ),
            StrategySpec(
                "medoid",
                medoid_vote,
                needs=("generator", "embedder"),
                answers=True,
                summary="the medoid of answers over permuted contexts",
            ),
        )
    }
)
"""Name -> :class:`StrategySpec`, read-only. The names are the eval suite's ``--strategies``."""


def get_strategy(name: str) -> StrategySpec:
    """The row named ``name``; ``ValueError`` lists the names known.

    Example:
        >>> get_strategy("edge")("Who wrote Hamlet?", ["a", "b", "c"]).order
        [0, 2, 1]
        >>> get_strategy("nope")
        Traceback (most recent call last):
        ...
        ValueError: unknown strategy 'nope'; known: convex_score, ... select_and_place_profile
    """
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}"
        ) from None


def strategy_options(name: str) -> frozenset[str]:
    """The options the strategy ``name`` takes.

    Example:
        >>> sorted(strategy_options("edge"))
        ['mode', 'scores', 'top_k', 'word_count_threshold']
        >>> strategy_options("retriever")
        frozenset()
    """
    return get_strategy(name).options
