"""Concurrent pipeline calls through LangChain and LlamaIndex: throughput, latency, memory, faults.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/load.py --out benchmarks/results/load.json
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/load.py --quick --out /tmp/load-quick.json

One pipeline call is ``await PositionAwareRetriever.ainvoke(query)`` (LangChain,
``langchain_rag_position``) or ``await PositionAwareRetriever.aretrieve(query)``
(LlamaIndex): a keyword retriever over a fixed corpus (the gold passages of the first
``--queries`` questions of the packaged NQ file, cut to ``--passage-words`` words, with
their titles) keeps ``--k`` passages, and ``passage_likelihood`` reorders them with an
``openai:`` scorer pointing at a server this script starts on 127.0.0.1 (``--k``
scoring requests a call). Two servers, one after the other, never at once:

- **vLLM**: ``rag-position serve --port 0 --dtype float32 --max-model-len 4096`` (as the
  test suite starts it), the embedded model; start-up is timed apart.
- **the double** (``rag_position.testing.openai_double``) in a child process, over a
  small random-weight model with the embedded model's tokenizer (``--double-model
  tiny``, the default: a reply costs milliseconds, so the client's own cost shows and
  5,000 calls fit the time; ``embedded`` serves the real weights). Broken replies come
  from its ``break_next`` (a handler subclass queues one before a ``/v1/completions``
  request with probability ``--break-rate``).

Per server: every distinct query is first called **alone** (sequentially): the
reference. Then, at each level of ``--levels`` calls in flight (an ``asyncio``
semaphore), ``--calls`` calls cycling over the queries, each bounded by
``asyncio.wait_for(--call-timeout)``: throughput (calls/s), p50/p99 latency, the peak
RSS of this process (sampled every 20 ms), and every result compared with its alone
reference: the passages, their order, the metadata records (scores included), the
node scores, and the call's own cost (``rag_position.cost.metered`` around the call:
LM calls and prompt tokens). A difference is a mismatch (target 0); on vLLM a score
within ``--score-tolerance`` of the reference is equal (vLLM's batching changes the
last digits) and the largest difference is reported.

Then the same scoring requests as the top level's calls, sent at once through the
backend's own batch call (``OpenAICompatibleModel.score_spans`` on all the prompts,
its default concurrency): the pipeline's throughput over that one (target >= 0.8).

On the double only: **faults**, ``--fault-calls`` calls per framework at
``--fault-concurrency`` in flight with ``--break-rate`` of the replies broken, once with
the backend's default retries and once with ``max_retries=0``: each call is right
(equal to its reference), a clear exception (counted by type and message), wrong, or
hung (past ``--call-timeout``); wrong and hung must be 0. And **memory**:
``--memory-calls`` calls (LangChain and LlamaIndex in turn) at
``--memory-concurrency``, RSS after ``gc.collect()`` at ``--memory-checkpoint`` calls
and at the end (target: within 10%).

Traffic goes only to the servers started here, on 127.0.0.1. ``--time-limit`` bounds
the whole run: a phase that would start after it is skipped (and said so), and a
watchdog ends the process (servers stopped) 120 s after it. The exit status is 1 when a
target is missed (the summary's ``targets_missed`` says which), 3 when the watchdog ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import platform
import random
import re
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_position.cost import metered
from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.models import load_model
from rag_position.passages import Passage
from rag_position.prompts import question_span, render_qa
from rag_position.testing import serve_process

ROOT = Path(__file__).resolve().parent.parent
STRATEGY = "passage_likelihood"
_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = (
    "a an and are as at be by for from has he her his in is it its of on or she that the their "
    "they this to was were what when where which who whom why will with how did does do"
)
_STOP = frozenset(_STOP_WORDS.split())


# ---------------------------------------------------------------------- corpus, retrievers
@dataclass(frozen=True)
class Corpus:
    questions: list[str]
    passages: list[Passage]

    def top(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` passages sharing the most words with ``query`` (ties: earlier first)."""
        words = set(_WORD.findall(query.lower())) - _STOP
        scored = []
        for i, p in enumerate(self.passages):
            bag = set(_WORD.findall(f"{p.title} {p.text}".lower()))
            scored.append((-len(words & bag), i))
        scored.sort()
        return [(i, float(-s)) for s, i in scored[:k]]


def build_corpus(n: int, words: int) -> Corpus:
    records = load_qa(default_data_dir() / ORACLE_FILE, limit=n)
    passages = []
    for r in records:
        gold = r.passages[0]
        passages.append(Passage(text=" ".join(gold.text.split()[:words]), title=gold.title))
    return Corpus([r.question for r in records], passages)


