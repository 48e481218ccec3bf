"""Each call's own cost is right when threads share one model: before
:func:`rag_position.cost.metered`, a cost was the change of the model's running total."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rag_position.cost import Cost, UsageMeter, metered, spent_by
from rag_position.models.protocols import SpanScore
from rag_position.strategies import convex_score, fact, likelihood_selection

QUESTION = "Who wrote Hamlet?"
DOCS = [
    "Hamlet is a tragedy written by William Shakespeare.",
    "The Thames flows through London.",
    "Paris is the capital of France.",
    "Oslo is in Norway.",
]


class SlowMetered:
    """A metered scorer and generator whose calls overlap when threads share it."""

    def __init__(self) -> None:
        self._meter = UsageMeter()
        self.barrier = threading.Barrier(2, timeout=10)

    @property
    def usage(self) -> Cost:
        return self._meter.total

    def score_spans(self, prompts: list[str], spans: list[Any]) -> list[SpanScore]:
        self.barrier.wait()  # both threads are inside a call before either is metered
        self._meter.add(Cost(lm_calls=len(prompts), prompt_tokens=10 * len(prompts)))
        self.barrier.wait()
        return [SpanScore(-float(len(p) % 7), -1.0, 1) for p in prompts]

    def generate(self, prompts: list[str], **kwargs: Any) -> list[str]:
        self.barrier.wait()
        self._meter.add(Cost(lm_calls=len(prompts), generated_tokens=3 * len(prompts)))
        self.barrier.wait()
        return ["none"] * len(prompts)


def test_overlapping_calls_on_a_shared_model_are_not_charged_to_each_other() -> None:
    model = SlowMetered()
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(convex_score, QUESTION, DOCS, model)  # 4 prompts
        b = pool.submit(likelihood_selection, QUESTION, DOCS[:3], model, n_orders=3)  # 3
        ra, rb = a.result(), b.result()
    assert ra.cost.lm_calls == 4 and ra.cost.prompt_tokens == 40
    assert rb.cost.lm_calls == 3 and rb.cost.prompt_tokens == 30
    assert model.usage.lm_calls == 7  # the running total still counts both
    model = SlowMetered()  # the answering strategies too
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(fact, QUESTION, DOCS, model, max_iterations=1) for _ in range(2)]
        results = [r.result() for r in runs]
    # one retrieval pass (nothing found: "none") and one answer each
    assert [r.cost.lm_calls for r in results] == [2, 2]
    assert [r.cost.generated_tokens for r in results] == [6, 6]


def test_spent_by_falls_back_to_the_usage_change_for_a_model_that_reports_nothing() -> None:
    class OwnTotal:
        usage = Cost()

        def generate(self, prompts: list[str]) -> list[str]:
            self.usage = self.usage + Cost(lm_calls=len(prompts))
            return list(prompts)

    model = OwnTotal()
    with spent_by(model) as spend:
        model.generate(["a", "b", "c"])
    assert spend.cost == Cost(lm_calls=3)
    with spent_by(object()) as unknown:
        pass
    assert unknown.cost is None


def test_the_embedded_model_under_two_threads(embedded_fp32: Any) -> None:
    """The real backend: a strategy's cost is the same alone and beside another thread."""
    model = embedded_fp32
    alone = convex_score(QUESTION, DOCS, model).cost
    other = likelihood_selection(QUESTION, DOCS[::-1], model, n_orders=4).cost
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(convex_score, QUESTION, DOCS, model)
        b = pool.submit(likelihood_selection, QUESTION, DOCS[::-1], model, n_orders=4)
        together, beside = a.result().cost, b.result().cost
    assert (together.lm_calls, together.prompt_tokens) == (alone.lm_calls, alone.prompt_tokens)
    assert (beside.lm_calls, beside.prompt_tokens) == (other.lm_calls, other.prompt_tokens)
    with metered() as tally:
        model.generate(["Say hi."], max_new_tokens=4)
    assert tally.total.lm_calls == 1 and 1 <= tally.total.generated_tokens <= 4
