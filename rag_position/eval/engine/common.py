"""What every eval task shares: the prediction key, decoding settings, seeds, errors."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag_position.cost import Cost
from rag_position.errors import RagPositionError


class EvalConfigError(RagPositionError, ValueError):
    """An eval setting that cannot work (a position outside the passages, no questions...).

    Example:
        >>> try:
        ...     Decoding(max_new_tokens=0)
        ... except EvalConfigError as err:
        ...     print(err)
        max_new_tokens must be at least 1, got 0
    """


class EvalRunError(RagPositionError, RuntimeError):
    """A model call failed mid-run; every prediction made before it is kept on disk.

    Example::

        try:
            result = run_multidoc(load_model("embedded"), out="runs/md")
        except EvalRunError as err:
            err.__cause__  # the model's error; rerun the same call to resume
    """


@dataclass(frozen=True)
class Key:
    """What identifies one prediction: (task, model, strategy, instance, setting).

    Example:
        >>> key = Key("multidoc", "embedded", "baseline", "q1", "docs=10 gold=0")
        >>> key.as_str()
        '["multidoc", "embedded", "baseline", "q1", "docs=10 gold=0"]'
    """

    task: str
    model: str
    strategy: str
    instance: str
    setting: str

    def as_str(self) -> str:
        return json.dumps([self.task, self.model, self.strategy, self.instance, self.setting])


@dataclass(frozen=True)
class Decoding:
    """How answers are generated: greedy, at most 100 new tokens, as in the paper.

    Example:
        >>> Decoding().as_dict()
        {'max_new_tokens': 100, 'temperature': 0.0, 'seed': 0}
        >>> Decoding(max_new_tokens=32, temperature=0.7, seed=1).temperature
        0.7
    """

    max_new_tokens: int = 100
    temperature: float = 0.0
    seed: int = 0
    stop: tuple[str, ...] = ()
    """Strings an answer ends before: ``("\\n",)`` for a completion (base) model, whose
    answer is its first line (:func:`answer_stop`); none for a chat model, which ends
    its turn."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise EvalConfigError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise EvalConfigError(f"temperature must be >= 0, got {self.temperature}")
        object.__setattr__(self, "stop", tuple(self.stop))

    def as_dict(self) -> dict[str, Any]:
        """The settings as recorded with each prediction (``stop`` only when set, so a
        chat model's records read as before it existed)."""
        settings = asdict(self)
        if self.stop:
            settings["stop"] = list(self.stop)
        else:
            del settings["stop"]
        return settings

    def describe(self) -> str:
        """The decoding in a report's words."""
        if self.temperature != 0:
            return str(self.as_dict())
        text = f"greedy, at most {self.max_new_tokens} new tokens"
        if self.stop:
            text += ", the answer ending at the first line break (a completion model)"
        return text


def answer_stop(model: Any) -> tuple[str, ...]:
    """Where ``model``'s answers end: a completion (base) model, prompted without a chat
    template, goes on writing after its answer (often another "Answer:"), so its answer
    is its first line, as in the usual evaluation of base models on NQ-open; a chat
    model ends its turn by itself.

    Example:
        >>> class Base:
        ...     use_chat_template = False
        >>> answer_stop(Base()), answer_stop(object())
        (('\\n',), ())
    """
    return ("\n",) if getattr(model, "use_chat_template", True) is False else ()


@dataclass(frozen=True)
class Prepared:
    """What a job produces before generation.

    ``prompt`` is generated from; a job that already has its answer (a strategy that
    answers by itself) sets ``answer`` instead. ``cost`` is what preparing spent
    (e.g. a strategy's scoring calls); ``info`` is stored with the prediction.

    Example:
        >>> prepared = Prepared(prompt="Question: Who wrote Hamlet?\\nAnswer:")
        >>> prepared.answer is None, prepared.cost.lm_calls
        (True, 0)
        >>> Prepared(answer="Shakespeare", cost=Cost(lm_calls=2)).cost.lm_calls
        2
    """

    prompt: str | None = None
    answer: str | None = None
    cost: Cost = field(default_factory=Cost)
    info: Mapping[str, Any] = field(default_factory=dict)
    scorer_cost: Cost | None = None
    """The part of ``cost`` a separate scorer spent (``--scorer``; set by the runner from
    :func:`~rag_position.eval.engine.pair.scorer_metered` unless the strategy set it)."""

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.answer is None):
            raise ValueError("a Prepared needs exactly one of `prompt` and `answer`")


def gold_info(gold: Any, chosen: Sequence[Any], *, selects: bool = False) -> dict[str, Any]:
    """Where the gold passage went in ``chosen`` (``gold_at``; left out when it is not
    there or there is no gold); for a strategy that ``selects``, also how many passages
    it kept and whether the gold was among them (``kept``, ``gold_kept``).

    Example:
        >>> gold_info("b", ["a", "b"]), gold_info("c", ["a"], selects=True)
        ({'gold_at': 1}, {'kept': 1, 'gold_kept': 0.0})
    """
    info: dict[str, Any] = {}
    for i, p in enumerate(chosen):
        if gold is not None and (p is gold or p == gold):
            info["gold_at"] = i
            break
    if selects:
        info["kept"] = len(chosen)
        if gold is not None:
            info["gold_kept"] = 1.0 if "gold_at" in info else 0.0
    return info


