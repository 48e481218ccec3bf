"""The published prompts, rendered byte for byte: the expected strings are written out, not
built from the template constants, so a stray space or newline in a template fails loudly."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from rag_position.passages import Passage
from rag_position.prompts import (
    fill_template,
    format_kv_records,
    question_span,
    render_closedbook,
    render_fact_needle,
    render_fact_retrieve,
    render_kv,
    render_qa,
    render_recite,
)

QUESTION = "test question"
DOCS = [
    Passage(title="first doc", text="first doc text", id="1", score=0.95),
    {"title": "second doc", "text": "second doc text", "id": "2", "score": 0.9, "hasanswer": True},
]
KV = [("test key1", "test value1"), ("test key2", "test value2"), ("test key3", "test value3")]
QA = (
    "Write a high-quality answer for the given question using only the provided search "
    "results (some of which might be irrelevant)."
)
TWO = (
    "Document [1](Title: first doc) first doc text\nDocument [2](Title: second doc) second doc text"
)
DEADPOOL = {
    "title": "Deadpool 2",
    "text": "Deadpool 2 is scheduled to be released in the United States on May 18, 2018.",
    "hasanswer": True,
    "isgold": True,
}
KV_HEAD = "Extract the value corresponding to the specified key in the JSON object below.\n\n"
KV_JSON = (
    'JSON data:\n{"test key1": "test value1",\n'
    ' "test key2": "test value2",\n'
    ' "test key3": "test value3"}\n\n'
)


@pytest.mark.parametrize(
    ("question", "docs", "flags", "expected"),
    [
        (QUESTION, DOCS, {}, f"{QA}\n\n{TWO}\n\nQuestion: test question\nAnswer:"),
        (
            "who wrote it?",
            ["Some text."],  # a plain string has an empty title
            {},
            f"{QA}\n\nDocument [1](Title: ) Some text.\n\nQuestion: who wrote it?\nAnswer:",
        ),
        (
            "when is the next deadpool movie being released",
            [DEADPOOL],
            {},
            f"{QA}\n\nDocument [1](Title: Deadpool 2) Deadpool 2 is scheduled to be released in "
            "the United States on May 18, 2018.\n\n"
            "Question: when is the next deadpool movie being released\nAnswer:",
        ),
        (
            QUESTION,
            DOCS,
            {"ordered_randomly": True},
            f"{QA} The search results are ordered randomly.\n\n{TWO}\n\n"
            "Question: test question\nAnswer:",
        ),
        (
            QUESTION,
            DOCS,
            {"query_aware": True},
            f"{QA}\n\nQuestion: test question\n\n{TWO}\n\nQuestion: test question\nAnswer:",
        ),
    ],
)
def test_qa(question: str, docs: list[Any], flags: dict[str, bool], expected: str) -> None:
    assert render_qa(question, docs, **flags) == expected


def test_closedbook_kv_and_custom_template() -> None:
    assert render_closedbook(QUESTION) == "Question: test question\nAnswer:"
    template = 'Context:\n{search_results}\nJSON: {"q": 1}\nQ: {question}'
    assert render_qa(QUESTION, DOCS[:1], template=template) == (
        'Context:\nDocument [1](Title: first doc) first doc text\nJSON: {"q": 1}\nQ: test question'
    )
    key = 'Key: "test key2"\n'
    assert render_kv(KV, "test key2") == f"{KV_HEAD}{KV_JSON}{key}Corresponding value:"
    assert render_kv([list(r) for r in KV], "test key2", query_aware=True) == (
        f"{KV_HEAD}{key}\n{KV_JSON}{key}Corresponding value:"
    )
    assert format_kv_records([("a", "1"), ("b", "2")]) == '{"a": "1",\n "b": "2"}'


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # an empty or blank question, everywhere
        *((partial(render_qa, q, DOCS), "`question`") for q in ("", "   ")),
        *((partial(render_closedbook, q), "`question`") for q in ("", "   ")),
        *((partial(render_recite, q, "ctx"), "`question`") for q in ("", "   ")),
        *((partial(render_fact_retrieve, q, "ctx"), "`question`") for q in ("", "   ")),
        (
            lambda: render_qa(QUESTION, DOCS, ordered_randomly=True, query_aware=True),
            "cannot be combined",
        ),
        (lambda: render_qa(QUESTION, []), "`passages`"),
        (lambda: render_recite(QUESTION, ""), "`context`"),
        (lambda: render_fact_retrieve(QUESTION, ""), "`context`"),
        (lambda: render_fact_needle("", "key"), "`context`"),
        (lambda: render_fact_needle("ctx", ""), "`query`"),
        (lambda: render_qa(QUESTION, DOCS, template="Q: {question}"), r"\{search_results\}"),
        (lambda: render_qa(QUESTION, DOCS, template="{search_results} only"), r"\{question\}"),
        (
            lambda: render_qa(QUESTION, DOCS, template="nothing"),
            r"\{question\}, \{search_results\}",
        ),
        (lambda: render_closedbook(QUESTION, template="Answer:"), r"\{question\}"),
        (lambda: render_kv(KV, "test key1", template='Key: "{key}"'), r"\{formatted_kv_records\}"),
        (lambda: render_recite(QUESTION, "ctx", template="{question}"), r"\{context\}"),
        (lambda: render_fact_needle("ctx", "key", template="{context}"), r"\{query\}"),
        (
            lambda: render_qa(
                QUESTION, DOCS, template="{question}{search_results}", query_aware=True
            ),
            "template",
        ),
        (lambda: question_span("Question: something else\nAnswer:", QUESTION), "does not occur"),
        (lambda: question_span("Question: x\nAnswer:", ""), "`question`"),
        # key-value records: render_kv(records, key)
        (partial(render_kv, [], "k"), "`ordered_kv_records`"),
        (partial(render_kv, [("k", "v")], "k"), "at least 2"),
        (partial(render_kv, [("k", "v"), ("k", "w")], "k"), "duplicate"),
        (partial(render_kv, KV, "missing key"), "not among"),
        (partial(render_kv, KV, ""), "`key`"),
        (partial(render_kv, [("k", "v", "x"), ("a", "b")], "k"), "pair"),
    ],
)
def test_bad_input_is_refused_naming_it(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_single_string_as_passages_rejected() -> None:
    with pytest.raises(TypeError):
        render_qa(QUESTION, "just one string")


def test_braces_in_inputs_are_not_placeholders() -> None:
    prompt = render_closedbook("what does {search_results} mean in {question}?")
    assert prompt == "Question: what does {search_results} mean in {question}?\nAnswer:"
    assert fill_template("{a}{b}", a="{b}", b="x") == "{b}x"


def test_recite_fact_retrieve_and_needle() -> None:
    assert render_recite("Where is Paris?", "Document 1:\nParis is in France.") == (
        "Read the question based on the given documents. Choose the documents most relevant to "
        "the question and copy them fully WORD BY WORD.\n\n"
        "The following are given documents.\n\nDocument 1:\nParis is in France.\n\n"
        "Read the question. Choose the documents most relevant to the question and copy them "
        "fully WORD BY WORD. Only give me the relevant documents and do not output any other "
        'words. Do not make up documents. Do not repeat documents. Use "# Document <number>" '
        "at the start of each document, then copy its full content.\n\nQuestion:\nWhere is Paris?"
    )
    assert render_fact_retrieve("Where is Paris?", "Paris is in France.") == (
        "Please retrieve all the sentences in the given documents that are important and "
        "relevant to answer the question.\n\nQuestion: Where is Paris?\n\n"
        "The following are given documents.\n\nParis is in France.\n\n"
        "Please retrieve the sentences from the given documents that are relevant to answer the "
        "question. Do not repeat your generation. The question is highlighted again at below.\n\n"
        "Question: Where is Paris?\n\nRetrieved sentences:\n\n"
        '(For each retrieved sentence, please start from the bullet symbol "-", if no results, '
        'just return a single "-")'
    )
    assert render_fact_needle("One of the special magic numbers for x is: 7.", "x") == (
        "Some special magic numbers are hidden within the following text. Make sure to memorize "
        "it. I will quiz you about the numbers afterwards.\n\n"
        "One of the special magic numbers for x is: 7.\n\n"
        "What are all the special magic numbers for x mentioned in the provided text? The special "
        "magic numbers for x mentioned in the provided text are"
    )


def test_question_span_is_the_question_after_the_passages() -> None:
    prompt = render_qa(QUESTION, DOCS, query_aware=True)
    start, end = question_span(prompt, QUESTION)
    assert prompt[start:end] == QUESTION
    assert prompt[end:] == "\nAnswer:"
    assert prompt.count(QUESTION) == 2 and prompt.find(QUESTION) < start
