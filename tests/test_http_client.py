"""The ``openai:`` backend's HTTP client (:mod:`rag_position.models._http`) being closed.

Found by ``benchmarks/load.py``: a model closed and then dropped stalled its collector 5 s.
"""

from __future__ import annotations

import gc
import time

from rag_position.models.openai_backend import OpenAICompatibleModel


def test_a_closed_model_opens_again_and_is_collected_at_once_its_loops_closed() -> None:
    """The finalizer found the stopping loop, sent it the client's close, waited 5 s and left
    that close pending ("Task was destroyed but it is pending"); the loop was never closed."""
    model = OpenAICompatibleModel("http://127.0.0.1:9/v1", "m")  # nothing is sent
    first, _ = model._http._start()
    model.close()
    second, _ = model._http._start()  # the next request starts a new loop
    assert second is not first and second.is_running()
    start = time.monotonic()
    model.close()
    model.close()  # a second close does nothing
    del model
    gc.collect()
    assert time.monotonic() - start < 2.0
    deadline = time.monotonic() + 5
    while not (first.is_closed() and second.is_closed()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert first.is_closed() and second.is_closed()
