"""What users pick instead of our selection, run by name through the frameworks' own classes.

Three rows for ``compare``, each keeping what its framework returns and nothing else:

``embeddings_filter``
    LangChain's ``EmbeddingsFilter`` (``langchain_classic.retrievers.document_compressors``
    in LangChain 1.x, ``langchain.retrievers.document_compressors`` before) inside a
    ``ContextualCompressionRetriever``, with the packaged all-MiniLM-L6-v2 as LangChain
    ``Embeddings`` (``langchain_rag_position.RagPositionEmbeddings()``): the one passage
    most similar to the question (``k=1, similarity_threshold=None``).
``embeddings_filter_threshold``
    The same filter built with ``k=None, similarity_threshold=``
    :data:`EMBEDDINGS_FILTER_THRESHOLD`: it keeps the passages whose cosine similarity to
    the question is above the threshold. In this LangChain (langchain-classic 1.0,
    langchain-core 1.x) the ``k=None`` does not hold: the class's ``pre_init`` validator
    fills every field given as ``None`` with its default, so ``k`` is 20 and the filter
    returns at most 20 passages, most similar first (not in the retriever's order); at
    ``--docs 10`` and ``20`` the cap never binds. This row keeps what the class does with
    what a user writes. When no passage passes, the
    prompt holds no passage (the QA template with empty search results): the failure
    users hit (langchain issue #7168), counted as ``info["kept"] == 0`` and
    ``info["none_kept"] == 1``, not replaced by anything.
``llm_rerank``
    LlamaIndex's ``LLMRerank`` (``llama_index.core.postprocessor``), ``top_n=1``, all the
    passages in one choice batch (``choice_batch_size`` = the number of passages; its
    default, 10, is the same at ``--docs 10``), its default prompt, with the run's scorer
    (the same small model our selection scores with) as a LlamaIndex LLM
    (``llama_index.postprocessor.rag_position.RagPositionLLM``, greedy, its default 256 new
    tokens).

The base retriever is a small ``BaseRetriever`` that returns the instance's passages as
documents in the retriever's order (``metadata["index"]`` giving each one's place), so
the kept documents map back to the instance's passages; a document's ``page_content``
is what the eval's retriever embedded (``"{title}\\n{text}"``,
:data:`rag_position.passages.EMBEDDING_TEXT`). A LlamaIndex node holds the passage's
text with its title as metadata (which ``LLMRerank``'s prompt shows as ``title: ...``).
The kept passages go into the answer prompt in the order the framework returns them.

What ``LLMRerank`` does with an answer it cannot read (llama-index-core 0.14): it parses
each line of the answer with ``default_parse_choice_select_answer_fn`` (``raise_error``
off), which skips any line that is not ``X: <int>, Y: <number>`` and any number above
the batch size; a line whose number parsed but whose relevance did not still counts
(its relevance is then misaligned or defaults to 1.0). So an unreadable answer raises
nothing: ``LLMRerank`` returns no node. A number below 1 (``Doc: 0``) is not checked:
``nodes[number - 1]`` then picks from the end of the batch (``Doc: 0`` is the last
passage), or raises ``IndexError`` when it is far enough below. This row records, in
``info``: ``format_failure`` (1 when no line of the answer parsed into a passage, or
``LLMRerank`` raised on the answer; the prompt then holds no passage, as the user's
pipeline would have none), ``invalid_choice`` (1 when a parsed number was below 1, so
the passage kept, if any, is not the one the model named), ``parsed`` (how many lines
parsed) and ``kept``. An error of the model call itself is raised, not counted.

Observed with the embedded SmolLM2-135M-Instruct (float32, chat template on, as
``load_model("embedded")`` gives it) as the scorer, on dev questions 260..269 (10
passages, the gold at compare's seeded random position): none of its 10 answers held a
``Doc: N, Relevance: M`` line (format failure 10 of 10, so no passage kept and no gold
kept). It answered the question in prose ("The name of the son of Lord Krishna is
Krishna."), summarised a document, or went on with the list ("Document 11:\ntitle:
..."), often until the 256 new tokens ran out (7 to 150 s a question on a loaded 2-core
CPU). On the same questions both ``embeddings_filter`` rows kept the gold 10 of 10 times
(the threshold row 1.3 passages on average): the distractors of the packaged dev file
are mined from its own 2,000 gold passages, so few are close to the question.

The threshold is chosen on dev questions the reported figures never use: those use the
first 200 of the packaged dev file, ``tune`` the next 60 (200..259); the threshold is
chosen on questions 260..459 (:data:`THRESHOLD_QUESTIONS`) by :func:`choose_threshold`,
as the grid value (0.00, 0.01, ..., 1.00) that maximises Youden's J, the rate of gold
passages kept minus the rate of distractors kept (the lowest such value on a tie).
``python -m rag_position.eval.rows.threshold --out results/threshold/similarities.json``
recomputes it (a minute on a CPU) with the similarities it is chosen from, on which
``tests/test_eval_peers.py`` checks the constant (and a sample against the embedder).
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rag_position.cost import Cost, metered
from rag_position.data import QAInstance
from rag_position.eval.engine.common import Prepared, gold_info
from rag_position.eval.engine.pair import charge_scorer, scoring_model
from rag_position.passages import Passage, embedding_text
from rag_position.prompts import QA_TEMPLATE, fill_template, render_qa

PEER_ROWS = ("embeddings_filter", "embeddings_filter_threshold", "llm_rerank")
"""The rows of this module, in ``compare``'s order."""

