"""Options declared once: in the strategy function's signature.

A strategy's keyword options carry their description and constraints where they are
declared, as ``Annotated[type, opt("description", ge=1)]``. :func:`option_model`
turns a signature into the pydantic model both framework integrations build their
components on, so a default, a constraint or a description is written in one place.

Example:
    >>> def f(question, passages, *, n: Annotated[int, opt("How many.", ge=1)] = 3): ...
    >>> option_model("F", (f,)).model_fields["n"].description
    'How many.'
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from types import UnionType
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, create_model
from pydantic.fields import FieldInfo

__all__ = [
    "CORE_ONLY",
    "LOOSE",
    "PLACEMENT_DOC",
    "PROFILE_DOC",
    "QUERY_AWARE_DOC",
    "REST_DOC",
    "TEMPLATE_DOC",
    "As",
    "opt",
    "option_model",
    "signature_options",
]

PLACEMENT_DOC = "Where the top passage (the gold candidate) goes: 'first', 'last' or 'profile'."
REST_DOC = "The rest: 'keep' their order or follow their 'scores' (default by placement)."
PROFILE_DOC = "A PositionProfile, its JSON path, or a list of numbers (placement='profile')."
TEMPLATE_DOC = "A QA template with {question} and {search_results} to score with."
QUERY_AWARE_DOC = "Score with the query-aware prompt (the question before and after)."


class _Loose:
    """Marker: the framework field takes any value; the core function checks it."""

    def __repr__(self) -> str:
        return "LOOSE"


LOOSE = _Loose()
"""Put in an option's ``Annotated`` metadata when pydantic must not coerce its value
(a profile may be a PositionProfile, a path or a list: the core resolves it)."""


class _CoreOnly:
    """Marker: a keyword of the core function only (a callable), not a component option."""

    def __repr__(self) -> str:
        return "CORE_ONLY"


CORE_ONLY = _CoreOnly()
"""Put in an option's ``Annotated`` metadata to leave it out of the components' options
(a callable such as FACT's ``retrieve``: a framework component builds it itself)."""


class As:
    """Marker: the type a framework component takes for this option (``As(Literal[...])``
    where the core also takes a callable)."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind


def opt(description: str, **constraints: Any) -> Any:
    """An option's description and pydantic constraints (``ge``, ``gt``, ``le``...)."""
    return Field(description=description, **constraints)


def signature_options(
    function: Callable[..., Any], exclude: Iterable[str] = ()
) -> dict[str, tuple[Any, FieldInfo]]:
    """``function``'s keyword options as pydantic field definitions ``{name: (type, Field)}``.

    Positional-only and ``*args``/``**kwargs`` parameters, parameters without a default
    and the names in ``exclude`` are left out. A parameter without an ``opt(...)`` gets an
    empty description.
    """
    hints = typing.get_type_hints(function, include_extras=True)
    skip = set(exclude)
    found: dict[str, tuple[Any, FieldInfo]] = {}
    for p in inspect.signature(function).parameters.values():
        if p.name in skip or p.default is inspect.Parameter.empty:
            continue
        if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        hint = hints.get(p.name, Any)
        info = FieldInfo(description="")
        kind = hint
        if typing.get_origin(hint) is Annotated:
            kind, *extras = typing.get_args(hint)
            if any(extra is CORE_ONLY for extra in extras):
                continue
            for extra in extras:
                if isinstance(extra, FieldInfo):
                    info = extra
                if extra is LOOSE:
                    kind = Any
                if isinstance(extra, As):
                    kind = extra.kind
        if _numeric(kind):  # a number is a number: no text, no bool, no 2.0 for an int
            kind = Annotated[kind, Strict()]
        field = FieldInfo.merge_field_infos(info, default=p.default)
        found[p.name] = (kind, field)
    return found


def _numeric(kind: Any) -> bool:
    """Whether ``kind`` is ``int`` or ``float`` (or either or ``None``): an option every
    door (core, frameworks, tuned files, the CLI) reads strictly, refusing a bool, text
    and, for an integer, a float."""
    if kind in (int, float):
        return True
    members = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, UnionType) else ()
    others = [m for m in members if m is not type(None)]
    return bool(others) and all(m in (int, float) for m in others)


def option_model(
    name: str,
    functions: Iterable[Callable[..., Any]],
    exclude: Iterable[str] = (),
    doc: str = "",
) -> type[BaseModel]:
    """A pydantic model with the keyword options of ``functions`` (a later one wins).

    ``exclude``: names that are not options (the models, the seed a caller derives).
    """
    fields: dict[str, Any] = {}
    for function in functions:
        fields.update(signature_options(function, exclude))
    model: type[BaseModel] = create_model(
        name,
        __config__=ConfigDict(arbitrary_types_allowed=True, allow_inf_nan=False),
        __doc__=doc or None,
        **fields,
    )
    return model
