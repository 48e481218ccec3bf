"""The scoring prefix cache (rag_position.models.prefix_cache), issue 41: the LRU on fake
tensors; the rest (slow) on the embedded model, with ``select_and_place``'s prompts."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _backends_kit import close_scores

from rag_position.models import SpanScore, prefix_cache
from rag_position.models.prefix_cache import KV, PrefixCache, kv_nbytes
from rag_position.prompts import question_span, render_qa
from rag_position.strategies import select_and_place

slow = pytest.mark.slow


def _kv(tokens: int) -> KV:
    """A fake entry: 2 layers x (keys, values) of (1, 1, tokens, 8) float32 = 128 bytes a token."""
    return tuple((torch.zeros(1, 1, tokens, 8), torch.zeros(1, 1, tokens, 8)) for _ in range(2))


# ---------------------------------------------------------------------- the LRU alone
def test_the_bound_holds_and_the_least_recently_used_go_first() -> None:
    cache = PrefixCache(1 / 64)  # 16 KiB = 16,384 bytes
    assert cache.capacity_bytes == 16_384 and kv_nbytes(_kv(32)) == 4_096
    for i in range(4):
        assert cache.put(i, _kv(32))
    assert cache.get(0) is not None  # 0 is now the most recently used
    assert cache.put(4, _kv(32))  # evicts 1, the least recently used
    assert cache.get(1) is None and all(cache.get(i) is not None for i in (0, 2, 3, 4))
    for i in range(5, 200):
        cache.put(i, _kv(1 + i % 97))
        s = cache.stats()
        assert s.bytes_held <= s.capacity_bytes and s.max_bytes_held <= s.capacity_bytes
    s = cache.stats()
    assert s.evictions > 0 and s.bytes_held == sum(kv_nbytes(e) for e, _ in cache._entries.values())
    assert (s.hits, s.misses) == (5, 1) and s.hit_rate == pytest.approx(5 / 6)


def test_an_entry_over_the_bound_is_not_stored_and_a_replaced_one_counts_once() -> None:
    cache = PrefixCache(1 / 64)
    cache.put("a", _kv(10))
    assert not cache.put("big", _kv(300))  # 38,400 bytes > 16,384
    assert cache.get("big") is None and cache.stats().too_large == 1 and len(cache) == 1
    cache.put("a", _kv(20))
    assert cache.stats().bytes_held == kv_nbytes(_kv(20)) and len(cache) == 1
    cache.clear()
    assert cache.stats() == PrefixCache(1 / 64).stats() and cache.get("a") is None


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "512"])
def test_a_bound_must_be_a_positive_number(bad: Any) -> None:
    with pytest.raises(ValueError, match="prefix_cache_mb"):
        PrefixCache(bad)


# ---------------------------------------------------------------------- on the real model
@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The first three dev questions, ten passages each (built from the packaged rankings)."""
    from rag_position.eval.tasks.datasets import load_multidoc

    cache_dir = tmp_path_factory.mktemp("distractors")
    return load_multidoc(None, docs=10, questions=3, cache_dir=cache_dir).instances


def _cached(src: Any, mb: float = 256) -> Any:
    """A model with the cache on, sharing ``src``'s weights."""
    from rag_position.models.transformers_backend import TransformersModel

    return TransformersModel(src.model, src.tokenizer, name=src.name, prefix_cache_mb=mb)


def _one_passage(question: str, passages: list[Any]) -> tuple[list[str], list[Any]]:
    """``select_and_place``'s prompts: the QA prompt with one passage, the question's span."""
    prompts = [render_qa(question, [p]) for p in passages]
    return prompts, [question_span(p, question) for p in prompts]