def langchain_base(corpus: Corpus, k: int) -> Any:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    # one Document per passage, shared by every call (as an in-memory store returns them):
    # a component that wrote on its inputs would leak into other requests' results
    shared = [
        Document(page_content=p.text, metadata={"title": p.title, "id": i}, id=f"doc-{i}")
        for i, p in enumerate(corpus.passages)
    ]

    def docs(query: str) -> list[Document]:
        return [shared[i] for i, _ in corpus.top(query, k)]

    def state() -> str:
        return json.dumps([[d.id, d.page_content, d.metadata] for d in shared])

    class Keyword(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return docs(query)

        async def _aget_relevant_documents(
            self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
        ) -> list[Document]:
            return docs(query)  # no I/O: no executor thread

    return Keyword(), state


def llama_index_base(corpus: Corpus, k: int) -> Any:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    shared = [  # one node per passage, shared by every call (see langchain_base)
        TextNode(text=p.text, id_=f"node-{i}", metadata={"title": p.title, "id": i})
        for i, p in enumerate(corpus.passages)
    ]

    class Keyword(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [
                NodeWithScore(node=shared[i], score=s)
                for i, s in corpus.top(query_bundle.query_str, k)
            ]

    def state() -> str:
        return json.dumps(
            [[n.node_id, n.text, n.metadata, n.excluded_llm_metadata_keys] for n in shared]
        )

    return Keyword(), state


@dataclass
class Pipelines:
    """The two frameworks' pipelines over one scorer spec: name -> async call of query q."""

    spec: str
    calls: dict[str, Callable[[int], Awaitable[Any]]] = field(default_factory=dict)
    states: dict[str, Callable[[], str]] = field(default_factory=dict)  # the shared inputs
    initial: dict[str, str] = field(default_factory=dict)

    def inputs_untouched(self) -> bool:
        """Whether every shared input document / node is as it was when built."""
        return all(state() == self.initial[name] for name, state in self.states.items())


def pipelines(corpus: Corpus, k: int, spec: str, scorer_kwargs: dict[str, Any]) -> Pipelines:
    from langchain_rag_position import PositionAwareRetriever as LangChainRetriever
    from llama_index.postprocessor.rag_position import PositionAwareRetriever as LlamaRetriever

    lc_base, lc_state = langchain_base(corpus, k)
    li_base, li_state = llama_index_base(corpus, k)
    lc = LangChainRetriever(
        retriever=lc_base,
        strategy=STRATEGY,
        scorer=spec,
        strategy_options={"scorer_kwargs": dict(scorer_kwargs)},
    )
    li = LlamaRetriever(li_base, STRATEGY, scorer=spec, scorer_kwargs=dict(scorer_kwargs))

    async def langchain(q: int) -> Any:
        with metered() as tally:
            docs = await lc.ainvoke(corpus.questions[q])
        return {
            "passages": [d.page_content for d in docs],
            "ids": [d.id for d in docs],
            "metadata": [d.metadata for d in docs],
            "cost": [tally.total.lm_calls, tally.total.prompt_tokens],
        }

    async def llama_index(q: int) -> Any:
        with metered() as tally:
            nodes = await li.aretrieve(corpus.questions[q])
        return {
            "passages": [n.node.get_content() for n in nodes],
            "ids": [n.node.node_id for n in nodes],
            "metadata": [dict(n.node.metadata) for n in nodes],
            "node_scores": [n.score for n in nodes],
            "cost": [tally.total.lm_calls, tally.total.prompt_tokens],
        }

    states = {"langchain": lc_state, "llama_index": li_state}
    return Pipelines(
        spec,
        {"langchain": langchain, "llama_index": llama_index},
        states,
        {name: state() for name, state in states.items()},
    )


# ---------------------------------------------------------------------- comparing
def compare(a: Any, b: Any, tol: float) -> tuple[bool, bool, float]:
    """(bit-identical, equal with floats within ``tol``, largest float difference)."""
    if isinstance(a, float) and isinstance(b, float):
        d = abs(a - b) if math.isfinite(a) and math.isfinite(b) else (0.0 if a == b else math.inf)
        return a == b, d <= tol, d
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return False, False, 0.0
        parts = [compare(a[key], b[key], tol) for key in a]
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return False, False, 0.0
        parts = [compare(x, y, tol) for x, y in zip(a, b, strict=True)]
    else:
        same = type(a) is type(b) and a == b
        return same, same, 0.0
    return (
        all(p[0] for p in parts),
        all(p[1] for p in parts),
        max((p[2] for p in parts), default=0.0),
    )


def error_key(exc: BaseException) -> str:
    """An exception as ``Type: message`` with numbers, URLs and quoted text generalised."""
    text = str(exc).replace("\n", " ")
    text = re.sub(r"http://127\.0\.0\.1:\d+", "<server>", text)
    text = re.sub(r"it starts (b?)'.*?'(?=[;)]|$)", "it starts '...'", text)
    text = re.sub(r" and is (b?)'.*'$", " and is '...'", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return f"{type(exc).__module__}.{type(exc).__name__}: {text[:300]}"


# ---------------------------------------------------------------------- memory
def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return math.nan


class RSSPeak:
    """The largest RSS of this process seen while the block runs (sampled every 20 ms)."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb())
            self._stop.wait(0.02)

    def __enter__(self) -> RSSPeak:
        self.peak = rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


# ---------------------------------------------------------------------- running calls
@dataclass
class Outcome:
    query: int
    seconds: float
    result: Any = None
    error: BaseException | None = None
    hung: bool = False


async def run_calls(
    call: Callable[[int], Awaitable[Any]],
    queries: Sequence[int],
    concurrency: int,
    timeout: float,
) -> tuple[list[Outcome], float]:
    """``call(q)`` for every query index, at most ``concurrency`` in flight; (outcomes, wall s)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(q: int) -> Outcome:
        async with gate:
            start = time.perf_counter()
            try:
                result = await asyncio.wait_for(call(q), timeout)
            except asyncio.TimeoutError:
                return Outcome(q, time.perf_counter() - start, hung=True)
            except Exception as exc:  # counted, by type and message
                return Outcome(q, time.perf_counter() - start, error=exc)
            return Outcome(q, time.perf_counter() - start, result=result)

    start = time.perf_counter()
    outcomes = await asyncio.gather(*(one(q) for q in queries))
    return list(outcomes), time.perf_counter() - start


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(0, math.ceil(p / 100 * len(ordered)) - 1)
    return ordered[rank]


def tally(outcomes: Sequence[Outcome], reference: dict[int, Any], tol: float) -> dict[str, Any]:
    """Right / wrong / errors / hung, compared with the alone references."""
    right = wrong = identical = hung = 0
    worst = 0.0
    errors: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    for o in outcomes:
        if o.hung:
            hung += 1
        elif o.error is not None:
            errors[error_key(o.error)] += 1
        else:
            same, close, diff = compare(o.result, reference[o.query], tol)
            worst = max(worst, diff)
            identical += same
            if close:
                right += 1
            else:
                wrong += 1
                if len(examples) < 3:
                    examples.append(
                        {"query": o.query, "got": o.result, "alone": reference[o.query]}
                    )
    return {
        "right": right,
        "mismatches": wrong,
        "bit_identical": identical,
        "largest_score_difference": worst,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors.most_common()),
        "hung": hung,
        "mismatch_examples": examples,
    }


def level_row(
    outcomes: list[Outcome], wall: float, peak: float, reference: dict[int, Any], tol: float
) -> dict[str, Any]:
    latencies = [o.seconds for o in outcomes if not o.hung and o.error is None]
    return {
        "calls": len(outcomes),
        "seconds": round(wall, 3),
        "throughput_calls_per_s": round(len(latencies) / wall, 3),  # answered calls
        "latency_p50_s": round(percentile(latencies, 50), 4),
        "latency_p99_s": round(percentile(latencies, 99), 4),
        "peak_rss_mb": round(peak, 1),
        **tally(outcomes, reference, tol),
    }


# ---------------------------------------------------------------------- servers
_STARTED: list[Any] = []  # servers started here, for the watchdog
_PARTIAL: dict[str, Any] = {}  # the report so far, which the watchdog writes


class DoubleProcess:
    """The OpenAI double in a child process (``serve-double``), with its control routes."""

    def __init__(self, model: str, seed: int) -> None:
        self.model, self.seed = model, seed
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.name = ""

    def start(self, timeout: float = 600) -> DoubleProcess:
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        command = [sys.executable, __file__, "serve-double", "--model", self.model,
                   "--seed", str(self.seed)]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        _STARTED.append(self)
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the double exited ({self.process.poll()}) before serving")
            if line.startswith("SERVING "):
                _, self.url, self.name = line.split()
                return self
        raise RuntimeError("the double did not start in time")

    @property
    def spec(self) -> str:
        return f"openai:{self.url}/{self.name}"

    def control(self, path: str, body: dict[str, Any] | None = None) -> Any:
        import httpx

        root = self.url.removesuffix("/v1")
        reply = httpx.post(f"{root}/_load/{path}", json=body or {}, timeout=30)
        reply.raise_for_status()
        return reply.json()

    def rss_mb(self) -> float | None:
        if self.process is None:
            return None
        try:
            with open(f"/proc/{self.process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class ServeProcess(serve_process.ServeProcess):
    """``rag-position serve`` (vLLM) as the test suite starts it, registered for the watchdog."""

    def start(self, timeout: float = 900.0) -> ServeProcess:
        _STARTED.append(self)
        super().start(timeout)
        return self

    def log_tail(self) -> dict[str, Any]:
        """Whether the server still runs, and its last warnings and errors."""
        lines = self.log_text(100_000).splitlines()
        worse = [x[:300] for x in lines if " ERROR " in x or " WARNING " in x][-12:]
        return {"running": self.running, "log": str(self.log), "errors_and_warnings": worse}


def serve_double(model_kind: str, seed: int) -> int:
    """The child process: the double on 127.0.0.1, breaking replies as the parent asks."""
    import torch

    from rag_position.models.transformers_backend import TransformersModel
    from rag_position.testing._faults import BREAKS
    from rag_position.testing.openai_double import ModelServer, OpenAIHandler

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if model_kind == "embedded":
        model = load_model("embedded", dtype="float32", chat_template=False)
    else:
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        from rag_position.serving import model_folder

        folder, _ = model_folder("embedded")
        tokenizer = AutoTokenizer.from_pretrained(folder)
        torch.manual_seed(seed)
        config = LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=4096, tie_word_embeddings=True, initializer_range=0.5,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        )  # fmt: skip
        model = TransformersModel(
            LlamaForCausalLM(config).eval(),  # type: ignore[no-untyped-call]
            tokenizer,
            name="tiny-random",
            chat_template=False,
            max_context=4096,
        )

    state: dict[str, Any] = {"rate": 0.0, "kinds": [], "queued": Counter()}
    rng = random.Random(seed)
    lock = threading.Lock()

    class RandomBreaks(OpenAIHandler):
        def _routes(self) -> dict[tuple[str, str], Callable[[Any], Any]]:
            return {
                **super()._routes(),
                ("POST", "/_load/breaks"): self.set_breaks,
                ("POST", "/_load/stats"): self.stats,
            }

        def set_breaks(self, req: Any) -> Any:
            kinds = list(req.get("kinds") or [])
            if any(k not in BREAKS for k in kinds):
                raise ValueError(f"unknown break in {kinds}")
            with lock:
                state["rate"], state["kinds"] = float(req.get("rate", 0.0)), kinds
            return {"rate": state["rate"], "kinds": kinds}

        def stats(self, _req: Any) -> Any:
            with lock:
                queued = dict(state["queued"])
            return {"breaks_queued": queued, "requests": len(self.server.requests)}

        def _dispatch(self, method: str) -> None:
            if method == "POST" and self.path.rstrip("/") == "/v1/completions":
                with lock:
                    kind = None
                    if state["kinds"] and rng.random() < state["rate"]:
                        kind = rng.choice(state["kinds"])
                        state["queued"][kind] += 1
                if kind is not None:
                    self.server.break_next(1, kind)  # the double's own mechanism
            super()._dispatch(method)

    class Server(ModelServer):
        request_queue_size = 256  # socketserver's 5 overflows at 64 calls in flight

    server = Server(model, handler=RandomBreaks).start()
    print("SERVING", server.url, server.model_name, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            if os.getppid() == 1:  # the parent died
                break
    finally:
        server.shutdown()
    return 0


# ---------------------------------------------------------------------- phases
class Clock:
    def __init__(self, limit: float) -> None:
        self.start = time.monotonic()
        self.limit = limit

    def left(self) -> float:
        return self.limit - (time.monotonic() - self.start)


def calls_at(args: argparse.Namespace, server: str, level: int) -> int:
    """Calls at a level: vLLM on this CPU answers a few requests a second, the double more."""
    if server == "vllm":
        return int(args.vllm_calls or max(16, level))
    return int(args.calls or max(64, 2 * level))


def cycle(n_queries: int, calls: int, rng: random.Random) -> list[int]:
    """``calls`` query indices: every query in turn, each round shuffled."""
    out: list[int] = []
    while len(out) < calls:
        block = list(range(n_queries))
        rng.shuffle(block)
        out += block
    return out[:calls]


async def alone(pipes: Pipelines, questions: Sequence[str], timeout: float) -> dict[str, Any]:
    """Every distinct query through each framework, one at a time: the references."""
    references: dict[str, dict[int, Any]] = {}
    info: dict[str, Any] = {}
    for name, call in pipes.calls.items():
        outcomes, wall = await run_calls(call, range(len(questions)), 1, timeout)
        bad = [o for o in outcomes if o.result is None]
        if bad:
            raise RuntimeError(f"{name}: an alone call failed: {bad[0].error or 'hung'}")
        references[name] = {o.query: o.result for o in outcomes}
        costs = [o.result["cost"] for o in outcomes]
        info[name] = {
            "calls": len(outcomes),
            "seconds": round(wall, 3),
            "latency_p50_s": round(percentile([o.seconds for o in outcomes], 50), 4),
            "lm_calls_per_call": sorted({c[0] for c in costs}),
            "prompt_tokens_per_call_mean": round(sum(c[1] for c in costs) / len(costs), 1),
        }
    return {"references": references, "info": info}


async def levels_phase(
    server: str,
    pipes: Pipelines,
    questions: Sequence[str],
    references: dict[str, dict[int, Any]],
    args: argparse.Namespace,
    clock: Clock,
    rng: random.Random,
    rows: dict[str, Any],
) -> None:
    """Fills ``rows``: framework -> level -> figures."""
    for name, call in pipes.calls.items():
        rows[name] = {}
        for level in args.levels:
            if clock.left() <= 0:
                rows[name][str(level)] = {"skipped": "the time limit was reached"}
                continue
            queries = cycle(len(questions), calls_at(args, server, level), rng)
            gc.collect()
            load = os.getloadavg()[0]
            cpu = time.process_time()
            with RSSPeak() as peak:
                outcomes, wall = await run_calls(call, queries, level, args.call_timeout)
            cpu = time.process_time() - cpu
            row = level_row(outcomes, wall, peak.peak, references[name], args.score_tolerance)
            row["client_cpu_ms_per_call"] = round(1000 * cpu / len(outcomes), 1)
            row["load_average_at_start"] = round(load, 2)
            rows[name][str(level)] = row
            print(
                f"  {name} x{level}: {row['throughput_calls_per_s']} calls/s, p50 "
                f"{row['latency_p50_s']} s, p99 {row['latency_p99_s']} s, peak RSS "
                f"{row['peak_rss_mb']} MB, mismatches {row['mismatches']}, errors "
                f"{row['errors']}, hung {row['hung']}",
                flush=True,
            )


def direct_batch(
    spec: str,
    corpus: Corpus,
    k: int,
    calls: int,
    references: dict[int, Any],
    rng: random.Random,
    tol: float,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """The scoring requests of ``calls`` pipeline calls in one score_spans call, at the
    backend's own concurrency (or ``concurrency``)."""
    queries = cycle(len(corpus.questions), calls, rng)
    prompts, spans = [], []
    for q in queries:
        question = corpus.questions[q]
        for i, _ in corpus.top(question, k):
            prompt = render_qa(question, [corpus.passages[i]])
            prompts.append(prompt)
            spans.append(question_span(prompt, question))
    model = load_model(spec, **({"concurrency": concurrency} if concurrency else {}))
    model.score_spans(prompts[:1], spans[:1])  # the scoring probe, outside the timing
    start, cpu = time.perf_counter(), time.process_time()
    try:
        scores = model.score_spans(prompts, spans)
    finally:
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        model.close()
    # the scores equal the records' (the pipelines sent these very prompts)
    worst, at = 0.0, 0
    for q in queries:
        by_id = {m["id"]: m["rag_position"]["score"] for m in references[q]["metadata"]}
        for i, _ in corpus.top(corpus.questions[q], k):
            worst = max(worst, abs(scores[at].mean - by_id[i]))
            at += 1
    return {
        "calls": calls,
        "scoring_requests": len(prompts),
        "concurrency": getattr(model, "concurrency", None),
        "seconds": round(wall, 3),
        "throughput_calls_per_s": round(calls / wall, 3),
        "client_cpu_ms_per_call": round(1000 * cpu / calls, 1),
        "largest_score_difference_from_pipeline": worst,
        "scores_match_pipeline": worst <= tol,
    }


async def ratio_phase(
    label: str,
    pipes: Pipelines,
    spec: str,
    corpus: Corpus,
    references: dict[str, dict[int, Any]],
    levels: dict[str, Any],
    args: argparse.Namespace,
    clock: Clock,
    rng: random.Random,
    tol: float,
    rounds: int,
) -> dict[str, Any]:
    """Pipeline throughput at the top level over the direct batch's, in alternating rounds
    (the first reuses the level's row); medians. On the double also the direct batch at
    the pipeline's own requests in flight (executor threads x k)."""
    top = max(args.levels)
    n = calls_at(args, label, top)
    threads = args.executor_threads or min(32, (os.cpu_count() or 1) + 4)
    in_flight = min(top, threads) * args.k
    measured: dict[str, list[float]] = {name: [] for name in pipes.calls}
    measured["direct"], measured["direct_at_pipeline_in_flight"] = [], []
    first: dict[str, Any] = {}
    mismatches = 0
    for _ in range(rounds):
        if clock.left() <= 0:
            break
        r = len(measured["direct"])
        for name, call in pipes.calls.items():
            row = levels[name].get(str(top), {})
            if r == 0 and "throughput_calls_per_s" in row:
                measured[name].append(row["throughput_calls_per_s"])
                continue
            queries = cycle(len(corpus.questions), n, rng)
            outcomes, wall = await run_calls(call, queries, top, args.call_timeout)
            mismatches += tally(outcomes, references[name], tol)["mismatches"]
            answered = sum(1 for o in outcomes if o.result is not None)
            measured[name].append(round(answered / wall, 3))
        ref = references["langchain"]
        try:
            batch = await asyncio.to_thread(direct_batch, spec, corpus, args.k, n, ref, rng, tol)
        except Exception as exc:
            first = first or {"failed": f"{type(exc).__name__}: {exc}"}
            break
        measured["direct"].append(batch["throughput_calls_per_s"])
        first = first or batch
        if label != "vllm":
            spread = await asyncio.to_thread(
                direct_batch, spec, corpus, args.k, n, ref, rng, tol, in_flight
            )
            measured["direct_at_pipeline_in_flight"].append(spread["throughput_calls_per_s"])
    medians = {k: (round(statistics.median(v), 3) if v else None) for k, v in measured.items()}
    out: dict[str, Any] = {
        **first,
        "rounds": len(measured["direct"]),
        "throughput_calls_per_s_by_round": measured,
        "median_throughput_calls_per_s": medians,
        "pipeline_requests_in_flight": in_flight,
        "mismatches_in_extra_rounds": mismatches,
    }
    direct, wide = medians["direct"], medians["direct_at_pipeline_in_flight"]
    for name in pipes.calls:
        mine = medians[name]
        if mine and direct:
            out[f"ratio_{name}_at_{top}"] = round(mine / direct, 3)
        if mine and wide:
            out[f"ratio_{name}_at_{top}_vs_direct_at_{in_flight}"] = round(mine / wide, 3)
    shown = {k: v for k, v in out.items() if k.startswith(("ratio", "median"))}
    print(f"  direct batch: {json.dumps(shown)}", flush=True)
    return out


async def faults_phase(
    double: DoubleProcess,
    corpus: Corpus,
    references: dict[str, dict[int, Any]],
    args: argparse.Namespace,
    rng: random.Random,
) -> dict[str, Any]:
    out: dict[str, Any] = {"break_rate": args.break_rate, "break_kinds": args.break_kinds}
    for label, kwargs in (("default_retries", {}), ("max_retries_0", {"max_retries": 0})):
        pipes = pipelines(corpus, args.k, double.spec, kwargs)
        for call in pipes.calls.values():  # the scoring probe, before any break
            await call(0)
        before = double.control("stats")["breaks_queued"]
        double.control("breaks", {"rate": args.break_rate, "kinds": args.break_kinds})
        rows: dict[str, Any] = {}
        try:
            for name, call in pipes.calls.items():
                queries = cycle(len(corpus.questions), args.fault_calls, rng)
                outcomes, wall = await run_calls(
                    call, queries, args.fault_concurrency, args.call_timeout
                )
                row = tally(outcomes, references[name], 0.0)
                row.update(calls=len(outcomes), seconds=round(wall, 2))
                rows[name] = row
                print(
                    f"  faults {label} {name}: right {row['right']}, errors {row['errors']}, "
                    f"mismatches {row['mismatches']}, hung {row['hung']}",
                    flush=True,
                )
        finally:
            double.control("breaks", {"rate": 0.0, "kinds": []})
        after = double.control("stats")["breaks_queued"]
        rows["breaks_sent"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        rows["inputs_untouched"] = pipes.inputs_untouched()
        rows["scorer_options"] = kwargs or {"max_retries": 4}
        out[label] = rows
    return out


async def memory_phase(
    pipes: Pipelines,
    questions: Sequence[str],
    references: dict[str, dict[int, Any]],
    args: argparse.Namespace,
    rng: random.Random,
) -> dict[str, Any]:
    """``--memory-calls`` calls (the frameworks in turn); RSS after gc at the checkpoint and end."""
    names = list(pipes.calls)

    turns = iter(range(10**9))

    async def mixed(q: int) -> Any:
        name = names[next(turns) % len(names)]
        return name, q, await pipes.calls[name](q)

    checkpoints = [args.memory_checkpoint, args.memory_calls]
    done, wrong, hung = 0, 0, 0
    readings: dict[str, float] = {}
    errors: Counter[str] = Counter()
    start = time.perf_counter()
    for target in checkpoints:
        queries = cycle(len(questions), target - done, rng)
        outcomes, _ = await run_calls(mixed, queries, args.memory_concurrency, args.call_timeout)
        for o in outcomes:
            if o.hung:
                hung += 1
            elif o.error is not None:
                errors[error_key(o.error)] += 1
            else:
                name, q, result = o.result
                wrong += not compare(result, references[name][q], args.score_tolerance)[1]
        done = target
        gc.collect()
        readings[str(done)] = round(rss_mb(), 1)
        print(f"  memory: RSS after {done} calls {readings[str(done)]} MB", flush=True)
    first, last = readings[str(checkpoints[0])], readings[str(checkpoints[-1])]
    return {
        "calls": done,
        "concurrency": args.memory_concurrency,
        "seconds": round(time.perf_counter() - start, 1),
        "rss_mb_after_gc": readings,
        "growth": round(last / first - 1, 4),
        "within_10_percent": abs(last / first - 1) <= 0.10,
        "mismatches": wrong,
        "errors": dict(errors),
        "hung": hung,
    }


async def server_phase(
    label: str,
    spec: str,
    corpus: Corpus,
    args: argparse.Namespace,
    clock: Clock,
    tol: float,
) -> dict[str, Any]:
    rng = random.Random(args.seed)
    pipes = pipelines(corpus, args.k, spec, {})
    report: dict[str, Any] = {"spec": spec}
    _PARTIAL[label] = report
    print(f"{label}: alone calls", flush=True)
    ref = await alone(pipes, corpus.questions, args.call_timeout)
    references = ref["references"]
    report["alone"] = ref["info"]
    report["levels"] = {}
    await levels_phase(
        label, pipes, corpus.questions, references, args, clock, rng, report["levels"]
    )
    rounds = args.vllm_ratio_rounds if label == "vllm" else args.ratio_rounds
    report["direct_batch"] = await ratio_phase(
        label, pipes, spec, corpus, references, report["levels"], args, clock, rng, tol, rounds
    )
    report["inputs_untouched"] = pipes.inputs_untouched()
    report["_references"] = references
    report["_pipes"] = pipes
    return report


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = Clock(args.time_limit)
    corpus = build_corpus(args.queries, args.passage_words)
    loop = asyncio.get_running_loop()
    if args.executor_threads:
        loop.set_default_executor(ThreadPoolExecutor(args.executor_threads))
    report: dict[str, Any] = {
        "benchmark": "concurrent pipeline calls through LangChain and LlamaIndex",
        "command": "python benchmarks/load.py " + " ".join(sys.argv[1:]),
        "machine": {"cpu": platform.machine(), "threads": os.cpu_count()},
        "load_average_at_start": os.getloadavg()[0],
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "strategy": STRATEGY,
        "queries": len(corpus.questions),
        "k": args.k,
        "levels": args.levels,
        "calls_per_level": {
            server: {str(lv): calls_at(args, server, lv) for lv in args.levels}
            for server in ("vllm", "double")
        },
        "default_executor_threads": args.executor_threads or min(32, (os.cpu_count() or 1) + 4),
        "score_tolerance_vllm": args.score_tolerance,
    }
    _PARTIAL["report"] = report
    # the double first: its phases take a known time; vLLM's start-up and speed vary more
    parts = [("double", double_part)] if args.double else []
    parts += [("vllm", vllm_part)] if args.vllm or args.vllm_spec else []
    for label, part in parts:
        try:
            report[label] = await part(args, corpus, clock)
        except Exception as exc:  # what was measured, and why the rest was not
            row = {k: v for k, v in _PARTIAL.get(label, {}).items() if not k.startswith("_")}
            row["failed"] = f"{type(exc).__name__}: {exc}"
            report[label] = row
            print(f"{label} failed: {row['failed']}", flush=True)
    return report


async def vllm_part(args: argparse.Namespace, corpus: Corpus, clock: Clock) -> dict[str, Any]:
    """The pipelines against a vLLM server started here (or ``--vllm-spec``)."""
    if args.vllm_spec:  # a server already running (development), not started here
        row = await server_phase("vllm", args.vllm_spec, corpus, args, clock, args.score_tolerance)
        row.pop("_references"), row.pop("_pipes")
        return row
    if clock.left() <= 0:
        return {"skipped": "the time limit was reached"}
    server = ServeProcess()
    start = time.perf_counter()
    try:
        server.start(timeout=min(900.0, max(60.0, clock.left())))
        startup = time.perf_counter() - start
        print(f"vLLM ready in {startup:.0f} s: {server.spec}", flush=True)
        try:
            row = await server_phase("vllm", server.spec, corpus, args, clock, args.score_tolerance)
        finally:
            _PARTIAL["vllm"]["server_log_tail"] = server.log_tail()
        row["startup_seconds"] = round(startup, 1)
        row["seconds"] = round(time.perf_counter() - start, 1)
        row.pop("_references"), row.pop("_pipes")
        return row
    finally:
        server.stop()


async def double_part(args: argparse.Namespace, corpus: Corpus, clock: Clock) -> dict[str, Any]:
    """The pipelines against the double: levels, direct batch, faults, memory."""
    if clock.left() <= 0:
        return {"skipped": "the time limit was reached"}
    double = DoubleProcess(args.double_model, args.seed)
    start = time.perf_counter()
    try:
        double.start()
        print(f"double ready in {time.perf_counter() - start:.0f} s: {double.spec}", flush=True)
        row = await server_phase("double", double.spec, corpus, args, clock, 0.0)
        references, pipes = row.pop("_references"), row.pop("_pipes")
        row["model"] = args.double_model
        if not args.fault_calls:
            row["faults"] = {"skipped": "--fault-calls 0"}
        elif clock.left() > 0:
            print("double: faults", flush=True)
            row["faults"] = await faults_phase(double, corpus, references, args, random.Random(1))
        else:
            row["faults"] = {"skipped": "the time limit was reached"}
        if not args.memory_calls:
            row["memory"] = {"skipped": "--memory-calls 0"}
        elif clock.left() > 0:
            print("double: memory", flush=True)
            row["memory"] = await memory_phase(
                pipes, corpus.questions, references, args, random.Random(2)
            )
        else:
            row["memory"] = {"skipped": "the time limit was reached"}
        row["inputs_untouched"] = pipes.inputs_untouched()
        row["server_peak_rss_mb"] = double.rss_mb()
        row["seconds"] = round(time.perf_counter() - start, 1)
        return row
    finally:
        double.stop()


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """The headline figures: mismatches, hung calls, the ratio, memory growth."""
    out: dict[str, Any] = {}
    mismatches = hung = 0
    for server in ("vllm", "double"):
        row = report.get(server) or {}
        for levels in (row.get("levels") or {}).values():
            for level in levels.values():
                mismatches += level.get("mismatches", 0)
                hung += level.get("hung", 0)
        ratios = {k: v for k, v in (row.get("direct_batch") or {}).items() if k.startswith("ratio")}
        if ratios:
            out[f"{server}_ratio_vs_direct_batch"] = ratios
    faults = (report.get("double") or {}).get("faults") or {}
    for label in ("default_retries", "max_retries_0"):
        for name in ("langchain", "llama_index"):
            row = (faults.get(label) or {}).get(name) or {}
            mismatches += row.get("mismatches", 0)
            hung += row.get("hung", 0)
    memory = (report.get("double") or {}).get("memory") or {}
    mismatches += memory.get("mismatches", 0)
    hung += memory.get("hung", 0)
    untouched = [
        row.get("inputs_untouched")
        for row in (report.get("vllm") or {}, report.get("double") or {}, *faults.values())
        if isinstance(row, dict) and "inputs_untouched" in row
    ]
    out.update(
        mismatches=mismatches,
        hung=hung,
        memory_growth=memory.get("growth"),
        inputs_untouched=all(untouched) if untouched else None,
    )
    out["targets"] = {
        "mismatches": "0",
        "hung": "0",
        "ratio_vs_direct_batch_at_least": 0.8,
        "memory_growth_within": 0.10,
    }
    ratios = [v for key in out if key.endswith("_ratio_vs_direct_batch") for v in out[key].values()]
    missed = []
    if mismatches:
        missed.append(f"{mismatches} mismatches")
    if hung:
        missed.append(f"{hung} hung calls")
    if out["inputs_untouched"] is False:
        missed.append("a shared input document or node was changed")
    if any(r < 0.8 for r in ratios):
        missed.append(f"throughput ratio {min(ratios)} < 0.8")
    if memory.get("growth") is not None and memory["growth"] > 0.10:
        missed.append(f"memory growth {memory['growth']:.1%} > 10%")
    out["targets_missed"] = missed  # the exit status is 1 when any is
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "serve-double":
        child = argparse.ArgumentParser()
        child.add_argument("command")
        child.add_argument("--model", default="tiny")
        child.add_argument("--seed", type=int, default=0)
        opts = child.parse_args()
        return serve_double(opts.model, opts.seed)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/load.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run of about a minute")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument(
        "--calls", type=int, default=0, help="calls per level, double (default max(64, 2 x level))"
    )
    parser.add_argument(
        "--vllm-calls", type=int, default=0, help="calls per level, vLLM (default max(16, level))"
    )
    parser.add_argument("--queries", type=int, default=32, help="distinct queries (the corpus)")
    parser.add_argument("--k", type=int, default=2, help="passages a call keeps and scores")
    parser.add_argument("--passage-words", type=int, default=40)
    parser.add_argument(
        "--vllm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run against vLLM too (default: yes, except with --quick)",
    )
    parser.add_argument(
        "--vllm-spec",
        default=None,
        help="the openai: spec of a vLLM server already running on 127.0.0.1 (for development: "
        "started with --dtype float32 --max-model-len 4096), used instead of starting one",
    )
    parser.add_argument("--double", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--double-model", choices=("tiny", "embedded"), default="tiny")
    parser.add_argument("--break-rate", type=float, default=0.1)
    parser.add_argument(
        "--break-kinds",
        nargs="+",
        default=["truncated-json", "html", "not-an-object", "null-text", "no-choices",
                 "nan-logprob", "null-logprob", "short-logprobs", "short-offsets",
                 "short-arrays"],
    )  # fmt: skip
    parser.add_argument("--fault-calls", type=int, default=300, help="per framework and setting")
    parser.add_argument("--fault-concurrency", type=int, default=32)
    parser.add_argument("--memory-calls", type=int, default=5000)
    parser.add_argument("--memory-checkpoint", type=int, default=500)
    parser.add_argument("--memory-concurrency", type=int, default=32)
    parser.add_argument(
        "--call-timeout", type=float, default=300.0, help="seconds per call, queueing included"
    )
    parser.add_argument(
        "--score-tolerance",
        type=float,
        default=1e-4,
        help="|score difference| counted as equal on vLLM",
    )
    parser.add_argument(
        "--executor-threads",
        type=int,
        default=0,
        help="the event loop's default executor size (0: asyncio's default)",
    )
    parser.add_argument("--time-limit", type=float, default=1080.0, help="seconds, the whole run")
    parser.add_argument(
        "--ratio-rounds",
        type=int,
        default=2,
        help="rounds of (pipelines at the top level, direct batch), alternating, on the double",
    )
    parser.add_argument("--vllm-ratio-rounds", type=int, default=2, help="the same rounds on vLLM")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.queries = min(args.queries, 8)
        args.calls = args.calls or 16
        args.vllm_calls = args.vllm_calls or 8
        args.ratio_rounds = 1
        args.fault_calls = min(args.fault_calls, 24)
        args.memory_calls = min(args.memory_calls, 200)
        args.memory_checkpoint = min(args.memory_checkpoint, 40)
        args.time_limit = min(args.time_limit, 240.0)
    if args.vllm is None:
        args.vllm = not args.quick
    if args.vllm_spec and not re.match(r"openai:http://127\.0\.0\.1:\d+/", args.vllm_spec):
        parser.error("--vllm-spec must be an openai: spec of a server on 127.0.0.1")
    if args.memory_calls and not 0 < args.memory_checkpoint < args.memory_calls:
        parser.error("--memory-checkpoint must be between 0 and --memory-calls")

    def watchdog() -> None:
        time.sleep(args.time_limit + 120)
        print("the time limit passed by 120 s: stopping", file=sys.stderr, flush=True)
        for server in _STARTED:
            server.stop()
        try:  # what was measured so far
            partial = dict(_PARTIAL.get("report", {}))
            for label in ("double", "vllm"):
                if label in _PARTIAL and not isinstance(partial.get(label), dict):
                    row = dict(_PARTIAL[label])
                    row.pop("_references", None), row.pop("_pipes", None)
                    partial[label] = row
            partial["stopped"] = f"by the watchdog, {args.time_limit + 120:.0f} s after the start"
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(partial, indent=2, default=str) + "\n")
        finally:
            os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    start = time.perf_counter()
    report = asyncio.run(run(args))
    report["seconds"] = round(time.perf_counter() - start, 1)
    report["client_max_rss_mb"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    report["torch_imported_by_client"] = "torch" in sys.modules
    report["summary"] = summary(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(json.dumps(report["summary"], indent=2), flush=True)
    if report["summary"]["targets_missed"]:
        print("targets missed: " + "; ".join(report["summary"]["targets_missed"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
