"""A tuned file's strategy, ready to call (:class:`TunedReorderer`, :func:`load_tuned`);
both are importable from :mod:`rag_position.tuned`, where the file's model lives."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from rag_position._tuned_models import hub_name, load_kwargs, trusted_spec, warn_if_other_model
from rag_position.strategies import AnswerResult, OrderingResult, StrategySpec
from rag_position.tuned import TunedChoice, TunedLike, as_tuned, profile_applies


class TunedReorderer:
    """A tuned file's strategy, ready to call: ``reorderer(question, passages)``.

    Runs ``STRATEGIES[choice.strategy]`` with the file's options (its ``seed`` as the
    row's ``seed=``) and its profile as ``profile=``; returns the row's result: an
    :class:`~rag_position.strategies.OrderingResult` for a reordering row (every row but
    ``fact``, ``recite`` and ``medoid``, which answer: an
    :class:`~rag_position.strategies.AnswerResult`). Made by :func:`load_tuned`.
    """

    def __init__(
        self,
        choice: TunedChoice,
        scorer: Any = None,
        *,
        generator: Any = None,
        embedder: Any = None,
        model: Any = None,
        trust_spec: bool = False,
    ) -> None:
        from rag_position.models.lazy import LazyModel

        if model is not None and (scorer is not None or generator is not None):
            raise ValueError("pass `model=` (for every role) or `scorer=`/`generator=`, not both")
        self.choice = choice
        row = choice.row
        roles = {*row.needs, *row.uses}
        given: dict[str, Any] = {
            "scorer": model if model is not None else scorer,
            "generator": model if model is not None else generator,
            "embedder": embedder,
        }
        self._models: dict[str, Any] = {}
        lazy: LazyModel[Any] | None = None
        seen: set[int] = set()
        for role in ("scorer", "generator"):
            if role not in roles:
                continue
            value = given[role]
            if value is None:
                if lazy is None:
                    spec = trusted_spec(choice, trust_spec=trust_spec)  # refused now
                    named = hub_name(choice.spec) if spec != choice.spec else None
                    loader = partial(_load_named, spec, load_kwargs(choice), named)
                    lazy = LazyModel(loader=loader, label=choice.spec, check=self._loaded)
                self._models[role] = lazy
            elif isinstance(value, str):  # a spec: loaded on first use (the file's: its dtype)
                kwargs = load_kwargs(choice) if value == choice.spec else {}
                if id(value) not in seen:
                    seen.add(id(value))
                    loader = partial(_load, value, kwargs)
                    strings = LazyModel(loader=loader, label=value, check=self._loaded)
                self._models[role] = strings
            else:
                if id(value) not in seen:
                    seen.add(id(value))
                    warn_if_other_model(choice, value, stacklevel=3)
                self._models[role] = value
        if "embedder" in roles and embedder is not None:
            self._models["embedder"] = embedder

    def _loaded(self, model: Any) -> Any:
        warn_if_other_model(self.choice, model, stacklevel=4)  # the caller of __call__
        return model

    @property
    def row(self) -> StrategySpec:
        """The row of the strategy table that runs."""
        return self.choice.row

    @property
    def strategy(self) -> str:
        """The strategy's name (the row's)."""
        return self.choice.strategy

    def options(self) -> dict[str, Any]:
        """The keyword options the row receives: the file's, and its profile as ``profile``
        where the row places by one."""
        options = dict(self.choice.options)
        if self.choice.profile is not None and profile_applies(self.row, options):
            options["profile"] = self.choice.profile
        return options

    def __call__(
        self, question: str, passages: Sequence[Any]
    ) -> OrderingResult[Any] | AnswerResult:
        """The row on ``passages`` (the file's model is loaded here first, if it is used)."""
        from rag_position.models.lazy import LazyModel

        models = {
            role: value.get() if isinstance(value, LazyModel) else value
            for role, value in self._models.items()
        }
        options = self.options()
        seed = options.pop("seed", 0)
        return self.row(question, passages, seed=seed, **models, **options)

    def __repr__(self) -> str:
        return (
            f"TunedReorderer(strategy={self.choice.strategy!r}, model={self.choice.model!r}, "
            f"options={dict(self.choice.options)!r})"
        )


def _load(spec: str, kwargs: Mapping[str, Any]) -> Any:
    from rag_position.models import load_model

    return load_model(spec, **kwargs)


def _load_named(spec: str, kwargs: Mapping[str, Any], name: str | None) -> Any:
    """``_load``; a model loaded from a hub name's cache folder is named by the hub name
    (as loading the hub name names it), not by the folder."""
    model = _load(spec, kwargs)
    if name is not None:
        with contextlib.suppress(AttributeError):
            model.name = name
    return model


def load_tuned(
    path: TunedLike,
    scorer: Any = None,
    *,
    generator: Any = None,
    embedder: Any = None,
    model: Any = None,
    trust_spec: bool = False,
) -> TunedReorderer:
    """The strategy a tuned file chose, as a reorderer: ``reorderer(question, passages)``.

    ``path``: the tuned file (``rag-position tune --out``; a :class:`TunedChoice` also
    does), read and checked now (:func:`read_tuned`'s errors). The reorderer runs
    ``STRATEGIES[choice.strategy]`` with the file's options and profile and returns the
    row's :class:`~rag_position.strategies.OrderingResult` (an
    :class:`~rag_position.strategies.AnswerResult` for the answering rows); ``.choice``
    is the file's :class:`TunedChoice`.

    Models: ``scorer=`` (a Scorer, e.g. ``load_model("embedded")``, or a spec string,
    loaded on the first call, with the file's ``dtype`` where it is the file's spec),
    ``generator=``, or ``model=`` for both roles (not together with them); ``embedder=``
    for ``medoid`` (default: the embedded one). A model the row needs and that is not
    given is the file's own: ``load_model(choice.spec, dtype=choice.dtype)`` (``dtype``
    for local backends), loaded on the first call, once. A file's spec is not trusted: a packaged
    model (``embedded``, ``embedded:...``) loads, but an ``openai:`` server or an ``hf:``
    model only with ``trust_spec=True`` (a
    :class:`~rag_position.errors.ModelSpecError` now otherwise; an ``hf:`` hub name then
    loads from the local Hugging Face cache only; see docs/models.md, "What you can rely
    on"). Rows without a model (``retriever``,
    ``edge``, ``sandwich``) ignore the models given. When a model in use has a ``name``
    other than the file's ``model``, a ``UserWarning`` names both (once: at this call
    for a model given, at loading for the file's own).

    Example::

        reorder = load_tuned("tuned.json", scorer=load_model("embedded"))
        result = reorder("Who wrote Hamlet?", passages)
        result.passages, result.cost, reorder.choice.evidence
    """
    return TunedReorderer(
        as_tuned(path),
        scorer,
        generator=generator,
        embedder=embedder,
        model=model,
        trust_spec=trust_spec,
    )
