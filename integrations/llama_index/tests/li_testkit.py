"""Test helpers of the LlamaIndex integration (a unique module name: the repository runs
every test directory in one pytest session, so ``import conftest`` would be ambiguous)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import NodeWithScore, TextNode

from rag_position.models import SpanScore

DOCS = [
    ("Paris", "Paris is the capital and largest city of France, on the river Seine."),
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("Everest", "Mount Everest is the highest mountain on Earth, in the Himalayas."),
    ("Python", "Python is a programming language created by Guido van Rossum."),
]
"""Four short documents, one topic each (titles in metadata["title"])."""


class GoldAtEdgesScorer:
    """A scripted Scorer: likelihood 1 when ``gold`` is the first or last passage, else 0;
    -1 without ``gold`` in the prompt (one other passage alone, as passage likelihood scores).

    ConvexScore and passage likelihood must then pick ``gold``; likelihood selection
    ties, keeping the given order. ``calls`` counts the prompts scored.
    """

    def __init__(self, texts: Sequence[str], gold: str) -> None:
        self.texts = list(texts)
        self.gold = gold
        self.calls = 0
        self.prompts: list[str] = []

    def score_spans(self, prompts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[Any]:
        out = []
        for prompt in prompts:
            self.calls += 1
            self.prompts.append(prompt)
            order = sorted((t for t in self.texts if t in prompt), key=prompt.index)
            if self.gold not in order:
                out.append(SpanScore(mean=-1.0, sum=-1.0, n_tokens=1))
                continue
            k = order.index(self.gold)
            v = 1.0 if k in (0, len(order) - 1) else 0.0
            out.append(SpanScore(mean=v, sum=v, n_tokens=1))
        return out


class GoldFirstScorer(GoldAtEdgesScorer):
    """Likelihood falls with the gold passage's position: the best order puts it first."""

    def score_spans(self, prompts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[Any]:
        out = []
        for prompt in prompts:
            self.calls += 1
            order = sorted((t for t in self.texts if t in prompt), key=prompt.index)
            v = -float(order.index(self.gold))
            out.append(SpanScore(mean=v, sum=v, n_tokens=1))
        return out


def make_nodes(scores: Sequence[float | None] | None = None, n: int = 4) -> list[NodeWithScore]:
    """``n`` nodes (texts of :data:`DOCS` repeated with an index), with metadata and scores."""
    scores = list(scores) if scores is not None else [0.9 - 0.1 * i for i in range(n)]
    nodes = []
    for i, score in enumerate(scores):
        title, text = DOCS[i % len(DOCS)]
        node = TextNode(
            text=f"{text} ({i})",
            id_=f"node-{i}",
            metadata={"title": title, "source": f"file-{i}.txt"},
            excluded_llm_metadata_keys=["source"],
        )
        nodes.append(NodeWithScore(node=node, score=score))
    return nodes


class EchoModel:
    """A scripted rag-position model (Generator and Scorer) that records its calls.

    ``replies``: texts returned in turn (then ``"ok"``); ``calls``: the options of each
    ``generate`` call.
    """

    name = "echo-model"
    max_context = 1234

    def __init__(self, replies: Sequence[str] = ()) -> None:
        self.replies = list(replies)
        self.calls: list[dict[str, Any]] = []
        self.prompts: list[str] = []

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int = 100,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[str]:
        out = []
        for prompt in prompts:
            self.prompts.append(prompt)
            self.calls.append(
                {
                    "max_new_tokens": max_new_tokens,
                    "temperature": temperature,
                    "seed": seed,
                    "stop": stop,
                }
            )
            out.append(self.replies.pop(0) if self.replies else "ok")
        return out

    def score_spans(self, prompts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[Any]:
        return [SpanScore(mean=-float(len(p)), sum=-float(len(p)), n_tokens=1) for p in prompts]


class GenerateOnly:
    """A Generator that cannot score."""

    def generate(self, prompts: Sequence[str], **options: Any) -> list[str]:
        return ["x" for _ in prompts]


class WordEmbedder:
    """A scripted Embedder: bag of lower-case words over a fixed vocabulary, unit rows."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.vocabulary = [w.lower() for w in vocabulary]

    def embed(self, texts: Sequence[str]) -> Any:
        import re

        import numpy as np

        rows = np.zeros((len(texts), len(self.vocabulary) + 1), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            for j, w in enumerate(self.vocabulary):
                rows[i, j] = words.count(w)
            rows[i, -1] = 0.01  # never a zero row
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)