def derive_seed(seed: int, *parts: object) -> int:
    """A 32-bit seed from ``seed`` and ``parts``: stable across runs, processes and platforms.

    Example:
        >>> derive_seed(0, "gold-position", "q1")
        3153488635
        >>> derive_seed(0, "gold-position", "q1") == derive_seed(0, "gold-position", "q2")
        False
    """
    material = json.dumps([seed, *map(str, parts)]).encode("utf-8")
    return int.from_bytes(hashlib.sha256(material).digest()[:4], "big")


def model_label(model: object) -> str:
    """The model's name for prediction keys, with its dtype where it has one.

    A float32 and a bfloat16 copy of the same weights answer slightly differently,
    so they must not share predictions.

    Example:
        >>> from types import SimpleNamespace
        >>> model_label(SimpleNamespace(name="embedded:SmolLM2", dtype="torch.bfloat16"))
        'embedded:SmolLM2@bfloat16'
    """
    name = str(getattr(model, "name", None) or type(model).__qualname__)
    dtype = getattr(model, "dtype", None)
    if dtype is not None:
        name += "@" + str(dtype).removeprefix("torch.")
    return name


def run_label(model: object, scorer: object = None) -> str:
    """A run's name in prediction keys: the reader's :func:`model_label`, and the scorer's
    when strategies score with another model (``--scorer``).

    Example:
        >>> from types import SimpleNamespace
        >>> run_label(SimpleNamespace(name="big"), SimpleNamespace(name="small"))
        'big scored by small'
        >>> run_label(SimpleNamespace(name="big"))
        'big'
    """
    label = model_label(model)
    return label if scorer is None else f"{label} scored by {model_label(scorer)}"


def check_data_file(data: str | os.PathLike[str] | None) -> None:
    """``--data`` (``None``: the packaged file) must name a file that is there.

    Example:
        >>> check_data_file(".")
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: --data . is a folder, not a data file; pass a JSON-lines file (optionally gzipped)
    """  # noqa: E501
    if data is None:
        return
    path = Path(data)
    if path.is_dir():
        raise EvalConfigError(
            f"--data {path} is a folder, not a data file; pass a JSON-lines file "
            "(optionally gzipped)"
        )
    if not path.exists():
        raise FileNotFoundError(f"no data file at {path}")
    if not path.is_file():
        raise EvalConfigError(
            f"--data {path} is not a regular file (a device or a pipe); pass a JSON-lines file "
            "(optionally gzipped)"
        )


def check_out_folder(out: str | os.PathLike[str] | None) -> None:
    """``--out`` must be a folder, or a path where one can be made (not a file, nor under one).

    Example:
        >>> check_out_folder("runs/new-folder")
        >>> check_out_folder(__file__)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: --out .../common.py is a file, not a folder; ...
    """  # noqa: E501
    if out is None:
        return
    path = Path(out)
    for folder in (path, *path.parents):
        if folder.is_dir():
            return
        if folder.exists() or folder.is_symlink():  # a file, or a link to nothing
            what = "a file, not a folder" if folder.is_file() else "not a folder"
            if folder == path:
                raise EvalConfigError(
                    f"--out {path} is {what}; pass a folder for the run's predictions and "
                    "report (it is made if missing)"
                )
            raise EvalConfigError(f"--out {path} cannot be made: {folder} is {what}")


def check_questions(questions: int | None, available: int | None = None) -> None:
    """``questions`` must be a positive count within what the data holds."""
    if questions is None:
        return
    if isinstance(questions, bool) or not isinstance(questions, int) or questions < 1:
        raise EvalConfigError(f"--questions must be a positive number, got {questions!r}")
    if available is not None and questions > available:
        raise EvalConfigError(
            f"--questions {questions} asks for more questions than the data holds ({available})"
        )


def check_positions(positions: Sequence[int], k: int, *, where: str = "--positions") -> None:
    """Every position must index one of ``k`` passages (or records); none repeated."""
    if not positions:
        raise EvalConfigError(f"{where}: no positions given")
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < k:
            raise EvalConfigError(
                f"{where}: position {p!r} is outside the {k} passages (0..{k - 1})"
            )
    if len(set(positions)) != len(positions):
        raise EvalConfigError(f"{where}: positions repeat: {list(positions)}")


def parse_int_list(text: str, *, what: str) -> list[int]:
    """``"0,4,9"`` -> ``[0, 4, 9]``, with an error naming the option."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise EvalConfigError(f"{what}: expected comma-separated integers, got {text!r}") from None
    if not values:
        raise EvalConfigError(f"{what}: expected at least one integer, got {text!r}")
    return values


def paper_positions(k: int) -> list[int]:
    """The paper's gold positions: 0, 4, 9, 14, ... up to k - 1 (0,4,9 for 10 passages).

    Example:
        >>> paper_positions(10), paper_positions(20)
        ([0, 4, 9], [0, 4, 9, 14, 19])
    """
    return sorted({0, *range(4, k, 5), k - 1})


def token_counter(model: Any) -> Callable[[str], int] | None:
    """The model's ``count_tokens`` when it has one."""
    counter = getattr(model, "count_tokens", None)
    return counter if callable(counter) else None


def check_fits(model: Any, tokens: Sequence[int], reserve: int, *, option: str) -> None:
    """Every size plus ``reserve`` tokens (prompt text, answer) must fit the model's window."""
    window = getattr(model, "max_context", None)
    if not isinstance(window, int):
        return
    too_big = [t for t in tokens if t + reserve > window]
    if too_big:
        raise EvalConfigError(
            f"{option}: {too_big} tokens plus about {reserve} for the prompt and the answer "
            f"exceed the model's context window of {window} tokens"
        )
