"""compare's peers run by name: LangChain's EmbeddingsFilter and LlamaIndex's LLMRerank."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_position.data import QAInstance
from rag_position.eval.engine.pair import ReaderScorer, scorer_metered
from rag_position.eval.rows import peers, threshold
from rag_position.passages import EMBEDDING_TEXT, Passage
from rag_position.prompts import QA_TEMPLATE, fill_template, render_qa

TEXTS = (
    ("Oslo", "Oslo is the capital and most populous city of Norway."),
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level."),
    ("Danube", "The Danube flows through ten countries into the Black Sea."),
    ("Shakespeare", "William Shakespeare was an English playwright, poet and actor."),
)
UNRELATED = (
    ("Penicillin", "Alexander Fleming discovered penicillin in 1928 in London."),
    ("Sourdough", "Sourdough bread is leavened by wild yeast and lactic acid bacteria."),
    ("Basalt", "Basalt is a fine-grained volcanic rock rich in magnesium and iron."),
)


def _instance(texts: Sequence[tuple[str, str]] = TEXTS, gold: int = 1) -> QAInstance:
    passages = tuple(Passage(text, title=title) for title, text in texts)
    return QAInstance("who wrote hamlet", ("Shakespeare",), passages, gold_index=gold, id="t")


def _cosines(instance: QAInstance) -> np.ndarray:
    """The question's cosine with each passage, computed directly with the same embedder."""
    embedder = peers.filter_embeddings().core_embedder
    docs = [EMBEDDING_TEXT.format(title=p.title, text=p.text) for p in instance.passages]
    q = np.asarray(embedder.embed([instance.question]), dtype=np.float64)[0]
    d = np.asarray(embedder.embed(docs), dtype=np.float64)
    return d @ q / (np.linalg.norm(d, axis=1) * np.linalg.norm(q))


def _no_passage(instance: QAInstance) -> str:
    return fill_template(QA_TEMPLATE, question=instance.question, search_results="")


class Scripted:
    """A scorer that answers every prompt with ``answer`` (and keeps the prompts)."""

    name = "scripted"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        self.prompts.extend(prompts)
        return [self.answer for _ in prompts]


def test_rows_are_those_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """setup.sh installs both frameworks and our integrations: every row is there, or none."""
    assert peers.embeddings_filter_installed() and peers.llm_rerank_installed()
    rows = peers.peer_strategies()
    assert tuple(rows) == peers.PEER_ROWS
    assert all(row.name == name for name, row in rows.items())
    assert rows["embeddings_filter"].k == 1 and rows["embeddings_filter"].threshold is None
    threshold_row = rows["embeddings_filter_threshold"]
    assert threshold_row.k is None and threshold_row.threshold == peers.EMBEDDINGS_FILTER_THRESHOLD
    # LangChain turns k=None into its default 20: the threshold row's order comes from it
    filter_class, _, _ = peers.langchain_classes()
    built = filter_class(embeddings=peers.filter_embeddings(), k=None, similarity_threshold=0.5)
    assert built.k == 20 and built.similarity_threshold == 0.5
    monkeypatch.setattr(peers, "_has", lambda module: not module.startswith("llama_index"))
    assert tuple(peers.peer_strategies()) == peers.PEER_ROWS[:2]
    monkeypatch.setattr(peers, "_has", lambda module: False)
    assert peers.peer_strategies() == {}


