"""compare's attention sorting: the attention each passage receives, sorted, then answered."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from test_eval_peers import TEXTS as PEER_TEXTS

from rag_position.data import QAInstance
from rag_position.eval.engine.common import EvalConfigError
from rag_position.eval.rows import attention_sort
from rag_position.eval.rows.lingua import LINGUA_ROWS, LinguaStrategy
from rag_position.eval.tasks.compare import _choose
from rag_position.passages import Passage
from rag_position.prompts import render_qa

TEXTS = PEER_TEXTS[:4]


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
    for lo, hi in attention_sort._document_spans(prompt, passages):
        lo, hi = lo + enc.prompt_start, hi + enc.prompt_start
        tokens = [t for t, (a, b) in enumerate(enc.offsets) if a < hi and b > lo]
        totals.append(float(last[tokens].sum()))
    return totals


@pytest.mark.slow
def test_the_attention_received_is_the_last_rows_and_the_kernel_is_restored(
    embedded_fp32: Any,
) -> None:
    model, instance = embedded_fp32, _instance()
    passages = list(instance.passages)
    before = model.model.config._attn_implementation
    answer = model.generate(["What is the capital of France?"], max_new_tokens=8)
    received, cost = attention_sort.attention_received(model, instance.question, passages)
    expected = _reference(model, instance.question, passages)
    assert received == pytest.approx(expected, rel=1e-3, abs=1e-6)
    assert 0 < sum(received) < 1
    prompt = render_qa(instance.question, passages)
    assert cost.lm_calls == 1 and cost.prompt_tokens == len(model.encode(prompt).ids)
    assert model.model.config._attn_implementation == before
    assert model.generate(["What is the capital of France?"], max_new_tokens=8) == answer


@pytest.mark.slow
def test_each_sort_puts_the_most_attended_passage_last(embedded_fp32: Any) -> None:
    model, instance = embedded_fp32, _instance()
    passages = list(instance.passages)
    received, _ = attention_sort.attention_received(model, instance.question, passages)
    once = attention_sort.AttentionSort(iterations=1).prepare(instance, model, seed=0)
    ranked = sorted(range(len(passages)), key=lambda j: (received[j], j))
    assert once.prompt == render_qa(instance.question, [passages[j] for j in ranked])
    assert once.info["gold_at"] == ranked.index(1)
    twice = attention_sort.AttentionSort().prepare(instance, model, seed=0)
    assert twice.cost.lm_calls == 2 and twice.cost.seconds > 0
    assert [(p.text, dict(p.metadata)) for p in passages] == [
        (t, {"i": i}) for i, (_, t) in enumerate(TEXTS)
    ]


# ------------------------------------------------------------- rows that need local weights
REMOTE = SimpleNamespace(name="openai:http://127.0.0.1:1/v1/m")


@pytest.mark.parametrize(
    ("row", "says"),
    [
        (attention_sort.AttentionSort(), "only a local transformers model"),
        (LinguaStrategy("longllmlingua", "first"), "needs a local transformers model"),
    ],
)
def test_a_remote_model_is_a_clear_error(row: Any, says: str) -> None:
    with pytest.raises(EvalConfigError, match=says):
        row.prepare(_instance(), REMOTE, seed=0)


def test_compare_names_the_rows_problem_or_skips_them() -> None:
    """With a remote model: a row named is a one-line error before any work; in the
    default set, the rows are left out and the report says why."""
    ctx = SimpleNamespace(scorer=None, label="remote", model=REMOTE)  # the model scores
    for name, says in [
        ("attention_sort", "attention_sort reads the attention"),
        ("longllmlingua_last", "longllmlingua_last: longllmlingua ranks"),
    ]:
        with pytest.raises(EvalConfigError, match=says):
            _choose(["retriever", name], {}, None, 10, ctx, [])  # type: ignore[arg-type]
    notes: list[str] = []
    chosen = _choose(None, {}, None, 10, ctx, notes)  # type: ignore[arg-type]
    assert not {s.name for s in chosen} & {*attention_sort.ATTENTION_ROWS, *LINGUA_ROWS}
    assert any(n.startswith("attention_sort: not run: attention_sort reads") for n in notes)
    assert any(n.startswith(f"{', '.join(LINGUA_ROWS)}: not run") for n in notes)
