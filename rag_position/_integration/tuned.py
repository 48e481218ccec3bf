"""A tuned file (:mod:`rag_position.tuned`) as a framework component's construction.

Both integrations build the component a tuned file chose the same way:
:func:`tuned_component` says which component (by class name; :data:`GIVEN_ORDER` for the
``retriever`` row, the given order) with which keyword arguments (the file's options and
profile, the caller's framework-side options, the scorer), and whether the scorer in use
must be compared with the file's model once it is loaded (:meth:`TunedComponent.check_model`,
a ``UserWarning`` naming both). Nothing here imports LangChain or LlamaIndex.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rag_position._integration.components import COMPONENT_TABLE, component_of
from rag_position.models.lazy import LazyModel
from rag_position.strategies import StrategySpec
from rag_position.tuned import (
    TunedChoice,
    TunedLike,
    as_tuned,
    load_kwargs,
    profile_applies,
    trusted_spec,
    warn_if_other_model,
)

GIVEN_ORDER = "GivenOrder"
"""The class name of the component for the ``retriever`` row (the given order, recorded)."""

EMBEDDER_FIELDS = ("embeddings", "embed_model")
"""The components' embedder fields (LangChain's, LlamaIndex's): a file whose options use
an embedder (``similar``) gets the packaged one, ``"embedded"``, as ``tune`` measured
with, where the caller gives none."""

_PROFILE_OWN = frozenset({"relevance", "profile"})
"""The ``profile`` row's own options; the rest are ConvexScore's (``convex_options``)."""


@dataclass(frozen=True)
class TunedComponent:
    """What to build for a tuned file: ``component`` (a class name of the integration's
    reordering components, or :data:`GIVEN_ORDER`) with ``options``; ``watch``: compare
    the scorer with the file's model once it is loaded (a scorer given as the file's own
    spec, or none, is not compared)."""

    choice: TunedChoice
    component: str
    options: dict[str, Any] = field(default_factory=dict)
    watch: bool = False

    def check_model(self, model: Any) -> None:
        """A ``UserWarning`` when ``model``'s name is not the file's ``model``."""
        warn_if_other_model(self.choice, model, stacklevel=4)


def check_tuned_strategy(choice: TunedChoice, strategy: Any) -> None:
    """``ValueError`` when a ``strategy`` given beside ``tuned=`` is not the file's."""
    if strategy is None or strategy == choice.strategy:
        return
    given = repr(strategy) if isinstance(strategy, str) else f"a {type(strategy).__name__}"
    raise ValueError(
        f"`tuned` sets the strategy ({choice.strategy!r}, from the tuned file for "
        f"{choice.model!r}), and `strategy` is {given}: leave one of them out"
    )


def _component_of(row: StrategySpec) -> str:
    if row.answers or row.sandwich:
        what = "answers the question" if row.answers else "rewrites the prompt (query sandwich)"
        raise ValueError(
            f"the tuned strategy {row.name!r} {what}, which a reordering component cannot "
            "do; run it with rag_position.load_tuned(...), or tune for reordering strategies"
        )
    if row.name == "retriever":
        return GIVEN_ORDER
    own = component_of(row.name)
    if own is not None:
        return own.name
    for owner in COMPONENT_TABLE:  # convex_score_profile: ConvexScoreReorder
        if owner.row.function is row.function:
            return owner.name
    raise ValueError(f"the tuned strategy {row.name!r} has no reordering component")


def _file_options(choice: TunedChoice) -> dict[str, Any]:
    """The file's options as the component's keyword arguments."""
    row = choice.row
    options = dict(choice.options)
    if row.name == "profile":  # ProfileReorder: relevance, profile, convex_options
        own = {k: v for k, v in options.items() if k in _PROFILE_OWN}
        convex = {k: v for k, v in options.items() if k not in _PROFILE_OWN}
        if own.get("relevance") != "convex_score":  # the default is not
            convex.pop("seed", None)  # unused by the other relevances
        options = {**own, **({"convex_options": convex} if convex else {})}
    else:
        options.update(row.fixed)
    if choice.profile is not None and profile_applies(row, choice.options):
        options["profile"] = choice.profile
    return options


def tuned_component(
    tuned: TunedLike,
    *,
    scorer: Any = None,
    options: Mapping[str, Any] | None = None,
    trust_spec: bool = False,
) -> TunedComponent:
    """The component a tuned file chose, with its keyword arguments.

    ``options``: the caller's, merged with the file's; one the file sets to another value
    is a ``ValueError`` naming both. ``scorer``: used where the row scores (else ignored,
    with any ``scorer_kwargs``); ``None`` is the file's own spec, loaded with the file's
    ``dtype`` on first use: a packaged model's, or with ``trust_spec`` an ``openai:`` or
    ``hf:`` one (an ``hf:`` hub name from the local cache only); else a
    ``ModelSpecError`` now (:func:`rag_position.tuned.trusted_spec`). A scorer spec string
    equal to the file's is the caller's own choice, loaded as given.
    """
    choice = as_tuned(tuned)
    row = choice.row
    component = _component_of(row)
    made = _file_options(choice)
    given = dict(options or {})
    scores = "scorer" in {*row.needs, *row.uses}
    if not scores:
        given.pop("scorer_kwargs", None)
    conflicts = sorted(k for k in given if k in made and not _same(given[k], made[k]))
    if conflicts:
        raise ValueError(
            "the tuned file sets "
            + ", ".join(f"{k}={made[k]!r} (given {given[k]!r})" for k in conflicts)
            + ": leave them out, or leave out `tuned`"
        )
    made.update(given)
    watch = False
    if scores:
        if scorer is None:
            made["scorer"] = trusted_spec(choice, trust_spec=trust_spec)
            if "scorer_kwargs" not in given:
                kwargs = load_kwargs(choice)
                if kwargs:
                    made["scorer_kwargs"] = kwargs
        else:
            made["scorer"] = scorer
            watch = not (isinstance(scorer, str) and scorer == choice.spec)
    return TunedComponent(choice, component, made, watch)


def build_tuned(
    components: Mapping[str, Any],
    tuned: TunedLike,
    scorer: Any = None,
    *,
    trust_spec: bool = False,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """Both frameworks' ``from_tuned``: the component the tuned file's row names
    (:mod:`.components`, or ``GivenOrder`` for the retriever), looked up in
    ``components`` (the framework module's namespace, where every row's component is
    defined), built with the file's options and the caller's (:func:`tuned_component`);
    an embedder the file's own options need and the caller left out is the packaged one
    (:data:`EMBEDDER_FIELDS`); ``similar`` the caller adds needs the caller's embedder, as
    when the component is built by hand.
    A scorer other than the file's is checked against the file's model name once loaded.
    """
    plan = tuned_component(tuned, scorer=scorer, options=options, trust_spec=trust_spec)
    cls = components[plan.component]
    kwargs = dict(plan.options)
    if plan.choice.options.get("similar"):  # tune measured with the packaged embedder
        declared = getattr(cls, "model_fields", {})
        for name in EMBEDDER_FIELDS:
            if name in declared and kwargs.get(name) is None:
                kwargs[name] = "embedded"
    made = cls(**kwargs)
    holder = getattr(made, "scorer_holder", None)
    if plan.watch and isinstance(holder, LazyModel):
        holder.add_check(plan.check_model)
    return made


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an object without a usable ==
        return a is b
