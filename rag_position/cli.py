"""The ``rag-position`` command line.

rag-position demo                      # one NQ question, gold passage at 0, 4 and 9 of 10
rag-position demo --model hf:./my-model --question 12
rag-position serve                     # vLLM serving the embedded model; prints the spec
rag-position eval quick                # the eval suite's 10-minute run (see eval --help)
rag-position tune --out tuned.json     # choose this model's ordering; pass the file to a pipeline
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
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback
        print("rag-position: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
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

    serve = commands.add_parser(
        "serve",
        help="start vLLM's OpenAI-compatible server for a model and print the spec to use",
        description="Start vLLM's OpenAI-compatible server (installed by `bash scripts/setup.sh "
        "--vllm`) for an embedded model or a transformers folder, wait until it answers, "
        "print the --model spec for the eval and the integrations, and serve until Ctrl-C. "
        "Arguments after `--` go to vLLM as given.",
    )
    serve.add_argument(
        "--model",
        default="embedded",
        help="'embedded', 'embedded:gemma3-270m', 'embedded:qwen2.5-coder-0.5b' or "
        "'embedded:qwen2.5-coder-1.5b' (exported from its GGUF once, cached), "
        "'hf:<folder>' or 'hf:<file>.gguf' (default: embedded)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=8000, help="port; 0 picks a free one")
    serve.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "bfloat16", "float16", "float32"],
        help="vLLM's --dtype (default: auto, vLLM's choice: it serves a float32 folder, such "
        "as an exported GGUF, in the device's 16-bit type; float32 scores as the local "
        "backend does)",
    )
    serve.add_argument(
        "--max-model-len",
        type=positive_int,
        default=None,
        help="context window (default: the model's)",
    )
    serve.add_argument(
        "--tensor-parallel-size", type=positive_int, default=1, help="GPUs to split the model over"
    )
    serve.add_argument(
        "--api-key",
        default=None,
        help="a key clients must send (default: $RAG_POSITION_API_KEY, else none); clients "
        "read it from OPENAI_API_KEY",
    )
    serve.add_argument(
        "--allow-open",
        action="store_true",
        help="serve on an address other than 127.0.0.1 without an API key (anyone who "
        "reaches it may use the model); refused without this flag",
    )
    serve.add_argument("--served-model-name", default=None, help="the model name clients use")
    serve.add_argument(
        "--vllm-python",
        default=None,
        help="the Python that has vLLM (default: $RAG_POSITION_VLLM_PYTHON, else .venv-vllm)",
    )
    serve.add_argument(
        "--startup-timeout",
        type=positive_float,
        default=900.0,
        help="seconds to wait for readiness",
    )

    from rag_position.eval.cli import add_eval_parser, add_tune_parser

    add_eval_parser(commands)
    add_tune_parser(commands)

    argv = sys.argv[1:] if argv is None else list(argv)
    vllm_args: list[str] = []
    command = next((a for a in argv if not a.startswith("-")), None)
    if command == "serve" and "--" in argv:  # the rest goes to vLLM as given
        cut = argv.index("--")
        argv, vllm_args = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.command == "demo":
        from rag_position.errors import RagPositionError

        try:
            return demo_command(args)
        except (RagPositionError, ValueError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.command in ("eval", "tune"):
        from rag_position.eval.cli import eval_command

        return eval_command(args, argv)
    return serve_command(args, vllm_args)


def port_number(text: str) -> int:
    """``--port``: a TCP port, 0 to 65535 (0: any free one); checked before anything loads.

    Example:
        >>> port_number("8000")
        8000
        >>> port_number("70000")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: must be a port number from 0 to 65535 (0: any free port), got 70000
    """  # noqa: E501
    value = _integer(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"must be a port number from 0 to 65535 (0: any free port), got {text}"
        )
    return value


def positive_int(text: str) -> int:
    """An option that counts something (tokens, GPUs): an integer of at least 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text}")
    return value


def positive_float(text: str) -> float:
    """An option in seconds: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def serve_command(args: argparse.Namespace, vllm_args: Sequence[str] = ()) -> int:
    """Start vLLM, print the spec once it answers, serve until Ctrl-C, `kill` or vLLM exits."""
    import os
    import signal

    from rag_position.errors import RagPositionError
    from rag_position.serving import VLLMServer

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C and `kill` both stop vLLM with it, even where SIGINT came in ignored (a
    # command started in the background by a shell).
    previous = signal.signal(signal.SIGINT, interrupted), signal.signal(signal.SIGTERM, interrupted)
    api_key = args.api_key or os.environ.get("RAG_POSITION_API_KEY") or None
    server: VLLMServer | None = None
    try:
        server = VLLMServer(
            args.model,
            host=args.host,
            port=args.port,
            dtype=args.dtype,
            max_model_len=args.max_model_len,
            tensor_parallel_size=args.tensor_parallel_size,
            api_key=api_key,
            served_model_name=args.served_model_name,
            extra_args=vllm_args,
            vllm_python=args.vllm_python,
            startup_timeout=args.startup_timeout,
            log=sys.stderr,
            allow_open=args.allow_open,
        )
        print(f"starting vLLM for {args.model} (its log follows on stderr)...", flush=True)
        start = time.perf_counter()
        server.start()
        key_hint = " (clients send the key: export OPENAI_API_KEY=<the key>)" if api_key else ""
        print(
            f"\nvLLM is serving {server.served_model_name} at {server.base_url} "
            f"(ready in {time.perf_counter() - start:.0f} s){key_hint}. Use it with:\n\n"
            f"  --model {server.spec}\n\n"
            f"e.g. rag-position eval quick --model {server.spec} --concurrency 8\n"
            "Ctrl-C stops the server.",
            flush=True,
        )
        code = server.wait()
    except (RagPositionError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0  # stopped as asked (finally stops vLLM)
    finally:
        # a second Ctrl-C must not interrupt the stop and leave vLLM running
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if server is not None:
            server.stop()
        signal.signal(signal.SIGINT, previous[0])  # as they were (main() may be a library call)
        signal.signal(signal.SIGTERM, previous[1])
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    print(f"rag-position serve: vLLM {how}", file=sys.stderr)
    return 128 - code if code < 0 else code or 1


def demo_command(args: argparse.Namespace) -> int:
    """Move the gold passage through positions; print answer, correctness, question likelihood."""
    from rag_position.data import InstanceBuilder, best_subspan_em, default_data_dir, place_gold
    from rag_position.data.loaders import ORACLE_FILE
    from rag_position.models import load_embedder, load_model
    from rag_position.prompts import question_span, render_qa

    positions = [int(p) for p in args.positions.split(",") if p.strip()]
    data = args.data or default_data_dir() / ORACLE_FILE
    start = time.perf_counter()
    model = load_model(args.model)  # first: a bad spec fails before the embedder loads
    builder = InstanceBuilder(data, load_embedder("embedded"))
    instance = builder.build(args.docs, 0, n_questions=args.question + 1)[args.question]
    variants = [place_gold(instance, p) for p in positions]
    prompts = [render_qa(v.question, v.passages) for v in variants]
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
