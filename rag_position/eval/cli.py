"""``rag-position eval <task>``: a thin wrapper over the task functions.

rag-position eval quick                                   # ~10 min on 2 CPU cores
rag-position eval multidoc --docs 20 --questions 200 --out runs/md20
rag-position eval compare --strategies retriever,convex_score,gold_first
rag-position eval kv --pairs 140 --query-aware both
rag-position eval gauge --questions 100
rag-position eval open-domain --retriever bm25 --ks 5,10,20
rag-position eval swim --budget 2000
rag-position eval multifact --tokens 2000,4000 --iterations 4 --questions 20
rag-position eval length --filler-tokens 0,1000,2000,4000 --questions 20
rag-position eval voting --votes 3,5 --questions 30
rag-position eval multidoc --model openai:http://localhost:8000/v1/Qwen2.5-7B-Instruct \\
    --concurrency 32 --docs 30
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_position.errors import RagPositionError
from rag_position.eval.engine.common import EvalConfigError, EvalRunError
from rag_position.eval.engine.report import EvalResult, acc_cell
from rag_position.eval.engine.task import TaskSpec
from rag_position.eval.engine.worker_process import Terminated
from rag_position.eval.tasks.compare import COMPARE
from rag_position.eval.tasks.gauge import GAUGE
from rag_position.eval.tasks.kv import KV
from rag_position.eval.tasks.length import LENGTH
from rag_position.eval.tasks.multidoc import MULTIDOC
from rag_position.eval.tasks.multifact import MULTIFACT
from rag_position.eval.tasks.open_domain import OPEN_DOMAIN
from rag_position.eval.tasks.quick import QUICK
from rag_position.eval.tasks.swim import SWIM
from rag_position.eval.tasks.tune import TUNE, check_candidates, check_tune_files
from rag_position.eval.tasks.voting import VOTING
from rag_position.models import check_spec, find_backend, load_model

SPECS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        QUICK,
        MULTIDOC,
        COMPARE,
        KV,
        GAUGE,
        OPEN_DOMAIN,
        SWIM,
        MULTIFACT,
        LENGTH,
        VOTING,
        TUNE,
    )
}
"""Every task, by its ``rag-position eval`` name; the options come from its parameters."""
TASKS = tuple(SPECS)


def add_eval_parser(commands: Any) -> None:
    """Add ``eval`` and its tasks to the ``rag-position`` subcommands."""
    parser = commands.add_parser(
        "eval",
        help="run an eval task and write a report",
        description="Run an eval task; write predictions, summaries, plots and report.md.",
    )
    tasks = parser.add_subparsers(dest="task", required=True)
    for spec in SPECS.values():
        spec.parser(tasks)


def add_tune_parser(commands: Any) -> None:
    """``rag-position tune``: ``eval tune`` under its own name (``--out FILE.json`` writes
    the tuned file there, the run's predictions and report beside it in ``FILE-run/``)."""
    TUNE.parser(commands)


def tune_paths(args: argparse.Namespace) -> str:
    """``--out tuned.json``: the tuned file is that file, the run folder ``tuned-run``.
    Returns the option that names the tuned file (``--out`` or ``--tuned``).

    Example:
        >>> from pathlib import Path
        >>> args = argparse.Namespace(out=Path("tuned.json"), tuned=None)
        >>> tune_paths(args), args.out, args.tuned
        ('--out', PosixPath('tuned-run'), PosixPath('tuned.json'))
    """
    out = getattr(args, "out", None)
    if out is not None and Path(out).suffix == ".json":
        if args.tuned is not None:
            raise EvalConfigError(
                f"--out {out} names the tuned file, and so does --tuned {args.tuned}: give one "
                "(--out FILE.json, or --out FOLDER with --tuned FILE)"
            )
        args.tuned = Path(out)
        args.out = Path(out).with_name(Path(out).stem + "-run")
        return "--out"
    return "--tuned"


def eval_command(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run the task ``args.task``; print where the report is and the headline numbers."""
    command = "rag-position " + shlex.join(argv)
    start = time.perf_counter()
    if args.command == "tune":
        args.task = "tune"
    spec = SPECS[args.task]
    flag = "--tuned"
    try:
        check_command_text(argv)
        if spec is TUNE:
            flag = tune_paths(args)
        params = spec.from_cli(args)  # before the model loads
        if spec is TUNE:
            params["spec"] = args.scorer or args.model  # what the tuned file loads to score
            check_tune_files(params, tuned_flag=flag)  # the files it writes and reads
            check_candidates(params.get("strategies"))  # their options too
        check_strategy_options(params.get("strategies"))  # option values, before any work
        spec.check_run_folder(spec.values(params))  # the model's part once it has loaded
        check_spec(args.model, "--model", present=True)  # both before either loads
        if isinstance(params.get("scorer"), str):
            check_spec(params["scorer"], "--scorer", present=True)
        model = load_model(args.model, **model_options(args))
        if isinstance(params.get("scorer"), str):
            params["scorer"] = load_model(params["scorer"], **scorer_options(args))
        result = spec.function(model, command=command, **params)
    except EvalRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (RagPositionError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated) as exc:
        how = "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else "SIGTERM"
        print(
            f"interrupted ({how}): the predictions made so far are saved; rerun the same "
            "command to resume",
            file=sys.stderr,
        )
        return 130 if isinstance(exc, KeyboardInterrupt) else 143
    _print_result(result, time.perf_counter() - start)
    return 0


def check_strategy_options(names: Any) -> None:
    """``--strategies NAME:KEY=VALUE``: each value a row of the strategy table declares is
    checked against its option model now (``mass=2``, ``top_n=0``, ``mass=true`` are
    refused before the model loads, not when the strategy first runs); the names and
    the other options are the task's to check.

    Example:
        >>> check_strategy_options(["retriever", "select_and_place:top_n=2"])
        >>> check_strategy_options(["select_and_place:mass=true"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: --strategies: select_and_place:mass=true: option `mass`: Input should be a valid number...
    """  # noqa: E501
    from pydantic import ValidationError

    from rag_position.eval.rows import PROFILE
    from rag_position.eval.rows.catalog import split_variant
    from rag_position.strategies import STRATEGIES

    if not isinstance(names, (list, tuple)):
        return
    for name in names:
        if not isinstance(name, str):
            continue
        base, options = split_variant(name)
        row = STRATEGIES.get(base)
        if row is None or not options:
            continue
        fields = row.option_model.model_fields
        known = {k: v for k, v in options.items() if k in fields and k != PROFILE}
        try:
            row.option_model.model_validate(known)
        except ValidationError as exc:
            problems = "; ".join(
                f"option `{'.'.join(map(str, e['loc']))}`: {e['msg']} (got {e.get('input')!r})"
                for e in exc.errors()
            )
            raise EvalConfigError(f"--strategies: {name}: {problems}") from None


def check_command_text(argv: Sequence[str]) -> None:
    """Every argument must be text in UTF-8: the report records the command line.

    A name holding a byte that is not UTF-8 reaches Python as a lone surrogate; the run
    would do all its work and then fail to write its report.

    Example:
        >>> check_command_text(["eval", "kv", "--out", "runs/\\udcff"])
        Traceback (most recent call last):
        ...
        rag_position.eval.engine.common.EvalConfigError: --out 'runs/\\udcff' is not valid UTF-8 (byte 0xff at character 5); the report records the command line as text: rename it, or pass a name in UTF-8
    """  # noqa: E501
    for i, word in enumerate(argv):
        try:
            word.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(word[exc.start])
            what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "a surrogate"
            before = argv[i - 1] if i else ""
            option = before if before.startswith("--") and "=" not in before else "argument"
            raise EvalConfigError(
                f"{option} {word!r} is not valid UTF-8 ({what} at character {exc.start}); the "
                "report records the command line as text: rename it, or pass a name in UTF-8"
            ) from None


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """``load_model`` keywords from ``--device`` and ``--dtype`` (local models only).

    Example:
        >>> model_options(argparse.Namespace(model="embedded", device="cuda", dtype=None))
        {'device': 'cuda'}
    """
    options = {k: v for k in ("device", "dtype") if (v := getattr(args, k, None)) is not None}
    backend = find_backend(args.model)
    if options and backend is not None and not backend.local:
        scorer = getattr(args, "scorer", None)
        scoring = find_backend(scorer) if isinstance(scorer, str) else None
        if scoring is not None and scoring.local:
            return {}  # they are the local scorer's (scorer_options)
        flags = " and ".join(f"--{k}" for k in options)
        verb = "apply" if len(options) > 1 else "applies"
        raise EvalConfigError(
            f"{flags} {verb} to local models only; the server {args.model!r} chooses its own"
        )
    return options


def scorer_options(args: argparse.Namespace) -> dict[str, Any]:
    """``load_model`` keywords for ``--scorer``: ``--device`` and ``--dtype`` where it is
    local (they apply to whichever of ``--model`` and ``--scorer`` runs here).

    Example:
        >>> scorer_options(argparse.Namespace(scorer="embedded", device=None, dtype="bfloat16"))
        {'dtype': 'bfloat16'}
        >>> scorer_options(argparse.Namespace(scorer="openai:http://h/v1/m", device=None,
        ...                                   dtype="bfloat16"))
        {}
    """
    options = {k: v for k in ("device", "dtype") if (v := getattr(args, k, None)) is not None}
    backend = find_backend(args.scorer)
    return options if backend is None or backend.local else {}


def _print_result(result: EvalResult, seconds: float) -> None:
    for section in result.sections:
        print(f"\n{section.title}")
        for row in section.rows:
            label = row["setting"] if row["strategy"] == "baseline" else row["strategy"]
            if row["strategy"] != "baseline":
                label += f"  ({row['setting']})"
            print(f"  {label:<48} n={row['n']:<4} accuracy {acc_cell(row)}")
    print(f"\nreport: {result.report}\n{seconds:.0f} s in all")
