"""One shape for every eval task: its parameters declared once, as data.

A :class:`TaskSpec` names a task (its ``rag-position eval`` name and help) and lists
its own :class:`Param` s; the parameters every task shares (:data:`COMMON`:
questions, data, seed, out, max_new_tokens, batch_size, concurrency, workers, shard,
progress, command) are declared here, once. :meth:`TaskSpec.task` turns the
function doing a task's own work on a :class:`TaskRun` into the public
``run_<task>(model, **params)``. From a spec come:

- the ``rag-position eval <task>`` subcommand's options (:meth:`TaskSpec.parser`)
  and the keywords they give (:meth:`TaskSpec.from_cli`);
- the run's plumbing (:class:`TaskRun`): defaults and unknown names, the question
  count check, the run context opened on first use, the report;
- the command the report records (:meth:`TaskSpec.call`): the Python call with the
  value of every parameter that changes results, so that the report can be re-run.
  (A run started from the CLI records the command line as typed: every option it
  leaves out takes the same default again.)

Example:
    >>> from rag_position.eval.tasks.kv import KV
    >>> print(KV.call("scripted", KV.values({"pairs": 8, "query_aware": (True,)})))
    rag_position.eval.run_kv(<scripted>, pairs=8, positions=None, query_aware=(True,), questions=None, data=None, seed=0, max_new_tokens=100)
    >>> KV.from_cli(KV.parser().parse_args(["--pairs", "8", "--query-aware", "on"]))["query_aware"]
    (True,)
"""  # noqa: E501

from __future__ import annotations

import argparse
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rag_position.data import QAInstance, load_qa
from rag_position.eval.engine.common import (
    Decoding,
    answer_stop,
    check_data_file,
    check_out_folder,
    check_questions,
    run_label,
)
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.marker import (
    RunMarker,
    check_run_folder,
    read_marker,
    write_marker,
)
from rag_position.eval.engine.params import COMMON, Param
from rag_position.eval.engine.plots import require_matplotlib
from rag_position.eval.engine.report import EvalResult, Section
from rag_position.eval.engine.session import finish, open_context
from rag_position.eval.tasks.datasets import MultidocData, default_oracle_path, load_multidoc


