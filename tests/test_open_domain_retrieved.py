"""open-domain on retrieval results (``hasanswer`` at chosen ranks) and on sentence chunks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_data import _write_jsonl as write
from test_eval_runner import Scripted, write_gold_at_file

import rag_position.eval.cli as eval_cli
from rag_position.cli import main
from rag_position.errors import DataFormatError
from rag_position.eval import EvalConfigError
from rag_position.eval.tasks.open_domain import DEFAULT_KS, run_open_domain
from rag_position.eval.tasks.ranked import is_retrieval_results, load_retrieved, sentence_chunks
from rag_position.passages import Passage

DEPTH = 55
# question -> (rank of the GOLD text (1-based) or None, ranks flagged hasanswer)
LAYOUT: dict[int, tuple[int | None, tuple[int, ...]]] = {
    0: (1, (1,)),  # found at once
    1: (10, (10,)),  # found from k=10
    2: (30, (30, 52)),  # found from k=30 (rank 52: beyond the grid)
    3: (None, (3,)),  # flagged at rank 3, but no GOLD text: recall counts the flag
    4: (5, ()),  # the GOLD text at rank 5, unflagged: recall 0, the reader right at k=5
}
RECALL = {5: 0.4, 10: 0.6, 20: 0.6, 30: 0.8, 40: 0.8, 50: 0.8}
READER = {5: 0.4, 10: 0.4, 20: 0.2, 30: 0.4, 40: 0.2, 50: 0.2}


def records(depth: int = DEPTH) -> list[dict[str, Any]]:
    """The release's format: question, answers, ctxs (id, title, text, score, hasanswer)."""
    out = []
    for q, (gold, flagged) in LAYOUT.items():
        ctxs = []
        for rank in range(1, depth + 1):
            text = f"GOLD the answer is ans{q}" if rank == gold else f"passage {rank} about {q}"
            score = 2.0 - rank / 100
            ctx = {"id": str(1000 * q + rank), "title": f"T{q}-{rank}", "text": text}
            score_field = str(score) if q % 2 else score  # the release: strings
            ctxs.append({**ctx, "score": score_field, "hasanswer": rank in flagged})
        record: dict[str, Any] = {"question": f"question {q}?", "answers": [f"ans{q}"]}
        record["ctxs"] = ctxs
        if q == 0:
            record["nq_annotated_gold"] = {"title": "T0-1", "chunked_long_answer": "..."}
        out.append(record)
    return out


@pytest.fixture()
def retrieved(tmp_path: Path) -> Path:
    return write(tmp_path / "nq-open-contriever-msmarco-retrieved-documents.jsonl.gz", records())


def by(rows: list[dict[str, Any]], strategy: str) -> dict[int, float]:
    return {r["k"]: r["accuracy"] for r in rows if r["strategy"] == strategy}


def test_retrieval_results_recall_and_file_order(retrieved: Path, tmp_path: Path) -> None:
    model = Scripted()
    result = run_open_domain(model, data=retrieved, out=tmp_path / "out")
    assert by(result.rows, "retriever-recall") == pytest.approx(RECALL)
    assert by(result.rows, "reader") == pytest.approx(READER)
    assert sorted(by(result.rows, "reader")) == list(DEFAULT_KS)  # the paper's grid
    assert {r["setting"] for r in result.rows if r["k"] == 5} == {"k=5 retriever=file"}
    assert all(r["n"] == 5 for r in result.rows)
    # the reader got each question's own top k, in the file's order
    assert len(model.prompts) == 5 * len(DEFAULT_KS)
    first = next(p for p in model.prompts if "question 2?" in p and "[30]" in p and "[31]" not in p)
    docs = [line for line in first.split("\n") if line.startswith("Document [")]
    assert [d.split("(Title: ")[1].split(")")[0] for d in docs] == [
        f"T2-{rank}" for rank in range(1, 31)
    ]
    report = result.report.read_text()
    assert "retrieval results" in report and "hasanswer" in report
    assert (tmp_path / "out" / "open-domain-recall-vs-accuracy.png").is_file()


def test_plain_jsonl_questions_and_smaller_ks(tmp_path: Path) -> None:
    plain = write(tmp_path / "retrieved.jsonl", records(depth=12))
    result = run_open_domain(Scripted(), data=plain, ks=[1, 10], questions=2, out=tmp_path / "o")
    assert by(result.rows, "retriever-recall") == {1: 0.5, 10: 1.0}
    ranked = load_retrieved(plain, depth=10, limit=3)
    assert [r.question.question for r in ranked] == ["question 0?", "question 1?", "question 2?"]
    assert ranked[0].question.metadata["nq_annotated_gold"]["title"] == "T0-1"
    assert ranked[1].question.passages[0].score == pytest.approx(1.99)  # from the string
    assert len(ranked[0].question.passages) == 10 and ranked[1].hits[9] is True
    with pytest.raises(EvalConfigError, match="--questions 6 asks for more questions"):
        run_open_domain(Scripted(), data=plain, ks=[1], questions=6, out=tmp_path / "p")


DROP = object()


