"""LongLLMLingua's coarse ranking, run by name from the ``llmlingua`` package, as a baseline.

The ranking a RAG builder would reach for instead of ours: LongLLMLingua (Jiang et
al., ACL 2024) ranks documents by the question's perplexity conditioned on each
document alone (``PromptCompressor.get_rank_results(..., rank_method="longllmlingua",
condition_in_question="after")``, the question followed by its sentence "We can get
the answer to this question in the given documents."). LangChain's
``LLMLinguaCompressor`` and LlamaIndex's ``LongLLMLinguaPostprocessor`` call the same
method. Here it runs on the compare's own model (the loaded weights are handed to
the package, not a second copy), and its top document is placed first
(``longllmlingua``, LongLLMLingua's own reordering) or last (``longllmlingua_last``,
where this model reads best; the placement ``passage_likelihood:placement=last``
uses), the rest keeping the retriever's order, so the rows differ from ours only in
the ranking. ``longllmlingua_top1`` is its coarse compression at one document: the
top-ranked document alone, the answer prompt's budget of ``select_and_place:top_n=1``.

Installed with the ``[baselines]`` extra (``llmlingua==0.2.2``). The rows need a
local transformers model (``embedded``, ``hf:...``): the package scores with the
model's own forward pass. The package builds a tiktoken encoder at start-up for
OpenAI token counts, which downloads its encoding; ranking never uses it, so the
compressor is assembled around the loaded model without that step.
"""

from __future__ import annotations

import importlib.util
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from rag_position.cost import Cost
from rag_position.data import QAInstance
from rag_position.eval.engine.common import EvalConfigError, Prepared, gold_info
from rag_position.eval.engine.pair import scoring_model
from rag_position.prompts import DOCUMENT_TEMPLATE, render_qa
from rag_position.strategies._base import to_passages
from rag_position.strategies.profiles import place

LINGUA_ROWS = ("longllmlingua", "longllmlingua_last", "longllmlingua_top1")
QUESTION_SUFFIX = " We can get the answer to this question in the given documents."
"""What ``get_rank_results`` appends to the question before scoring (llmlingua 0.2.2)."""

_COMPRESSORS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_RANKINGS: OrderedDict[tuple[Any, ...], tuple[list[int], Cost]] = OrderedDict()
_LOCK = threading.Lock()


def lingua_installed() -> bool:
    """Whether the ``llmlingua`` package can be imported here."""
    return importlib.util.find_spec("llmlingua") is not None


def lingua_model_problem(model: Any) -> str | None:
    """Why ``model`` cannot run the LongLLMLingua rows, or ``None`` when it can."""
    inner, tokenizer = getattr(model, "model", None), getattr(model, "tokenizer", None)
    if inner is None or tokenizer is None or not hasattr(inner, "config"):
        label = getattr(model, "name", type(model).__name__)
        return (
            f"longllmlingua ranks with llmlingua's PromptCompressor, which runs the model's "
            f"own forward pass: it needs a local transformers model (embedded, hf:...), "
            f"got {label!r}"
        )
    return None


@dataclass(frozen=True)
class LinguaStrategy:
    """LongLLMLingua's ranking by name; its top document ``placement`` first or last.

    ``keep``: LongLLMLingua's coarse compression, document level only: the ``keep``
    top-ranked documents, the rest dropped (the answer prompt's budget in documents),
    the top one at ``placement`` and the others by rank away from it.

    Example::

        row = LinguaStrategy("longllmlingua_last", "last")
        prepared = row.prepare(instance, load_model("embedded"), seed=0)
        prepared.info["gold_at"], prepared.info["ranking"], prepared.cost.lm_calls
    """

    name: str
    placement: Literal["first", "last"]
    keep: int | None = None

    def prepare(self, instance: QAInstance, model: Any, *, seed: int) -> Prepared:
        model = scoring_model(model)  # a separate scorer ranks, as in a user's pipeline
        problem = lingua_model_problem(model)
        if problem:
            raise EvalConfigError(problem)
        passages = list(instance.passages)
        docs = [
            DOCUMENT_TEMPLATE.format(index=i + 1, title=p.title, text=p.text)
            for i, p in enumerate(to_passages(passages))
        ]
        ranking, cost = _rank(model, docs, instance.question)
        if self.keep is not None:
            kept = ranking[: self.keep]
            order = kept if self.placement == "first" else kept[::-1]
        elif len(docs) > 1:
            order = place(ranking, self.placement, "keep", None)
        else:
            order = ranking
        chosen = [passages[i] for i in order]
        info = {
            "ranking": ranking,
            **gold_info(instance.gold, chosen, selects=self.keep is not None),
        }
        prompt = render_qa(instance.question, chosen)
        return Prepared(prompt=prompt, cost=cost, info=info, scorer_cost=cost)