EMBEDDINGS_FILTER_THRESHOLD = 0.46
"""``embeddings_filter_threshold``'s ``similarity_threshold``: :func:`choose_threshold`'s
result on :data:`THRESHOLD_QUESTIONS` (recomputed by :func:`main`)."""


RERANK_MAX_NEW_TOKENS = 256
"""New tokens for ``LLMRerank``'s answer: ``RagPositionLLM``'s default."""

_LOCK = threading.Lock()
_EMBEDDINGS: list[Any] = []  # the one RagPositionEmbeddings of this process, once made
_RERANK_LLMS: OrderedDict[tuple[int, int], Any] = OrderedDict()
_CLASSES: dict[str, Any] = {}


# ---------------------------------------------------------------------------- installed?
def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing or half installed
        return False


def _langchain_home() -> str | None:
    """The package holding ``EmbeddingsFilter`` and ``ContextualCompressionRetriever``:
    ``langchain_classic`` (LangChain 1.x) or ``langchain`` (before 1.0)."""
    for home in ("langchain_classic", "langchain"):
        if _has(f"{home}.retrievers"):  # imports the top package only (langchain 1.x has none)
            return home
    return None


def embeddings_filter_installed() -> bool:
    """Whether LangChain's ``EmbeddingsFilter`` and our LangChain embeddings can be imported."""
    return (
        _has("langchain_core")
        and _has("langchain_community")
        and _has("langchain_rag_position")
        and _langchain_home() is not None
    )


def llm_rerank_installed() -> bool:
    """Whether LlamaIndex's ``LLMRerank`` and our LlamaIndex LLM can be imported."""
    return _has("llama_index.core") and _has("llama_index.postprocessor.rag_position")


# ---------------------------------------------------------------------------- shared objects
def filter_embeddings() -> Any:
    """The process's ``RagPositionEmbeddings()`` (all-MiniLM-L6-v2, loaded on first use)."""
    with _LOCK:
        if not _EMBEDDINGS:
            from langchain_rag_position import RagPositionEmbeddings

            _EMBEDDINGS.append(RagPositionEmbeddings())
        return _EMBEDDINGS[0]


def langchain_classes() -> tuple[Any, Any, Any]:
    """``(EmbeddingsFilter, ContextualCompressionRetriever, PassageRetriever)``."""
    with _LOCK:
        if "filter" not in _CLASSES:
            import importlib

            from langchain_core.callbacks import CallbackManagerForRetrieverRun
            from langchain_core.documents import Document
            from langchain_core.retrievers import BaseRetriever

            home = _langchain_home() or "langchain_classic"
            compressors = importlib.import_module(
                f"{home}.retrievers.document_compressors.embeddings_filter"
            )
            compression = importlib.import_module(f"{home}.retrievers.contextual_compression")

            class PassageRetriever(BaseRetriever):
                """The instance's passages, as the retriever ordered them, whatever the query."""

                documents: list[Document]

                def _get_relevant_documents(
                    self, query: str, *, run_manager: CallbackManagerForRetrieverRun
                ) -> list[Document]:
                    return list(self.documents)

            _CLASSES["filter"] = compressors.EmbeddingsFilter
            _CLASSES["compression"] = compression.ContextualCompressionRetriever
            _CLASSES["retriever"] = PassageRetriever
        return _CLASSES["filter"], _CLASSES["compression"], _CLASSES["retriever"]


