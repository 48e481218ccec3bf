"""compare's LongLLMLingua rows: llmlingua's own ranking on the run's model, top first or last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from rag_position.data import QAInstance
from rag_position.eval.engine.common import EvalConfigError
from rag_position.eval.rows.lingua import (
    LINGUA_ROWS,
    QUESTION_SUFFIX,
    LinguaStrategy,
    lingua_installed,
    lingua_strategies,
)
from rag_position.passages import Passage
from rag_position.prompts import DOCUMENT_TEMPLATE, render_qa

TEXTS = (
    ("Oslo", "Oslo is the capital and most populous city of Norway."),
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level."),
    ("Danube", "The Danube flows through ten countries into the Black Sea."),
    ("Penicillin", "Alexander Fleming discovered penicillin in 1928 in London."),
)


def _instance(gold: int = 1) -> QAInstance:
    passages = tuple(
        Passage(text, title=title, metadata={"i": i}) for i, (title, text) in enumerate(TEXTS)
    )
    return QAInstance("who wrote hamlet", ("Shakespeare",), passages, gold_index=gold, id="t")


def _reference_ranking(model: Any, instance: QAInstance) -> list[int]:
    """LongLLMLingua's definition written out: the mean loss of the question (with its
    sentence) after each document, counted from the document's last token; lowest first."""
    tok, net = model.tokenizer, model.model
    query = instance.question + QUESTION_SUFFIX
    ppl = []
    for i, p in enumerate(instance.passages):
        doc = DOCUMENT_TEMPLATE.format(index=i + 1, title=p.title, text=p.text)
        ids = tok(doc + query, return_tensors="pt").input_ids
        with torch.no_grad():
            logits = net(ids).logits
        loss = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:], reduction="none")
        start = len(tok(doc).input_ids) - 1
        ppl.append(float(loss[start:].mean()))
    return sorted(range(len(ppl)), key=lambda i: ppl[i])


def test_llmlingua_is_installed_with_the_package_extras() -> None:
    """[all] (what setup.sh installs) carries [baselines]: the rows exist, not skipped."""
    assert lingua_installed()
    assert sorted(lingua_strategies()) == sorted(LINGUA_ROWS)


@pytest.mark.parametrize("placement", ["first", "last"])
def test_rows_rank_by_llmlingua_and_place_the_top_document(
    embedded_fp32: Any, placement: str
) -> None:
    model = embedded_fp32
    instance = _instance()
    padding = model.tokenizer.padding_side
    before = [(p.text, p.title, dict(p.metadata)) for p in instance.passages]
    prepared = LinguaStrategy(f"row_{placement}", placement).prepare(instance, model, seed=0)  # type: ignore[arg-type]
    ranking = prepared.info["ranking"]
    assert ranking == _reference_ranking(model, instance)
    top, rest = ranking[0], [i for i in range(len(TEXTS)) if i != ranking[0]]
    order = [top, *rest] if placement == "first" else [*rest, top]
    expected = [instance.passages[i] for i in order]
    assert prepared.prompt == render_qa(instance.question, expected)
    assert prepared.info.get("gold_at") == order.index(instance.gold_index)
    # cost: one scoring prompt per document, counted by the model's tokenizer
    query = instance.question + QUESTION_SUFFIX
    docs = [
        DOCUMENT_TEMPLATE.format(index=i + 1, title=p.title, text=p.text)
        for i, p in enumerate(instance.passages)
    ]
    assert prepared.cost.lm_calls == len(TEXTS)
    assert prepared.cost.prompt_tokens == sum(model.count_tokens(d + query) for d in docs)
    assert prepared.cost.seconds > 0
    # nothing shared was changed: the tokenizer's padding side, the passages
    assert model.tokenizer.padding_side == padding
    assert [(p.text, p.title, dict(p.metadata)) for p in instance.passages] == before


def test_rows_refuse_a_model_without_local_weights() -> None:
    class Remote:
        name = "openai:http://127.0.0.1:1/v1/m"

    with pytest.raises(EvalConfigError, match="needs a local transformers model"):
        LinguaStrategy("longllmlingua", "first").prepare(_instance(), Remote(), seed=0)


def test_compare_names_the_rows_problem_or_skips_them(tmp_path: Path) -> None:
    """Named with a remote model: a one-line error before any work; in the default set:
    left out, and the report says why."""
    from rag_position.eval.tasks.compare import _choose

    class Ctx:
        scorer = None  # no --scorer: the model scores
        label = "remote"

        class model:  # a model without local weights
            name = "openai:http://127.0.0.1:1/v1/m"

    with pytest.raises(EvalConfigError, match="longllmlingua_last: longllmlingua ranks"):
        _choose(["retriever", "longllmlingua_last"], {}, None, 10, Ctx(), [])  # type: ignore[arg-type]
    notes: list[str] = []
    chosen = _choose(None, {}, None, 10, Ctx(), notes)  # type: ignore[arg-type]
    assert not {s.name for s in chosen} & set(LINGUA_ROWS)
    assert any(n.startswith(f"{', '.join(LINGUA_ROWS)}: not run") for n in notes)


def test_top1_is_the_coarse_compression_at_one_document(embedded_fp32: Any) -> None:
    """``longllmlingua_top1``: llmlingua's top document alone (the budget of
    ``select_and_place:top_n=1``); what it kept, and whether the gold was among it."""
    model, instance = embedded_fp32, _instance()
    row = lingua_strategies()["longllmlingua_top1"]
    prepared = row.prepare(instance, model, seed=0)  # type: ignore[arg-type]
    top = prepared.info["ranking"][0]
    assert top == _reference_ranking(model, instance)[0]
    assert prepared.prompt == render_qa(instance.question, [instance.passages[top]])
    assert prepared.info["kept"] == 1
    assert prepared.info["gold_kept"] == (1.0 if top == instance.gold_index else 0.0)
    assert prepared.cost.lm_calls == len(TEXTS)  # the ranking scores every document
