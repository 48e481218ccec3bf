"""The similarity threshold of the ``embeddings_filter_threshold`` row: the value
maximising Youden's J on dev questions the reported figures never use
(:func:`choose_threshold`); ``python -m rag_position.eval.rows.threshold`` prints it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag_position.data import QAInstance
from rag_position.eval.rows.peers import (
    EMBEDDINGS_FILTER_THRESHOLD,
    as_documents,
    filter_embeddings,
    langchain_classes,
)

THRESHOLD_QUESTIONS = (260, 460)
"""The dev questions (``[start, stop)`` of the packaged dev file, 10 passages each) the
threshold is chosen on: after the 200 the reported figures use and the 60 ``tune`` uses."""


THRESHOLD_GRID = tuple(round(i / 100, 2) for i in range(101))
"""The thresholds :func:`choose_threshold` tries."""


# ---------------------------------------------------------------------------- the threshold
@dataclass(frozen=True)
class ThresholdChoice:
    """:func:`choose_threshold`'s result and its evidence."""

    threshold: float
    gold_kept: float
    distractor_kept: float
    youden_j: float
    questions: int


def similarities(instance: QAInstance) -> list[float]:
    """Each passage's similarity to the question, as ``EmbeddingsFilter`` computes it (its
    ``similarity_fn`` on the same ``Embeddings`` and documents)."""
    embeddings_filter, _, _ = langchain_classes()
    embeddings = filter_embeddings()
    scorer = embeddings_filter(embeddings=embeddings, k=1, similarity_threshold=None)
    docs = embeddings.embed_documents([d.page_content for d in as_documents(instance.passages)])
    query = embeddings.embed_query(instance.question)
    return [float(x) for x in np.asarray(scorer.similarity_fn([query], docs))[0]]


def all_similarities(instances: Sequence[QAInstance]) -> list[list[float]]:
    """:func:`similarities` of every instance, each distinct text embedded once (in
    batches: the same vectors up to float rounding)."""
    embeddings_filter, _, _ = langchain_classes()
    embeddings = filter_embeddings()
    similarity_fn = embeddings_filter(
        embeddings=embeddings, k=1, similarity_threshold=None
    ).similarity_fn
    texts = [[d.page_content for d in as_documents(inst.passages)] for inst in instances]
    distinct = sorted({t for group in texts for t in group})
    vectors = dict(zip(distinct, embeddings.embed_documents(distinct), strict=True))
    queries = sorted({inst.question for inst in instances})
    asked = dict(zip(queries, embeddings.embed_documents(queries), strict=True))
    out = []
    for inst, group in zip(instances, texts, strict=True):
        scores = similarity_fn([asked[inst.question]], [vectors[t] for t in group])
        out.append([float(x) for x in np.asarray(scores)[0]])
    return out


def choose_threshold(
    instances: Sequence[QAInstance],
    grid: Sequence[float] = THRESHOLD_GRID,
    similarities: Sequence[Sequence[float]] | None = None,
) -> ThresholdChoice:
    """The ``grid`` value maximising Youden's J over ``instances``: the rate of gold
    passages above it minus the rate of distractors above it (``EmbeddingsFilter`` keeps
    a similarity strictly above its threshold); the lowest such value on a tie.
    ``similarities`` are each instance's (:func:`all_similarities`, computed when not given)."""
    if similarities is None:
        similarities = all_similarities(instances)
    gold: list[float] = []
    other: list[float] = []
    for instance, scores in zip(instances, similarities, strict=True):
        for i, score in enumerate(scores):
            (gold if i == instance.gold_index else other).append(score)
    if not gold or not other:
        raise ValueError("choosing a threshold needs gold passages and distractors")
    g, o = np.asarray(gold), np.asarray(other)
    best: ThresholdChoice | None = None
    for t in grid:
        tpr, fpr = float(np.mean(g > t)), float(np.mean(o > t))
        if best is None or tpr - fpr > best.youden_j:
            best = ThresholdChoice(float(t), tpr, fpr, tpr - fpr, len(instances))
    assert best is not None
    return best


def threshold_instances(questions: tuple[int, int] = THRESHOLD_QUESTIONS) -> list[QAInstance]:
    """The dev instances the threshold is chosen on (10 passages, as ``compare``'s default)."""
    from rag_position.eval.tasks.datasets import load_multidoc

    start, stop = questions
    return load_multidoc(None, docs=10, questions=stop).instances[start:stop]


def main(argv: Sequence[str] | None = None) -> None:
    """Print the threshold :func:`choose_threshold` gives on :data:`THRESHOLD_QUESTIONS`;
    with ``--out FILE.json``, write the similarities it was chosen from and the choice
    (``results/threshold/similarities.json``, which the tests check the constant on)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rag_position.eval.rows.threshold")
    parser.add_argument("--out", help="write the similarities and the choice to this JSON file")
    args = parser.parse_args(argv)
    instances = threshold_instances()
    similarities = all_similarities(instances)
    choice = choose_threshold(instances, similarities=similarities)
    if args.out:
        from rag_position._jsonfile import write_atomic

        record = {
            "command": "python -m rag_position.eval.rows.threshold --out " + args.out,
            "questions": list(THRESHOLD_QUESTIONS),
            "ids": [instance.id for instance in instances],
            "choice": dataclasses.asdict(choice),
        }
        rows = ",\n  ".join(json.dumps(row) for row in similarities)  # a question a line
        head = json.dumps(record, indent=1).removesuffix("\n}")
        write_atomic(Path(args.out), f'{head},\n "similarities": [\n  {rows}\n ]\n}}\n')
    print(
        f"threshold {choice.threshold:.2f}: gold kept {choice.gold_kept:.3f}, distractors "
        f"kept {choice.distractor_kept:.3f}, J {choice.youden_j:.3f} "
        f"({choice.questions} questions {THRESHOLD_QUESTIONS[0]}..{THRESHOLD_QUESTIONS[1] - 1}); "
        f"the constant is {EMBEDDINGS_FILTER_THRESHOLD}"
    )


__all__ = ["THRESHOLD_QUESTIONS", "ThresholdChoice", "choose_threshold", "threshold_instances"]

if __name__ == "__main__":
    main()
