"""The published prompts, rendered byte for byte.

Expected strings are written out here, not built from the template constants, so a
stray space or newline in a template fails loudly.
"""

from __future__ import annotations

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


# --- Lost in the Middle: QA ------------------------------------------------------------


def test_qa_two_documents() -> None:
    assert render_qa(QUESTION, DOCS) == (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n"
        "\n"
        "Document [1](Title: first doc) first doc text\n"
        "Document [2](Title: second doc) second doc text\n"
        "\n"
        "Question: test question\n"
        "Answer:"
    )


def test_qa_one_document_from_plain_string_has_empty_title() -> None:
    assert render_qa("who wrote it?", ["Some text."]) == (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n"
        "\n"
        "Document [1](Title: ) Some text.\n"
        "\n"
        "Question: who wrote it?\n"
        "Answer:"
    )


def test_qa_one_document_real_record() -> None:
    doc = {
        "title": "Deadpool 2",
        "text": "Deadpool 2 is scheduled to be released in the United States on May 18, 2018.",
        "hasanswer": True,
        "isgold": True,
    }
    assert render_qa("when is the next deadpool movie being released", [doc]) == (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n"
        "\n"
        "Document [1](Title: Deadpool 2) Deadpool 2 is scheduled to be released in the United "
        "States on May 18, 2018.\n"
        "\n"
        "Question: when is the next deadpool movie being released\n"
        "Answer:"
    )


def test_qa_ordered_randomly() -> None:
    assert render_qa(QUESTION, DOCS, ordered_randomly=True) == (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant). The search results are ordered randomly.\n"
        "\n"
        "Document [1](Title: first doc) first doc text\n"
        "Document [2](Title: second doc) second doc text\n"
        "\n"
        "Question: test question\n"
        "Answer:"
    )


def test_qa_query_aware() -> None:
    assert render_qa(QUESTION, DOCS, query_aware=True) == (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n"
        "\n"
        "Question: test question\n"
        "\n"
        "Document [1](Title: first doc) first doc text\n"
        "Document [2](Title: second doc) second doc text\n"
        "\n"
        "Question: test question\n"
        "Answer:"
    )


def test_qa_ordered_randomly_and_query_aware_cannot_combine() -> None:
    with pytest.raises(ValueError, match="cannot be combined"):
        render_qa(QUESTION, DOCS, ordered_randomly=True, query_aware=True)


def test_closedbook() -> None:
    assert render_closedbook(QUESTION) == "Question: test question\nAnswer:"


@pytest.mark.parametrize("question", ["", "   "])
def test_empty_question_rejected_everywhere(question: str) -> None:
    for render in (
        lambda: render_qa(question, DOCS),
        lambda: render_closedbook(question),
        lambda: render_recite(question, "ctx"),
        lambda: render_fact_retrieve(question, "ctx"),
    ):
        with pytest.raises(ValueError, match="`question`"):
            render()


def test_empty_passages_rejected() -> None:
    with pytest.raises(ValueError, match="`passages`"):
        render_qa(QUESTION, [])


def test_empty_context_and_query_rejected() -> None:
    with pytest.raises(ValueError, match="`context`"):
        render_recite(QUESTION, "")
    with pytest.raises(ValueError, match="`context`"):
        render_fact_retrieve(QUESTION, "")
    with pytest.raises(ValueError, match="`context`"):
        render_fact_needle("", "key")
    with pytest.raises(ValueError, match="`query`"):
        render_fact_needle("ctx", "")


def test_single_string_as_passages_rejected() -> None:
    with pytest.raises(TypeError):
        render_qa(QUESTION, "just one string")


# --- custom templates ---------------------------------------------------------------


def test_custom_template() -> None:
    template = 'Context:\n{search_results}\nJSON: {"q": 1}\nQ: {question}'
    assert render_qa(QUESTION, DOCS[:1], template=template) == (
        'Context:\nDocument [1](Title: first doc) first doc text\nJSON: {"q": 1}\nQ: test question'
    )


@pytest.mark.parametrize(
    ("template", "missing"),
    [
        ("Q: {question}", "{search_results}"),
        ("{search_results} only", "{question}"),
        ("nothing", "{question}, {search_results}"),
    ],
)
def test_custom_template_missing_placeholders(template: str, missing: str) -> None:
    with pytest.raises(ValueError, match=missing.replace("{", r"\{").replace("}", r"\}")):
        render_qa(QUESTION, DOCS, template=template)


def test_custom_template_missing_placeholders_other_tasks() -> None:
    with pytest.raises(ValueError, match=r"\{question\}"):
        render_closedbook(QUESTION, template="Answer:")
    with pytest.raises(ValueError, match=r"\{formatted_kv_records\}"):
        render_kv(KV, "test key1", template='Key: "{key}"')
    with pytest.raises(ValueError, match=r"\{context\}"):
        render_recite(QUESTION, "ctx", template="{question}")
    with pytest.raises(ValueError, match=r"\{query\}"):
        render_fact_needle("ctx", "key", template="{context}")


