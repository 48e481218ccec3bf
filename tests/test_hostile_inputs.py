"""What the second probe of issue 42 found: hostile files, replies and values, each
refused with a clear error (or ignored where the docs say so), never a traceback, a hang
or a write through a link."""

from __future__ import annotations

import io
import logging
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_position.cli import main
from rag_position.errors import BackendError
from rag_position.eval.engine.common import Decoding
from rag_position.eval.engine.marker import RunMarker, check_run_folder, write_marker
from rag_position.eval.engine.report import Section, write_report
from rag_position.strategies import edge_reorder, profile_reorder
from rag_position.strategies.profiles import PositionProfile

DEEP = "[" * 200_000 + "]" * 200_000
BIG_INT = '{"choices": [{"text": "x", "index": ' + "9" * 100_000 + "}]}"


def test_a_deep_line_in_an_unmarked_folder_is_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "predictions.jsonl").write_text(DEEP + "\n")
    # skipped here; the store names the line when it loads the file
    check_run_folder(tmp_path, task="compare", decoding=Decoding(), model="m")


@pytest.mark.parametrize("name", ["run.json", "report.md", "summary.json", "summary.csv"])
def test_a_runs_files_are_never_written_through_a_link_or_into_a_fifo(
    tmp_path: Path, name: str
) -> None:
    """Each is written whole through a new file of a random name (``write_atomic``): a link
    left at the old fixed temporary name was written through, a FIFO there blocked."""
    victim = tmp_path / "victim"
    victim.write_text("mine")
    run = tmp_path / "run"
    run.mkdir()
    left = run / f"{name}.tmp"

    def write() -> None:
        if name == "run.json":
            marker = RunMarker("compare", "m", Decoding().as_dict(), "rag-position eval compare")
            write_marker(run, marker)
        else:
            section = Section("Demo", "demo", rows=[{"setting": "x", "accuracy": 0.5}])
            write_report(run, [section], title="Demo", command="x", settings={})

    left.symlink_to(victim)
    write()
    assert victim.read_text() == "mine" and (run / name).is_file()
    left.unlink()
    os.mkfifo(left)  # would block a write at that fixed name forever
    write()
    assert not [p.name for p in run.iterdir() if p.name.startswith(f".{name}.")]  # none left


class _Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b""
    status = 200

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/models"):
            out, status = b'{"data": [{"id": "m", "max_model_len": 2048}]}', 200
        else:
            out, status = type(self).body, type(self).status
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _reply


@pytest.fixture
def hostile() -> Iterator[tuple[str, type[_Hostile]]]:
    handler = type("Handler", (_Hostile,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1", handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status", [200, 400])
@pytest.mark.parametrize("body", [DEEP, BIG_INT], ids=["deep", "big-int"])
def test_a_hostile_reply_is_a_backend_error(
    hostile: tuple[str, type[_Hostile]], body: str, status: int
) -> None:
    from rag_position.models import load_model

    url, handler = hostile
    handler.body, handler.status = body.encode(), status
    model = load_model(f"openai:{url}/m", max_retries=0, scoring="echo", chat_template=False)
    with pytest.raises(BackendError, match=url):
        model.generate(["hi"], max_new_tokens=4)
    with pytest.raises(BackendError, match=url):
        model.score_spans(["hi there"], [(3, 8)])


def test_a_pool_cache_claiming_more_than_it_holds_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from rag_position.data import default_data_dir
    from rag_position.data.builder import InstanceBuilder
    from rag_position.data.loaders import ORACLE_FILE

    class Ones:
        name = "ones"

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 4), dtype=np.float32)

    builder = InstanceBuilder(
        default_data_dir() / ORACLE_FILE, Ones(), cache_dir=tmp_path, packaged=False
    )
    header = io.BytesIO()
    claimed = {"descr": "<f4", "fortran_order": False, "shape": (2**38, 4)}  # 4 TiB
    np.lib.format.write_array_header_1_0(header, claimed)
    builder.pool_cache_path.write_bytes(header.getvalue() + b"\0" * 64)
    with caplog.at_level(logging.WARNING):
        vectors = builder._pool_embeddings()
    assert vectors.shape == (len(builder._pool), 4)
    assert "ignoring unreadable cache file" in caplog.text


@pytest.mark.parametrize("task", ["compare", "open-domain"])
def test_an_unknown_strategy_is_refused_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str
) -> None:
    out = tmp_path / "run"
    for strategies, said in [
        ("retriever,nosuch", "unknown ['nosuch']"),
        ("select_and_place:bogus=1", "takes no option 'bogus'"),
    ]:
        argv = ["eval", task, "--model", "openai:http://127.0.0.1:9/v1/m"]  # unreachable
        code = main([*argv, "--strategies", strategies, "--out", str(out)])
        assert code == 2 and said in capsys.readouterr().err
    assert not out.exists()


def test_tuned_naming_a_folder_by_its_slash_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["tune", "--tuned", "runs/new/", "--questions", "2"])
    assert done.value.code == 2 and "names a folder" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["0.1", True, None])
def test_scores_must_be_numbers(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"`scores\[1\]` must be a number"):
        profile_reorder("q?", ["a", "b", "c"], profile=[0.3, 0.1, 0.5], scores=[0.2, bad, 3])
    if bad is not None:  # None is edge_reorder's "no score"
        with pytest.raises(TypeError, match=r"`scores\[1\]` must be a number"):
            edge_reorder(["a", "b", "c"], scores=[0.2, bad, 3], mode="llamaindex")
    assert profile_reorder(
        "q?", ["a", "b", "c"], profile=[0.3, 0.1, 0.5], scores=[np.float32(0.2), 1, 3.0]
    ).order == [1, 0, 2]  # c where the profile is best (2), b next (0), a last


@pytest.mark.parametrize("bad", ["0.2", True])
def test_a_profile_holds_numbers(bad: Any) -> None:
    with pytest.raises(TypeError, match="must be numbers"):
        PositionProfile((bad, 0.1, 0.4))