def as_documents(passages: Sequence[Passage]) -> list[Any]:
    from langchain_core.documents import Document

    return [
        Document(page_content=embedding_text(p), metadata={"index": i, "title": p.title})
        for i, p in enumerate(passages)
    ]


def rerank_llm(scorer: Any, max_new_tokens: int = RERANK_MAX_NEW_TOKENS) -> Any:
    """``RagPositionLLM`` around ``scorer``, greedy, made once per scorer and length (the
    last few are kept: a run has one scorer; the LLM holds its scorer, so a weak cache
    would keep every one alive)."""
    key = (id(scorer), max_new_tokens)
    with _LOCK:
        found = _RERANK_LLMS.get(key)
        if found is None or found.core_model is not scorer:
            from llama_index.postprocessor.rag_position import RagPositionLLM

            found = RagPositionLLM(scorer, max_new_tokens=max_new_tokens, temperature=0.0)
            _RERANK_LLMS[key] = found
            while len(_RERANK_LLMS) > 4:
                _RERANK_LLMS.popitem(last=False)
        return found


def _prompt(question: str, passages: Sequence[Passage]) -> str:
    """The answer prompt; with no passage, the QA template with empty search results
    (what a pipeline that stuffs the kept documents sends)."""
    if passages:
        return render_qa(question, list(passages))
    return fill_template(QA_TEMPLATE, question=question, search_results="")


# ---------------------------------------------------------------------------- the rows
@dataclass(frozen=True)
class EmbeddingsFilterStrategy:
    """LangChain's ``EmbeddingsFilter`` in a ``ContextualCompressionRetriever``, by name.

    ``k``: keep the ``k`` most similar passages (most similar first); ``threshold``: keep
    those whose cosine similarity to the question is above it (``k=None`` becomes the
    class's default 20 in this LangChain: see the module's notes). ``info``: ``kept``,
    ``gold_kept``, ``gold_at``, ``none_kept`` (1 when nothing passed), ``embed_seconds``
    (the filter's time, the row's whole cost: no LM call; charged to the scorer's side of
    a ``--scorer`` split, as selection).

    Example::

        row = peer_strategies()["embeddings_filter"]
        prepared = row.prepare(instance, load_model("embedded"), seed=0)
        prepared.info["kept"], prepared.info["gold_kept"]          # 1, 1.0 or 0.0
    """

    name: str
    k: int | None
    threshold: float | None

    def __post_init__(self) -> None:
        if self.k is None and self.threshold is None:
            raise ValueError("EmbeddingsFilter needs `k` or `threshold`")

    def prepare(self, instance: QAInstance, model: Any, *, seed: int) -> Prepared:
        passages = list(instance.passages)
        kept, seconds = self.filter(instance.question, passages)
        chosen = [passages[i] for i in kept]
        cost = Cost(seconds=seconds)
        charge_scorer(cost)
        info = {
            **gold_info(instance.gold, chosen, selects=True),
            "none_kept": 0 if chosen else 1,
            "embed_seconds": seconds,
        }
        return Prepared(prompt=_prompt(instance.question, chosen), cost=cost, info=info)

    def filter(self, question: str, passages: Sequence[Passage]) -> tuple[list[int], float]:
        """The indices of the passages the compression retriever returns, in its order, and
        the seconds it took."""
        embeddings_filter, compression, retriever = langchain_classes()
        embeddings = filter_embeddings()
        pipeline = compression(
            base_compressor=embeddings_filter(
                embeddings=embeddings, k=self.k, similarity_threshold=self.threshold
            ),
            base_retriever=retriever(documents=as_documents(passages)),
        )
        start = time.perf_counter()
        docs = pipeline.invoke(question)
        seconds = time.perf_counter() - start
        return [int(d.metadata["index"]) for d in docs], seconds


