"""Multi-fact retrieval (FACT, Wang, Wang et al.): recall of needle values, single pass
vs FACT by iteration.

RULER-style multi-value needles (:func:`~rag_position.data.synthetic.make_multivalue`):
one key with 10 values scattered through essay-like filler (K1V10Q1), and five keys of
10 values each with one asked for (K5V10Q1), at about 2K and 4K tokens. The single
pass answers the published needle prompt once; FACT runs the same prompt as its
``retrieve`` (:func:`~rag_position.strategies.needle_retrieve`) for up to 4 iterations,
cutting out what it found each time. ``fact@i`` is FACT with at most ``i`` iterations
(the first ``i`` passes of one run, charged the cost of those passes). The metric is
recall: the share of the queried key's values found in the output.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from rag_position.data.synthetic import NEEDLE_TEMPLATE, SyntheticInstance, make_multivalue
from rag_position.eval.common import EvalConfigError, Key, Prepared, check_questions
from rag_position.eval.plots import Panel, plot_panels
from rag_position.eval.report import EvalResult, Section, Table, acc_cell, num, point
from rag_position.eval.runner import Job, RunContext
from rag_position.eval.session import api_command, finish, open_context
from rag_position.eval.stats import summarize
from rag_position.eval.synthetic import CallLog, check_fits, essay_filler, token_counter
from rag_position.prompts import render_fact_needle
from rag_position.strategies import fact, needle_retrieve

TASK = "multifact"
PathLike = str | os.PathLike[str]
DEFAULT_TOKENS = (2000, 4000)
DEFAULT_CONFIGS = ((1, 10), (5, 10))
"""(keys, values): K1V10Q1 and K5V10Q1."""
RETRIEVE_TOKENS = 160
"""New tokens for one needle answer: ten 7-digit numbers need about 80 tokens."""


def run_multifact(
    model: Any,
    *,
    tokens: Sequence[int] = DEFAULT_TOKENS,
    configs: Sequence[tuple[int, int]] = DEFAULT_CONFIGS,
    iterations: int = 4,
    questions: int | None = None,
    data: PathLike | None = None,
    seed: int = 0,
    out: PathLike = "runs/multifact",
    max_new_tokens: int = RETRIEVE_TOKENS,
    batch_size: int | None = None,
    concurrency: int = 1,
    shard: tuple[int, int] | None = None,
    progress: bool | None = None,
    command: str | None = None,
) -> EvalResult:
    """Recall of needle values, single pass vs ``fact@1..iterations``; report in ``out``.

    ``questions`` haystacks per (config, size), default 20; ``data`` is the NQ file
    whose passages are the filler (default: the packaged one). ``max_new_tokens`` bounds
    each needle answer (single pass and every FACT pass alike).

    Example::

        result = run_multifact(load_model("embedded"), tokens=(2000,), iterations=3,
                               questions=10, out="runs/multifact")
        for row in result.rows:  # strategy: "single_pass", "fact@1", ..., "fact@3"
            row["strategy"], row["setting"], row["accuracy"]  # accuracy: mean recall
    """
    check_questions(questions)
    if iterations < 1:
        raise EvalConfigError(f"--iterations must be >= 1, got {iterations}")
    if not tokens or not configs:
        raise EvalConfigError("multifact needs at least one size and one (keys, values)")
    check_fits(model, tokens, max_new_tokens + 100, option="--tokens")
    ctx = open_context(
        model,
        out,
        seed=seed,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        concurrency=concurrency,
        shard=shard,
        progress=progress,
    )
    filler = essay_filler(data)
    count = token_counter(model)
    haystacks = {
        (keys, values, size): make_multivalue(
            questions or 20,
            filler=filler,
            tokens=size,
            keys=keys,
            values=values,
            seed=seed,
            count_tokens=count,
        )
        for keys, values in configs
        for size in tokens
    }
    section = multifact_section(ctx, haystacks, iterations)
    call = command or api_command(
        "run_multifact",
        ctx.label,
        {"tokens": list(tokens), "configs": list(configs), "iterations": iterations,
         "questions": questions, "seed": seed},
    )  # fmt: skip
    return finish(ctx, [section], title="Multi-fact retrieval: single pass vs FACT", command=call)


def recall(record: Mapping[str, Any]) -> float:
    """Share of the gold values that occur in the prediction as whole numbers."""
    found = set(re.findall(r"\d+", str(record["prediction"])))
    answers = list(record["answers"])
    return sum(a in found for a in answers) / len(answers)


_NEEDLE = re.compile(
    re.escape(NEEDLE_TEMPLATE)
    .replace(re.escape("{key}"), r"[^\s]+?")
    .replace(re.escape("{value}"), r"(\d+)")
)


def needle_values(context: str) -> set[str]:
    """Every needle value in a haystack, whatever its key.

    Example:
        >>> needle_values("One of the special magic numbers for a-b is: 1234567. Filler 42.")
        {'1234567'}
    """
    return set(_NEEDLE.findall(context))


def precision(record: Mapping[str, Any], values: set[str]) -> float | None:
    """Share of the needle values in the output that are the queried key's (None: none).

    With five keys a model that ignores the key scores about 0.2, whatever its recall.
    """
    found = set(re.findall(r"\d+", str(record["prediction"]))) & values
    if not found:
        return None
    return len(found & set(record["answers"])) / len(found)


def multifact_section(
    ctx: RunContext,
    haystacks: Mapping[tuple[int, int, int], Sequence[SyntheticInstance]],
    iterations: int,
) -> Section:
    """Run single pass and FACT on every haystack in ``ctx``; summarise as a section."""
    jobs: list[Job] = []
    for (keys, values, size), instances in haystacks.items():
        setting = f"K{keys}V{values}Q1 tokens={size}"
        fields = {"config": f"K{keys}V{values}Q1", "tokens": size}
        for instance in instances:
            prompt = render_fact_needle(instance.context, instance.query)
            jobs.append(
                Job(
                    Key(TASK, ctx.label, "single_pass", instance.id, setting),
                    instance.answers,
                    partial(Prepared, prompt=prompt),
                    {**fields, "iteration": 0},
                )
            )
            run = _FactRun(ctx.model, instance, iterations, ctx.decoding.max_new_tokens)
            for i in range(1, iterations + 1):
                jobs.append(
                    Job(
                        Key(TASK, ctx.label, f"fact@{i}", instance.id, setting),
                        instance.answers,
                        partial(run.prepared, i),
                        {**fields, "iteration": i},
                    )
                )
    records = ctx.run(jobs, desc="multifact")
    rows = summarize(records, seed=ctx.seed, metric=recall)
    needles = {
        inst.id: needle_values(inst.context) for group in haystacks.values() for inst in group
    }
    precisions: dict[tuple[str, str], list[float]] = {}
    for record in records:
        p = precision(record, needles.get(record["instance"], set()))
        if p is not None:
            precisions.setdefault((record["strategy"], record["setting"]), []).append(p)
    for row in rows:
        got = precisions.get((row["strategy"], row["setting"]), [])
        row["precision"] = sum(got) / len(got) if got else None
    panels = []
    for config in dict.fromkeys(r["config"] for r in rows):
        curves: dict[str, list[tuple[float, float, float, float]]] = {}
        for row in rows:
            if row["config"] == config:
                curves.setdefault(f"{row['tokens']} tokens", []).append(
                    point(row, row["iteration"])
                )
        panels.append(
            Panel(
                f"{ctx.label}, {config}",
                "FACT iterations (0 = single pass)",
                "recall of values (%)",
                curves,
                xticks=list(range(iterations + 1)),
            )
        )
    figure = "multifact-recall-by-iteration.png"
    plot_panels(ctx.store.path.parent / figure, panels)
    cells = [
        [
            r["config"],
            str(r["tokens"]),
            r["strategy"],
            str(r["n"]),
            acc_cell(r),
            num(None if r["precision"] is None else 100 * r["precision"], 1),
            num(r["lm_calls"]),
            num(r["seconds"], 2),
            num(r.get("hallucinated"), 2),
        ]
        for r in rows
    ]
    headers = [
        "config", "tokens", "strategy", "n", "recall", "precision", "LM calls", "seconds",
        "made up",
    ]  # fmt: skip
    return Section(
        title="Multi-fact retrieval: recall of the queried key's values",
        task=TASK,
        rows=rows,
        tables=[Table("Recall (%) [95% CI] and mean cost per haystack", headers, cells)],
        figures=[(figure, "Recall by FACT iteration (0 = the single pass)")],
        notes=[
            "recall: share of the queried key's values that appear in the output (single "
            "pass) or in the facts FACT collected (fact@i: at most i retrieve/rewrite "
            "passes of one run, charged the cost of those passes); 'made up': mean count "
            "of numbers FACT's retrieve gave that are not in the haystack",
            "precision (%): of the needle values in the output (any key's), the share that "
            "are the queried key's, averaged over haystacks with at least one; with five keys, "
            "a model that ignores the key scores about 20",
        ],
        settings={"iterations": iterations},
    )


class _FactRun:
    """One FACT run on a haystack, made on first use and shared by its ``fact@i`` jobs."""

    def __init__(
        self, model: Any, instance: SyntheticInstance, iterations: int, max_new_tokens: int
    ) -> None:
        self.model = model
        self.max_new_tokens = max_new_tokens
        self.instance = instance
        self.iterations = iterations
        self._done: tuple[Any, CallLog] | None = None

    def prepared(self, i: int) -> Prepared:
        if self._done is None:
            log = CallLog(self.model)
            result = fact(
                self.instance.question,
                self.instance.context,
                log,
                max_iterations=self.iterations,
                retrieve=needle_retrieve(
                    log, self.instance.query, max_new_tokens=self.max_new_tokens
                ),
                answer=False,
            )
            self._done = (result, log)
        result, log = self._done
        passes = result.trace.iterations[:i]
        facts = [f for it in passes for f in it.new_facts]
        info = {
            "facts": len(facts),
            "hallucinated": sum(len(it.hallucinated) for it in passes),
            "passes": len(passes),
        }
        answer = "\n".join(facts) if facts else "(no fact found)"
        return Prepared(answer=answer, cost=log.cost(len(passes)), info=info)
