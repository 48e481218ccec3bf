"""Text that is not valid Unicode (a lone surrogate) is refused early, with a ValueError naming it.

A Python str can hold ``"\\ud800"`` (a JSON ``\\ud800`` escape decodes to it); no
tokenizer, UTF-8 encoder or server accepts it. The strategies, the local backend, the
embedder and the data loaders refuse it before any model is asked, naming the text
(``question``, ``passage i's text``, ``prompt i``, a file's line and field) and where
the surrogate is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from rag_position.data import load_kv, load_qa
from rag_position.errors import DataFormatError
from rag_position.models.embedders import SentenceTransformerEmbedder
from rag_position.models.transformers_backend import TransformersModel
from rag_position.passages import Passage, check_text
from rag_position.strategies import (
    convex_score,
    fact,
    likelihood_selection,
    medoid_vote,
    profile_reorder,
    question_likelihood,
    recite_then_solve,
    sandwich,
)

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
RENDERING = [name for name in STRATEGIES if name != "profile_reorder"]  # put text in prompts


def test_check_text_names_the_text_and_the_position() -> None:
    assert check_text("Zürich, 東京", "`question`") == "Zürich, 東京"
    with pytest.raises(ValueError, match=r"`question` is not valid Unicode.*character 8") as err:
        check_text(BAD, "`question`")
    assert "\\ud800" in str(err.value)  # shown escaped: the message itself prints anywhere
    str(err.value).encode("utf-8")
    with pytest.raises(TypeError, match="prompt 2 must be a str, got int"):
        check_text(3, "prompt 2")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_strategies_refuse_a_question_that_is_not_unicode(name: str) -> None:
    with pytest.raises(
        ValueError, match=r"`question` is not valid Unicode.*'\\ud800' at character 8"
    ):
        STRATEGIES[name](BAD, DOCS)


@pytest.mark.parametrize("name", RENDERING)
def test_strategies_refuse_a_passage_that_is_not_unicode(name: str) -> None:
    docs = [DOCS[0], "Rome \udc80 is the capital of Italy."]
    with pytest.raises(ValueError, match=r"passage 1's text is not valid Unicode.*character 5"):
        STRATEGIES[name]("Which is the capital of Italy?", docs)


@pytest.mark.parametrize("name", ["convex_score", "sandwich"])
def test_strategies_refuse_a_title_that_is_not_unicode(name: str) -> None:
    docs = [Passage(DOCS[0], title="Par\ud83dis"), Passage(DOCS[1])]
    with pytest.raises(ValueError, match="passage 0's title is not valid Unicode"):
        STRATEGIES[name]("Which is the capital of France?", docs)


@pytest.mark.parametrize("name", ["fact", "recite_then_solve"])
def test_a_context_string_that_is_not_unicode_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="the context is not valid Unicode"):
        STRATEGIES[name]("Which is the capital of France?", "Paris \udfff is the capital.")


# ---------------------------------------------------------------- backends, before tokenizing
def _unloaded() -> TransformersModel:
    """A TransformersModel without weights or tokenizer: the checks must come before both."""
    return TransformersModel.__new__(TransformersModel)


def test_local_backend_refuses_prompts_before_tokenizing() -> None:
    model = _unloaded()
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


def test_embedder_refuses_texts_before_encoding() -> None:
    embedder = SentenceTransformerEmbedder.__new__(SentenceTransformerEmbedder)
    with pytest.raises(ValueError, match="text 1 is not valid Unicode"):
        embedder.embed(["fine", BAD])


# ---------------------------------------------------------------- data files
def _ctxs(n: int = 1) -> list[dict[str, Any]]:
    return [{"title": f"t{i}", "text": f"passage {i}", "isgold": i == 0} for i in range(n)]


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"question": BAD, "answers": ["x"], "ctxs": _ctxs()}, "question"),
        ({"question": "q?", "answers": ["x", "\ud800"], "ctxs": _ctxs()}, "answers[1]"),
        (
            {"question": "q?", "answers": ["x"], "ctxs": [*_ctxs(), {"title": "", "text": BAD}]},
            "ctxs[1].text",
        ),
    ],
)
def test_qa_file_with_a_lone_surrogate_names_line_and_field(
    tmp_path: Path, record: dict[str, Any], field: str
) -> None:
    path = tmp_path / "qa.jsonl"
    good = {"question": "q?", "answers": ["x"], "ctxs": _ctxs()}
    path.write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")  # \ud800 escaped
    with pytest.raises(
        DataFormatError, match=rf"line 2: field {re.escape(repr(field))} is not valid Unicode"
    ):
        load_qa(path)


def test_kv_file_with_a_lone_surrogate_names_line_and_field(tmp_path: Path) -> None:
    pairs = [["k0", "v0"], ["k\udc00", "v1"]]
    path = tmp_path / "kv.jsonl"
    path.write_text(json.dumps({"ordered_kv_records": pairs, "key": "k0", "value": "v0"}) + "\n")
    with pytest.raises(DataFormatError, match=r"field 'ordered_kv_records\[1\]\[0\]' is not"):
        load_kv(path)
