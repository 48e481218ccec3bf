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

import re
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from rag_position.cost import Cost
from rag_position.data.synthetic import (
    NEEDLE_TEMPLATE,
    SyntheticInstance,
    essay_filler,
    make_multivalue,
)
from rag_position.eval.engine.common import (
    EvalConfigError,
    Key,
    Prepared,
    check_fits,
    parse_int_list,
    token_counter,
)
from rag_position.eval.engine.context import RunContext
from rag_position.eval.engine.params import SCORER, Param, int_list, names
from rag_position.eval.engine.plots import Panel, plot_panels
from rag_position.eval.engine.report import EvalResult, Section, Table, num, point, row_cells
from rag_position.eval.engine.runner import Job
from rag_position.eval.engine.stats import summarize
from rag_position.eval.engine.task import TaskRun, TaskSpec
from rag_position.eval.rows import (
    FACT,
    MULTIFACT_KNOWN_ROWS,
    MULTIFACT_ROWS,
    SELECT_AND_PLACE,
    SINGLE_PASS,
)
from rag_position.prompts import render_fact_needle
from rag_position.strategies import fact, needle_retrieve, select_and_place
from rag_position.strategies._align import sentence_spans

TASK = "multifact"
DEFAULT_TOKENS = (2000, 4000)
DEFAULT_CONFIGS = ((1, 10), (5, 10))
"""(keys, values): K1V10Q1 and K5V10Q1."""
ROWS = MULTIFACT_ROWS
"""What multifact runs by default; ``select_and_place`` is asked for by name."""
KNOWN_ROWS = MULTIFACT_KNOWN_ROWS
SELECT_SENTENCES = 4
"""Sentences a chunk, where ``select_and_place`` cuts the haystack into passages."""
RETRIEVE_TOKENS = 160
"""New tokens for one needle answer: ten 7-digit numbers need about 80 tokens."""


MULTIFACT_EXAMPLES = 20
"""Examples the task generates by default."""

MULTIFACT = TaskSpec(
    "multifact",
    "multi-value needles: single pass vs FACT by iteration",
    (
        int_list("tokens", DEFAULT_TOKENS, "--tokens", "2000,4000", "haystack sizes in tokens"),
        Param(
            "configs",
            DEFAULT_CONFIGS,
            "keys per haystack (10 values each)",
            "--keys",
            {"default": "1,5"},
            lambda text: [(k, 10) for k in parse_int_list(text, what="--keys")],
        ),
        Param("iterations", 4, "FACT iterations, at most", "--iterations", {"type": int}),
        Param(
            "strategies",
            ROWS,
            "single_pass, fact and/or select_and_place (the haystack cut into chunks of "
            "4 sentences, the likeliest kept, then the single pass)",
            "--strategies",
            {"default": ",".join(ROWS)},
            lambda text: names(text, what="--strategies") or (),
            omit_default=True,
        ),
        SCORER,
    ),
    defaults={"max_new_tokens": RETRIEVE_TOKENS},
    cli_questions=None,
    questions_help=f"{MULTIFACT_EXAMPLES} examples",
)