@pytest.mark.slow
def test_embeddings_filter_rows_keep_the_most_similar_passages() -> None:
    """Top-1 keeps the Hamlet passage; the threshold row those above it (most similar first)."""
    rows = peers.peer_strategies()
    for gold in (1, 3):
        instance = _instance(gold=gold)
        prepared = rows["embeddings_filter"].prepare(instance, None, seed=0)
        best = int(np.argmax(_cosines(instance)))
        assert best == 1  # the Hamlet passage
        assert prepared.info["kept"] == 1 and prepared.info["gold_kept"] == float(best == gold)
        assert prepared.info["none_kept"] == 0
        assert prepared.prompt == render_qa(instance.question, [instance.passages[best]])
        assert prepared.cost.lm_calls == 0 and prepared.cost.seconds > 0
        assert prepared.info["embed_seconds"] == prepared.cost.seconds
    cosines = _cosines(instance)
    by_similarity = [int(i) for i in np.argsort(-cosines)]
    for cut in (float(np.sort(cosines)[-2:].mean()), float(np.sort(cosines)[1] - 1e-3)):
        kept, _ = peers.EmbeddingsFilterStrategy("t", None, cut).filter(
            instance.question, instance.passages
        )
        assert kept == [i for i in by_similarity if cosines[i] > cut]
    assert len(kept) == 4  # the second threshold drops only the least similar
    prepared = rows["embeddings_filter_threshold"].prepare(instance, None, seed=0)
    cut = peers.EMBEDDINGS_FILTER_THRESHOLD
    expected = [instance.passages[i] for i in by_similarity if cosines[i] > cut]
    assert prepared.info["kept"] == len(expected) >= 1
    assert prepared.prompt == render_qa(instance.question, expected)
    unrelated = _instance(UNRELATED, gold=0)
    assert max(_cosines(unrelated)) < cut
    prepared = rows["embeddings_filter_threshold"].prepare(unrelated, None, seed=0)
    assert prepared.info["kept"] == 0 and prepared.info["none_kept"] == 1
    assert prepared.info["gold_kept"] == 0.0 and "gold_at" not in prepared.info
    assert prepared.prompt == _no_passage(unrelated)
    assert "Document [" not in (prepared.prompt or "")
    # choose_threshold embeds distinct texts in batches; the filter embeds per instance
    instances = [instance, _instance(TEXTS[2:], gold=0)]
    for one, scores in zip(instances, threshold.all_similarities(instances), strict=True):
        assert np.allclose(scores, threshold.similarities(one), atol=1e-5)
        assert np.allclose(scores, _cosines(one), atol=1e-5)


SIMILARITIES = Path(__file__).resolve().parents[1] / "results/threshold/similarities.json"


@pytest.mark.slow
def test_the_threshold_constant_is_what_the_function_chooses() -> None:
    """The committed similarities (``python -m rag_position.eval.rows.threshold``) choose it."""
    record = json.loads(SIMILARITIES.read_text())
    instances = threshold.threshold_instances()
    assert record["ids"] == [instance.id for instance in instances]
    similarities = record["similarities"]
    choice = threshold.choose_threshold(instances, similarities=similarities)
    assert choice.questions == 200 == len(similarities)
    assert choice.threshold == peers.EMBEDDINGS_FILTER_THRESHOLD == record["choice"]["threshold"]
    assert choice.gold_kept > choice.distractor_kept
    sample = range(0, 200, 25)
    again = threshold.all_similarities([instances[i] for i in sample])
    for i, scores in zip(sample, again, strict=True):
        assert np.allclose(scores, similarities[i], atol=1e-5), i


def test_choose_threshold_maximises_youden_j(monkeypatch: pytest.MonkeyPatch) -> None:
    sims = {"a": [0.9, 0.3, 0.2], "b": [0.5, 0.6, 0.1]}  # gold first
    monkeypatch.setattr(threshold, "all_similarities", lambda insts: [sims[i.id] for i in insts])
    passages = tuple(Passage(t) for t in "xyz")
    instances = [QAInstance("q", ("x",), passages, gold_index=0, id=key) for key in sims]
    choice = threshold.choose_threshold(instances, grid=(0.0, 0.25, 0.4, 0.55, 0.7))
    # J: 0.0 -> 1-1=0; 0.25 -> 1-0.5=0.5; 0.4 -> 1-0.25=0.75; 0.55 -> 0.5-0.25=0.25
    assert (choice.threshold, choice.youden_j, choice.questions) == (0.4, 0.75, 2)
    assert threshold.choose_threshold(instances, grid=(0.4, 0.45)).threshold == 0.4  # a tie


