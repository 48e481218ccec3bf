"""Text that is not valid Unicode (a lone surrogate, as a JSON ``\\ud800`` decodes to) is
refused before any model is asked, with a ValueError naming the text and the position."""

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


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({**GOOD, "question": BAD}, "question"),
        ({**GOOD, "answers": ["x", "\ud800"]}, "answers[1]"),
        ({**GOOD, "ctxs": [*CTXS, {"title": "", "text": BAD}]}, "ctxs[1].text"),
    ],
)
def test_qa_file_with_a_lone_surrogate_names_line_and_field(
    tmp_path: Path, record: dict[str, Any], field: str
) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(record) + "\n")  # \ud800 escaped
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
