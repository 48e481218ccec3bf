"""compare's attention sorting: the attention each passage receives, sorted, then answered."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from rag_position.data import QAInstance
from rag_position.eval.engine.common import EvalConfigError
from rag_position.eval.rows.attention_sort import (
    ATTENTION_ROWS,
    AttentionSort,
    _document_spans,
    attention_received,
)
from rag_position.passages import Passage
from rag_position.prompts import render_qa

TEXTS = (
    ("Oslo", "Oslo is the capital and most populous city of Norway."),
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level."),
    ("Danube", "The Danube flows through ten countries into the Black Sea."),
)


def _instance() -> QAInstance:
    passages = tuple(Passage(t, title=h, metadata={"i": i}) for i, (h, t) in enumerate(TEXTS))
    return QAInstance("who wrote hamlet?", ("Shakespeare",), passages, gold_index=1, id="t")


def _reference(model: Any, question: str, passages: list[Passage]) -> list[float]:
    """Written out on a copy of the weights: a full eager forward with every attention
    matrix returned; the last row, summed per document, averaged over heads and layers."""
    net = copy.deepcopy(model.model)
    net.set_attn_implementation("eager")
    prompt = render_qa(question, passages)
    enc = model.encode(prompt)
    with torch.no_grad():
        out = net(input_ids=torch.tensor([enc.ids]), output_attentions=True)
    last = torch.stack([a[0, :, -1, :] for a in out.attentions]).float().mean(dim=(0, 1))
    totals = []
    for lo, hi in _document_spans(prompt, passages):
        lo, hi = lo + enc.prompt_start, hi + enc.prompt_start
        tokens = [t for t, (a, b) in enumerate(enc.offsets) if a < hi and b > lo]
        totals.append(float(last[tokens].sum()))
    return totals


@pytest.mark.slow
def test_the_attention_received_is_the_last_rows_and_the_kernel_is_restored(
    embedded_fp32: Any,
) -> None:
    model, instance = embedded_fp32, _instance()
    before = model.model.config._attn_implementation
    answer = model.generate(["What is the capital of France?"], max_new_tokens=8)
    received, cost = attention_received(model, instance.question, list(instance.passages))
    expected = _reference(model, instance.question, list(instance.passages))
    assert received == pytest.approx(expected, rel=1e-3, abs=1e-6)
    assert 0 < sum(received) < 1
    prompt = render_qa(instance.question, list(instance.passages))
    assert cost.lm_calls == 1 and cost.prompt_tokens == len(model.encode(prompt).ids)
    assert model.model.config._attn_implementation == before
    assert model.generate(["What is the capital of France?"], max_new_tokens=8) == answer


@pytest.mark.slow
def test_each_sort_puts_the_most_attended_passage_last(embedded_fp32: Any) -> None:
    model, instance = embedded_fp32, _instance()
    passages = list(instance.passages)
    received, _ = attention_received(model, instance.question, passages)
    once = AttentionSort(iterations=1).prepare(instance, model, seed=0)
    ranked = sorted(range(len(passages)), key=lambda j: (received[j], j))
    assert once.prompt == render_qa(instance.question, [passages[j] for j in ranked])
    assert once.info["gold_at"] == ranked.index(1)
    twice = AttentionSort().prepare(instance, model, seed=0)
    assert twice.cost.lm_calls == 2 and twice.cost.seconds > 0
    assert [(p.text, dict(p.metadata)) for p in passages] == [
        (t, {"i": i}) for i, (_, t) in enumerate(TEXTS)
    ]


def test_a_remote_model_is_a_clear_error() -> None:
    class Remote:
        name = "openai:http://127.0.0.1:1/v1/m"

    with pytest.raises(EvalConfigError, match="only a local transformers model"):
        AttentionSort().prepare(_instance(), Remote(), seed=0)


def test_compare_names_the_problem_or_skips_the_row() -> None:
    from rag_position.eval.tasks.compare import _choose

    class Ctx:
        scorer = None  # no --scorer: the model scores
        label = "remote"

        class model:  # a model without local weights
            name = "openai:http://127.0.0.1:1/v1/m"

    with pytest.raises(EvalConfigError, match="attention_sort reads the attention"):
        _choose(["retriever", "attention_sort"], {}, None, 10, Ctx(), [])  # type: ignore[arg-type]
    notes: list[str] = []
    chosen = _choose(None, {}, None, 10, Ctx(), notes)  # type: ignore[arg-type]
    assert not {s.name for s in chosen} & set(ATTENTION_ROWS)
    assert any(n.startswith("attention_sort: not run: attention_sort reads") for n in notes)
