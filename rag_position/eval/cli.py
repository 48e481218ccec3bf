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
rag-position eval voting --ks 3,5 --questions 30
rag-position eval multidoc --model openai:http://localhost:8000/v1/Qwen2.5-7B-Instruct \\
    --concurrency 32 --docs 30
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_position.errors import RagPositionError
from rag_position.eval.common import EvalConfigError, EvalRunError, parse_int_list
from rag_position.eval.report import EvalResult, acc_cell
from rag_position.eval.runner import parse_shard
from rag_position.models import load_model

TASKS = (
    "quick", "multidoc", "compare", "kv", "gauge", "open-domain", "swim",
    "multifact", "length", "voting",
)  # fmt: skip
OWN_DEFAULT_QUESTIONS = ("quick", "multifact", "length", "voting")
"""Tasks whose functions choose the question count themselves (20, 20, 30)."""


def add_eval_parser(commands: Any) -> None:
    """Add ``eval`` and its tasks to the ``rag-position`` subcommands."""
    parser = commands.add_parser(
        "eval",
        help="run an eval task and write a report",
        description="Run an eval task; write predictions, summaries, plots and report.md.",
    )
    tasks = parser.add_subparsers(dest="task", required=True)
    quick = _task(tasks, "quick", "10-passage sweep, baselines and strategies (~10 min on CPU)")
    quick.add_argument("--strategies", default=None, help="comma-separated (default: light set)")
    quick.add_argument("--no-compare", action="store_true", help="skip the strategy comparison")
    multidoc = _task(tasks, "multidoc", "multi-document QA: accuracy by gold position")
    _docs(multidoc)
    multidoc.add_argument("--positions", default=None, help="gold positions (default: paper's)")
    multidoc.add_argument("--ordered-randomly", action="store_true", help="shuffled distractors")
    multidoc.add_argument("--sandwich", action="store_true", help="query-aware prompt")
    multidoc.add_argument("--no-baselines", action="store_true", help="skip closed-book, oracle")
    compare = _task(tasks, "compare", "every strategy on the same instances, with costs")
    _docs(compare)
    compare.add_argument("--strategies", default=None, help="comma-separated (default: all)")
    compare.add_argument("--worst-position", type=int, default=None, help="skip the sweep")
    compare.add_argument(
        "--gold", default="random,worst", help="gold settings: random, worst or both"
    )
    compare.add_argument("--profile", type=Path, default=None, help="profile JSON for *_profile")
    kv = _task(tasks, "kv", "key-value retrieval: accuracy by position of the queried pair")
    kv.add_argument("--pairs", type=int, default=75, help="pairs per example (75, 140, 300...)")
    kv.add_argument("--positions", default=None, help="positions (default: the paper's)")
    kv.add_argument("--query-aware", choices=("both", "on", "off"), default="both")
    gauge = _task(tasks, "gauge", "question likelihood as a gauge of accuracy")
    _docs(gauge)
    gauge.add_argument("--positions", default=None, help="gold positions (default: paper's)")
    domain = _task(tasks, "open-domain", "retriever recall@k vs reader accuracy@k")
    domain.add_argument("--ks", default="5,10,20,30,40,50", help="passage counts")
    domain.add_argument("--retriever", choices=("dense", "bm25"), default="dense")
    swim = _task(tasks, "swim", "SWiM depth and size tests within a token budget")
    swim.add_argument("--budget", type=int, default=None, help="tokens (default: the window)")
    swim.add_argument("--depths", default="0,25,50,75,100", help="depth percentages")
    swim.add_argument("--sizes", default="0,25,50,75,100", help="size percentages")
    multifact = _task(tasks, "multifact", "multi-value needles: single pass vs FACT by iteration")
    multifact.add_argument("--tokens", default="2000,4000", help="haystack sizes in tokens")
    multifact.add_argument("--keys", default="1,5", help="keys per haystack (10 values each)")
    multifact.add_argument("--iterations", type=int, default=4, help="FACT iterations, at most")
    length = _task(tasks, "length", "VarSum by filler size: direct vs recite-then-solve")
    length.add_argument("--filler-tokens", default="0,1000,2000,4000", help="filler sizes")
    length.add_argument("--fillers", default="essay,whitespace", help="filler kinds")
    length.add_argument("--summed", type=int, default=3, help="variables summed (1: a lookup)")
    voting = _task(tasks, "voting", "medoid voting vs single runs at the worst position")
    _docs(voting)
    voting.add_argument("--ks", default="3,5", help="runs per vote")
    voting.add_argument("--control-temperatures", default="0.7", help="resampling controls")
    voting.add_argument("--worst-position", type=int, default=None, help="skip the sweep")