# ---------------------------------------------------------------------------- LLMRerank
class Down(Scripted):
    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        raise RuntimeError("server down")


def test_llm_rerank_keeps_the_passage_the_answer_names_on_the_scorer() -> None:
    scorer = Scripted("Doc: 2, Relevance: 9")
    instance = _instance(gold=1)
    with scorer_metered() as tally:
        prepared = peers.LLMRerankStrategy().prepare(instance, scorer, seed=0)
    kept = {"gold_at": 0, "kept": 1, "gold_kept": 1.0}
    assert prepared.info == kept | {"format_failure": 0, "invalid_choice": 0, "parsed": 1}
    assert prepared.prompt == render_qa(instance.question, [instance.passages[1]])
    # LLMRerank's own prompt, all passages in one batch, the title shown as metadata
    (prompt,) = scorer.prompts
    assert "Doc: 9, Relevance: 7" in prompt and "Document 5:" in prompt
    assert "title: Hamlet" in prompt and prompt.rstrip().endswith("Answer:")
    # a scorer that reports nothing: one call counted, charged to the scorer
    assert prepared.cost.lm_calls == 1 and tally.total.lm_calls == 1
    # with a reader apart, the scorer answers; a failed call is raised, not counted
    scorer, rerank = Scripted("Doc: 2, Relevance: 9"), peers.LLMRerankStrategy()
    prepared = rerank.prepare(instance, ReaderScorer(Down(""), scorer), seed=0)
    assert prepared.info["kept"] == 1 and len(scorer.prompts) == 1
    with pytest.raises(RuntimeError, match="server down"):
        rerank.prepare(instance, Down(""), seed=0)


@pytest.mark.parametrize(
    ("answer", "info", "kept"),
    [
        ("Doc: 1, Relevance: 3\nDoc: 4, Relevance: 8", {"kept": 1, "parsed": 2}, 3),  # by relevance
        ("I don't know", {"format_failure": 1, "kept": 0, "parsed": 0, "gold_kept": 0.0}, None),
        ("Doc: 9, Relevance: 9", {"format_failure": 1, "kept": 0}, None),  # beyond: skipped
        # LLMRerank indexes ``nodes[number - 1]`` unchecked: Doc 0 is the last passage,
        # a number far below 1 raises IndexError (a format failure)
        ("Doc: 0, Relevance: 5", {"invalid_choice": 1, "format_failure": 0}, -1),
        ("Doc: -20, Relevance: 5", {"format_failure": 1, "kept": 0, "invalid_choice": 1}, None),
    ],
)
def test_llm_rerank_reads_answers(answer: str, info: dict[str, Any], kept: int | None) -> None:
    instance = _instance(gold=1)
    prepared = peers.LLMRerankStrategy().prepare(instance, Scripted(answer), seed=0)
    assert {key: prepared.info[key] for key in info} == info
    if kept is None:
        assert prepared.prompt == _no_passage(instance)
    else:
        assert prepared.prompt == render_qa(instance.question, [instance.passages[kept]])


@pytest.mark.slow
def test_llm_rerank_on_the_embedded_model_charges_the_scorer(embedded_fp32: Any) -> None:
    instance = _instance(TEXTS[:3], gold=1)
    row = peers.LLMRerankStrategy(max_new_tokens=24)  # the row's 256 tokens, cut for time
    with scorer_metered() as tally:
        prepared = row.prepare(instance, embedded_fp32, seed=0)
    assert prepared.info["format_failure"] in (0, 1) and prepared.info["kept"] <= 1
    assert prepared.info["kept"] == 0 or prepared.info["format_failure"] == 0
    assert tally.total.lm_calls > 0 and tally.total == prepared.cost
    assert prepared.cost.prompt_tokens > 0


def test_docstring_examples() -> None:
    import doctest

    result = doctest.testmod(peers, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0