@dataclass(frozen=True)
class LLMRerankStrategy:
    """LlamaIndex's ``LLMRerank`` (``top_n=1``) with the run's scorer as its LLM, by name.

    Example::

        row = peer_strategies()["llm_rerank"]
        prepared = row.prepare(instance, load_model("embedded"), seed=0)
        prepared.info["format_failure"], prepared.info["kept"], prepared.cost.lm_calls
    """

    name: str = "llm_rerank"
    top_n: int = 1
    max_new_tokens: int = RERANK_MAX_NEW_TOKENS

    def prepare(self, instance: QAInstance, model: Any, *, seed: int) -> Prepared:
        passages = list(instance.passages)
        with metered() as tally:
            start = time.perf_counter()
            outcome = self.rerank(instance.question, passages, scoring_model(model))
            seconds = time.perf_counter() - start
        cost = tally.total
        if tally.records == 0:  # a scorer that reports nothing: count what was sent
            cost = Cost(lm_calls=outcome.answers, seconds=seconds)
        charge_scorer(cost)
        chosen = [passages[i] for i in outcome.kept]
        info = {
            **gold_info(instance.gold, chosen, selects=True),
            "format_failure": outcome.format_failure,
            "invalid_choice": outcome.invalid_choice,
            "parsed": outcome.parsed,
        }
        return Prepared(prompt=_prompt(instance.question, chosen), cost=cost, info=info)

    def rerank(self, question: str, passages: Sequence[Passage], scorer: Any) -> RerankOutcome:
        """What ``LLMRerank`` keeps of ``passages`` for ``question``, and how it read the answer."""
        from llama_index.core.indices.utils import default_parse_choice_select_answer_fn
        from llama_index.core.postprocessor import LLMRerank
        from llama_index.core.schema import NodeWithScore, TextNode

        k = len(passages)
        nodes = [
            NodeWithScore(
                node=TextNode(
                    text=p.text,
                    id_=str(i),
                    metadata={"title": p.title} if p.title else {},
                ),
                score=float(k - i),  # the retriever's order (LLMRerank does not read it)
            )
            for i, p in enumerate(passages)
        ]
        answers: list[tuple[str, list[int]]] = []

        def parse(answer: str, num_choices: int) -> tuple[list[int], list[float]]:
            # LLMRerank's own parser, unchanged; only watched
            numbers, relevances = default_parse_choice_select_answer_fn(answer, num_choices)
            answers.append((answer, list(numbers)))
            return numbers, relevances

        reranker = LLMRerank(
            llm=rerank_llm(scorer, self.max_new_tokens),
            top_n=self.top_n,
            choice_batch_size=max(k, 1),
            parse_choice_select_answer_fn=parse,
        )
        try:
            out = reranker.postprocess_nodes(nodes, query_str=question)
        except Exception:
            if not answers:  # the model call failed, not the answer: the run's error
                raise
            out, raised = [], True
        else:
            raised = False
        numbers = [n for _, parsed in answers for n in parsed]
        kept = [int(n.node.node_id) for n in out]
        return RerankOutcome(
            kept=kept,
            answers=len(answers),
            parsed=len(numbers),
            format_failure=1 if raised or not numbers else 0,
            invalid_choice=1 if any(n < 1 for n in numbers) else 0,
        )


@dataclass(frozen=True)
class RerankOutcome:
    """How one ``LLMRerank`` call went: the passages kept (in its order), the number of
    answers (batches), of parsed lines, whether it failed on the format, whether a parsed
    number was below 1."""

    kept: list[int]
    answers: int
    parsed: int
    format_failure: int
    invalid_choice: int


def peer_strategies() -> dict[str, Any]:
    """The rows whose frameworks are installed here (none when missing).

    Example:
        >>> set(peer_strategies()) <= set(PEER_ROWS)
        True
    """
    found: dict[str, Any] = {}
    if embeddings_filter_installed():
        found["embeddings_filter"] = EmbeddingsFilterStrategy("embeddings_filter", 1, None)
        found["embeddings_filter_threshold"] = EmbeddingsFilterStrategy(
            "embeddings_filter_threshold", None, EMBEDDINGS_FILTER_THRESHOLD
        )
    if llm_rerank_installed():
        found["llm_rerank"] = LLMRerankStrategy()
    return found


__all__ = [
    "EMBEDDINGS_FILTER_THRESHOLD",
    "PEER_ROWS",
    "EmbeddingsFilterStrategy",
    "LLMRerankStrategy",
    "RerankOutcome",
    "embeddings_filter_installed",
    "llm_rerank_installed",
    "peer_strategies",
]
