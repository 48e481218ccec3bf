"""compare's LongLLMLingua rows: llmlingua's own ranking on the run's model, top first or last."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_eval_peers import TEXTS as PEER_TEXTS
from test_eval_peers import UNRELATED

from rag_position.data import QAInstance
from rag_position.eval.rows import lingua
from rag_position.passages import Passage
from rag_position.prompts import DOCUMENT_TEMPLATE, render_qa

TEXTS = (*PEER_TEXTS[:4], UNRELATED[0])


def _instance(gold: int = 1) -> QAInstance:
    passages = tuple(Passage(t, title=h, metadata={"i": i}) for i, (h, t) in enumerate(TEXTS))
    return QAInstance("who wrote hamlet", ("Shakespeare",), passages, gold_index=gold, id="t")


def _documents(instance: QAInstance) -> list[str]:
    return [
        DOCUMENT_TEMPLATE.format(index=i + 1, title=p.title, text=p.text)
        for i, p in enumerate(instance.passages)
    ]


def _reference_ranking(model: Any, instance: QAInstance) -> list[int]:
    """LongLLMLingua's definition written out: the mean loss of the question (with its
    sentence) after each document, counted from the document's last token; lowest first."""
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


def test_llmlingua_is_installed_with_the_package_extras() -> None:
    """[all] (what setup.sh installs) carries [baselines]: the rows exist, not skipped."""
    assert lingua.lingua_installed()
    assert sorted(lingua.lingua_strategies()) == sorted(lingua.LINGUA_ROWS)


@pytest.mark.parametrize("name", lingua.LINGUA_ROWS)
def test_rows_rank_by_llmlingua_and_place_the_top_document(embedded_fp32: Any, name: str) -> None:
    """``longllmlingua_top1``: llmlingua's top document alone (the budget of
    ``select_and_place:top_n=1``); what it kept, and whether the gold was among it."""
    model, instance = embedded_fp32, _instance()
    padding = model.tokenizer.padding_side
    before = [(p.text, p.title, dict(p.metadata)) for p in instance.passages]
    prepared = lingua.lingua_strategies()[name].prepare(instance, model, seed=0)
    ranking = prepared.info["ranking"]
    assert ranking == _reference_ranking(model, instance)
    top, rest = ranking[0], [i for i in range(len(TEXTS)) if i != ranking[0]]
    order = {lingua.LINGUA_ROWS[0]: [top, *rest], lingua.LINGUA_ROWS[1]: [*rest, top]}.get(
        name, [top]
    )
    assert prepared.prompt == render_qa(instance.question, [instance.passages[i] for i in order])
    if name == "longllmlingua_top1":
        assert prepared.info["kept"] == 1
        assert prepared.info["gold_kept"] == (1.0 if top == instance.gold_index else 0.0)
    else:
        assert prepared.info.get("gold_at") == order.index(instance.gold_index)
    # cost: one scoring prompt per document, counted by the model's tokenizer
    query = instance.question + lingua.QUESTION_SUFFIX
    assert prepared.cost.lm_calls == len(TEXTS)
    assert prepared.cost.prompt_tokens == sum(
        model.count_tokens(d + query) for d in _documents(instance)
    )
    assert prepared.cost.seconds > 0
    # nothing shared was changed: the tokenizer's padding side, the passages
    assert model.tokenizer.padding_side == padding
    assert [(p.text, p.title, dict(p.metadata)) for p in instance.passages] == before
