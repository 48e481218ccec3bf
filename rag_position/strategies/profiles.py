"""Position profiles (beyond the papers): put each passage where this model reads best.

"Lost in the Middle" (Liu et al., TACL 2024) found accuracy U-shaped in the gold
passage's position, and Liu, Qi, He et al. found the question's likelihood
follows it; but each model has its own curve (the embedded model reads the LAST
position best). A :class:`PositionProfile` is that curve, measured by the eval or
estimated from question likelihoods (:func:`estimate_profile`), and saved as a
small JSON file per model; :func:`~rag_position.strategies.profile_reorder` uses it.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from rag_position._jsonfile import check_output_file, read_json
from rag_position.models.protocols import Scorer, Span
from rag_position.prompts import question_span, render_qa
from rag_position.strategies._base import check_passages, check_question, score_prompts, to_passages
from rag_position.strategies._question_likelihood import check_template

ProfileSource = Literal["eval", "likelihood"]


@dataclass(frozen=True)
class PositionProfile:
    """How well a model reads each of N positions (higher is better), for one model.

    ``values[p]``: accuracy with the gold passage at ``p`` (``source="eval"``) or
    the mean question log-likelihood with it there (``source="likelihood"``).
    Saved as ``{"model": ..., "n_positions": N, "values": [...], "source": ...}``.

    Example:
        >>> PositionProfile([0.17, 0.12, 0.40], model_name="embedded", source="eval").ranking()
        [2, 0, 1]
    """

    values: tuple[float, ...]
    model_name: str = ""
    source: ProfileSource = "likelihood"

    def __post_init__(self) -> None:
        given = tuple(self.values)
        wrong = [v for v in given if isinstance(v, bool) or not isinstance(v, numbers.Real)]
        if wrong:  # "0.2" or True would pass float() and mean something else
            raise TypeError(f"a profile's values must be numbers, got {wrong[0]!r} in {given!r}")
        values = tuple(float(v) for v in given)
        if not values or not all(math.isfinite(v) for v in values):
            raise ValueError(f"a profile needs at least one finite value, got {list(values)}")
        if self.source not in ("eval", "likelihood"):
            raise ValueError(f"`source` must be 'eval' or 'likelihood', got {self.source!r}")
        object.__setattr__(self, "values", values)

    @property
    def n_positions(self) -> int:
        return len(self.values)

    def ranking(self) -> list[int]:
        """Positions from the best read to the worst (ties: the earlier position first)."""
        return sorted(range(len(self.values)), key=lambda p: (-self.values[p], p))

    def interpolate(self, n: int) -> PositionProfile:
        """The profile at ``n`` positions, linear in relative position (0 = first, 1 = last)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"`n` must be an int >= 1, got {n!r}")
        m = len(self.values)
        if n == m:
            return self
        if m == 1 or n == 1:
            values = [sum(self.values) / m] * n
        else:
            values = [_interp(i * (m - 1) / (n - 1), list(range(m)), self.values) for i in range(n)]
        return PositionProfile(tuple(values), model_name=self.model_name, source=self.source)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "n_positions": self.n_positions,
            "values": list(self.values),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> PositionProfile:
        """The profile :meth:`to_dict` gave: its four keys, each of its type (numbers as
        numbers: no text, no bool; ``n_positions`` an integer)."""
        keys = ("model", "n_positions", "values", "source")
        missing = [k for k in keys if k not in record]
        if missing:
            raise ValueError(f"a position profile needs the keys {missing}")
        unknown = sorted(str(k) for k in record if k not in keys)
        if unknown:
            raise ValueError(
                f"unknown key {', '.join(map(repr, unknown))} in a position profile (it has "
                f"{', '.join(keys)})"
            )
        n = record["n_positions"]
        if isinstance(n, bool) or not isinstance(n, int):
            raise ValueError(f"`n_positions` must be an integer, got {n!r}")
        values = record["values"]
        if (
            not isinstance(values, list)
            or len(values) != n
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        ):
            raise ValueError(f"`values` must be a list of n_positions={n} numbers, got {values!r}")
        if not isinstance(record["model"], str):
            raise ValueError(f"`model` must be a string, got {record['model']!r}")
        return cls(tuple(values), model_name=record["model"], source=record["source"])

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the profile as JSON at ``path`` (a regular file or a new name in a folder
        that exists; a folder, a device or a FIFO is a ``ValueError`` naming it)."""
        check_output_file(path, what="position profile file")
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PositionProfile:
        """The profile :meth:`save` wrote to ``path``; every error names the file."""
        where = os.fspath(path)
        record = read_json(path, what="position profile file")
        if not isinstance(record, Mapping):
            raise ValueError(
                f"position profile file {where!r} must hold a JSON object (as "
                f"PositionProfile.save writes), got a {type(record).__name__}"
            )
        try:
            return cls.from_dict(record)
        except ValueError as exc:
            raise ValueError(f"position profile file {where!r}: {exc}") from None


ProfileLike: TypeAlias = (
    PositionProfile | str | os.PathLike[str] | Sequence[float] | Mapping[str, Any]
)
"""A profile, the path of its JSON file, or its values per position."""


def estimate_profile(
    scorer: Scorer,
    instances: Iterable[Any],
    *,
    positions: Sequence[int] | None = None,
    model_name: str | None = None,
    template: str | None = None,
    query_aware: bool = False,
    progress: bool = False,
) -> PositionProfile:
    """A likelihood profile: mean question log-likelihood with the gold passage at each position.

    ``instances``: objects with ``question``, ``passages`` and ``gold_index`` (a
    ``QAInstance``) or ``(question, passages, gold_index)`` tuples, all with the
    same N passages. For each instance and each of ``positions`` (default: all N),
    the gold passage moves there and the others keep their order (as
    ``place_gold`` does); every prompt goes to the scorer in one batched call
    (N prompts per instance, no generation). Positions not measured are filled by
    linear interpolation. ``model_name`` defaults to the scorer's ``name``. ``progress=True``
    shows a progress bar and scores one instance's prompts per call instead (the
    same scores; a CPU backend scores one prompt at a time either way).

    Example::

        model = load_model("embedded")
        docs = ["Hamlet is a tragedy by Shakespeare.", "Paris is in France.", "Rome is in Italy."]
        profile = estimate_profile(model, [("Who wrote Hamlet?", docs, 0)])
        profile.values, profile.ranking()  # mean question log-likelihood, best position first
        profile.save("embedded-profile.json")  # for profile_reorder(..., profile=...)
    """
    check_template(template, query_aware)
    prompts: list[str] = []
    spans: list[Span] = []
    n_passages: int | None = None
    for k, instance in enumerate(instances):
        question, passages, gold = _unpack(instance, k)
        docs = to_passages(check_passages(passages))
        if n_passages is None:
            n_passages = len(docs)
            wanted = sorted(set(range(n_passages) if positions is None else positions))
            if not wanted or not 0 <= wanted[0] <= wanted[-1] < n_passages:
                raise ValueError(f"`positions` must be within range({n_passages}), got {positions}")
        if len(docs) != n_passages or not 0 <= gold < n_passages:
            raise ValueError(
                f"instance {k}: every instance needs {n_passages} passages and a gold index "
                f"among them, got {len(docs)} passages and gold_index={gold}"
            )
        for p in wanted:
            moved = [d for i, d in enumerate(docs) if i != gold]
            moved.insert(p, docs[gold])
            prompt = render_qa(question, moved, query_aware=query_aware, template=template)
            prompts.append(prompt)
            spans.append(question_span(prompt, question))
    if n_passages is None:
        raise ValueError("`instances` is empty; a profile needs at least one instance")
    if progress:
        from tqdm.auto import tqdm

        step = len(wanted)
        results = []
        for at in tqdm(range(0, len(prompts), step), desc="estimate_profile", unit="instance"):
            results += score_prompts(scorer, prompts[at : at + step], spans[at : at + step])[0]
    else:
        results, _ = score_prompts(scorer, prompts, spans)
    means = [sum(r.mean for r in results[j :: len(wanted)]) / (len(results) // len(wanted))
             for j in range(len(wanted))]  # fmt: skip
    values = tuple(_interp(p, wanted, means) for p in range(n_passages))
    name = model_name if model_name is not None else str(getattr(scorer, "name", ""))
    return PositionProfile(values, model_name=name, source="likelihood")


def as_profile(profile: ProfileLike) -> PositionProfile:
    """A profile, one loaded from its JSON file, one from a list of values per position, or
    one from its :meth:`PositionProfile.to_dict` record (as a serialised component holds it).

    Example:
        >>> as_profile([0.17, 0.12, 0.40]).ranking()
        [2, 0, 1]
    """
    if isinstance(profile, PositionProfile):
        return profile
    if isinstance(profile, (str, os.PathLike)):
        return PositionProfile.load(profile)
    if isinstance(profile, Mapping):
        return PositionProfile.from_dict(profile)
    if isinstance(profile, Sequence) and not isinstance(profile, bytes):
        values: list[Any] = list(profile)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise TypeError(f"a profile given as a list must hold numbers, got {values!r}")
        return PositionProfile(tuple(float(v) for v in values), source="eval")
    raise TypeError(
        "`profile` must be a PositionProfile, the path of its JSON file, a list of values "
        f"per position, or a PositionProfile.to_dict() record; got {type(profile).__name__}"
    )


def _interp(x: float, xs: Sequence[int], ys: Sequence[float]) -> float:
    """Piecewise-linear through ``(xs, ys)`` (``xs`` increasing), constant beyond the ends."""
    if x <= xs[0]:
        return ys[0]
    for j in range(1, len(xs)):
        if x <= xs[j]:
            x0, x1, y0, y1 = xs[j - 1], xs[j], ys[j - 1], ys[j]
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]


def _unpack(instance: Any, k: int) -> tuple[str, Sequence[Any], int]:
    if isinstance(instance, tuple) and len(instance) == 3:
        question, passages, gold = instance
    else:
        try:
            question, passages, gold = instance.question, instance.passages, instance.gold_index
        except AttributeError:
            raise TypeError(
                f"instance {k} needs `question`, `passages` and `gold_index` "
                "(a QAInstance or a (question, passages, gold_index) tuple)"
            ) from None
    check_question(question)
    if isinstance(gold, bool) or not isinstance(gold, int):
        raise ValueError(f"instance {k} has no gold passage (gold_index={gold!r})")
    return question, passages, gold


Placement = Literal["first", "last", "profile"]
Rest = Literal["keep", "scores"]


def check_placement(placement: str, rest: str | None, profile: Any) -> PositionProfile | None:
    """The placement rules every placing strategy shares; the profile, resolved (or ``None``).

    ``placement`` one of first, last, profile; ``rest`` None, keep or scores; a
    ``profile`` exactly when ``placement="profile"`` (a bad profile file fails here,
    before any scoring).
    """
    if placement not in ("first", "last", "profile"):
        raise ValueError(f"`placement` must be 'first', 'last' or 'profile', got {placement!r}")
    if rest is not None and rest not in ("keep", "scores"):
        raise ValueError(f"`rest` must be 'keep' or 'scores', got {rest!r}")
    if (placement == "profile") != (profile is not None):
        raise ValueError("pass a `profile` exactly when placement='profile'")
    return None if profile is None else as_profile(profile)


def place(
    ranked: Sequence[int], placement: Placement, rest: Rest | None, profile: ProfileLike | None
) -> list[int]:
    """The new order from ``ranked`` (input indices, most relevant first).

    ``"first"``/``"last"``: the top passage to the front/end; with ``rest="scores"``
    the others follow the ranking away from it, else they keep their input order.
    ``"profile"``: the k-th ranked passage at the profile's k-th best position
    (``rest="keep"``: only the top one; the others fill the remaining positions in
    their input order).
    """
    n = len(ranked)
    gold = ranked[0]
    if placement == "profile":
        assert profile is not None
        positions = as_profile(profile).interpolate(n).ranking()
        if rest in (None, "scores"):
            who = list(ranked)
        else:
            others = [d for d in range(n) if d != gold]
            slots = sorted(positions[1:])
            who = [gold] + [others[slots.index(p)] for p in positions[1:]]
        order = [0] * n
        for position, d in zip(positions, who, strict=True):
            order[position] = d
        return order
    front = list(ranked) if rest == "scores" else [gold, *(d for d in range(n) if d != gold)]
    if placement == "first":
        return front
    return front[::-1] if rest == "scores" else [*front[1:], gold]