@slow
def test_scores_equal_the_uncached_ones_and_a_hit_equals_its_miss(
    embedded_fp32: Any, dev: Any
) -> None:
    plain, model = embedded_fp32, _cached(embedded_fp32)
    question, passages = dev[0].question, dev[0].passages[:4]
    prompts, spans = _one_passage(question, passages)
    want = plain.score_spans(prompts, spans)
    first = model.score_spans(prompts, spans)
    s = model.prefix_cache.stats()
    assert (s.hits, s.misses, s.entries) == (0, 4, 5)  # four prefixes and their shared head
    close_scores(first, want, 1e-5)
    again = model.score_spans(prompts, spans)
    assert model.prefix_cache.stats().hits == 4
    assert again == first  # a hit computes exactly what its miss computed
    # one row a forward (no padding) gives the same scores as the batched suffixes
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prefix_cache, "SUFFIX_BATCH_TOKENS", 1)
        close_scores(model.score_spans(prompts, spans), first, 1e-5)
    # what a hit computed: the question's tokens, not the prefix
    before = model.usage.prompt_tokens
    model.score_spans(prompts[:1], spans[:1])
    assert 0 < model.usage.prompt_tokens - before < len(model.encode(prompts[0]).ids) // 4
    # another question on the same passages: each prefix a hit
    was = model.prefix_cache.stats()
    prompts, spans = _one_passage(dev[1].question, passages[:3])
    got = model.score_spans(prompts, spans)
    s = model.prefix_cache.stats()
    assert (s.hits - was.hits, s.misses - was.misses) == (3, 0)
    assert s.tokens_reused - was.tokens_reused > 3 * 100
    close_scores(got, plain.score_spans(prompts, spans), 1e-5)


@slow
def test_the_bound_holds_on_the_model(embedded_fp32: Any, dev: Any) -> None:
    plain = embedded_fp32
    model = _cached(plain, mb=16)  # one or two prefixes of 150 to 250 tokens (46 KB a token)
    prompts, spans = _one_passage(dev[2].question, dev[2].passages[:6])
    got = model.score_spans(prompts, spans)
    s = model.prefix_cache.stats()
    assert s.max_bytes_held <= s.capacity_bytes == 16 * 2**20
    assert s.evictions + s.too_large > 0 and s.entries <= 3
    close_scores(got, plain.score_spans(prompts, spans), 1e-5)
    tiny = _cached(plain, mb=1)  # no prefix fits: scored all the same, nothing stored
    assert tiny.score_spans(prompts[:2], spans[:2]) == got[:2]
    assert tiny.prefix_cache.stats().too_large == 3 and len(tiny.prefix_cache) == 0  # + the head


@slow
def test_the_misses_of_a_call_compute_their_shared_head_once(embedded_fp32: Any, dev: Any) -> None:
    prompts, spans = _one_passage(dev[1].question, dev[1].passages[:4])

    def used(model: Any) -> tuple[list[SpanScore], int]:
        before = model.usage.prompt_tokens
        return model.score_spans(prompts, spans), model.usage.prompt_tokens - before

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prefix_cache, "shared_head", lambda prefixes: [])
        alone, each_whole = used(_cached(embedded_fp32))
    model = _cached(embedded_fp32)
    shared, once = used(model)
    # the head (chat template and instruction, 56 tokens) computed once, kept as an entry
    assert once == each_whole - 3 * 56 and model.prefix_cache.stats().entries == 4 + 1
    close_scores(shared, alone, 1e-5)
    again, reused = used(_cached(embedded_fp32))  # a new cache: a new head, the same scores
    assert reused == once and again == shared


@slow
def test_a_cache_never_serves_another_model_or_dtype(
    embedded_fp32: Any, embedded_bf16: Any, dev: Any
) -> None:
    fp32, bf16 = _cached(embedded_fp32), _cached(embedded_bf16)
    bf16.prefix_cache = fp32.prefix_cache  # one cache object, even: keys tell them apart
    twin = _cached(embedded_fp32)  # same weights and name, another instance
    twin.prefix_cache = fp32.prefix_cache
    prompts, spans = _one_passage(dev[0].question, dev[0].passages[:2])
    fp32.score_spans(prompts, spans)
    got = bf16.score_spans(prompts, spans)
    twin.score_spans(prompts, spans)
    s = fp32.prefix_cache.stats()
    assert (s.hits, s.misses, s.entries) == (0, 6, 9)  # three models x (two prefixes, a head)
    dtypes = {e[0][0][0].dtype for e in fp32.prefix_cache._entries.values()}
    assert dtypes == {torch.float32, torch.bfloat16}
    # bfloat16 with the cache against bfloat16 without: rounding of bfloat16 (measured
    # by benchmarks/reuse.py over many prompts)
    worst = close_scores(got, embedded_bf16.score_spans(prompts, spans), 0.1)
    print(f"bfloat16: largest difference of means {worst:.2e}")


