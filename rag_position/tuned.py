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

The options' checks live in :mod:`rag_position._tuned_checks`, the loading of a file's
model in :mod:`rag_position._tuned_models`, the reorderer in
:mod:`rag_position._tuned_run`; their names are importable from here.

Example::

    from rag_position import load_tuned

    reorder = load_tuned("tuned.json")        # the file's model loads on first use
    result = reorder("Who wrote Hamlet?", passages)
    result.passages, reorder.choice.strategy
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rag_position._jsonfile import check_output_file, read_json, write_atomic
from rag_position._tuned_checks import Evidence, Questions, check_profile, check_row, readable
from rag_position._tuned_checks import accepted_options as accepted_options
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
from rag_position.strategies import STRATEGIES, StrategySpec
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


class TunedChoice(BaseModel):
    """The strategy ``rag-position tune`` chose for one model, with its evidence.

    A pydantic model: each field is declared once below, with its description and its
    constraints (``evidence`` items are :class:`~rag_position._tuned_checks.Evidence`,
    ``questions`` :class:`~rag_position._tuned_checks.Questions`; both keep more keys),
    and checked on construction: a ``ValueError`` names the first field that is wrong
    (an option the row does not take lists those it does). ``profile`` is given as the
    row's ``profile=`` where the row places by one, else kept as a record.
    :meth:`write` saves the file, :func:`read_tuned` reads it, :func:`load_tuned` runs it.

    Example::

        choice = TunedChoice(
            model="embedded:SmolLM2-135M-Instruct", spec="embedded", dtype="bfloat16",
            strategy="passage_likelihood", options={"placement": "last"}, profile=None,
            evidence=(), questions={"data": "multidoc", "first": 0, "n": 200},
            command="rag-position tune --model embedded --out tuned.json",
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        choice.write("tuned.json")
    """

    model_config = ConfigDict(
        frozen=True, strict=True, extra="forbid", arbitrary_types_allowed=True
    )

    model: str = Field(description="The measured model's name (its ``.name``).")
    spec: str = Field(description="The ``load_model`` spec it was loaded from.")
    dtype: Literal["bfloat16", "float16", "float32"] | None = Field(
        description="The dtype it was loaded with, or ``None``: the backend's own."
    )
    strategy: str = Field(description="The chosen row of the strategy table.")
    options: Mapping[str, Any] = Field(description="The row's options (``profile`` apart).")
    profile: PositionProfile | None = Field(
        description="The model's position profile, given where the row places by one."
    )
    evidence: tuple[dict[str, Any], ...] = Field(
        description="Each candidate's measurement (:class:`~rag_position._tuned_checks.Evidence`)."
    )
    questions: dict[str, Any] = Field(
        description="The questions measured (:class:`~rag_position._tuned_checks.Questions`)."
    )
    command: str = Field(description="The command that measured.")
    created: str = Field(description="When, an ISO 8601 UTC time (kept as written).")
    version: int = Field(default=VERSION, description="The tuned-file version.")
    rag_position: str = Field(
        default_factory=_package_version,
        description="The rag-position version that wrote the choice.",
    )

    def __init__(self, **fields: Any) -> None:
        """The choice, checked; a ``ValueError`` names the first field that is wrong."""
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise ValueError(readable(exc)) from None

    @field_validator("version")
    @classmethod
    def _version(cls, version: int) -> int:
        if version != VERSION:
            raise ValueError(
                f"`version` {version!r} is not one this rag-position "
                f"({_package_version()}) reads: it reads version {VERSION}"
            )
        return version

    @field_validator("model", "spec", "rag_position")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(f"must be a non-empty string, got {value!r}")
        return value

    @field_validator("spec")
    @classmethod
    def _spec(cls, spec: str) -> str:
        from rag_position.models import check_spec

        check_spec(spec, "spec")  # a spec load_model would refuse: refused when read
        return spec

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, strategy: str) -> str:
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {strategy!r}; accepted: {', '.join(sorted(STRATEGIES))}"
            )
        return strategy

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence(cls, evidence: Any) -> tuple[dict[str, Any], ...]:
        if isinstance(evidence, (str, bytes, Mapping)) or not isinstance(evidence, Sequence):
            raise ValueError(f"must be a list of objects, got {type(evidence).__name__}")
        found = []
        for i, item in enumerate(evidence):
            try:
                found.append(Evidence.model_validate(item).model_dump())
            except ValidationError as exc:
                raise ValueError(readable(exc, ("evidence", i))) from None
        return tuple(found)

    @field_validator("questions", mode="before")
    @classmethod
    def _questions(cls, questions: Any) -> dict[str, Any]:
        try:
            return Questions.model_validate(questions).model_dump()
        except ValidationError as exc:
            raise ValueError(readable(exc, ("questions",))) from None

    @field_validator("created", mode="before")
    @classmethod
    def _created(cls, created: Any) -> Any:
        if not isinstance(created, str):
            raise ValueError(f"must be an ISO 8601 string, got {created!r}")
        text = created[:-1] + "+00:00" if created.endswith(("Z", "z")) else created
        try:
            datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"must be an ISO 8601 time, got {created!r}") from None
        return created

    @model_validator(mode="before")
    @classmethod
    def _row_options(cls, data: Any) -> Any:
        """The options and profile checked against the row (its option model, its check)."""
        if not isinstance(data, Mapping) or data.get("strategy") not in STRATEGIES:
            return data
        row = STRATEGIES[data["strategy"]]
        options = data.get("options")
        if not isinstance(options, Mapping):
            raise ValueError(f"`options` must be an object, got {type(options).__name__}")
        checked = check_options(row, options)
        profile = check_profile(row, checked, data.get("profile"))
        check_row(row, checked, profile)
        return {**data, "options": MappingProxyType(checked), "profile": profile}

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
        if type(version) is not int or version != VERSION:
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
        try:
            write_atomic(target, text)
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot write tuned file {os.fspath(target)}: {exc.strerror or exc}"
            ) from None
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


# the reorderer a file makes: its own module, which reads TunedChoice from here
from rag_position._tuned_run import TunedReorderer, load_tuned  # noqa: E402
