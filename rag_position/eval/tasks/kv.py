"""Key-value retrieval sweep ("Lost in the Middle", Liu et al., TACL 2024).

A JSON object of k UUID pairs, one key asked for; the queried pair moves through
the positions, with and without query-aware contextualization (the key also
before the data). 75 and 140 pairs read the release's files; other sizes are
generated (seeded random UUIDs, the same format).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_position.data import KV_75_FILE, KV_140_FILE, KVInstance, default_data_dir, load_kv
from rag_position.data import place_gold as place_pair
from rag_position.eval.engine.common import Prepared, check_positions, check_questions
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import Param, PathLike, positions_param, positive_int
from rag_position.eval.engine.plots import Panel, plot_panels
from rag_position.eval.engine.report import EvalResult, Section, Table, acc_cell, point
from rag_position.eval.engine.stats import summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.prompts import render_kv

TASK = "kv"
SHARED_FILES = {75: KV_75_FILE, 140: KV_140_FILE}


KV = TaskSpec(
    "kv",
    "key-value retrieval: accuracy by position of the queried pair",
    (
        Param(
            "pairs", 75, "pairs per example (75, 140, 300...)", "--pairs", {"type": positive_int}
        ),
        positions_param("positions (default: the paper's)"),
        Param(
            "query_aware",
            (False, True),
            "prompt variants: both, on (query-aware) or off",
            "--query-aware",
            {"choices": ("both", "on", "off")},
            {"both": (False, True), "on": (True,), "off": (False,)}.__getitem__,
        ),
    ),
)


@KV.task
def run_kv(run: TaskRun) -> EvalResult:
    """Sweep the queried pair over ``positions`` (default: the paper's) of ``pairs`` pairs.

    Parameters (:data:`KV`): ``pairs=75``, ``positions``, ``query_aware=(False, True)``
    (the prompt variants), and the common ones (:data:`~rag_position.eval.engine.params.COMMON`).
    ``data`` is a ``kv-retrieval-*_keys`` file (default: the packaged file for 75 or
    140 pairs; generated for any other count).

    Example::

        result = run_kv(load_model("embedded"), pairs=75, questions=20, out="runs/kv")
        for row in result.rows:  # prompt: "kv" or "kv_query_aware"
            row["prompt"], row["position"], row["accuracy"]
    """
    pairs, positions = run["pairs"], run["positions"]
    chosen = list(positions) if positions is not None else kv_positions(pairs)
    check_positions(chosen, pairs)
    ctx = run.ctx
    instances, source = kv_instances(
        pairs, questions=run["questions"], data=run["data"], seed=run["seed"]
    )
    section = kv_section(ctx, instances, chosen, run["query_aware"], source)
    return run.finish([section], title=f"Key-value retrieval, {pairs} pairs")


def kv_positions(pairs: int) -> list[int]:
    """The paper's positions: 0,24,49,74 (75 pairs); 0,34,...,139 (140); 0,49,...,299 (300)."""
    steps = 3 if pairs <= 100 else 4 if pairs <= 200 else 6
    steps = min(steps, pairs - 1) or 1
    return sorted({(i * (pairs - 1)) // steps for i in range(steps + 1)})


def kv_instances(
    pairs: int, *, questions: int | None, data: PathLike | None, seed: int
) -> tuple[list[KVInstance], str]:
    """The instances and where they came from (a file, or ``generated(seed=S)``)."""
    if data is not None or pairs in SHARED_FILES:
        path = Path(data) if data is not None else default_data_dir() / SHARED_FILES[pairs]
        records = load_kv(path)
        check_questions(questions, len(records))
        chosen = records[: questions or len(records)]
        for record in chosen:
            if len(record.records) != pairs:
                from rag_position.errors import DataFormatError

                raise DataFormatError(
                    f"{path}: line {record.line}: field 'ordered_kv_records' holds "
                    f"{len(record.records)} pairs, but --pairs is {pairs}"
                )
        return chosen, path.name
    return generate_kv(pairs, questions or 100, seed=seed), f"generated(seed={seed})"


def generate_kv(pairs: int, n: int, *, seed: int = 0) -> list[KVInstance]:
    """``n`` examples of ``pairs`` random UUID pairs each, the queried pair first.

    Example:
        >>> examples = generate_kv(3, 2, seed=0)
        >>> len(examples), len(examples[0].records), examples[0].gold_index, examples[0].id
        (2, 3, 0, 'kv-3-seed0:1')
        >>> examples[0].records[0] == (examples[0].key, examples[0].value)
        True
    """
    rng = random.Random(seed)
    instances = []
    for i in range(n):
        records = tuple(
            (
                str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            )
            for _ in range(pairs)
        )
        key, value = records[0]
        instances.append(KVInstance(records, key, value, 0, id=f"kv-{pairs}-seed{seed}:{i + 1}"))
    return instances


def kv_section(
    ctx: RunContext,
    instances: Sequence[KVInstance],
    positions: Sequence[int],
    query_aware: Sequence[bool],
    source: str,
) -> Section:
    """Run the sweep in ``ctx`` and summarise it as a report section."""
    pairs = len(instances[0].records)
    jobs = []
    for instance in instances:
        for aware in query_aware:
            prompt_name = "kv_query_aware" if aware else "kv"
            for position in positions:
                setting = f"pairs={pairs} gold={position} prompt={prompt_name}"
                jobs.append(
                    ctx.job(
                        (TASK, "baseline", instance.id, setting),
                        (instance.value,),
                        _prepare(instance, position, aware),
                        {"pairs": pairs, "position": position, "prompt": prompt_name},
                    )
                )
    rows = summarize(ctx.run(jobs, desc=f"kv {pairs} pairs"), seed=ctx.seed)
    curves: dict[str, list[tuple[float, float, float | None, float | None]]] = {}
    for row in rows:
        curves.setdefault(row["prompt"], []).append(point(row, row["position"]))
    figure = f"kv-{pairs}-accuracy-by-position.png"
    plot_panels(
        ctx.store.path.parent / figure,
        [
            Panel(
                f"{ctx.label}, {pairs} key-value pairs",
                "position of the queried pair",
                "accuracy (%)",
                curves,
                xticks=list(positions),
            )
        ],
    )
    cells = [[r["prompt"], str(r["position"]), str(r["n"]), acc_cell(r)] for r in rows]
    return Section(
        title=f"Key-value retrieval, {pairs} pairs",
        task=TASK,
        rows=rows,
        tables=[Table("Accuracy (%) [95% CI]", ["prompt", "position", "n", "accuracy"], cells)],
        figures=[(figure, f"Accuracy by position of the queried pair ({pairs} pairs)")],
        notes=[f"{len(instances)} examples from {source}; correct when the value is in the output"],
    )


def _prepare(instance: KVInstance, position: int, aware: bool) -> Any:
    def prepare() -> Prepared:
        moved = place_pair(instance, position)
        return Prepared(prompt=render_kv(moved.records, moved.key, query_aware=aware))

    return prepare