@slow
def test_load_model_passes_the_bound_on_and_off_touches_no_cache(
    embedded_fp32: Any, dev: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_position.models import load_model
    from rag_position.models import transformers_backend as backend

    model = load_model("embedded", dtype="bfloat16", prefix_cache_mb=8)
    assert model.prefix_cache.capacity_bytes == 8 * 2**20
    assert load_model("embedded", dtype="bfloat16").prefix_cache is None

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the cache was touched while off")

    monkeypatch.setattr(backend, "PrefixCache", refuse)
    monkeypatch.setattr(backend, "cached_target_logprobs", refuse)
    off = _cached(embedded_fp32, mb=0)
    assert off.prefix_cache is None
    prompts, spans = _one_passage(dev[0].question, dev[0].passages[:2])
    assert off.score_spans(prompts, spans) == embedded_fp32.score_spans(prompts, spans)


@slow
def test_a_model_without_plain_attention_layers_is_scored_uncached(
    embedded_fp32: Any, dev: Any
) -> None:
    from transformers.cache_utils import DynamicSlidingWindowLayer

    from rag_position.models.transformers_backend import cache_name

    model = _cached(embedded_fp32)
    decoder = model.decoder

    def hybrid(**kwargs: Any) -> Any:  # a cache that does not come out as plain layers
        out = decoder(**kwargs)
        cache = getattr(out, cache_name(), None)
        if cache is not None:
            cache.layers[0] = DynamicSlidingWindowLayer(sliding_window=4)
        return out

    model.decoder = hybrid
    prompts, spans = _one_passage(dev[1].question, dev[1].passages[:2])
    got = model.score_spans(prompts, spans)
    assert model.prefix_cache.unsupported and len(model.prefix_cache) == 0
    assert got == embedded_fp32.score_spans(prompts, spans)
    model.score_spans(prompts, spans)  # from now on not even looked up
    assert model.prefix_cache.stats().misses == 1


@slow
def test_sliding_window_layers_past_the_window(dev: Any) -> None:
    """Gemma 3 (sliding windows of 512 tokens) keeps plain layers, the window applied by
    the mask: a ten-passage prompt of about 900 tokens scores as uncached."""
    from rag_position.models import load_model

    gemma = load_model("embedded:gemma3-270m", dtype="float32")
    model = _cached(gemma)
    question = dev[0].question
    prompts = [render_qa(question, dev[0].passages), render_qa(question, dev[0].passages[:1])]
    spans = [question_span(p, question) for p in prompts]
    assert len(gemma.encode(prompts[0]).ids) > 800
    close_scores(model.score_spans(prompts, spans), gemma.score_spans(prompts, spans), 1e-5)
    assert model.prefix_cache.unsupported is None and len(model.prefix_cache) == 2 + 1  # + head


@slow
def test_select_and_place_keeps_the_same_passages_in_the_same_order(
    embedded_fp32: Any, dev: Any
) -> None:
    model = _cached(embedded_fp32)
    for instance in dev:
        want = select_and_place(instance.question, instance.passages, embedded_fp32)
        for _ in range(2):  # cold, then every prefix a hit
            got = select_and_place(instance.question, instance.passages, model)
            assert got.order == want.order
            assert got.details["dropped"] == want.details["dropped"]
            assert got.details["ranked"] == want.details["ranked"]
            assert got.scores == pytest.approx(want.scores, abs=1e-5)
    s = model.prefix_cache.stats()
    assert s.misses == len({(p.title, p.text) for i in dev for p in i.passages})
    assert s.hits == 3 * 10 - s.misses + 3 * 10  # repeats in the cold pass, then all


@slow
def test_a_framework_component_turns_it_on_from_a_spec_string() -> None:
    """``scorer_kwargs`` reach ``load_model``: a LangChain ``SelectAndPlace`` given
    ``scorer="embedded"`` scores a passage it has seen from the cache."""
    pytest.importorskip("langchain_rag_position")
    from langchain_core.documents import Document
    from langchain_rag_position import SelectAndPlace

    select = SelectAndPlace(scorer="embedded", scorer_kwargs={"prefix_cache_mb": 64})
    docs = [Document(page_content=t) for t in ("Paris is in France.", "Rome is in Italy.")]
    select.compress_documents(docs, "What is the capital of France?")
    select.compress_documents(docs, "Which city is in Italy?")
    stats = select.core_scorer.prefix_cache.stats()
    assert (stats.misses, stats.hits) == (2, 2), stats
