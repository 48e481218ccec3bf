"""Attention sorting (Peysakhovich and Lerer, 2023), run by its published recipe, as a peer.

"Attention Sorting Combats Recency Bias In Long Context Language Models": decode one
step with the passages in the retriever's order, sort them by the attention they
receive (the most attended last, next to the question), repeat, then answer from the
sorted context. Here the attention a passage receives is what the last prompt token
(the one that predicts the first answer token) pays to the passage's tokens, summed
over them and averaged over every head and layer. :data:`ITERATIONS` sorts; each is
one forward pass over the full prompt, charged as one LM call with its prompt tokens.

Attention weights are read from the model's own attention modules, so the row needs a
local transformers model (``embedded``, ``hf:...``); a server does not return them,
and the row stops with :class:`~rag_position.eval.engine.common.EvalConfigError`. The model
runs with eager attention for these passes only (the fused kernels do not expose the
weights) for the last token only: the prompt before it runs with the model's own kernel
into a cache, then the one decoding step reads the weights; the model then goes back
to its own implementation for every answer.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from rag_position.cost import Cost
from rag_position.data import QAInstance
from rag_position.eval.engine.common import EvalConfigError, Prepared, gold_info
from rag_position.prompts import DOCUMENT_TEMPLATE, render_qa
from rag_position.strategies._base import to_passages

ATTENTION_ROWS = ("attention_sort",)
ITERATIONS = 2
"""Sorts before answering (the paper's Figure 4 shows most of the gain from the first)."""

_LOCK = threading.Lock()


def attention_model_problem(model: Any) -> str | None:
    """Why ``model`` cannot run attention sorting, or ``None`` when it can."""
    inner, tokenizer = getattr(model, "model", None), getattr(model, "tokenizer", None)
    decoder = getattr(inner, "get_decoder", None)
    layers = getattr(decoder(), "layers", None) if callable(decoder) else None
    if tokenizer is None or not hasattr(model, "encode") or layers is None:
        label = getattr(model, "name", type(model).__name__)
        return (
            "attention_sort reads the attention each passage receives, which only a local "
            f"transformers model (embedded, hf:...) exposes; got {label!r}"
        )
    return None


@dataclass(frozen=True)
class AttentionSort:
    """Attention sorting by its recipe: ``iterations`` sorts, then the answer prompt.

    Example::

        prepared = AttentionSort().prepare(instance, load_model("embedded"), seed=0)
        prepared.info["gold_at"], prepared.cost.lm_calls     # where the gold went; 2 passes
    """

    name: str = "attention_sort"
    iterations: int = ITERATIONS

    def prepare(self, instance: QAInstance, model: Any, *, seed: int) -> Prepared:
        problem = attention_model_problem(model)
        if problem:
            raise EvalConfigError(problem)
        passages = list(instance.passages)
        order = list(range(len(passages)))
        cost = Cost()
        for _ in range(self.iterations if len(passages) > 1 else 0):
            received, spent = attention_received(
                model, instance.question, [passages[i] for i in order]
            )
            cost = cost + spent
            # ascending: the most attended passage goes last (ties keep their order)
            ranked = sorted(range(len(order)), key=lambda j: (received[j], j))
            order = [order[j] for j in ranked]
        chosen = [passages[i] for i in order]
        info = gold_info(instance.gold, chosen)
        return Prepared(prompt=render_qa(instance.question, chosen), cost=cost, info=info)


def attention_received(model: Any, question: str, passages: list[Any]) -> tuple[list[float], Cost]:
    """The attention each passage receives from the prompt's last token, and its cost.

    One forward pass over the QA prompt of ``passages`` (as given; its last token with
    eager attention); per layer and head, the last position's attention weights summed over each
    passage's tokens; then the mean over heads and layers.
    """
    import torch

    prompt = render_qa(question, passages)
    spans = _document_spans(prompt, passages)
    enc = model.encode(prompt)
    model.check_length(len(enc.ids))
    owner = [-1] * len(enc.ids)
    for d, (lo, hi) in enumerate(spans):
        lo, hi = lo + enc.prompt_start, hi + enc.prompt_start
        for t, (a, b) in enumerate(enc.offsets):
            if a < hi and b > lo and owner[t] < 0:
                owner[t] = d
    index = torch.tensor([max(o, 0) for o in owner])
    valid = torch.tensor([o >= 0 for o in owner], dtype=torch.float32)
    totals: list[torch.Tensor] = []
    inner = model.model
    layers = inner.get_decoder().layers

    def hook(module: Any, args: Any, output: Any) -> None:
        weights = output[1]  # (batch, heads, queries, keys)
        last = weights[0, :, -1, :].float().mean(dim=0) * valid
        totals.append(torch.zeros(len(passages)).index_add_(0, index, last))

    ids = torch.tensor([enc.ids], device=inner.device)
    from rag_position.models.transformers_backend import cache_name

    name = cache_name()
    start = time.perf_counter()
    with _LOCK:  # the attention implementation is the model's, for every thread
        previous = inner.config._attn_implementation
        handles: list[Any] = []
        try:
            with torch.inference_mode():
                # the prompt less its last token with the model's own kernel, then that
                # token (the one decoding step) with eager attention, which gives weights
                out = inner(input_ids=ids[:, :-1], use_cache=True)
                cache = {name: getattr(out, name)}
                inner.set_attn_implementation("eager")
                handles = [layer.self_attn.register_forward_hook(hook) for layer in layers]
                inner(input_ids=ids[:, -1:], use_cache=True, **cache)
        finally:
            for handle in handles:
                handle.remove()
            inner.set_attn_implementation(previous)
    seconds = time.perf_counter() - start
    if len(totals) != len(layers):
        raise RuntimeError(f"read attention from {len(totals)} of {len(layers)} layers")
    received = torch.stack(totals).mean(dim=0)
    return [float(x) for x in received], Cost(
        lm_calls=1, prompt_tokens=len(enc.ids), seconds=seconds
    )


def _document_spans(prompt: str, passages: list[Any]) -> list[tuple[int, int]]:
    """Each passage's character span in ``prompt`` (its ``Document [i](Title: ...)`` line)."""
    spans = []
    at = 0
    for i, p in enumerate(to_passages(passages)):
        line = DOCUMENT_TEMPLATE.format(index=i + 1, title=p.title, text=p.text)
        lo = prompt.find(line, at)
        if lo < 0:
            raise RuntimeError(f"document {i + 1} not found in the prompt")
        spans.append((lo, lo + len(line)))
        at = lo + len(line)
    return spans


def attention_strategies() -> dict[str, AttentionSort]:
    """The attention-sorting row (it needs ``torch``, as every local model does).

    Example:
        >>> sorted(attention_strategies())
        ['attention_sort']
    """
    return {"attention_sort": AttentionSort()}


__all__ = [
    "ATTENTION_ROWS",
    "ITERATIONS",
    "AttentionSort",
    "attention_model_problem",
    "attention_received",
    "attention_strategies",
]
