"""compare's rows on a local model's internals: attention sorting and LongLLMLingua."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from test_eval_peers import TEXTS as PEER_TEXTS
from test_eval_peers import UNRELATED

from rag_position.data import QAInstance
from rag_position.eval.engine.common import EvalConfigError
from rag_position.eval.rows import attention_sort, lingua
from rag_position.eval.rows.lingua import LINGUA_ROWS, LinguaStrategy
from rag_position.eval.tasks.compare import _choose
from rag_position.passages import Passage
from rag_position.prompts import DOCUMENT_TEMPLATE, render_qa

TEXTS = PEER_TEXTS[:4]
LINGUA_TEXTS = (*TEXTS, UNRELATED[0])


def _instance(texts: Any = TEXTS, question: str = "who wrote hamlet?") -> QAInstance:
    passages = tuple(Passage(t, title=h, metadata={"i": i}) for i, (h, t) in enumerate(texts))
    return QAInstance(question, ("Shakespeare",), passages, gold_index=1, id="t")


def _reference(model: Any, question: str, passages: list[Passage]) -> list[float]:
    """An eager forward of a copy: the last attention row, per document, mean of heads, layers."""
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
def test_the_attention_received_sorts_the_most_attended_last(embedded_fp32: Any) -> None:
    """The attention received is the last row's; the kernel is restored after."""
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
    """A remote model: a row named is an error before any work; by default left out, saying why."""
    assert lingua.lingua_installed()  # [all] (what setup.sh installs) carries [baselines]
    assert sorted(lingua.lingua_strategies()) == sorted(lingua.LINGUA_ROWS)
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


# ------------------------------------------------------------------ LongLLMLingua
def _documents(instance: QAInstance) -> list[str]:
    passages = enumerate(instance.passages, 1)
    return [DOCUMENT_TEMPLATE.format(index=i, title=p.title, text=p.text) for i, p in passages]


def _reference_ranking(model: Any, instance: QAInstance) -> list[int]:
    """LongLLMLingua's: the question's mean loss after each document (from its last token)."""
    tok, net = model.tokenizer, model.model
    query = instance.question + lingua.QUESTION_SUFFIX
    ppl = []
    for doc in _documents(instance):
        ids = tok(doc + query, return_tensors="pt").input_ids
        with torch.no_grad():
            logits = net(ids).logits
        loss = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:], reduction="none")
        start = len(tok(doc).input_ids) - 1
        ppl.append(float(loss[start:].mean()))
    return sorted(range(len(ppl)), key=lambda i: ppl[i])


@pytest.mark.parametrize("name", lingua.LINGUA_ROWS)
def test_rows_rank_by_llmlingua_and_place_the_top_document(embedded_fp32: Any, name: str) -> None:
    """``longllmlingua_top1`` keeps the top document alone (``select_and_place:top_n=1``'s)."""
    model, instance = embedded_fp32, _instance(LINGUA_TEXTS, "who wrote hamlet")
    padding = model.tokenizer.padding_side
    before = [(p.text, p.title, dict(p.metadata)) for p in instance.passages]
    prepared = lingua.lingua_strategies()[name].prepare(instance, model, seed=0)
    ranking = prepared.info["ranking"]
    assert ranking == _reference_ranking(model, instance)
    top, rest = ranking[0], [i for i in range(len(LINGUA_TEXTS)) if i != ranking[0]]
    orders = {lingua.LINGUA_ROWS[0]: [top, *rest], lingua.LINGUA_ROWS[1]: [*rest, top]}
    order = orders.get(name, [top])
    assert prepared.prompt == render_qa(instance.question, [instance.passages[i] for i in order])
    if name == "longllmlingua_top1":
        assert prepared.info["kept"] == 1
        assert prepared.info["gold_kept"] == (1.0 if top == instance.gold_index else 0.0)
    else:
        assert prepared.info.get("gold_at") == order.index(instance.gold_index)
    # cost: one scoring prompt per document, counted by the model's tokenizer
    query = instance.question + lingua.QUESTION_SUFFIX
    assert prepared.cost.lm_calls == len(LINGUA_TEXTS)
    tokens = sum(model.count_tokens(d + query) for d in _documents(instance))
    assert prepared.cost.prompt_tokens == tokens
    assert prepared.cost.seconds > 0
    # nothing shared was changed: the tokenizer's padding side, the passages
    assert model.tokenizer.padding_side == padding
    assert [(p.text, p.title, dict(p.metadata)) for p in instance.passages] == before
