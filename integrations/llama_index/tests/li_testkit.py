"""Test helpers of the LlamaIndex integration (a unique module name: the repository runs
every test directory in one pytest session, so ``import conftest`` would be ambiguous)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from rag_position.models import SpanScore
from rag_position.passages import Passage

DOCS = [
    ("Paris", "Paris is the capital and largest city of France, on the river Seine."),
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("Everest", "Mount Everest is the highest mountain on Earth, in the Himalayas."),
    ("Python", "Python is a programming language created by Guido van Rossum."),
]


class ListRetriever(BaseRetriever):
    """Returns its nodes, the very list, for every query (as a vector store might), and
    records the queries."""

    def __init__(self, nodes: list[NodeWithScore]) -> None:
        self.nodes = nodes
        self.queries: list[str] = []
        self.bundles: list[QueryBundle] = []
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        self.bundles.append(query_bundle)
        return self.nodes


class GoldAtEdgesScorer:
    """A scripted Scorer: likelihood 1 with ``gold`` the first or last passage, else 0; -1
    without ``gold`` (one other passage alone). ConvexScore and passage likelihood pick it."""

    def __init__(self, texts: Sequence[str], gold: str) -> None:
        self.texts = list(texts)
        self.gold = gold

    def score_spans(self, prompts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[Any]:
        out = []
        for prompt in prompts:
            order = sorted((t for t in self.texts if t in prompt), key=prompt.index)
            v = -1.0
            if self.gold in order:
                v = 1.0 if order.index(self.gold) in (0, len(order) - 1) else 0.0
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


def node_ids(nodes: Sequence[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def node_texts(nodes: Sequence[NodeWithScore]) -> list[str]:
    return [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]


def passages(nodes: Sequence[NodeWithScore]) -> list[Passage]:
    """Built independently of the package, from what the nodes hold."""
    return [Passage(text=n.node.text, title=n.node.metadata["title"]) for n in nodes]


class EchoModel:
    """A scripted rag-position model (Generator and Scorer): ``replies`` in turn (then
    ``"ok"``); records each prompt and the options of each call in ``prompts``/``calls``."""

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
        options = {"max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
        self.prompts += prompts
        self.calls += [{**options, "stop": stop} for _ in prompts]
        return [self.replies.pop(0) if self.replies else "ok" for _ in prompts]

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
        rows = np.zeros((len(texts), len(self.vocabulary) + 1), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            for j, w in enumerate(self.vocabulary):
                rows[i, j] = words.count(w)
            rows[i, -1] = 0.01  # never a zero row
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)