def lingua_strategies() -> dict[str, LinguaStrategy]:
    """The LongLLMLingua rows, where ``llmlingua`` is installed.

    Example:
        >>> sorted(lingua_strategies()) in ([], list(LINGUA_ROWS))
        True
    """
    if not lingua_installed():
        return {}
    return {
        "longllmlingua": LinguaStrategy("longllmlingua", "first"),
        "longllmlingua_last": LinguaStrategy("longllmlingua_last", "last"),
        "longllmlingua_top1": LinguaStrategy("longllmlingua_top1", "last", keep=1),
    }


def _rank(model: Any, docs: list[str], question: str) -> tuple[list[int], Cost]:
    """llmlingua's ranking of ``docs`` and what computing it cost.

    The rows of one instance rank the same documents: the last few rankings are
    kept, and a repeat is charged what the original cost (each row reports its own
    cost, as :class:`~rag_position.eval.rows.scoring.SharedScoring` does).
    """
    key = (id(model.model), question, tuple(docs))
    with _LOCK:
        hit = _RANKINGS.get(key)
    if hit is not None:
        return list(hit[0]), hit[1]
    compressor = _compressor(model)
    start = time.perf_counter()
    with _LOCK:  # one forward pass at a time on the shared weights
        ranked = compressor.get_rank_results(
            docs, question, "longllmlingua", "after", [0] * len(docs)
        )
    seconds = time.perf_counter() - start
    ranking = [int(i) for i, _ in ranked]
    if sorted(ranking) != list(range(len(docs))):
        raise RuntimeError(f"llmlingua returned {ranking!r}, not a ranking of {len(docs)}")
    query = question + QUESTION_SUFFIX
    cost = Cost(
        lm_calls=len(docs),
        prompt_tokens=sum(model.count_tokens(d + query) for d in docs),
        seconds=seconds,
    )
    with _LOCK:
        _RANKINGS[key] = (ranking, cost)
        while len(_RANKINGS) > 8:
            _RANKINGS.popitem(last=False)
    return list(ranking), cost


def _compressor(model: Any) -> Any:
    """llmlingua's ``PromptCompressor`` around ``model``'s loaded weights (one per model).

    What ``PromptCompressor.__init__`` sets for ranking, less its tiktoken encoder
    (downloaded at start-up, used only for OpenAI token counts) and its
    ``load_model`` (which would load a second copy and set the shared tokenizer's
    padding side).
    """
    with _LOCK:
        found = _COMPRESSORS.get(model)
        if found is not None:
            return found
        from llmlingua import PromptCompressor

        compressor = PromptCompressor.__new__(PromptCompressor)
        inner = model.model
        compressor.model_name = getattr(model, "name", "model")
        compressor.use_llmlingua2 = False
        compressor.retrieval_model = None
        compressor.retrieval_model_name = None
        compressor.open_api_config = {}
        compressor.cache_bos_num = 10
        compressor.prefix_bos_num = 100
        compressor.oai_tokenizer = None
        compressor.tokenizer = model.tokenizer
        compressor.model = inner
        compressor.device = str(inner.device)
        compressor.context_idxs = []
        compressor.max_position_embeddings = inner.config.max_position_embeddings
        _COMPRESSORS[model] = compressor
        return compressor


__all__ = [
    "LINGUA_ROWS",
    "LinguaStrategy",
    "lingua_installed",
    "lingua_model_problem",
    "lingua_strategies",
]
