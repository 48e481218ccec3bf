"""A tiny random-weight model behind the embedded model's tokenizer: scores and
generations in milliseconds, where a test or benchmark is about the client around the
model (requests in flight, results kept apart, faults), not the model's answers.

Example::

    from rag_position.testing.openai_double import serve
    from rag_position.testing.tiny_model import tiny_random_model

    with serve(tiny_random_model(seed=0)) as server:
        spec = f"openai:{server.url}/{server.model_name}"
"""

from __future__ import annotations

from typing import Any


def tiny_random_model(seed: int = 0, name: str = "tiny-random") -> Any:
    """A 2-layer Llama of width 64 with random weights (seeded, so every call gives the
    same model) and SmolLM2's tokenizer, as a :class:`~rag_position.models.
    transformers_backend.TransformersModel` (float32, no chat template, 4,096 tokens)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from rag_position.models.transformers_backend import TransformersModel
    from rag_position.serving import model_folder

    folder, _ = model_folder("embedded")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=4096, tie_word_embeddings=True, initializer_range=0.5,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).eval()  # type: ignore[no-untyped-call]
    finally:
        torch.random.set_rng_state(state)  # the caller's random stream is left as it was
    return TransformersModel(model, tokenizer, name=name, chat_template=False, max_context=4096)
