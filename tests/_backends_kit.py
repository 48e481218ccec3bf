"""Helpers shared by the backend tests (served models, the prefix cache, the double)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_position.data import ORACLE_FILE, default_data_dir, load_qa
from rag_position.eval import run_multidoc
from rag_position.models.protocols import SpanScore
from rag_position.prompts import question_span, render_qa
from rag_position.testing._openai_payloads import JSON
from rag_position.testing.openai_double import OpenAIHandler


def instances(n: int, docs: int) -> list[tuple[str, list[str]]]:
    """``n`` oracle questions, each with the gold passages of the next ``docs`` records."""
    records = load_qa(default_data_dir() / ORACLE_FILE)[: n + docs]
    return [
        (records[i].question, [records[i + j].passages[0] for j in range(docs)]) for i in range(n)
    ]


def qa_spans(n: int, docs: int) -> tuple[list[str], list[tuple[int, int]]]:
    """``n`` QA prompts' question spans, then a span of the first starting inside a word."""
    prompts, spans = [], []
    for question, passages in instances(n, docs):
        prompts.append(render_qa(question, passages))
        spans.append(question_span(prompts[-1], question))
    mid = prompts[0].index("Document [5]")
    return [*prompts, prompts[0]], [*spans, (mid + 3, mid + 40)]


def close_scores(want: Sequence[SpanScore], got: Sequence[SpanScore], tol: float) -> float:
    """Token counts equal, means within ``tol``, sums within ``tol`` a token; the worst mean."""
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        assert a.n_tokens == b.n_tokens, (i, a, b)
        assert abs(a.mean - b.mean) <= tol, (i, a, b)
        assert abs(a.sum - b.sum) <= tol * a.n_tokens, (i, a, b)
    return max(abs(a.mean - b.mean) for a, b in zip(want, got, strict=True))


def check_first_line_eval(model: Any, out: Path) -> None:
    """The eval on a completion model (no chat template) takes its answer's first line."""
    result = run_multidoc(model, questions=1, positions=[0], baselines=False, out=out)
    (record,) = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    assert record["decoding"]["stop"] == ["\n"]
    assert record["prediction"].strip() and "\n" not in record["prediction"]
    assert "first line break" in result.report.read_text()


class NoTokenize(OpenAIHandler):
    """A server without vLLM's ``/tokenize`` (OpenAI's API, a proxy): 404 there. ``FINISH``
    (when set) as every reply's finish_reason."""

    FINISH: str | None = None

    def _routes(self) -> dict[tuple[str, str], Callable[[JSON], JSON]]:
        return {k: v for k, v in super()._routes().items() if "tokenize" not in k[1]}

    def postprocess(self, path: str, body: JSON) -> JSON:
        if self.FINISH is not None and "choices" in body:
            for choice in body["choices"]:
                choice["finish_reason"] = self.FINISH
        return body
