"""``workers``: a local model's chunks in forked processes write what one thread writes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from test_eval_runner import Scripted, _numbers, write_gold_at_file

from rag_position.cost import Cost
from rag_position.eval import EvalConfigError, EvalRunError, run_multidoc
from rag_position.eval.engine._workers import _weights_bytes, auto_workers, can_fork, check_workers
from rag_position.eval.engine.common import Key, Prepared
from rag_position.eval.engine.runner import Job, run_jobs
from rag_position.eval.engine.store import PredictionStore

pytestmark = pytest.mark.skipif(not can_fork(), reason="workers need fork (Linux)")


@pytest.fixture()
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class PidLogged:
    """The embedded model, logging each ``generate`` call's process and threads to a file."""

    def __init__(self, model: Any, log: Path) -> None:
        self._model, self._log = model, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        with self._log.open("a") as out:
            out.write(f"{os.getpid()} {torch.get_num_threads()}\n")
        return list(self._model.generate(prompts, **kwargs))


def _raw(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]


def _records(folder: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.endswith("cost")} for r in _raw(folder)]


def test_two_workers_write_as_one(embedded_fp32: Any, tmp_path: Path, one_thread: None) -> None:
    assert 0.4e9 < _weights_bytes(embedded_fp32) < 0.7e9  # 135M parameters in float32
    log = tmp_path / "pids.txt"
    model = PidLogged(embedded_fp32, log)
    settings = dict(questions=2, positions=[0, 9], baselines=False, batch_size=2, max_new_tokens=12)
    run_multidoc(model, out=tmp_path / "one", workers=1, **settings)
    assert {line.split()[0] for line in log.read_text().splitlines()} == {str(os.getpid())}
    log.unlink()
    torch.set_num_threads(2)  # the workers share these out: one thread each
    run_multidoc(model, out=tmp_path / "two", workers=2, **settings)
    calls = [line.split() for line in log.read_text().splitlines()]
    pids = {pid for pid, _ in calls}
    assert str(os.getpid()) not in pids and len(pids) == 2, calls  # both workers generated
    assert {threads for _, threads in calls} == {"1"}
    assert len(_records(tmp_path / "two")) == 4
    assert _records(tmp_path / "two") == _records(tmp_path / "one")
    assert "| workers | 2 |" in (tmp_path / "two" / "report.md").read_text()


class FailsOn(Scripted):
    """The scripted model, failing on one question's prompts, or ending its process there."""

    def __init__(self, question: int, *, die: bool = False) -> None:
        super().__init__()
        self.question, self.die = question, die

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        if any(f"Question: question {self.question}?" in p for p in prompts):
            if self.die:
                os._exit(3)
            raise RuntimeError(f"scripted failure on question {self.question}")
        return super().generate(prompts, **kwargs)


@pytest.mark.parametrize("die", [False, True], ids=["raises", "dies"])
def test_a_failed_worker_stops_the_run_and_the_rerun_resumes(tmp_path: Path, die: bool) -> None:
    data = write_gold_at_file(tmp_path / "nq-open-10_total_documents_gold_at_3.jsonl")
    whole = run_multidoc(Scripted(), data=data, questions=None, out=tmp_path / "whole")
    out = tmp_path / "cut"
    failing = FailsOn(7, die=die)
    with pytest.raises(EvalRunError, match="rerun the same command") as err:
        run_multidoc(failing, data=data, questions=None, out=out, batch_size=5, workers=2)
    if die:
        assert "worker process ended without finishing its chunk" in str(err.value)
    else:
        assert "scripted failure on question 7" in str(err.value)
        assert "in worker process" in str(err.value)
        assert "scripted failure" in str(err.value.__cause__.__cause__)  # the worker's traceback
    # 5 jobs a question (3 positions, closed book, oracle): those before question 7's, in order
    assert len(PredictionStore(out / "predictions.jsonl")) == 7 * 5
    instances = [r["instance"] for r in _raw(out)]
    assert instances == sorted(instances, key=lambda i: int(i.rsplit(":", 1)[1]))
    resumed = Scripted()
    again = run_multidoc(resumed, data=data, questions=None, out=out, batch_size=5, workers=2)
    assert resumed.prompts == []  # generated in the workers, not here
    assert len(PredictionStore(out / "predictions.jsonl")) == 12 * 5
    assert _numbers(again.rows) == _numbers(whole.rows)


def test_by_default_a_cpu_model_gets_one_worker_per_torch_thread(one_thread: None) -> None:
    """...but one when remote, accelerated, or short of memory; a server's model is refused."""
    with pytest.raises(EvalConfigError, match="--concurrency"):
        check_workers(2, SimpleNamespace(concurrency=4))
    assert check_workers(1, SimpleNamespace(concurrency=4)) == 1
    for bad in (0, -1, True, 1.5):
        with pytest.raises(EvalConfigError, match="--workers must be an integer"):
            check_workers(bad, object())  # type: ignore[arg-type]
    cpu = torch.device("cpu")
    assert auto_workers(SimpleNamespace(device=cpu)) == 1  # one thread: shares side by side
    torch.set_num_threads(3)
    assert auto_workers(SimpleNamespace(device=cpu)) == 3
    assert auto_workers(SimpleNamespace(device=cpu, concurrency=4)) == 1
    assert auto_workers(SimpleNamespace(device=torch.device("meta"))) == 1
    assert auto_workers(object()) == 1
    huge = SimpleNamespace(numel=lambda: 10**15, element_size=lambda: 4)  # 4 PB of float32
    big = SimpleNamespace(device=cpu, model=SimpleNamespace(parameters=lambda: iter([huge])))
    torch.set_num_threads(4)  # the fixture restores the count
    assert auto_workers(big) == 1


