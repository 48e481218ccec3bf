"""Test aids for rag-position's users and its own tests (not for production use).

- :mod:`rag_position.testing.openai_double`: a fault-injecting double of vLLM's
  OpenAI-compatible server over a local model, for testing clients' failure handling.
- :mod:`rag_position.testing.fault_proxy`: the same faults and broken replies, injected
  into a real server's replies (vLLM) by a proxy in front of it.
- :mod:`rag_position.testing.serve_process`: ``rag-position serve`` in a child process,
  started and stopped as a user would (the tests' and benchmarks' vLLM server).
- :mod:`rag_position.testing.tiny_model`: a tiny random-weight model with a real
  tokenizer, fast enough to serve many requests at once behind the double.
- :mod:`rag_position.testing.scripted`: scorers whose scores a test chooses, to pin an
  algorithm's logic without a model.
- :mod:`rag_position.testing.tuned`: valid tuned files a test changes field by field.
- :mod:`rag_position.testing.strategies`: Hypothesis strategies for passages, metadata
  and scores (needs ``hypothesis``, a dev dependency).
"""
