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

``medoid``'s embedder defaults to the embedded all-MiniLM-L6-v2, loaded once; so does
``select_and_place``'s when ``similar=`` asks for one.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel

from rag_position.models.protocols import Embedder, Generator, Scorer
from rag_position.prompts import fill_template
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
from rag_position.strategies._options import opt, option_model
from rag_position.strategies._passage_likelihood import passage_likelihood
from rag_position.strategies._profile_reorder import profile_reorder
from rag_position.strategies._recite_then_solve import recite_then_solve
from rag_position.strategies._sandwich import sandwich, sandwich_prompt
from rag_position.strategies._select_and_place import select_and_place
from rag_position.strategies.profiles import check_placement

__all__ = [  # the table, and every row's public function (rag_position.strategies exports them)
    "STRATEGIES",
    "StrategySpec",
    "convex_score",
    "edge_reorder",
    "fact",
    "get_strategy",
    "likelihood_selection",
    "medoid_vote",
    "passage_likelihood",
    "profile_reorder",
    "recite_then_solve",
    "sandwich",
    "select_and_place",
]

Role = Literal["scorer", "generator", "embedder"]
_ROLES: tuple[Role, ...] = ("scorer", "generator", "embedder")
PROFILE = "profile"
_NOT_OPTIONS = frozenset({"question", "passages", "passages_or_context", "seed", *_ROLES})


def _check_template(options: Mapping[str, Any]) -> dict[str, Any]:
    """A custom ``template`` names both placeholders (else a ``ValueError`` now, not at
    the first query)."""
    if options.get("template") is not None:
        fill_template(options["template"], question="", search_results="")
    return {}


def _check_placed(options: Mapping[str, Any]) -> dict[str, Any]:
    """The template and placement rules at construction; the profile, resolved."""
    _check_template(options)
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


def convex_score_sandwich(
    question: str,
    passages: Sequence[Any],
    scorer: Scorer,
    *,
    chat: Annotated[
        bool, opt("Render the query sandwich as a chat user turn (see sandwich_prompt).")
    ] = False,
    seed: int = 0,
    **options: Any,
) -> OrderingResult[Any]:
    """ConvexScore's order (:func:`convex_score` with ``options``), answered with the query
    sandwich of that order (:func:`sandwich_prompt`) as ``result.prompt``."""
    result = convex_score(question, passages, scorer, seed=seed, **options)
    if not result.passages:
        return result
    return replace(result, prompt=sandwich_prompt(question, result.passages, chat=chat))


@dataclass(frozen=True)
class StrategySpec:
    """One row of the strategy table: call it like the function it names.

    ``function``: the public function the row calls. ``fixed``: options the name sets
    (``convex_score_profile`` places by the profile); ``passes_to``: the function that
    takes the row's further options (``profile`` hands them to ConvexScore, with
    ``relevance="convex_score"``). ``answers``: the row answers by itself (an
    :class:`~rag_position.strategies.AnswerResult`). ``selects``: the row may drop
    passages (``result.passages`` is a subset, in a new order;
    ``result.details["dropped"]`` lists the rest), where every other ordering row
    returns a permutation. ``check``: the construction-time check of the options (it
    returns the options it resolved, e.g. a profile file read).

    Derived from the function's signature: :attr:`needs` (the models it takes, in its
    positional order after the passages), :attr:`uses` (ones it takes when given, by
    keyword), :attr:`requires` (options a caller must give), :attr:`options` and
    :attr:`option_model` (its pydantic options). The framework integrations' facts (the
    component's class name, its metadata record) are their own table,
    ``rag_position._integration.components``; the eval's (seed groups, what ``compare``
    runs by default) are in ``rag_position.eval.rows``.

    Example:
        >>> spec = STRATEGIES["edge"]
        >>> spec("Who wrote Hamlet?", ["a", "b", "c"]).passages
        ['a', 'c', 'b']
        >>> spec.answers, sorted(spec.options)
        (False, ['mode', 'scores', 'top_k', 'word_count_threshold'])
        >>> STRATEGIES["medoid"].defaults["n_orders"], STRATEGIES["medoid"].needs
        (3, ('generator', 'embedder'))
    """

    name: str
    function: Callable[..., Any]
    summary: str = ""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    passes_to: Callable[..., Any] | None = None
    answers: bool = False
    selects: bool = False
    check: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None

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

    @cached_property
    def _roles(self) -> dict[Role, bool]:
        """The model roles the function takes -> whether it must be given (positional)."""
        return {
            p.name: p.default is inspect.Parameter.empty and p.kind != p.KEYWORD_ONLY
            for p in inspect.signature(self.function).parameters.values()
            if p.name in _ROLES
        }

    @property
    def needs(self) -> tuple[Role, ...]:
        """The models the function takes, in its positional order after the passages."""
        return tuple(role for role, given in self._roles.items() if given)

    @property
    def uses(self) -> tuple[Role, ...]:
        """The models the function takes when given (by keyword)."""
        return tuple(role for role, given in self._roles.items() if not given)

    @property
    def requires(self) -> tuple[str, ...]:
        """The options a caller must give: ``profile`` where the row places by one."""
        own = inspect.signature(self.function).parameters.get(PROFILE)
        needed = own is not None and own.default is inspect.Parameter.empty
        return (PROFILE,) if needed or self.fixed.get("placement") == PROFILE else ()

    @property
    def sandwich(self) -> bool:
        """The row answers with the query-aware prompt of its order (it takes ``chat=``)."""
        return "chat" in self._parameters

    @property
    def takes_question(self) -> bool:
        return "question" in inspect.signature(self.function).parameters

    @property
    def options(self) -> frozenset[str]:
        """The options a caller may set (the function's keywords, less what the name fixes)."""
        return frozenset(set(self._parameters) - set(self.fixed))

    @cached_property
    def option_model(self) -> type[BaseModel]:
        """The options as a pydantic model (names, types, defaults, constraints, descriptions).

        Generated from the annotated signature of the row's function (and of
        ``passes_to``), less what the name fixes; both integrations' components
        inherit it.
        """
        functions = [f for f in (self.passes_to, self.function) if f is not None]
        name = self.name.title().replace("_", "") + "Options"
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
        if embedder is None and "embedder" in self.needs:
            models["embedder"] = _embedded_embedder()
        elif embedder is None and "embedder" in self.uses:  # loaded if the options use it
            models["embedder"] = _EmbeddedOnUse()
        for role in self.needs:
            if models[role] is None:
                raise ValueError(f"strategy {self.name!r} needs a {role}: pass {role}=")
        for given, value in models.items():
            if isinstance(value, str):
                load = "load_embedder" if given == "embedder" else "load_model"
                raise TypeError(
                    f"`{given}` is the string {value!r}, not a model: pass "
                    f"rag_position.{load}({value!r})"
                )
        kwargs: dict[str, Any] = {**options, **self.fixed}
        kwargs.update({role: models[role] for role in self.uses if models[role] is not None})
        if "seed" in inspect.signature(self.function).parameters:
            kwargs["seed"] = seed
        lead = (question,) if self.takes_question else ()
        result: OrderingResult[Any] | AnswerResult = self.function(
            *lead, passages, *(models[role] for role in self.needs), **kwargs
        )
        return result