@pytest.mark.parametrize(
    ("line", "ctx", "field", "value", "message"),
    [
        *[
            (2, 6, field, DROP, rf"missing field 'ctxs\[6\]\.{field}'")
            for field in ("hasanswer", "id", "title", "text", "score")
        ],
        (2, 6, "hasanswer", "yes", r"field 'ctxs\[6\]\.hasanswer' must be bool"),
        (2, 6, "score", "high", r"field 'ctxs\[6\]\.score' must be a number"),
        (2, 6, "score", True, r"field 'ctxs\[6\]\.score' must be str or int or"),
        (3, None, "ctxs", records()[2]["ctxs"][:40], r"field 'ctxs' holds 40 passages"),
        (2, None, "answers", [], r"field 'answers' is empty"),
        (2, None, "answers", "ans1", r"field 'answers' must be list"),
        (4, None, "question", 7, r"field 'question' must be str"),
        (3, None, "answers", DROP, r"missing field 'answers'"),
    ],
)
def test_malformed_lines_name_file_line_and_field(
    tmp_path: Path, line: int, ctx: int | None, field: str, value: Any, message: str
) -> None:
    rows = records()
    edited = rows[line - 1] if ctx is None else rows[line - 1]["ctxs"][ctx]
    if value is DROP:
        del edited[field]
    else:
        edited[field] = value
    path = write(tmp_path / "retrieved.jsonl", rows)
    model = Scripted()
    with pytest.raises(DataFormatError, match=f"line {line}: {message}") as info:
        run_open_domain(model, data=path, out=tmp_path / "out")
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    assert not model.prompts and not (tmp_path / "out").exists()  # checked before running
    assert len(load_retrieved(path, depth=50, limit=line - 1)) == line - 1  # the rest unread


def test_format_detection_and_corpus_options(retrieved: Path, tmp_path: Path) -> None:
    assert is_retrieval_results(retrieved)
    assert not is_retrieval_results(write_gold_at_file(tmp_path / "gold_at.jsonl"))  # isgold
    assert not is_retrieval_results(write(tmp_path / "empty.jsonl", []))
    with pytest.raises(EvalConfigError, match=r"--chunk-sentences: .* retrieval results"):
        run_open_domain(Scripted(), data=retrieved, chunk_sentences=1, out=tmp_path)
    with pytest.raises(EvalConfigError, match=r"--retriever bm25: .* retrieval results"):
        run_open_domain(Scripted(), data=retrieved, retriever="bm25", out=tmp_path)


def test_sentence_chunks() -> None:
    sentences = ["One is here.", "Two is there!", "Three?", "Four."]
    a = Passage(" ".join(sentences), title="A")
    b = Passage("One is here.", title="A")  # a duplicate of a's first chunk
    pairs = [("A", "One is here. Two is there!"), ("A", "Three? Four."), ("A", "One is here.")]
    assert [(c.title, c.text) for c in sentence_chunks([a, b], 2)] == pairs
    assert [c.text for c in sentence_chunks([a, b], 1)] == sentences
    assert [c.text for c in sentence_chunks([a], 9)] == [a.text]
    with pytest.raises(ValueError, match="positive"):
        sentence_chunks([a], 0)


def test_chunked_corpus_with_bm25(tmp_path: Path) -> None:
    """The oracle format in 1-sentence chunks; recall: the normalised answer in the chunk."""
    path = tmp_path / "oracle.jsonl"
    rows = []
    for q in range(6):
        text = f"Filler about topic {q}. GOLD the answer is ans{q}. More on topic {q} here."
        ctx = {"title": f"P{q}", "text": text, "isgold": True, "hasanswer": True}
        rows.append({"question": f"question {q}?", "answers": [f"ans{q}"], "ctxs": [ctx]})
    write(path, rows)
    result = run_open_domain(
        Scripted(), data=path, ks=[1, 3, 18], retriever="bm25", chunk_sentences=1, out=tmp_path
    )
    recall = by(result.rows, "retriever-recall")
    assert recall[18] == 1.0 and recall[1] <= recall[3] <= recall[18]
    settings = {r["setting"] for r in result.rows if r["k"] == 3}
    assert settings == {"k=3 retriever=bm25 chunk_sentences=1"}
    assert "18 distinct chunks of 1 sentence" in result.report.read_text()
    with pytest.raises(EvalConfigError, match="k=19 exceeds the 18 1-sentence chunks"):
        run_open_domain(
            Scripted(), data=path, ks=[19], retriever="bm25", chunk_sentences=1, out=tmp_path
        )
    with pytest.raises(EvalConfigError, match="--chunk-sentences must be a positive"):
        run_open_domain(Scripted(), data=path, retriever="bm25", chunk_sentences=0, out=tmp_path)


def test_cli_reads_retrieval_results(
    retrieved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(eval_cli, "load_model", lambda spec, **kw: Scripted())
    out = tmp_path / "od"
    argv = ["eval", "open-domain", "--data", str(retrieved), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    assert "k=50 retriever=file" in capsys.readouterr().out
    assert "open-domain --data" in (out / "report.md").read_text()
    rows = records()
    del rows[0]["ctxs"][0]["hasanswer"]
    bad = write(tmp_path / "bad.jsonl", rows)
    argv = ["eval", "open-domain", "--data", str(bad), "--out", str(tmp_path / "b")]
    assert main([*argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {bad}: line 1: missing field 'ctxs[0].hasanswer'\n"
    argv = ["eval", "open-domain", "--data", str(retrieved), "--chunk-sentences", "2"]
    assert main([*argv, "--out", str(tmp_path / "c"), "--no-progress"]) == 2
    assert "--chunk-sentences: " in capsys.readouterr().err
