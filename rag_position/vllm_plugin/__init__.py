"""Code that runs inside the vLLM server ``rag-position serve`` starts (see rag_position_vllm).

This folder is put on the server's ``PYTHONPATH``; its modules import vLLM, never
rag-position, and are not imported by rag-position itself.
"""