@dataclass(eq=False)
class TaskSpec:
    """An eval task: its CLI name and help, its own parameters, its functions.

    ``defaults`` override :data:`COMMON` defaults (``out`` defaults to
    ``runs/<name>``); ``cli_questions`` is the question count the CLI asks of the
    packaged dev file when neither ``--questions`` nor ``--data`` is given (``None``:
    the function's own default; ``questions_help`` states it in ``--questions``' help).
    :meth:`task` turns the function doing the task's
    own part on a :class:`TaskRun` into the public ``run_<task>(model, **params)``.
    """

    name: str
    help: str
    params: tuple[Param, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    cli_questions: int | None = 50
    questions_help: str = ""
    function: Callable[..., EvalResult] = field(init=False)

    def task(self, work: Callable[[TaskRun], EvalResult]) -> Callable[..., EvalResult]:
        """Decorator: ``work`` does the task on a :class:`TaskRun` (and returns
        :meth:`TaskRun.finish`); it becomes the public ``run_<task>(model, **params)``,
        with the signature the parameters declare."""

        @functools.wraps(work)
        def function(model: Any, **params: Any) -> EvalResult:
            run = TaskRun(self, model, self.values(params))
            check_questions(run["questions"])
            check_data_file(run["data"])
            check_out_folder(run["out"])
            scorer = run.values.get("scorer")
            if isinstance(scorer, str):
                from rag_position.models import load_model

                run.values["scorer"] = scorer = load_model(scorer)
            label = run_label(model, scorer)
            self.check_run_folder(run.values, label, answer_stop(model))
            return work(run)

        function.__signature__ = self.signature()  # type: ignore[attr-defined]
        self.function = function
        return function

    def check_run_folder(
        self, values: Mapping[str, Any], model: str | None = None, stop: Sequence[str] = ()
    ) -> None:
        """Refuse an output folder that holds another run (:mod:`rag_position.eval.engine.marker`);
        ``model``: the model's label, ``None`` before the model loads (checked later);
        ``stop``: where its answers end (:func:`~rag_position.eval.engine.common.answer_stop`)."""
        decoding = Decoding(
            max_new_tokens=values["max_new_tokens"], seed=values["seed"], stop=tuple(stop)
        )
        check_run_folder(values["out"], task=self.name, decoding=decoding, model=model)

    @property
    def every(self) -> tuple[Param, ...]:
        """The task's own parameters, then the common ones."""
        return (*self.params, *COMMON)

    def default(self, param: Param) -> Any:
        if param.name == "out":
            return self.defaults.get("out", f"runs/{self.name}")
        return self.defaults.get(param.name, param.default)

    def signature(self) -> inspect.Signature:
        """``run_<task>(model, *, <every parameter>=<its default>)``."""
        keyword = inspect.Parameter.KEYWORD_ONLY
        return inspect.Signature(
            [
                inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                *(inspect.Parameter(p.name, keyword, default=self.default(p)) for p in self.every),
            ],
            return_annotation=EvalResult,
        )

    def values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Every parameter's value: those given, the defaults for the others."""
        known = {p.name for p in self.every}
        unknown = [name for name in params if name not in known]
        if unknown:
            raise TypeError(
                f"{self.function.__name__}() got an unexpected keyword argument {unknown[0]!r}"
            )
        return {p.name: params.get(p.name, self.default(p)) for p in self.every}

    def call(self, model: str, values: Mapping[str, Any]) -> str:
        """The Python call a report records: every parameter that changes results.

        Example:
            >>> from rag_position.eval.tasks.length import LENGTH
            >>> print(LENGTH.call("m", LENGTH.values({"recite_tokens": 64, "shard": (1, 2)})))
            ... # doctest: +NORMALIZE_WHITESPACE
            rag_position.eval.run_length(<m>, filler_tokens=(0, 1000, 2000, 4000),
            fillers=('essay', 'whitespace'), summed=3, recite_tokens=64, questions=None,
            data=None, seed=0, max_new_tokens=32, shard=(1, 2))
        """
        shown = [
            f"{p.name}={literal(values[p.name])}"
            for p in self.every
            if p.recorded and not (p.omit_default and values[p.name] == self.default(p))
        ]
        arguments = "".join(f", {s}" for s in shown)
        return f"rag_position.eval.{self.function.__name__}(<{model}>{arguments})"

    def parser(self, tasks: Any = None) -> argparse.ArgumentParser:
        """The task's CLI parser (a subparser of ``tasks`` when given)."""
        if tasks is None:
            parser = argparse.ArgumentParser(prog=f"rag-position eval {self.name}")
        else:
            parser = tasks.add_parser(self.name, help=self.help, description=self.help)
        parser.add_argument(
            "--model", default="embedded", help="a load_model spec (default: embedded)"
        )
        parser.add_argument(
            "--device", default=None, help="a local model's device: cpu (default), cuda, cuda:1..."
        )
        parser.add_argument(
            "--dtype",
            default=None,
            choices=("auto", "float32", "bfloat16", "float16"),
            help="a local model's dtype (default auto: bfloat16 where native, float16 on a GPU "
            "without it, else float32)",
        )
        for param in (*COMMON, *self.params):
            param.add_to(
                parser, self.name, self.questions_help if param.name == "questions" else ""
            )
        return parser

    def from_cli(self, args: argparse.Namespace) -> dict[str, Any]:
        """The function's keywords from parsed options (those not given: left out)."""
        given = {
            p.name: p.from_cli(getattr(args, p.name))
            for p in self.every
            if p.flag is not None and getattr(args, p.name) is not None
        }
        check_data_file(given.get("data"))  # before the model loads
        check_out_folder(given.get("out"))
        if "questions" not in given and "data" not in given and self.cli_questions is not None:
            given["questions"] = self.cli_questions  # 50 of the dev file; all of a --data file
        return given


class TaskRun:
    """One call of a task: its spec, model and parameter values; the run context
    (opened on first use, so that a task checks its inputs before writing anything);
    and the report, whose recorded command is made from the values (a task that
    resolves a value, e.g. a default budget, writes it back into :attr:`values`)."""

    def __init__(self, spec: TaskSpec, model: Any, values: dict[str, Any]) -> None:
        self.spec = spec
        self.model = model
        self.values = values

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @cached_property
    def ctx(self) -> RunContext:
        """The run context; opening it marks the output folder as this run's (``run.json``)."""
        require_matplotlib()
        v = self.values
        ctx = open_context(
            self.model,
            v["out"],
            seed=v["seed"],
            max_new_tokens=v["max_new_tokens"],
            batch_size=v["batch_size"],
            concurrency=v["concurrency"],
            shard=v["shard"],
            workers=v["workers"],
            progress=v["progress"],
            scorer=v.get("scorer"),
        )
        self._mark(ctx, self["command"] or self.spec.call(ctx.label, v))
        return ctx

    def _mark(self, ctx: RunContext, command: str, *, done: bool = False) -> None:
        """The folder's ``run.json``: at the start only where it has none (a resume that
        fails, e.g. on an empty shard, leaves the command that made the run); replaced by
        the latest command once the run is ``done`` (an extended run: the whole one)."""
        if not done and read_marker(ctx.store.path.parent) is not None:
            return
        marker = RunMarker(self.spec.name, ctx.label, ctx.decoding.as_dict(), command)
        write_marker(ctx.store.path.parent, marker)

    def multidoc(self, docs: int, embedder: Any = None) -> tuple[RunContext, MultidocData]:
        """The run context, then the run's multi-document QA instances (``docs`` passages)."""
        ctx = self.ctx
        embedder = embedder or self["embedder"]
        questions = self["questions"]
        return ctx, load_multidoc(self["data"], docs=docs, questions=questions, embedder=embedder)

    def finish(
        self,
        sections: Sequence[Section],
        *,
        title: str,
        settings: Mapping[str, Any] | None = None,
    ) -> EvalResult:
        """Write the report; its command: the one given, else the generated call."""
        command = self["command"] or self.spec.call(self.ctx.label, self.values)
        self._mark(self.ctx, command, done=True)  # the command as the report records it
        return finish(self.ctx, sections, title=title, command=command, settings=settings)


def qa_records(run: TaskRun) -> tuple[Path, list[QAInstance]]:
    """The records of the run's ``data`` file (default: the packaged oracle file),
    with its ``questions`` checked against what the file holds."""
    path = Path(run["data"]) if run["data"] is not None else default_oracle_path()
    records = load_qa(path)
    check_questions(run["questions"], len(records))
    return path, records


def literal(value: Any) -> str:
    """A value as the recorded call shows it: a Python literal where there is one
    (paths as strings), else ``<its name>`` (an embedder, a profile object).

    Example:
        >>> literal([Path("a.json"), (1, 2), {"p": None}]), literal(object())
        ("['a.json', (1, 2), {'p': None}]", '<object>')
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, os.PathLike):
        return repr(os.fspath(value))
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    from rag_position.eval.engine.common import model_label

    return f"<{model_label(value)}>"
