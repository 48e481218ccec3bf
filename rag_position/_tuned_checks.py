"""The checks a tuned file's fields pass, for :mod:`rag_position.tuned`.

:class:`~rag_position.tuned.TunedChoice` runs them on construction (so does
:func:`~rag_position.tuned.read_tuned`, through it): the options against the row's
option model (:func:`check_options`, which the eval's ``tune`` also runs on its
candidates), the profile where the row places by one (:func:`check_profile`), the row's
own construction-time check (:func:`check_row`); the evidence and the question range are
the pydantic models :class:`Evidence` and :class:`Questions`. Each raises a
``ValueError`` saying what is wrong.
Also here: which options a row takes (:func:`accepted_options`) and whether it places
by a profile (:func:`takes_profile`, :func:`profile_applies`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rag_position.strategies import StrategySpec
from rag_position.strategies.profiles import PositionProfile

__all__ = [
    "Evidence",
    "Questions",
    "accepted_options",
    "check_options",
    "check_profile",
    "check_row",
    "profile_applies",
    "readable",
    "takes_profile",
]

Finite = Annotated[float, Field(allow_inf_nan=False)]


class Evidence(BaseModel):
    """One candidate's measurement in a tuned file's ``evidence`` (more keys are kept)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    strategy: str = Field(description="The candidate: a row, or ``row:option=value``.")
    n: int = Field(ge=0, description="How many questions it was measured on.")
    accuracy: Finite = Field(description="Its accuracy, in percent.")
    low: Finite = Field(description="The lower end of its 95% bootstrap interval.")
    high: Finite = Field(description="The upper end of its 95% bootstrap interval.")
    wins: int | None = Field(description="Questions it got right and the reference wrong.")
    losses: int | None = Field(description="Questions it got wrong and the reference right.")
    p_value: Finite | None = Field(description="The sign test's p-value against the reference.")
    tokens_per_question: Finite = Field(description="Its prompt tokens per question.")


class Questions(BaseModel):
    """The questions a tuned file's choice was measured on (more keys are kept)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    data: str = Field(description="The data file (or the packaged dev file's name).")
    first: int = Field(ge=0, description="The first question's index.")
    n: int = Field(ge=0, description="How many, from ``first`` on.")


def readable(exc: ValidationError, at: tuple[str | int, ...] = ()) -> str:
    r"""A tuned file's first problem in ``exc``, as one line naming the field:
    ```\`evidence[0].n`: Input should be a valid integer (got '60')```; missing keys
    together (```\`questions` lacks first```); a check's own message as it is."""
    errors = exc.errors()
    first = errors[0]
    loc = (*at, *first["loc"])
    if first["type"] == "missing":
        parent = loc[:-1]
        lacking = [
            e["loc"][-1]
            for e in errors
            if (*at, *e["loc"])[:-1] == parent and e["type"] == "missing"
        ]
        return f"`{_where(parent)}` lacks {', '.join(map(str, lacking))}"
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "value_error":
        return f"`{_where(loc)}` {message}" if message.startswith("must") else message
    return f"`{_where(loc)}`: {message} (got {first.get('input')!r})"


def _where(loc: tuple[Any, ...]) -> str:
    """``("evidence", 0, "n")`` as ``evidence[0].n``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def accepted_options(row: StrategySpec) -> frozenset[str]:
    """The options a tuned file may give ``row`` (its components' options, less ``profile``,
    which has its own key; ``chat`` where the row answers with the query sandwich)."""
    return frozenset(set(row.option_model.model_fields) - {"profile"})


def takes_profile(row: StrategySpec) -> bool:
    """Whether ``row`` takes a ``profile=`` option."""
    return "profile" in row.option_model.model_fields


def profile_applies(row: StrategySpec, options: Mapping[str, Any]) -> bool:
    """Whether ``row`` with ``options`` places by a profile (it then receives the file's
    ``profile`` as ``profile=``): it requires one, or its placement is ``"profile"``."""
    if not takes_profile(row):
        return False
    if "profile" in row.requires:
        return True
    placement = options.get("placement", row.fixed.get("placement", row.defaults.get("placement")))
    return bool(placement == "profile")


def is_int(value: Any) -> bool:
    """Whether ``value`` is an ``int`` (a ``bool`` is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_options(row: StrategySpec, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked against ``row``'s option model, as a tuned file's are: a
    ``ValueError`` naming the option, else the values as the row reads them (the eval's
    ``tune`` checks its candidates so)."""
    if not all(isinstance(k, str) for k in options):
        raise ValueError("`options` must have string keys")
    accepted = accepted_options(row)
    unknown = sorted(set(options) - accepted)
    if unknown:
        fixed = [k for k in unknown if k in row.fixed]
        sets = (
            f" (the strategy sets {', '.join(f'{k}={row.fixed[k]!r}' for k in fixed)} itself)"
            if fixed
            else ""
        )
        profile = " (the profile has its own key, `profile`)" if "profile" in unknown else ""
        raise ValueError(
            f"strategy {row.name!r} takes no option {', '.join(map(repr, unknown))}{sets}"
            f"{profile}; its options: {', '.join(sorted(accepted)) or 'none'}"
        )
    checked = {k: v for k, v in options.items() if k != "chat"}
    if "chat" in options and not isinstance(options["chat"], bool):
        raise ValueError(f"option `chat` must be true or false, got {options['chat']!r}")
    try:
        model = row.option_model.model_validate(checked)
    except ValidationError as exc:
        problems = "; ".join(
            f"option `{'.'.join(map(str, e['loc']))}`: {e['msg']} (got {e.get('input')!r})"
            for e in exc.errors()
        )
        raise ValueError(
            f"strategy {row.name!r} refuses its options: {problems}; its options: "
            f"{', '.join(sorted(accepted)) or 'none'}"
        ) from None
    template = getattr(model, "template", None) if "template" in checked else None
    if template is not None:  # refused when read, not at the first call
        from rag_position.strategies._question_likelihood import check_template

        try:
            check_template(template, bool(getattr(model, "query_aware", False)))
        except ValueError as exc:
            raise ValueError(
                f"strategy {row.name!r} refuses its options: option `template`: {exc}"
            ) from None
    return {k: (getattr(model, k) if k in checked else options[k]) for k in options}


def check_profile(
    row: StrategySpec, options: Mapping[str, Any], profile: Any
) -> PositionProfile | None:
    if profile is None:
        if profile_applies(row, options):
            raise ValueError(
                f"strategy {row.name!r} places by a position profile, and `profile` is null "
                "(give PositionProfile.to_dict(): model, n_positions, values, source)"
            )
        return None
    if isinstance(profile, Mapping):
        try:
            profile = PositionProfile.from_dict(profile)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"bad `profile`: {exc}") from None
    if not isinstance(profile, PositionProfile):
        raise ValueError(
            "`profile` must be a PositionProfile (in the file: its to_dict() object) or null, "
            f"got {type(profile).__name__}"
        )
    return profile


def check_row(row: StrategySpec, options: Mapping[str, Any], profile: Any) -> None:
    """The row's construction-time check (e.g. ``placement="profile"`` needs a profile)."""
    if row.check is None:
        return
    defaults = row.option_model()
    full = {name: getattr(defaults, name) for name in row.option_model.model_fields}
    full.update(options)
    full["profile"] = profile if profile_applies(row, options) else None
    row.check(full)
