"""Hostile input, each refused with a clear error (or ignored where the docs say so), never
a traceback, a hang or a write through a link: what the second probe of issue 42 found, and
text that is not valid Unicode (a lone surrogate, as JSON's ``\\ud800`` decodes to), refused
before any model is asked with a ValueError naming the text and the position."""

from __future__ import annotations

import io
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_position.cli import main
from rag_position.data import load_kv, load_qa
from rag_position.errors import BackendError, DataFormatError
from rag_position.eval.engine.common import Decoding
from rag_position.eval.engine.marker import RunMarker, check_run_folder, write_marker
from rag_position.eval.engine.report import Section, write_report
from rag_position.models.embedders import SentenceTransformerEmbedder
from rag_position.models.transformers_backend import TransformersModel
from rag_position.passages import Passage, check_text
from rag_position.strategies import (
    convex_score,
    edge_reorder,
    fact,
    likelihood_selection,
    medoid_vote,
    profile_reorder,
    question_likelihood,
    recite_then_solve,
    sandwich,
)
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
    """``write_atomic``: a link at the old fixed temporary name was written through."""
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
def test_scores_and_profiles_must_be_numbers(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"`scores\[1\]` must be a number"):
        profile_reorder("q?", ["a", "b", "c"], profile=[0.3, 0.1, 0.5], scores=[0.2, bad, 3])
    if bad is not None:  # None is edge_reorder's "no score"
        with pytest.raises(TypeError, match=r"`scores\[1\]` must be a number"):
            edge_reorder(["a", "b", "c"], scores=[0.2, bad, 3], mode="llamaindex")
        with pytest.raises(TypeError, match="must be numbers"):
            PositionProfile((bad, 0.1, 0.4))
    assert profile_reorder(
        "q?", ["a", "b", "c"], profile=[0.3, 0.1, 0.5], scores=[np.float32(0.2), 1, 3.0]
    ).order == [1, 0, 2]  # c where the profile is best (2), b next (0), a last


# ---------------------------------------------------------------- not valid Unicode
BAD = "what is \ud800?"
DOCS = ["Paris is the capital of France.", "Rome is the capital of Italy."]


class Untouchable:
    """A scorer, generator and embedder that fails the test when it is asked anything."""

    name = "untouchable"

    def score_spans(self, prompts: Sequence[str], spans: Sequence[Any]) -> list[Any]:
        raise AssertionError("score_spans was called with text that is not valid Unicode")

    def generate(self, prompts: Sequence[str], **options: Any) -> list[str]:
        raise AssertionError("generate was called with text that is not valid Unicode")

    def embed(self, texts: Sequence[str]) -> Any:
        raise AssertionError("embed was called with text that is not valid Unicode")


M = Untouchable()
STRATEGIES: dict[str, Callable[[str, Any], Any]] = {
    "convex_score": lambda q, docs: convex_score(q, docs, M),
    "likelihood_selection": lambda q, docs: likelihood_selection(q, docs, M),
    "question_likelihood": lambda q, docs: question_likelihood(q, docs, M),
    "profile_reorder": lambda q, docs: profile_reorder(q, docs, profile=[0.1, 0.2]),
    "sandwich": lambda q, docs: sandwich(q, docs),
    "fact": lambda q, docs: fact(q, docs, M),
    "recite_then_solve": lambda q, docs: recite_then_solve(q, docs, M),
    "medoid_vote": lambda q, docs: medoid_vote(q, docs, M, M),
}
BAD_PASSAGE = [DOCS[0], "Rome \udc80 is the capital of Italy."]
BAD_TITLE = [Passage(DOCS[0], title="Par\ud83dis"), Passage(DOCS[1])]
BAD_CONTEXT = "Paris \udfff is the capital."
CASES = [
    *[
        (name, BAD, DOCS, r"`question` is not valid Unicode.*'\\ud800' at character 8")
        for name in sorted(STRATEGIES)
    ],
    # all but profile_reorder put the passages' text in prompts
    *[
        (name, "Q?", BAD_PASSAGE, r"passage 1's text is not valid Unicode.*character 5")
        for name in STRATEGIES
        if name != "profile_reorder"
    ],
    *[
        (name, "Q?", BAD_TITLE, "passage 0's title is not valid Unicode")
        for name in ("convex_score", "sandwich")
    ],
    *[
        (name, "Q?", BAD_CONTEXT, "the context is not valid Unicode")
        for name in ("fact", "recite_then_solve")
    ],
]


