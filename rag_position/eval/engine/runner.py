"""The runner: prepare, generate in moderate batches, score, append, resume.

Jobs are cut into chunks of ``batch_size`` at fixed places of the job list, so a
resumed run sends the model the same batches an uninterrupted run would (batched
generation in low precision can differ in the last bits from one batch to another).
Each chunk is prepared (a strategy may spend model calls here), its prompts sent in
one ``generate`` call, and its records appended and flushed before the next chunk.
A prompt the file already answered with the same model and decoding (gold first in
one task is the same prompt as gold at 0 in another) is not generated again.

Concurrency for remote backends: a model with a ``concurrency`` attribute (the
OpenAI-compatible backend) is given ``--concurrency`` for the run and chunks of at
least that size; any other model gets up to ``concurrency`` chunks in flight on
threads. Local models run with ``concurrency=1`` and, on a CPU, in ``workers`` forked
processes (default: one per torch thread, each running one thread;
:mod:`rag_position.eval.engine._workers`).

Costs per prediction: what preparing spent (reported by the strategy), plus one LM
call, the prompt and generated tokens as the model's ``count_tokens`` counts them
(the prompt text without chat template; ``None`` for a model that cannot count),
and the chunk's generation seconds shared evenly among its prompts.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any

from tqdm.auto import tqdm

from rag_position.cost import Cost, spent_or_sent
from rag_position.data import best_subspan_em
from rag_position.eval.engine._workers import resolve_workers
from rag_position.eval.engine.common import (
    Decoding,
    EvalConfigError,
    EvalRunError,
    Key,
    Prepared,
    model_label,
)
from rag_position.eval.engine.executor import backend_concurrency, choose_executor
from rag_position.eval.engine.pair import scorer_metered
from rag_position.eval.engine.shards import check_shard
from rag_position.eval.engine.store import PredictionStore
from rag_position.models.loading import is_remote

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """One prediction to make: its key, gold answers, how to build its prompt, its fields.

    ``prepare`` runs only when the key is not stored yet. ``fields`` (gold position,
    passage count...) are stored with the record for the summaries.

    Example:
        >>> from functools import partial
        >>> key = Key("demo", "embedded", "baseline", "q1", "closedbook")
        >>> job = Job(key, ("Paris",), partial(Prepared, prompt="Q: capital of France?\\nA:"))
        >>> job.prepare().prompt.splitlines()[0], job.fields
        ('Q: capital of France?', {})
    """

    key: Key
    answers: tuple[str, ...]
    prepare: Callable[[], Prepared]
    fields: Mapping[str, Any] = field(default_factory=dict)


def run_jobs(
    model: Any,
    jobs: Sequence[Job],
    store: PredictionStore,
    *,
    decoding: Decoding | None = None,
    batch_size: int | None = None,
    concurrency: int = 1,
    shard: tuple[int, int] | None = None,
    workers: int | None = 1,
    progress: bool | None = None,
    desc: str = "eval",
    label: str | None = None,
    split_scorer: bool = False,
) -> list[dict[str, Any]]:
    """Make every job's prediction not already in ``store``; return all records in job order.

    ``batch_size`` (default :func:`default_batch_size`) prompts go to each ``generate``
    call, and the file is written after each. A model error stops the run with
    :class:`EvalRunError` (the original error chained); every chunk finished before it
    is on disk, and a rerun resumes after it.

    ``shard=(k, n)`` (1 <= k <= n) makes only the jobs of every n-th instance, starting
    with the k-th in order of first appearance, and returns the records the store holds.
    Each instance's jobs stay in one share. n processes (or machines) with k = 1..n,
    each writing its own folder, split one run; concatenating their prediction files
    into one folder and rerunning without ``shard`` then only writes the report.

    ``workers`` (local models; ``None``: :func:`~rag_position.eval.engine._workers.auto_workers`,
    one per torch thread on a CPU) runs the chunks in that many forked processes of one
    thread each (:mod:`rag_position.eval.engine._workers`); the file gets the records, in the
    same order, that one process on one thread writes.

    ``label``: the run's name in the records (default: the model's
    :func:`~rag_position.eval.engine.common.model_label`). ``split_scorer``: record, beside each
    prediction's cost, the part a separate scorer spent (``scorer_cost``, from
    :func:`~rag_position.eval.engine.pair.scorer_metered`).

    Example::

        model = load_model("embedded")
        store = PredictionStore("runs/demo/predictions.jsonl")
        records = run_jobs(model, jobs, store, decoding=Decoding(max_new_tokens=32))
        [(r["prediction"], r["correct"]) for r in records]  # one record per job, in order
    """
    decoding = decoding or Decoding()
    batch_size = batch_size or default_batch_size(model)
    if batch_size < 1 or concurrency < 1:
        raise EvalConfigError(
            f"--batch-size and --concurrency must be >= 1, got {batch_size}, {concurrency}"
        )
    remote = is_remote(model)  # the one question that chooses how the run executes
    if concurrency > 1 and hasattr(model, "device") and not remote:
        raise EvalConfigError(
            "--concurrency is for remote backends; a local model runs one request at a time "
            "(use --batch-size to batch its prompts)"
        )
    workers = resolve_workers(workers, model)
    seen: set[str] = set()
    for job in jobs:
        if job.key.as_str() in seen:
            raise ValueError(f"two jobs share the key {job.key.as_str()}")
        seen.add(job.key.as_str())
        store.check_decoding(job.key, decoding)
    shard = check_shard(shard)
    share = _share(jobs, shard)
    pending = [i for i, job in enumerate(jobs) if job.key not in store and share(job)]
    chunk_size = max(batch_size, concurrency) if remote else batch_size
    chunks = _chunks(pending, chunk_size)
    mine = sum(1 for job in jobs if share(job))  # all jobs unless sharded
    if shard is not None and jobs and mine == 0:
        instances = len({job.key.instance for job in jobs})
        raise EvalConfigError(
            f"shard {shard[0]}/{shard[1]} holds no questions: the run has {instances}"
        )
    bar = tqdm(
        total=mine,
        initial=mine - len(pending),
        desc=desc,
        unit="pred",
        disable=None if progress is None else not progress,  # None: shown on a terminal
        leave=False,
    )
    work = _Chunk(model, label or model_label(model), decoding, store, split_scorer)
    done = 0
    try:
        execute = choose_executor(work, workers=workers, concurrency=concurrency, remote=remote)
        with bar, backend_concurrency(model, concurrency):
            for records in execute([[jobs[i] for i in c] for c in chunks]):
                store.append(records)
                done += len(records)
                bar.update(len(records))
    except Exception as exc:
        raise EvalRunError(
            f"{desc}: the run stopped on an error after {done} new predictions "
            f"({mine - len(pending) + done} of {mine} in all are saved in {store.path}; "
            f"rerun the same command to resume): {type(exc).__name__}: {exc}"
        ) from exc
    found = [store.get(job.key) for job in jobs]
    return [r for r in found if r is not None]


@dataclass
class _Plan:
    """One chunk's prepared jobs and what its records need: each prompt's key (``shas``),
    the answers the prediction file already holds (``reused``), the prompts an earlier
    chunk of this run generates (``later``: read from the file once that chunk is in),
    and the prompts this chunk generates, in order (``to_generate``)."""

    prepared: list[Prepared]
    shas: list[str | None]
    reused: dict[str, tuple[str, Cost]]
    later: set[str]
    to_generate: list[str]

    def generated_keys(self) -> list[str]:
        """The keys of the prompts this chunk generates."""
        return [_sha(prompt) for prompt in self.to_generate]


class _Chunk:
    """Prepares, generates and scores one chunk of jobs; returns its records.

    In stages, so that worker processes (:mod:`rag_position.eval.engine._workers`) can prepare
    and generate while the run's own process plans and writes: :meth:`prepare` (the
    strategies' own model calls), :meth:`plan` (which prompts are new),
    :meth:`generate` (one ``generate`` call) and :meth:`records`.
    """

    def __init__(
        self,
        model: Any,
        label: str,
        decoding: Decoding,
        store: PredictionStore,
        split_scorer: bool = False,
    ) -> None:
        self.model = model
        self.label = label
        self.decoding = decoding
        self.store = store
        self.split_scorer = split_scorer
        counter = getattr(model, "count_tokens", None)
        self.count: Callable[[str], int] | None = counter if callable(counter) else None

    def __call__(self, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        plan = self.plan(self.prepare(jobs))
        return self.records(jobs, plan, self.generate(plan.to_generate))

    def prepare(self, jobs: Sequence[Job]) -> list[Prepared]:
        if not self.split_scorer:
            return [job.prepare() for job in jobs]
        prepared = []
        for job in jobs:
            with scorer_metered() as tally:
                p = job.prepare()
            if p.scorer_cost is None:
                p = replace(p, scorer_cost=tally.total)
            prepared.append(p)
        return prepared

    def plan(self, prepared: list[Prepared], claimed: Set[str] = frozenset()) -> _Plan:
        """Which prompts to generate: not those the file answers, nor those an earlier
        chunk still running generates (``claimed``), nor one twice."""
        shas = [_sha(p.prompt) if p.prompt is not None else None for p in prepared]
        plan = _Plan(prepared, shas, {}, set(), [])
        seen: set[str] = set()
        for p, sha in zip(prepared, shas, strict=True):
            if p.prompt is None or sha is None or sha in seen:
                continue
            seen.add(sha)
            old = self.store.by_prompt(self.label, sha, self.decoding)
            if old is not None:
                plan.reused[sha] = _answer_of(old)
            elif sha in claimed:
                plan.later.add(sha)
            else:
                plan.to_generate.append(p.prompt)
        return plan

    def generate(self, prompts: list[str]) -> tuple[list[str], float]:
        """The answers to ``prompts`` in one ``generate`` call, and its seconds."""
        if not prompts:
            return [], 0.0
        start = time.perf_counter()
        texts = self.model.generate(
            prompts,
            max_new_tokens=self.decoding.max_new_tokens,
            temperature=self.decoding.temperature,
            seed=self.decoding.seed,
            stop=list(self.decoding.stop) or None,
        )
        if len(texts) != len(prompts):
            raise RuntimeError(f"generate returned {len(texts)} outputs for {len(prompts)}")
        return [str(t) for t in texts], time.perf_counter() - start

    def records(
        self, jobs: Sequence[Job], plan: _Plan, generated: tuple[list[str], float]
    ) -> list[dict[str, Any]]:
        outputs = dict(plan.reused)
        for sha in plan.later:  # an earlier chunk's, in the file by now
            old = self.store.by_prompt(self.label, sha, self.decoding)
            if old is None:
                raise RuntimeError(f"the answer to prompt {sha} was not written before its reuse")
            outputs[sha] = _answer_of(old)
        texts, seconds = generated
        if texts:
            share = seconds / len(texts)
            for prompt, text in zip(plan.to_generate, texts, strict=True):
                outputs[_sha(prompt)] = (text, self._generation_cost(prompt, text, share))
        return [
            self._record(job, p, sha, outputs)
            for job, p, sha in zip(jobs, plan.prepared, plan.shas, strict=True)
        ]

    def _generation_cost(self, prompt: str, text: str, seconds: float) -> Cost:
        counted = None
        if self.count is not None:
            counted = Cost(1, self.count(prompt), self.count(text) if text else 0, seconds)
        return spent_or_sent(counted, 1, seconds)

    def _record(
        self, job: Job, p: Prepared, sha: str | None, outputs: dict[str, tuple[str, Cost]]
    ) -> dict[str, Any]:
        if sha is not None:
            prediction, generation = outputs[sha]
        else:
            prediction, generation = str(p.answer), Cost()
        record = {
            "task": job.key.task,
            "model": self.label,
            "strategy": job.key.strategy,
            "instance": job.key.instance,
            "setting": job.key.setting,
            "fields": dict(job.fields),
            "answers": list(job.answers),
            "prediction": prediction,
            "correct": best_subspan_em(prediction, job.answers) == 1.0,
            "prompt_sha": sha,
            "prepare_cost": p.cost.as_dict(),
            "generation_cost": generation.as_dict(),
            "cost": (p.cost + generation).as_dict(),
            "info": dict(p.info),
            "decoding": self.decoding.as_dict(),
        }
        if self.split_scorer:
            scorer = p.scorer_cost or Cost()
            record["scorer_cost"] = scorer.as_dict()
            record["reader_cost"] = (p.cost + generation - scorer).as_dict()
        return record


def _share(jobs: Sequence[Job], shard: tuple[int, int] | None) -> Callable[[Job], bool]:
    """Whether a job is in ``shard``: instances dealt round-robin in order of appearance."""
    if shard is None or shard[1] == 1:
        return lambda job: True
    order: dict[str, int] = {}
    for job in jobs:
        order.setdefault(job.key.instance, len(order))
    k, n = shard
    return lambda job: order[job.key.instance] % n == k - 1


def _chunks(pending: Sequence[int], size: int) -> list[list[int]]:
    """Pending job indices grouped by fixed blocks ``[k*size, (k+1)*size)`` of the job list."""
    groups: dict[int, list[int]] = {}
    for i in pending:
        groups.setdefault(i // size, []).append(i)
    return [groups[g] for g in sorted(groups)]


def _answer_of(record: Mapping[str, Any]) -> tuple[str, Cost]:
    """A stored record's answer and what generating it cost."""
    return str(record["prediction"]), Cost(**record.get("generation_cost", {}))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def default_batch_size(model: Any) -> int:
    """Prompts per ``generate`` call: 8, or 1 for a CPU model that batches by padding.

    The local backend's greedy batches on a CPU prefill each prompt alone and decode
    together (``TransformersModel.split_prefill``): 8 prompts a call read the weights
    once per decoding step for all 8 answers. A CPU model without that (a padded batch:
    the whole batch decodes until its longest answer ends, and padding leaves the
    fast attention path) runs one prompt at a time. Accelerators and servers batch.

    Example:
        >>> from types import SimpleNamespace
        >>> padded = SimpleNamespace(device="cpu")
        >>> split = SimpleNamespace(device="cpu", split_prefill=True)
        >>> default_batch_size(padded), default_batch_size(split)
        (1, 8)
        >>> default_batch_size(object())
        8
    """
    device = getattr(model, "device", None)
    on_cpu = getattr(device, "type", device) == "cpu"
    return 1 if on_cpu and not getattr(model, "split_prefill", False) else 8