@MULTIFACT.task
def run_multifact(run: TaskRun) -> EvalResult:
    """Recall of needle values, single pass vs ``fact@1..iterations``; report in ``out``.

    Parameters (:data:`MULTIFACT`): ``tokens=(2000, 4000)`` (haystack sizes),
    ``configs=((1, 10), (5, 10))`` ((keys, values) per haystack), ``iterations=4``,
    and the common ones (:data:`~rag_position.eval.engine.params.COMMON`). ``questions``
    haystacks per (config, size), default 20; ``data`` is the NQ file whose passages
    are the filler (default: the packaged one). ``max_new_tokens`` (default 160)
    bounds each needle answer (single pass and every FACT pass alike).

    Example::

        result = run_multifact(load_model("embedded"), tokens=(2000,), iterations=3,
                               questions=10, out="runs/multifact")
        for row in result.rows:  # strategy: "single_pass", "fact@1", ..., "fact@3"
            row["strategy"], row["setting"], row["accuracy"]  # accuracy: mean recall
    """
    tokens, configs, iterations = run["tokens"], run["configs"], run["iterations"]
    chosen = tuple(dict.fromkeys(run["strategies"]))
    if not chosen or any(r not in KNOWN_ROWS for r in chosen):
        raise EvalConfigError(
            f"--strategies: choose from {', '.join(KNOWN_ROWS)} (comma-separated), "
            f"got {list(chosen)}"
        )
    if iterations < 1:
        raise EvalConfigError(f"--iterations must be >= 1, got {iterations}")
    if not tokens or not configs:
        raise EvalConfigError("multifact needs at least one size and one (keys, values)")
    check_fits(run.model, tokens, run["max_new_tokens"] + 100, option="--tokens")
    ctx = run.ctx
    filler = essay_filler(run["data"])
    haystacks = {
        (keys, values, size): make_multivalue(
            run["questions"] or MULTIFACT_EXAMPLES,
            filler=filler,
            tokens=size,
            keys=keys,
            values=values,
            seed=run["seed"],
            count_tokens=token_counter(run.model),
        )
        for keys, values in configs
        for size in tokens
    }
    section = multifact_section(ctx, haystacks, iterations, chosen)
    return run.finish([section], title="Multi-fact retrieval: single pass vs FACT")


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
    strategies: Sequence[str] = ROWS,
) -> Section:
    """Run ``strategies`` (single pass, FACT, selection) on every haystack in ``ctx``; summarise
    as a section. ``select_and_place`` cuts the haystack into chunks of
    :data:`SELECT_SENTENCES` sentences, keeps the likeliest for the question
    (:func:`~rag_position.strategies.select_and_place` at its defaults, in their
    haystack order) and answers the single pass's prompt from them."""
    jobs: list[Job] = []
    for (keys, values, size), instances in haystacks.items():
        setting = f"K{keys}V{values}Q1 tokens={size}"
        fields = {"config": f"K{keys}V{values}Q1", "tokens": size}
        for instance in instances:
            prompt = render_fact_needle(instance.context, instance.query)
            if SINGLE_PASS in strategies:
                jobs.append(
                    Job(
                        Key(TASK, ctx.label, SINGLE_PASS, instance.id, setting),
                        instance.answers,
                        partial(Prepared, prompt=prompt),
                        {**fields, "iteration": 0},
                    )
                )
            if SELECT_AND_PLACE in strategies:
                jobs.append(
                    Job(
                        Key(TASK, ctx.label, SELECT_AND_PLACE, instance.id, setting),
                        instance.answers,
                        partial(_selected, ctx.scoring(), instance),
                        {**fields, "iteration": 0},
                    )
                )
            run = _FactRun(ctx.model, instance, iterations, ctx.decoding.max_new_tokens)
            for i in range(1, iterations + 1 if FACT in strategies else 1):
                jobs.append(
                    Job(
                        Key(TASK, ctx.label, f"{FACT}@{i}", instance.id, setting),
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
            *row_cells(r, "config", "tokens", "strategy", "n", "accuracy"),
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
    table = Table("Recall (%) [95% CI] and mean cost per haystack", headers, cells)
    return Section(
        title="Multi-fact retrieval: recall of the queried key's values",
        task=TASK,
        rows=rows,
        tables=[table],
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


def haystack_chunks(context: str, sentences: int = SELECT_SENTENCES) -> list[str]:
    """``context`` cut into consecutive chunks of ``sentences`` sentences (none dropped).

    Example:
        >>> haystack_chunks("A b. C d. E f.", 2)
        ['A b. C d.', 'E f.']
    """
    spans = sentence_spans(context) or [(0, len(context))]
    return [
        context[spans[i][0] : spans[min(i + sentences, len(spans)) - 1][1]].strip()
        for i in range(0, len(spans), sentences)
    ]


def _selected(model: Any, instance: SyntheticInstance) -> Prepared:
    """The single pass on the chunks ``select_and_place`` keeps, in haystack order."""
    chunks = haystack_chunks(instance.context)
    result = select_and_place(instance.question, chunks, model)
    kept = sorted(result.order)
    holding = [i for i, c in enumerate(chunks) if needle_values(c) & set(instance.answers)]
    info = {
        "kept": len(kept),
        "chunks": len(chunks),
        "needle_chunks_kept": len(set(holding) & set(kept)) / len(holding) if holding else 0.0,
    }
    context = " ".join(chunks[i] for i in kept)
    return Prepared(prompt=render_fact_needle(context, instance.query), cost=result.cost, info=info)


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


class CallLog:
    """Wraps a generator and keeps the cost of each ``generate`` call, in order.

    Lets a task charge "FACT with at most i iterations" the cost of its first i calls.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.calls: list[Cost] = []
        self._count = token_counter(model)

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        start = time.perf_counter()
        texts: list[str] = self.model.generate(prompts, **kwargs)
        seconds = time.perf_counter() - start
        count = self._count
        self.calls.append(
            Cost(
                len(prompts),
                sum(count(p) for p in prompts) if count else 0,
                sum(count(t) for t in texts if t) if count else 0,
                seconds,
            )
        )
        return texts

    def cost(self, calls: int | None = None) -> Cost:
        """The cost of the first ``calls`` calls (all when ``None``)."""
        total = Cost()
        for cost in self.calls[:calls]:
            total = total + cost
        return total