@cache
def _embedded_embedder() -> Embedder:
    from rag_position.models.embedders import load_embedder

    return load_embedder("embedded")


class _EmbeddedOnUse:
    """The embedded embedder, loaded on the first ``embed`` (a row that may use one)."""

    def embed(self, texts: Sequence[str]) -> Any:
        return _embedded_embedder().embed(texts)


STRATEGIES: Mapping[str, StrategySpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            StrategySpec("retriever", given_order, summary="the given order"),
            StrategySpec(
                "likelihood_selection",
                likelihood_selection,
                summary="the candidate order whose prompt makes the question most likely",
                check=_check_template,
            ),
            StrategySpec(
                "convex_score",
                convex_score,
                summary="ConvexScore's gold candidate first",
                check=_check_convex,
            ),
            StrategySpec(
                "convex_score_profile",
                convex_score,
                fixed=MappingProxyType({"placement": "profile"}),
                summary="ConvexScore's ranking placed down the model's position profile",
            ),
            StrategySpec(
                "passage_likelihood",
                passage_likelihood,
                summary="the passage that alone makes the question most likely, first",
                check=_check_placed,
            ),
            StrategySpec(
                "passage_likelihood_profile",
                passage_likelihood,
                fixed=MappingProxyType({"placement": "profile"}),
                summary="passages ranked by their own question likelihood, down the profile",
            ),
            StrategySpec(
                "select_and_place",
                select_and_place,
                selects=True,
                summary="the passages likeliest to answer, the rest dropped, the best last",
                check=_check_placed,
            ),
            StrategySpec(
                "select_and_place_profile",
                select_and_place,
                selects=True,
                fixed=MappingProxyType({"placement": "profile"}),
                summary="the passages likeliest to answer, down the position profile",
            ),
            StrategySpec(
                "edge",
                edge_reorder,
                summary="most relevant at the edges (LongContextReorder)",
            ),
            StrategySpec("sandwich", sandwich, summary="the question before and after"),
            StrategySpec(
                "convex_score_sandwich",
                convex_score_sandwich,
                passes_to=convex_score,
                summary="ConvexScore's order in the query sandwich",
            ),
            StrategySpec(
                "profile",
                profile_reorder,
                passes_to=convex_score,
                summary="most relevant at the profile's best position",
            ),
            StrategySpec(
                "fact",
                fact,
                answers=True,
                summary="FACT: find facts, rewrite the context, repeat; then answer",
            ),
            StrategySpec(
                "recite",
                recite_then_solve,
                answers=True,
                summary="recite the evidence, then answer from it alone",
            ),
            StrategySpec(
                "medoid",
                medoid_vote,
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