def eval_command(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run the task ``args.task``; print where the report is and the headline numbers."""
    command = "rag-position " + shlex.join(argv)
    start = time.perf_counter()
    try:
        args.shard = parse_shard(args.shard) if args.shard else None  # before the model loads
        model = load_model(args.model, **model_options(args))
        common = _common(args, model, command)
        result = RUNNERS[args.task](args, common)
    except EvalRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (RagPositionError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _print_result(result, time.perf_counter() - start)
    return 0


def _quick(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.quick import QUICK_QUESTIONS, run_quick

    common["questions"] = common["questions"] or QUICK_QUESTIONS
    return run_quick(strategies=_names(args.strategies), compare=not args.no_compare, **common)


def _multidoc(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.multidoc import run_multidoc

    positions = parse_int_list(args.positions, what="--positions") if args.positions else None
    return run_multidoc(
        docs=args.docs,
        positions=positions,
        ordered_randomly=args.ordered_randomly,
        sandwich=args.sandwich,
        baselines=not args.no_baselines,
        **common,
    )


def _compare(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.compare import run_compare

    options = {"convex_score_profile": {"profile": args.profile}} if args.profile else None
    return run_compare(
        strategies=_names(args.strategies),
        docs=args.docs,
        worst_position=args.worst_position,
        gold=_names(args.gold) or (),
        strategy_options=options,
        **common,
    )


def _kv(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.kv import run_kv

    positions = parse_int_list(args.positions, what="--positions") if args.positions else None
    aware = {"both": (False, True), "on": (True,), "off": (False,)}[args.query_aware]
    return run_kv(pairs=args.pairs, positions=positions, query_aware=aware, **common)


def _gauge(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.gauge import run_gauge

    positions = parse_int_list(args.positions, what="--positions") if args.positions else None
    return run_gauge(docs=args.docs, positions=positions, **common)


def _open_domain(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.open_domain import run_open_domain

    ks = parse_int_list(args.ks, what="--ks")
    return run_open_domain(ks=ks, retriever=args.retriever, **common)


def _swim(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.swim import run_swim

    return run_swim(
        budget=args.budget,
        depths=parse_int_list(args.depths, what="--depths"),
        sizes=parse_int_list(args.sizes, what="--sizes"),
        **common,
    )


def _multifact(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.multifact import run_multifact

    keys = parse_int_list(args.keys, what="--keys")
    return run_multifact(
        tokens=parse_int_list(args.tokens, what="--tokens"),
        configs=[(k, 10) for k in keys],
        iterations=args.iterations,
        **common,
    )


def _length(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.length import run_length

    return run_length(
        filler_tokens=parse_int_list(args.filler_tokens, what="--filler-tokens"),
        fillers=_names(args.fillers) or [],
        summed=args.summed,
        **common,
    )


def _voting(args: argparse.Namespace, common: dict[str, Any]) -> EvalResult:
    from rag_position.eval.voting import run_voting

    try:
        temperatures = [float(t) for t in args.control_temperatures.split(",") if t.strip()]
    except ValueError:
        raise EvalConfigError(
            f"--control-temperatures: expected numbers, got {args.control_temperatures!r}"
        ) from None
    return run_voting(
        ks=parse_int_list(args.ks, what="--ks"),
        control_temperatures=temperatures,
        docs=args.docs,
        worst_position=args.worst_position,
        **common,
    )


RUNNERS: dict[str, Callable[[argparse.Namespace, dict[str, Any]], EvalResult]] = {
    "quick": _quick,
    "multidoc": _multidoc,
    "compare": _compare,
    "kv": _kv,
    "gauge": _gauge,
    "open-domain": _open_domain,
    "swim": _swim,
    "multifact": _multifact,
    "length": _length,
    "voting": _voting,
}


def _task(tasks: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = tasks.add_parser(name, help=help_text, description=help_text)
    parser.add_argument("--model", default="embedded", help="a load_model spec (default: embedded)")
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
    parser.add_argument(
        "--data", type=Path, default=None, help="data file (default: the packaged dev file)"
    )
    parser.add_argument(
        "--questions", type=int, default=None, help="first N (default: 50 of dev, all of --data)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    parser.add_argument("--out", type=Path, default=None, help=f"output folder (runs/{name})")
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="per answer (default: the task's, 100)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=None, help="prompts per generate call (CPU: 1, else 8)"
    )
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight (remote)")
    parser.add_argument(
        "--shard",
        default=None,
        metavar="K/N",
        help="only the K-th of N shares of the questions (split a run; see README)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """``load_model`` keywords from ``--device`` and ``--dtype`` (local models only).

    Example:
        >>> model_options(argparse.Namespace(model="embedded", device="cuda", dtype=None))
        {'device': 'cuda'}
    """
    options = {k: v for k in ("device", "dtype") if (v := getattr(args, k, None)) is not None}
    if options and args.model.startswith("openai:"):
        flags = " and ".join(f"--{k}" for k in options)
        verb = "apply" if len(options) > 1 else "applies"
        raise EvalConfigError(
            f"{flags} {verb} to local models only; the server {args.model!r} chooses its own"
        )
    return options


def _docs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=int, default=10, choices=(10, 20, 30), help="passages")


def _common(args: argparse.Namespace, model: Any, command: str) -> dict[str, Any]:
    questions = args.questions
    if questions is None and args.task not in OWN_DEFAULT_QUESTIONS:
        questions = None if args.data else 50  # all of a --data file, 50 of the dev file
    common = {
        "model": model,
        "questions": questions,
        "data": args.data,
        "seed": args.seed,
        "out": args.out or Path("runs") / args.task,
        "batch_size": args.batch_size,
        "concurrency": args.concurrency,
        "shard": args.shard,
        "progress": not args.no_progress,
        "command": command,
    }
    if args.max_new_tokens is not None:  # else each task's own default
        common["max_new_tokens"] = args.max_new_tokens
    return common


def _names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def _print_result(result: EvalResult, seconds: float) -> None:
    for section in result.sections:
        print(f"\n{section.title}")
        for row in section.rows:
            label = row["setting"] if row["strategy"] == "baseline" else row["strategy"]
            if row["strategy"] != "baseline":
                label += f"  ({row['setting']})"
            print(f"  {label:<48} n={row['n']:<4} accuracy {acc_cell(row)}")
    print(f"\nreport: {result.report}\n{seconds:.0f} s in all")
