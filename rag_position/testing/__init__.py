"""Test aids for rag-position's users and its own tests (not for production use).

- :mod:`rag_position.testing.openai_double`: a fault-injecting double of vLLM's
  OpenAI-compatible server over a local model, for testing clients' failure handling.
"""
