"""benchmarks/load.py's parts: the corpus and pipelines, comparing results, memory, the servers.

Imported by ``benchmarks/load.py`` (run as a script, its folder is on ``sys.path``).
Run as a script itself, ``load_support.py serve-double --model tiny --seed 0`` is the
double's child process (:class:`DoubleProcess` starts it so).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_position.cost import metered
from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.models import load_model
from rag_position.passages import Passage
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
STARTED_SERVERS: list[Any] = []  # servers started here, for the watchdog
PARTIAL_REPORT: dict[str, Any] = {}  # the report so far, which the watchdog writes


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
        STARTED_SERVERS.append(self)
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
        STARTED_SERVERS.append(self)
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

    from rag_position.testing._faults import BREAKS
    from rag_position.testing.openai_double import ModelServer, OpenAIHandler
    from rag_position.testing.tiny_model import tiny_random_model

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if model_kind == "embedded":
        model = load_model("embedded", dtype="float32", chat_template=False)
    else:
        model = tiny_random_model(seed)

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


def _child_main() -> int:
    """``serve-double --model KIND --seed N``: :func:`serve_double`."""
    import argparse

    child = argparse.ArgumentParser()
    child.add_argument("command", choices=["serve-double"])
    child.add_argument("--model", default="tiny", choices=["tiny", "embedded"])
    child.add_argument("--seed", type=int, default=0)
    opts = child.parse_args()
    return serve_double(opts.model, opts.seed)


if __name__ == "__main__":
    sys.exit(_child_main())