class Echo:
    """Answers each prompt reversed; logs each prompt, with its process, to a file."""

    name = "echo"

    def __init__(self, log: Path) -> None:
        self.log = log

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        with self.log.open("a") as out:
            out.writelines(f"{os.getpid()} {p}\n" for p in prompts)
        return [p[::-1] for p in prompts]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _prepared_in(log: Path, prompt: str) -> Prepared:
    with log.open("a") as out:
        out.write(f"{os.getpid()}\n")
    return Prepared(prompt=prompt, cost=Cost(lm_calls=1, prompt_tokens=len(prompt)))


def test_a_prompt_of_an_earlier_chunk_is_generated_once_as_in_one_process(tmp_path: Path) -> None:
    """Strategies share prompts: an earlier, even running, chunk's answer is reused."""
    prompts = [f"prompt {i % 5} of the run" for i in range(24)]  # each prompt 4 or 5 times
    results = {}
    for workers in (1, 2):
        log, prep = tmp_path / f"gen{workers}.txt", tmp_path / f"prep{workers}.txt"
        jobs = [
            Job(Key("t", "echo", "s", f"q{i}", "x"), ("a",), partial(_prepared_in, prep, p))
            for i, p in enumerate(prompts)
        ]
        store = PredictionStore(tmp_path / f"run{workers}" / "predictions.jsonl")
        records = run_jobs(Echo(log), jobs, store, batch_size=2, workers=workers)
        generated = [line.split(" ", 1) for line in log.read_text().splitlines()]
        assert sorted(p for _, p in generated) == sorted(set(prompts))  # each once
        pids = {pid for pid, _ in generated} | set(prep.read_text().split())
        assert (str(os.getpid()) in pids) == (workers == 1), pids
        results[workers] = [
            {k: v for k, v in r.items() if k not in ("generation_cost", "cost")}
            | {"tokens": (r["cost"]["prompt_tokens"], r["cost"]["generated_tokens"])}
            for r in records
        ]
        assert [r["instance"] for r in _raw(store.path.parent)] == [f"q{i}" for i in range(24)]
    assert results[2] == results[1]


# ---------------------------------------------------------------------- the run's process dies
RUN_SCRIPT = """
import os, sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_eval_runner import Scripted, write_gold_at_file
import rag_position.eval.cli as eval_cli
from rag_position.cli import main

class Slow(Scripted):
    def generate(self, prompts, **kwargs):
        with open({log!r}, "a") as out:
            out.write(f"{{os.getpid()}}\\n")
        time.sleep(0.2)
        return super().generate(prompts, **kwargs)

data = write_gold_at_file(Path({folder!r}) / "nq-open-10_total_documents_gold_at_3.jsonl", n=200)
eval_cli.load_model = lambda spec, **kwargs: Slow()
sys.exit(main(["eval", "multidoc", "--data", str(data), "--out", {out!r}, "--workers", "2",
               "--batch-size", "1", "--no-progress"]))
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _start_run(tmp_path: Path) -> tuple[subprocess.Popen[str], set[int]]:
    """A ``--workers 2`` run of a slow model in a process; it and its workers, once both run."""
    log = tmp_path / "pids.txt"
    script = RUN_SCRIPT.format(
        tests=str(Path(__file__).parent), log=str(log), folder=str(tmp_path),
        out=str(tmp_path / "run"),
    )  # fmt: skip
    # SIGINT's default restored in the child: pytest started in the background has SIGINT
    # ignored, a child inherits that, and the Ctrl-C case would wait forever.
    run = subprocess.Popen(
        [sys.executable, "-c", script], env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 120
    workers: set[int] = set()
    while len(workers) < 2:
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.1)
        if log.exists():
            workers = {int(p) for p in log.read_text().split()} - {run.pid}
    return run, workers


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_the_workers_die_with_the_runs_process(tmp_path: Path, how: str) -> None:
    """SIGKILL or SIGTERM of a run left both workers alive (0.9 GB each); Ctrl-C: one line."""
    run, workers = _start_run(tmp_path)
    try:
        os.kill(run.pid, getattr(signal, how))
        _, err = run.communicate(timeout=30)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(_alive(p) for p in workers):
            time.sleep(0.1)
        assert not any(_alive(p) for p in workers), f"workers {workers} outlived the run"
    finally:
        for pid in workers:  # a failed test leaves nothing behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        run.kill()
    if how == "SIGTERM":
        assert run.returncode in (143, -signal.SIGTERM), run.returncode
    if how == "SIGINT":
        assert run.returncode == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "interrupted" in lines[0], err