def test_check_text_names_the_text_and_the_position() -> None:
    assert check_text("Zürich, 東京", "`question`") == "Zürich, 東京"
    with pytest.raises(ValueError, match=r"`question` is not valid Unicode.*character 8") as err:
        check_text(BAD, "`question`")
    assert "\\ud800" in str(err.value)  # shown escaped: the message itself prints anywhere
    str(err.value).encode("utf-8")
    with pytest.raises(TypeError, match="prompt 2 must be a str, got int"):
        check_text(3, "prompt 2")  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "question", "docs", "message"), CASES)
def test_strategies_refuse_text_that_is_not_unicode(
    name: str, question: str, docs: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        STRATEGIES[name](question, docs)


def test_backends_refuse_prompts_before_tokenizing_or_encoding() -> None:
    model = TransformersModel.__new__(TransformersModel)  # no weights nor tokenizer
    with pytest.raises(ValueError, match=r"prompt 1 is not valid Unicode.*character 8"):
        model.generate(["fine", BAD], max_new_tokens=4)
    with pytest.raises(ValueError, match="prompt 0 is not valid Unicode"):
        model.score_spans([BAD], [(0, 4)])
    with pytest.raises(ValueError, match="stop string 0 is not valid Unicode"):
        model.generate(["fine"], max_new_tokens=4, stop=["\ud800"])
    with pytest.raises(ValueError, match="text is not valid Unicode"):
        model.count_tokens(BAD)
    with pytest.raises(ValueError, match="prompt is not valid Unicode"):
        model.token_logprobs(BAD)
    embedder = SentenceTransformerEmbedder.__new__(SentenceTransformerEmbedder)
    with pytest.raises(ValueError, match="text 1 is not valid Unicode"):
        embedder.embed(["fine", BAD])


# ---------------------------------------------------------------- data files
CTXS = [{"title": "t0", "text": "passage 0", "isgold": True}]
GOOD = {"question": "q?", "answers": ["x"], "ctxs": CTXS}
KV = {"ordered_kv_records": [["k0", "v0"], ["k1", "v1"]], "key": "k0", "value": "v0"}
KV_FIELD = r"'ordered_kv_records\[1\]\[0\]'"


@pytest.mark.parametrize(
    ("load", "record", "field"),
    [
        (load_qa, {**GOOD, "question": BAD}, "'question'"),
        (load_qa, {**GOOD, "answers": ["x", "\ud800"]}, r"'answers\[1\]'"),
        (load_qa, {**GOOD, "ctxs": [*CTXS, {"title": "", "text": BAD}]}, r"'ctxs\[1\]\.text'"),
        (load_kv, {**KV, "ordered_kv_records": [["k0", "v0"], ["k\udc00", "v1"]]}, KV_FIELD),
    ],
    ids=["question", "answer", "passage", "kv-key"],
)
def test_a_data_file_with_a_lone_surrogate_names_line_and_field(
    tmp_path: Path, load: Callable[[Path], object], record: dict[str, Any], field: str
) -> None:
    path = tmp_path / "data.jsonl"
    good = json.dumps(GOOD if load is load_qa else KV)
    path.write_text(good + "\n" + json.dumps(record) + "\n")  # \ud800 escaped
    with pytest.raises(DataFormatError, match=rf"line 2: field {field} is not valid Unicode"):
        load(path)
