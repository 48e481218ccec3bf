"""Tuned for your model: the strategy ``rag-position tune`` chose, as a file, and its use.

``rag-position tune --model SPEC --out tuned.json`` measures the strategies on a model
and writes the winner as a *tuned file* (:class:`TunedChoice`, JSON, version 1)::

    {"format": "rag-position/tuned", "version": 1,
     "model": "embedded:SmolLM2-135M-Instruct",      # the loaded model's name
     "spec": "embedded",                              # the load_model spec measured
     "dtype": "bfloat16",                             # "float16", "float32", or null
     "strategy": "passage_likelihood",                # a row of STRATEGIES
     "options": {"placement": "last"},                # the row's options (no profile)
     "profile": null,                                 # PositionProfile.to_dict() or null
     "evidence": [{"strategy": ..., "n": ..., "accuracy": ..., "low": ..., "high": ...,
                   "wins": ..., "losses": ..., "p_value": ..., "tokens_per_question": ...}],
     "questions": {"data": ..., "first": ..., "n": ...},
     "command": "rag-position tune ...", "created": "2026-05-09T07:35:25+00:00",
     "rag_position": "0.1.0"}

:func:`read_tuned` reads and checks one (every error names the file and what is wrong);
:func:`load_tuned` turns one into a reorderer, ``reorderer(question, passages)``, that
runs the chosen row of :data:`~rag_position.strategies.STRATEGIES` with the file's
options and profile. Both framework integrations take the same file
(``PositionAwareRetriever(tuned="tuned.json")``, ``from_tuned("tuned.json")``).

The fields' checks live in :mod:`rag_position._tuned_checks`, the loading of a file's
model (and the consent it needs) in :mod:`rag_position._tuned_models`; the names they
had here (``check_options``, ``profile_applies``, ``trusted_spec``...) are imported
from here as before (re-exported, ``from ... import name as name``).

Example::

    from rag_position import load_tuned

    reorder = load_tuned("tuned.json")        # the file's model loads on first use
    result = reorder("Who wrote Hamlet?", passages)
    result.passages, reorder.choice.strategy
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rag_position._jsonfile import check_output_file, read_json
from rag_position._tuned_checks import accepted_options as accepted_options
from rag_position._tuned_checks import (
    check_created,
    check_evidence,
    check_profile,
    check_questions,
    check_row,
    check_text,
    is_int,
)
from rag_position._tuned_checks import check_options as check_options
from rag_position._tuned_checks import profile_applies as profile_applies
from rag_position._tuned_checks import takes_profile as takes_profile
from rag_position._tuned_models import hub_name as hub_name
from rag_position._tuned_models import load_kwargs as load_kwargs
from rag_position._tuned_models import model_label as model_label
from rag_position._tuned_models import spec_needs_trust as spec_needs_trust
from rag_position._tuned_models import trusted_spec as trusted_spec
from rag_position._tuned_models import warn_if_other_model as warn_if_other_model
from rag_position.errors import DataFormatError
from rag_position.strategies import STRATEGIES, AnswerResult, OrderingResult, StrategySpec
from rag_position.strategies.profiles import PositionProfile

__all__ = ["FORMAT", "VERSION", "TunedChoice", "TunedReorderer", "load_tuned", "read_tuned"]

FORMAT = "rag-position/tuned"
"""The ``"format"`` of every tuned file."""

VERSION = 1
"""The tuned-file version this library reads and writes."""

DTYPES = ("bfloat16", "float16", "float32")
"""The ``"dtype"`` values a tuned file may name (or ``null``: the backend's own)."""

_KEYS = (
    "format", "version", "model", "spec", "dtype", "strategy", "options", "profile",
    "evidence", "questions", "command", "created", "rag_position",
)  # fmt: skip


def _package_version() -> str:
    from rag_position._version import __version__

    return __version__


@dataclass(frozen=True)
class TunedChoice:
    """The strategy ``rag-position tune`` chose for one model, with its evidence.

    ``model``: the measured model's name (its ``.name``, e.g.
    ``"embedded:SmolLM2-135M-Instruct"``); ``spec``: the ``load_model`` spec it was loaded
    from; ``dtype``: ``"bfloat16"``, ``"float16"``, ``"float32"`` or ``None`` (the
    backend's own); ``strategy``: a row of :data:`~rag_position.strategies.STRATEGIES`;
    ``options``: the row's options (its component's, as JSON values; ``seed`` included,
    ``profile`` not);
    ``profile``: the model's :class:`~rag_position.strategies.PositionProfile` (or
    ``None``), given as the row's ``profile=`` where the row places by one (it requires
    one, or its ``placement`` is ``"profile"``), else kept as a record; ``evidence``: per
    strategy measured ``{"strategy", "n", "accuracy", "low", "high", "wins", "losses", "p_value",
    "tokens_per_question"}`` (``wins``, ``losses``, ``p_value`` may be ``None``, e.g. for
    the reference; more keys are kept); ``questions``: ``{"data", "first", "n"}`` (more
    keys are kept), the questions measured; ``command``: the command that measured;
    ``created``: an ISO 8601 UTC time.

    Everything is checked on construction (a ``ValueError`` says what is wrong; an option
    the row does not take lists those it does). :meth:`write` saves the file,
    :func:`read_tuned` reads it, :func:`load_tuned` runs it.

    Example::

        choice = TunedChoice(
            model="embedded:SmolLM2-135M-Instruct", spec="embedded", dtype="bfloat16",
            strategy="passage_likelihood", options={"placement": "last"}, profile=None,
            evidence=(), questions={"data": "multidoc", "first": 0, "n": 200},
            command="rag-position tune --model embedded --out tuned.json",
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        choice.write("tuned.json")
    """

    model: str
    spec: str
    dtype: str | None
    strategy: str
    options: Mapping[str, Any]
    profile: PositionProfile | None
    evidence: tuple[dict[str, Any], ...]
    questions: dict[str, Any]
    command: str
    created: str
    version: int = VERSION
    rag_position: str = field(default_factory=_package_version)
    """The rag-position version that wrote the choice."""

    def __post_init__(self) -> None:
        if not is_int(self.version) or self.version != VERSION:
            raise ValueError(
                f"`version` {self.version!r} is not one this rag-position "
                f"({_package_version()}) reads: it reads version {VERSION}"
            )
        check_text("model", self.model)
        check_text("spec", self.spec)
        from rag_position.models import check_spec

        check_spec(self.spec, "spec")  # a spec load_model would refuse: refused when read
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(
                f"`dtype` must be one of {', '.join(DTYPES)} or null, got {self.dtype!r}"
            )
        if not isinstance(self.strategy, str) or self.strategy not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {self.strategy!r}; accepted: {', '.join(sorted(STRATEGIES))}"
            )
        row = STRATEGIES[self.strategy]
        if not isinstance(self.options, Mapping):
            raise ValueError(f"`options` must be an object, got {type(self.options).__name__}")
        options = check_options(row, self.options)
        profile = check_profile(row, options, self.profile)
        check_row(row, options, profile)
        object.__setattr__(self, "options", MappingProxyType(options))
        object.__setattr__(self, "profile", profile)
        object.__setattr__(self, "evidence", check_evidence(self.evidence))
        object.__setattr__(self, "questions", check_questions(self.questions))
        check_text("command", self.command, empty=True)
        check_created(self.created)
        check_text("rag_position", self.rag_position)

    @property
    def row(self) -> StrategySpec:
        """The chosen row of the strategy table."""
        return STRATEGIES[self.strategy]

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object (version 1)."""
        return {
            "format": FORMAT,
            "version": self.version,
            "model": self.model,
            "spec": self.spec,
            "dtype": self.dtype,
            "strategy": self.strategy,
            "options": dict(self.options),
            "profile": None if self.profile is None else self.profile.to_dict(),
            "evidence": [dict(e) for e in self.evidence],
            "questions": dict(self.questions),
            "command": self.command,
            "created": self.created,
            "rag_position": self.rag_position,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> TunedChoice:
        """The choice a tuned file's JSON object holds; ``ValueError`` says what is wrong."""
        if not isinstance(record, Mapping):
            raise ValueError(f"a tuned file holds a JSON object, got a {type(record).__name__}")
        if record.get("format") != FORMAT:
            raise ValueError(
                f"not a rag-position tuned file: `format` is {record.get('format')!r}, "
                f"expected {FORMAT!r} (rag-position tune --model SPEC --out FILE writes one)"
            )
        version = record.get("version")
        if version != VERSION or not is_int(version):
            raise ValueError(
                f"tuned-file version {version!r}: this rag-position ({_package_version()}) "
                f"reads version {VERSION}"
            )
        missing = [k for k in _KEYS if k not in record]
        if missing:
            raise ValueError(f"missing keys: {', '.join(missing)}")
        unknown = sorted(str(k) for k in set(record) - set(_KEYS))
        if unknown:
            raise ValueError(
                f"unknown keys: {', '.join(unknown)} (version {VERSION} has {', '.join(_KEYS)})"
            )
        return cls(
            model=record["model"],
            spec=record["spec"],
            dtype=record["dtype"],
            strategy=record["strategy"],
            options=record["options"],
            profile=record["profile"],
            evidence=record["evidence"],
            questions=record["questions"],
            command=record["command"],
            created=record["created"],
            version=record["version"],
            rag_position=record["rag_position"],
        )

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Save the file at ``path`` (atomically: a temporary file beside it, then renamed).

        ``path`` must be a regular file (replaced) or a new name in a folder that exists:
        a folder, a device or a FIFO is refused before anything is written (a
        ``ValueError`` naming it), as is a name in a missing folder.
        """
        target = check_output_file(path, what="tuned file")
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot write tuned file {os.fspath(target)}: {exc.strerror or exc}"
            ) from None
        finally:
            tmp.unlink(missing_ok=True)
        return target


def read_tuned(path: str | os.PathLike[str]) -> TunedChoice:
    """The :class:`TunedChoice` in the tuned file at ``path``.

    Every problem is a :class:`~rag_position.errors.DataFormatError` (a ``ValueError``)
    naming the file and what is wrong: no such file, not JSON, another format or version
    (it says which version this library reads), an unknown strategy (it lists the
    accepted ones), an option the strategy does not take or refuses (it lists those it
    takes), a bad profile, evidence or question range.
    """
    where = os.fspath(path)
    hint = "write one with `rag-position tune --model SPEC --out FILE`"
    try:
        record = read_json(path, what="tuned file", hint=hint)
    except FileNotFoundError as exc:
        raise DataFormatError(str(exc)) from None
    try:
        return TunedChoice.from_dict(record)
    except (ValueError, TypeError) as exc:
        raise DataFormatError(f"tuned file {where!r}: {exc}") from None


TunedLike = TunedChoice | str | os.PathLike[str]
"""A tuned choice, or the path of its file."""


def as_tuned(tuned: TunedLike) -> TunedChoice:
    """``tuned`` itself, or the choice read from its file (:func:`read_tuned`)."""
    if isinstance(tuned, TunedChoice):
        return tuned
    if isinstance(tuned, (str, os.PathLike)):
        return read_tuned(tuned)
    raise TypeError(
        f"`tuned` must be the path of a tuned file or a TunedChoice, got {type(tuned).__name__}"
    )


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

    Models: ``scorer=`` (a Scorer, e.g. ``load_model("embedded")``), ``generator=``, or
    ``model=`` for both roles (not together with them); ``embedder=`` for ``medoid``
    (default: the embedded one). A model the row needs and that is not given is the
    file's own: ``load_model(choice.spec, dtype=choice.dtype)`` (``dtype`` for local
    backends), loaded on the first call, once. A file's spec is not trusted: a packaged
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
