"""The published prompts as data, and one render function per task.

Templates are the papers' own, byte for byte: "Lost in the Middle" (Liu et al.,
TACL 2024: ``qa``, ``qa_ordered_randomly``, query-aware contextualization,
closed-book, key-value retrieval), recite-then-solve step 1 (Du, Tian et al., 2025,
"context length alone hurts") and FACT (Wang, Wang et al., "FACT: Examining the
Effectiveness of Iterative Context Rewriting for Multi-fact Retrieval", Findings of
NAACL 2025). The Lost-in-the-Middle renderers reproduce the release's
``lost_in_the_middle/prompting.py`` (checked against its prompt tests): a template
file is read with its trailing newlines stripped, so no prompt ends in a newline.

Every renderer rejects empty input with a ``ValueError`` that names the argument.
A custom ``template`` may be passed instead of the published one; it must contain
every placeholder the renderer fills (``{question}``, ``{search_results}``, ...),
else a ``ValueError`` names the missing ones. Placeholders are replaced in one
pass, so other braces in a template and braces in the inserted text stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rag_position.passages import Passage, as_passages

# --- Lost in the Middle: multi-document QA -------------------------------------------

QA_INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided "
    "search results (some of which might be irrelevant)."
)
ORDERED_RANDOMLY_SENTENCE = " The search results are ordered randomly."

QA_TEMPLATE = QA_INSTRUCTION + "\n\n{search_results}\n\nQuestion: {question}\nAnswer:"
"""``qa.prompt``."""

QA_ORDERED_RANDOMLY_TEMPLATE = (
    QA_INSTRUCTION
    + ORDERED_RANDOMLY_SENTENCE
    + "\n\n{search_results}\n\nQuestion: {question}\nAnswer:"
)
"""``qa_ordered_randomly.prompt``: the instruction gains one sentence."""

QA_QUERY_AWARE_TEMPLATE = (
    QA_INSTRUCTION + "\n\nQuestion: {question}\n\n{search_results}\n\nQuestion: {question}\nAnswer:"
)
"""``qa_with_query_aware_contextualization.prompt``: the question before and after."""

DOCUMENT_TEMPLATE = "Document [{index}](Title: {title}) {text}"
"""One search result, numbered from 1. The release formats the title as is, so an
empty title renders as ``(Title: )``; the text is not stripped or re-wrapped."""

CLOSEDBOOK_TEMPLATE = "Question: {question}\nAnswer:"
"""``closedbook_qa.prompt``."""

# --- Lost in the Middle: key-value retrieval -----------------------------------------

KV_INSTRUCTION = "Extract the value corresponding to the specified key in the JSON object below."

KV_TEMPLATE = (
    KV_INSTRUCTION + '\n\nJSON data:\n{formatted_kv_records}\n\nKey: "{key}"\nCorresponding value:'
)
"""``kv_retrieval.prompt``."""

KV_QUERY_AWARE_TEMPLATE = (
    KV_INSTRUCTION
    + '\n\nKey: "{key}"\n\nJSON data:\n{formatted_kv_records}\n\nKey: "{key}"\nCorresponding value:'
)
"""``kv_retrieval_with_query_aware_contextualization.prompt``."""

# --- Recite-then-solve, step 1 (RULER QA1/QA2) ----------------------------------------

RECITE_TEMPLATE = (
    "Read the question based on the given documents. Choose the documents most relevant "
    "to the question and copy them fully WORD BY WORD.\n"
    "\n"
    "The following are given documents.\n"
    "\n"
    "{context}\n"
    "\n"
    "Read the question. Choose the documents most relevant to the question and copy them "
    "fully WORD BY WORD. Only give me the relevant documents and do not output any other "
    "words. Do not make up documents. Do not repeat documents. "
    'Use "# Document <number>" at the start of each document, then copy its full content.\n'
    "\n"
    "Question:\n"
    "{question}"
)
"""The paper's step-1 prompt for multi-document QA, with ``Question:`` and the question
on two lines. (Its Figure 12, as extracted from the PDF, shows ``Question: {question}``
on one line; we follow the two-line form given with the method's description.)"""

# --- FACT ----------------------------------------------------------------------------

FACT_RETRIEVE_TEMPLATE = (
    "Please retrieve all the sentences in the given documents that are important and "
    "relevant to answer the question.\n"
    "\n"
    "Question: {question}\n"
    "\n"
    "The following are given documents.\n"
    "\n"
    "{context}\n"
    "\n"
    "Please retrieve the sentences from the given documents that are relevant to answer "
    "the question. Do not repeat your generation. The question is highlighted again at below.\n"
    "\n"
    "Question: {question}\n"
    "\n"
    "Retrieved sentences:\n"
    "\n"
    '(For each retrieved sentence, please start from the bullet symbol "-", '
    'if no results, just return a single "-")'
)
"""FACT's retrieval step for QA tasks."""

FACT_NEEDLE_TEMPLATE = (
    "Some special magic numbers are hidden within the following text. Make sure to "
    "memorize it. I will quiz you about the numbers afterwards.\n"
    "\n"
    "{context}\n"
    "\n"
    "What are all the special magic numbers for {query} mentioned in the provided text? "
    "The special magic numbers for {query} mentioned in the provided text are"
)
"""FACT's prompt for RULER-style needle tasks."""


# --- Renderers -----------------------------------------------------------------------


def render_qa(
    question: str,
    passages: Sequence[Passage | str | Mapping[str, Any]],
    *,
    query_aware: bool = False,
    ordered_randomly: bool = False,
    template: str | None = None,
) -> str:
    """The multi-document QA prompt: ``qa``, ``qa_ordered_randomly`` or query-aware.

    ``passages`` are numbered from 1 in the order given. ``template`` replaces the
    published one (it needs ``{question}`` and ``{search_results}``) and cannot be
    combined with the flags. As in the release, ``ordered_randomly`` and
    ``query_aware`` cannot be combined: no published prompt does both.
    """
    _require_text(question, "question")
    docs = _require_passages(passages)
    if template is None:
        if ordered_randomly and query_aware:
            raise ValueError(
                "`ordered_randomly` and `query_aware` cannot be combined (no published prompt "
                "does both); pass a custom `template` to get such a prompt"
            )
        if ordered_randomly:
            template = QA_ORDERED_RANDOMLY_TEMPLATE
        elif query_aware:
            template = QA_QUERY_AWARE_TEMPLATE
        else:
            template = QA_TEMPLATE
    elif ordered_randomly or query_aware:
        raise ValueError("pass either a custom `template` or `query_aware`/`ordered_randomly`")
    return fill_template(template, question=question, search_results=format_documents(docs))


def render_closedbook(question: str, *, template: str | None = None) -> str:
    """The closed-book prompt ``Question: {question}\\nAnswer:``."""
    _require_text(question, "question")
    return fill_template(template or CLOSEDBOOK_TEMPLATE, question=question)


def render_kv(
    ordered_kv_records: Sequence[Sequence[str]],
    key: str,
    *,
    query_aware: bool = False,
    template: str | None = None,
) -> str:
    """The key-value retrieval prompt, records in the order given.

    Validates as the release does: at least 2 records, no duplicate keys, ``key``
    among them. ``template`` needs ``{formatted_kv_records}`` and ``{key}``.
    """
    records = _require_records(ordered_kv_records)
    _require_text(key, "key")
    keys = [k for k, _ in records]
    if key not in keys:
        raise ValueError(f"`key` {key!r} is not among the keys of `ordered_kv_records`")
    if template is None:
        template = KV_QUERY_AWARE_TEMPLATE if query_aware else KV_TEMPLATE
    elif query_aware:
        raise ValueError("pass either a custom `template` or `query_aware`")
    return fill_template(template, formatted_kv_records=format_kv_records(records), key=key)


def render_recite(question: str, context: str, *, template: str | None = None) -> str:
    """Recite-then-solve step 1: ask the model to copy the relevant documents verbatim."""
    _require_text(question, "question")
    _require_text(context, "context")
    return fill_template(template or RECITE_TEMPLATE, context=context, question=question)


def render_fact_retrieve(question: str, context: str, *, template: str | None = None) -> str:
    """FACT's retrieval step for QA: list the relevant sentences, one ``-`` bullet each."""
    _require_text(question, "question")
    _require_text(context, "context")
    return fill_template(template or FACT_RETRIEVE_TEMPLATE, question=question, context=context)


def render_fact_needle(context: str, query: str, *, template: str | None = None) -> str:
    """FACT's prompt for RULER-style needle tasks (``query`` names the needle key)."""
    _require_text(context, "context")
    _require_text(query, "query")
    return fill_template(template or FACT_NEEDLE_TEMPLATE, context=context, query=query)


def question_span(prompt: str, question: str) -> tuple[int, int]:
    """Half-open character span of the last occurrence of ``question`` in ``prompt``.

    The last one, because the likelihood gauge scores the question that follows the
    passages (a query-aware prompt also has one before them).
    """
    _require_text(question, "question")
    start = prompt.rfind(question)
    if start < 0:
        raise ValueError(f"`question` {question!r} does not occur in the prompt")
    return start, start + len(question)


def format_documents(passages: Sequence[Passage | str | Mapping[str, Any]]) -> str:
    """The ``{search_results}`` block: one ``Document [i](Title: t) text`` line each."""
    docs = _require_passages(passages)
    return "\n".join(
        DOCUMENT_TEMPLATE.format(index=i, title=p.title, text=p.text)
        for i, p in enumerate(docs, start=1)
    )


def format_kv_records(ordered_kv_records: Sequence[Sequence[str]]) -> str:
    """The ``{formatted_kv_records}`` block, exactly as the release builds it.

    The first record opens with ``{``, later ones with a space; every record but the
    last ends with ``,\\n``, the last with ``}``. Keys and values are quoted but not
    JSON-escaped (as in the release).
    """
    records = _require_records(ordered_kv_records)
    last = len(records) - 1
    return "".join(
        ("{" if i == 0 else " ") + f'"{k}": "{v}"' + (",\n" if i != last else "}")
        for i, (k, v) in enumerate(records)
    )


def fill_template(template: str, **values: str) -> str:
    """Replace each ``{name}`` of ``values`` in ``template`` in a single pass.

    Raises ``ValueError`` naming every placeholder of ``values`` the template lacks.
    Other text in braces is left alone (so a template may hold literal JSON).
    """
    if not isinstance(template, str) or not template:
        raise ValueError("`template` must be a non-empty string")
    missing = [name for name in values if "{" + name + "}" not in template]
    if missing:
        names = ", ".join("{" + name + "}" for name in missing)
        raise ValueError(f"the template is missing the placeholder(s) {names}")
    pattern = re.compile(r"\{(" + "|".join(re.escape(name) for name in values) + r")\}")
    return pattern.sub(lambda m: values[m.group(1)], template)


def _require_text(value: object, name: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"`{name}` must be a str, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"`{name}` must be a non-empty string, got {value!r}")


def _require_passages(passages: Sequence[Passage | str | Mapping[str, Any]]) -> list[Passage]:
    if isinstance(passages, (str, bytes)):
        raise TypeError("`passages` must be a sequence of passages, not a single string")
    docs = as_passages(passages)
    if not docs:
        raise ValueError("`passages` must hold at least one passage, got none")
    return docs


def _require_records(ordered_kv_records: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    if not ordered_kv_records:
        raise ValueError("`ordered_kv_records` must hold at least 2 records, got none")
    records: list[tuple[str, str]] = []
    for i, record in enumerate(ordered_kv_records):
        if isinstance(record, str) or len(record) != 2:
            raise ValueError(
                f"`ordered_kv_records[{i}]` must be a (key, value) pair, got {record!r}"
            )
        records.append((str(record[0]), str(record[1])))
    if len(records) < 2:
        raise ValueError(f"`ordered_kv_records` must hold at least 2 records, got {len(records)}")
    keys = [k for k, _ in records]
    if len(set(keys)) != len(keys):
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"`ordered_kv_records` has duplicate keys: {dupes}")
    return records
