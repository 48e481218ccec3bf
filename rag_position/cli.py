"""The ``rag-position`` command line.

rag-position demo                      # one NQ question, gold passage at 0, 4 and 9 of 10
rag-position demo --model hf:./my-model --question 12
rag-position serve --model embedded    # an OpenAI-compatible server over a local model
rag-position eval quick                # the eval suite's 10-minute run (see eval --help)
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger("rag_position")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rag-position", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="answer one NQ question with the gold passage at several positions"
    )
    demo.add_argument("--model", default="embedded", help="a load_model spec (default: embedded)")
    demo.add_argument("--question", type=int, default=0, help="index of the dev question")
    demo.add_argument("--docs", type=int, default=10, help="passages in the prompt")
    demo.add_argument("--positions", default="0,4,9", help="gold positions, comma-separated")
    demo.add_argument("--data", type=Path, default=None, help="oracle-format file (default: dev)")
    demo.add_argument("--max-new-tokens", type=int, default=100)

    serve = commands.add_parser("serve", help="serve a local model with the OpenAI-compatible API")
    serve.add_argument("--model", default="embedded", help="a local load_model spec")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)

    from rag_position.eval.cli import add_eval_parser

    add_eval_parser(commands)

    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.command == "demo":
        return demo_command(args)
    if args.command == "eval":
        from rag_position.eval.cli import eval_command

        return eval_command(args, sys.argv[1:] if argv is None else list(argv))
    from rag_position.serve import main as serve_main

    return int(serve_main(["--model", args.model, "--host", args.host, "--port", str(args.port)]))


def demo_command(args: argparse.Namespace) -> int:
    """Move the gold passage through positions; print answer, correctness, question likelihood."""
    from rag_position.data import InstanceBuilder, best_subspan_em, default_data_dir, place_gold
    from rag_position.data.loaders import ORACLE_FILE
    from rag_position.models import load_embedder, load_model
    from rag_position.prompts import question_span, render_qa

    positions = [int(p) for p in args.positions.split(",") if p.strip()]
    data = args.data or default_data_dir() / ORACLE_FILE
    start = time.perf_counter()
    builder = InstanceBuilder(data, load_embedder("embedded"))
    instance = builder.build(args.docs, 0, n_questions=args.question + 1)[args.question]
    variants = [place_gold(instance, p) for p in positions]
    prompts = [render_qa(v.question, v.passages) for v in variants]
    model = load_model(args.model)
    scores = model.score_spans(prompts, [question_span(p, instance.question) for p in prompts])
    answers = model.generate(prompts, max_new_tokens=args.max_new_tokens)

    print(f"model:    {getattr(model, 'name', args.model)}")
    print(f"question: {instance.question}")
    print(f"answers:  {' | '.join(instance.answers)}")
    print(f"passages: {args.docs} (distractors mined by dense retrieval from {Path(data).name})\n")
    print(f"{'gold at':>7}  {'correct':>7}  {'question log-lik':>16}  answer")
    for position, score, answer in zip(positions, scores, answers, strict=True):
        correct = best_subspan_em(answer, instance.answers) == 1.0
        flat = " ".join(answer.split())
        print(f"{position:>7}  {'yes' if correct else 'no':>7}  {score.mean:>16.4f}  {flat[:90]}")
    usage = getattr(model, "usage", None)
    print(f"\n{time.perf_counter() - start:.1f} s in all; model usage: {usage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
