"""The checks a tuned file's fields pass, for :mod:`rag_position.tuned`.

:class:`~rag_position.tuned.TunedChoice` runs them on construction (so does
:func:`~rag_position.tuned.read_tuned`, through it): the options against the row's
option model (:func:`check_options`, which the eval's ``tune`` also runs on its
candidates), the profile where the row places by one (:func:`check_profile`), the row's
own construction-time check (:func:`check_row`), the evidence, the question range, the
creation time and the text fields. Each raises a ``ValueError`` saying what is wrong.
Also here: which options a row takes (:func:`accepted_options`) and whether it places
by a profile (:func:`takes_profile`, :func:`profile_applies`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from rag_position.strategies import StrategySpec
from rag_position.strategies.profiles import PositionProfile

__all__ = [
    "accepted_options",
    "check_created",
    "check_evidence",
    "check_options",
    "check_profile",
    "check_questions",
    "check_row",
    "check_text",
    "is_int",
    "profile_applies",
    "takes_profile",
]

_EVIDENCE: Mapping[str, tuple[type, ...]] = {
    "strategy": (str,),
    "n": (int,),
    "accuracy": (int, float),
    "low": (int, float),
    "high": (int, float),
    "wins": (int, type(None)),
    "losses": (int, type(None)),
    "p_value": (int, float, type(None)),
    "tokens_per_question": (int, float),
}
_QUESTIONS: Mapping[str, type] = {"data": str, "first": int, "n": int}


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


def check_evidence(evidence: Any) -> tuple[dict[str, Any], ...]:
    if isinstance(evidence, (str, bytes, Mapping)) or not isinstance(evidence, Sequence):
        raise ValueError(f"`evidence` must be a list of objects, got {type(evidence).__name__}")
    found = []
    for i, item in enumerate(evidence):
        if not isinstance(item, Mapping):
            raise ValueError(f"`evidence[{i}]` must be an object, got {type(item).__name__}")
        missing = [k for k in _EVIDENCE if k not in item]
        if missing:
            raise ValueError(f"`evidence[{i}]` lacks {', '.join(missing)}")
        for key, kinds in _EVIDENCE.items():
            value = item[key]
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise ValueError(
                    f"`evidence[{i}].{key}` must be "
                    f"{' or '.join('null' if k is type(None) else k.__name__ for k in kinds)}, "
                    f"got {value!r}"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"`evidence[{i}].{key}` must be finite, got {value!r}")
        found.append(dict(item))
    return tuple(found)


def check_questions(questions: Any) -> dict[str, Any]:
    if not isinstance(questions, Mapping):
        raise ValueError(
            f"`questions` must be an object {{data, first, n}}, got {type(questions).__name__}"
        )
    for key, kind in _QUESTIONS.items():
        if key not in questions:
            raise ValueError(f"`questions` lacks {key!r} (it needs data, first, n)")
        value: Any = questions[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ValueError(f"`questions.{key}` must be a {kind.__name__}, got {value!r}")
        if isinstance(value, int) and value < 0:
            raise ValueError(f"`questions.{key}` must be >= 0, got {value!r}")
    return dict(questions)


def check_created(created: Any) -> str:
    if not isinstance(created, str):
        raise ValueError(f"`created` must be an ISO 8601 string, got {created!r}")
    text = created[:-1] + "+00:00" if created.endswith(("Z", "z")) else created
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"`created` must be an ISO 8601 time, got {created!r}") from None
    return created


def check_text(name: str, value: Any, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise ValueError(f"`{name}` must be a non-empty string, got {value!r}")
    return value
