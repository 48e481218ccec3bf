"""A task's parameters as data: :class:`Param` (one declaration gives the CLI option, the
Python keyword and the recorded command), the helpers that build the common kinds, and
:data:`COMMON`, what every task takes.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rag_position.eval.engine.common import (
    EvalConfigError,
    parse_int_list,
)
from rag_position.eval.engine.shards import parse_shard

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Param:
    """One parameter of an eval task, as data.

    ``name`` and ``default`` are the Python keyword's; ``flag`` the CLI option (``None``:
    Python only), ``cli`` its further ``argparse`` keywords and ``parse`` what turns the
    option's value into the parameter's (a value of ``None``: not given, the default).
    ``recorded``: it changes results, so the report's command shows its value
    (``omit_default``: only when it is not the default).

    Example:
        >>> pairs = Param("pairs", 75, "pairs per example", "--pairs", {"type": int})
        >>> pairs.name, pairs.default, pairs.recorded, pairs.from_cli("8")
        ('pairs', 75, True, '8')
        >>> int_list("votes", (3, 5), "--votes", "3,5", "answers per vote").from_cli("3,7")
        [3, 7]
    """

    name: str
    default: Any = None
    help: str = ""
    flag: str | None = None
    cli: Mapping[str, Any] = field(default_factory=dict)
    parse: Callable[[Any], Any] | None = None
    recorded: bool = True
    omit_default: bool = False

    def add_to(self, parser: argparse.ArgumentParser, task: str, default: str = "") -> None:
        """Add this parameter's option (if it has one) to a task's parser; ``default``: the
        task's own, in place of the help's ``(default: ...)``."""
        if self.flag is None:
            return
        options = dict(self.cli)
        if "action" not in options and "choices" not in options:
            options.setdefault("metavar", self.flag[2:].upper().replace("-", "_"))
        text = self.help.replace("<task>", task)
        if default:
            text = re.sub(r"\(default: [^)]*\)", f"(default: {default})", text)
        parser.add_argument(self.flag, dest=self.name, help=text, **options)

    def from_cli(self, value: Any) -> Any:
        """The parameter's value from its option's (``None``: not given)."""
        if value is None or self.parse is None:
            return value
        return self.parse(value)


FLAG: Mapping[str, Any] = {"action": "store_true"}
"""A CLI switch (``--sandwich``)."""


def negate(switch: bool) -> bool:
    """A ``--no-...`` switch's parameter: ``--no-baselines`` given -> ``baselines=False``."""
    return not switch


def int_list(name: str, default: Any, flag: str, text: str | None, help: str) -> Param:
    """A parameter given on the CLI as comma-separated integers (``text``: the default)."""
    return Param(name, default, help, flag, {"default": text}, partial(parse_int_list, what=flag))


def names(text: str | None, *, what: str = "--strategies") -> list[str] | None:
    """``"a, b"`` -> ``["a", "b"]``; not given -> ``None``; an empty name is an error.

    Example:
        >>> names("retriever, edge"), names(None)
        (['retriever', 'edge'], None)
        >>> names("edge,,sandwich")
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: --strategies: name 2 of 'edge,,sandwich' is empty; give comma-separated names without empty entries
    """  # noqa: E501
    if text is None:
        return None
    parts = [n.strip() for n in text.split(",")]
    empty = [i for i, n in enumerate(parts, start=1) if not n]
    if empty:
        where = f"name {empty[0]} of {text!r} is empty" if len(parts) > 1 else "no name given"
        raise EvalConfigError(f"{what}: {where}; give comma-separated names without empty entries")
    return parts


def float_list(name: str, default: Any, flag: str, text: str, help: str) -> Param:
    """A parameter given on the CLI as comma-separated numbers (``text``: the default)."""
    return Param(name, default, help, flag, {"default": text}, partial(floats, what=flag))


def floats(text: str, *, what: str) -> list[float]:
    """``"0.7,1"`` -> ``[0.7, 1.0]``, with an error naming the option."""
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise EvalConfigError(f"{what}: expected numbers, got {text!r}") from None


def docs_param(help: str = "passages") -> Param:
    """``--docs``: passages per question (10, 20 or 30 in the published files)."""
    return Param("docs", 10, help, "--docs", {"type": int, "default": 10, "choices": (10, 20, 30)})


def positions_param(help: str = "gold positions (default: paper's)") -> Param:
    return int_list("positions", None, "--positions", None, help)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (``--batch-size 0`` would never answer).

    Example:
        >>> positive_int("8")
        8
        >>> positive_int("0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: must be an integer >= 1, got '0'
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def out_folder(text: str) -> Path:
    """An argparse type: a folder name; an empty one (the current folder) is refused.

    Example:
        >>> out_folder("")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: is empty: name the run's folder (default runs/<task>)
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name the run's folder (default runs/<task>)")
    return Path(text)


SCORER = Param(
    "scorer",
    None,
    "a load_model spec the strategies score with (default: --model, which also answers)",
    "--scorer",
    omit_default=True,
)
"""The model strategies score with when it is not the reader (:mod:`rag_position.eval.engine.pair`):
a model, or a spec loaded with ``--device``/``--dtype`` where it is local."""


EMBEDDER = Param("embedder", None, omit_default=True)
"""The embedder that mines distractors (and, for voting, embeds answers); Python only."""


COMMON: tuple[Param, ...] = (
    Param(
        "questions",
        None,
        "how many questions (default: the first 50 of dev, all of --data)",
        "--questions",
        {"type": positive_int},
    ),
    Param("data", None, "data file (default: the packaged dev file)", "--data", {"type": Path}),
    Param("seed", 0, "seed of every random choice", "--seed", {"type": int, "default": 0}),
    Param(
        "out", None, "output folder (runs/<task>)", "--out", {"type": out_folder}, recorded=False
    ),
    Param(
        "max_new_tokens",
        100,
        "per answer (default: the task's, 100)",
        "--max-new-tokens",
        {"type": positive_int},
    ),
    Param(
        "batch_size",
        None,
        "prompts per generate call (default: 8; 1 for a CPU model that pads its batches)",
        "--batch-size",
        {"type": positive_int},
        omit_default=True,  # recorded: in low precision a batch's answers depend on its size
    ),
    Param(
        "concurrency",
        1,
        "requests in flight (remote)",
        "--concurrency",
        {"type": positive_int, "default": 1},
        recorded=False,
    ),
    Param(
        "workers",
        None,
        "processes for a local model (default on a CPU: one per torch thread)",
        "--workers",
        {"type": positive_int},
        recorded=False,
    ),
    Param(
        "shard",
        None,
        "only the K-th of N shares of the questions (split a run; see docs/eval.md)",
        "--shard",
        {"metavar": "K/N"},
        parse_shard,
        omit_default=True,
    ),
    Param(
        "progress",
        None,
        "no progress bar",
        "--no-progress",
        FLAG,
        negate,
        recorded=False,
    ),
    Param("command", None, recorded=False),
)
"""What every task takes: data and questions, seed, decoding, output and run plumbing."""