def test_custom_template_with_flags_rejected() -> None:
    with pytest.raises(ValueError, match="template"):
        render_qa(QUESTION, DOCS, template="{question}{search_results}", query_aware=True)


def test_braces_in_inputs_are_not_placeholders() -> None:
    prompt = render_closedbook("what does {search_results} mean in {question}?")
    assert prompt == "Question: what does {search_results} mean in {question}?\nAnswer:"
    assert fill_template("{a}{b}", a="{b}", b="x") == "{b}x"


# --- key-value retrieval ------------------------------------------------------------


def test_kv_three_records() -> None:
    assert render_kv(KV, "test key2") == (
        "Extract the value corresponding to the specified key in the JSON object below.\n"
        "\n"
        "JSON data:\n"
        '{"test key1": "test value1",\n'
        ' "test key2": "test value2",\n'
        ' "test key3": "test value3"}\n'
        "\n"
        'Key: "test key2"\n'
        "Corresponding value:"
    )


def test_kv_query_aware() -> None:
    assert render_kv([list(r) for r in KV], "test key2", query_aware=True) == (
        "Extract the value corresponding to the specified key in the JSON object below.\n"
        "\n"
        'Key: "test key2"\n'
        "\n"
        "JSON data:\n"
        '{"test key1": "test value1",\n'
        ' "test key2": "test value2",\n'
        ' "test key3": "test value3"}\n'
        "\n"
        'Key: "test key2"\n'
        "Corresponding value:"
    )


def test_kv_two_records_block() -> None:
    assert format_kv_records([("a", "1"), ("b", "2")]) == '{"a": "1",\n "b": "2"}'


@pytest.mark.parametrize(
    ("records", "key", "message"),
    [
        ([], "k", "`ordered_kv_records`"),
        ([("k", "v")], "k", "at least 2"),
        ([("k", "v"), ("k", "w")], "k", "duplicate"),
        (KV, "missing key", "not among"),
        (KV, "", "`key`"),
        ([("k", "v", "x"), ("a", "b")], "k", "pair"),
    ],
)
def test_kv_invalid(records: list[tuple[str, ...]], key: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_kv(records, key)


# --- recite-then-solve and FACT -----------------------------------------------------


def test_recite() -> None:
    context = "Document 1:\nParis is in France."
    assert render_recite("Where is Paris?", context) == (
        "Read the question based on the given documents. Choose the documents most relevant to "
        "the question and copy them fully WORD BY WORD.\n"
        "\n"
        "The following are given documents.\n"
        "\n"
        "Document 1:\nParis is in France.\n"
        "\n"
        "Read the question. Choose the documents most relevant to the question and copy them "
        "fully WORD BY WORD. Only give me the relevant documents and do not output any other "
        'words. Do not make up documents. Do not repeat documents. Use "# Document <number>" '
        "at the start of each document, then copy its full content.\n"
        "\n"
        "Question:\n"
        "Where is Paris?"
    )


def test_fact_retrieve() -> None:
    assert render_fact_retrieve("Where is Paris?", "Paris is in France.") == (
        "Please retrieve all the sentences in the given documents that are important and "
        "relevant to answer the question.\n"
        "\n"
        "Question: Where is Paris?\n"
        "\n"
        "The following are given documents.\n"
        "\n"
        "Paris is in France.\n"
        "\n"
        "Please retrieve the sentences from the given documents that are relevant to answer the "
        "question. Do not repeat your generation. The question is highlighted again at below.\n"
        "\n"
        "Question: Where is Paris?\n"
        "\n"
        "Retrieved sentences:\n"
        "\n"
        '(For each retrieved sentence, please start from the bullet symbol "-", if no results, '
        'just return a single "-")'
    )


def test_fact_needle() -> None:
    assert render_fact_needle("One of the special magic numbers for x is: 7.", "x") == (
        "Some special magic numbers are hidden within the following text. Make sure to memorize "
        "it. I will quiz you about the numbers afterwards.\n"
        "\n"
        "One of the special magic numbers for x is: 7.\n"
        "\n"
        "What are all the special magic numbers for x mentioned in the provided text? The special "
        "magic numbers for x mentioned in the provided text are"
    )


# --- question span ------------------------------------------------------------------


def test_question_span_is_the_question_after_the_passages() -> None:
    prompt = render_qa(QUESTION, DOCS, query_aware=True)
    start, end = question_span(prompt, QUESTION)
    assert prompt[start:end] == QUESTION
    assert prompt[end:] == "\nAnswer:"
    assert prompt.count(QUESTION) == 2 and prompt.find(QUESTION) < start


def test_question_span_missing_question() -> None:
    with pytest.raises(ValueError, match="does not occur"):
        question_span("Question: something else\nAnswer:", QUESTION)
    with pytest.raises(ValueError, match="`question`"):
        question_span("Question: x\nAnswer:", "")
