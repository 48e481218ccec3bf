"""FACT, recite-then-solve and medoid voting with scripted generators and embedders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from rag_position.cost import Cost
from rag_position.passages import Passage
from rag_position.prompts import format_documents, render_qa
from rag_position.strategies._align import (
    MASK_CHAR,
    StrategyError,
    locate,
    mask_facts,
    parse_bullets,
    remove_facts,
    sentence_spans,
)
from rag_position.strategies._fact import embedding_retrieve, fact, needle_retrieve
from rag_position.strategies._medoid_vote import is_absent, medoid_vote
from rag_position.strategies._recite_then_solve import parse_blocks, recite_then_solve

QUESTION = "Which cities are capitals?"
DOCS = [
    Passage("Paris is the capital of France. It has many museums.", title="Paris"),
    Passage("The Nile is a river in Africa.", title="Nile"),
    Passage("Berlin is the capital of Germany. It is large.", title="Berlin"),
]


class Scripted:
    """A Generator answering from a list (in call order) or a function of the prompt."""

    def __init__(self, replies: Sequence[str] | Callable[[str], str], *, fail_at: int = -1):
        self.replies = replies
        self.prompts: list[str] = []
        self.kwargs: list[dict[str, Any]] = []
        self.fail_at = fail_at

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list[str]:
        out = []
        self.kwargs.append(kwargs)
        for p in prompts:
            if len(self.prompts) == self.fail_at:
                raise RuntimeError("server down")
            self.prompts.append(p)
            if callable(self.replies):
                out.append(self.replies(p))
            else:
                out.append(self.replies[len(self.prompts) - 1])
        return out


class MeteredScripted(Scripted):
    @property
    def usage(self) -> Cost:
        return Cost(lm_calls=len(self.prompts) + 100, prompt_tokens=7 * len(self.prompts))


class WordEmbedder:
    """Bag-of-words vectors over a fixed vocabulary (other words ignored), unit rows."""

    def __init__(self, vocab: Sequence[str]) -> None:
        self.vocab = list(vocab)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), len(self.vocab)), dtype=np.float32)
        for i, t in enumerate(texts):
            words = t.lower().replace(".", " ").replace("?", " ").split()
            for w in words:
                if w in self.vocab:
                    rows[i, self.vocab.index(w)] += 1.0
            rows[i] /= max(float(np.linalg.norm(rows[i])), 1e-9)
        return rows


VOCAB = ["paris", "berlin", "rome", "capital", "france", "city"]
EMB = WordEmbedder(VOCAB)
BIG = ["Paris is big.", "Berlin is big."]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("- Paris is big.\n- Berlin is big.", BIG),
        ("Paris is big.\nBerlin is big.", BIG),  # no bullets
        ("- Paris is big.\n- Paris is big.\n-  Paris is big.", ["Paris is big."]),  # repeated
        ("1. Paris is big.\n2) Berlin is big.", BIG),
        ("- 1) Paris is big.\n- 2. Berlin is big.", BIG),
        ("- Paris is big.\n- Berlin is big.\n- The Nile is a riv", BIG),
        ("", []),
        ("-", []),
        ("  -  \n\n", []),
        ("Retrieved sentences:\n* Paris is big.", ["Paris is big."]),
        ('- "Paris is big."', ["Paris is big."]),
        ("- Paris is big", ["Paris is big"]),  # a single item is kept even without a period
        ("- 3.5 million live there.", ["3.5 million live there."]),
        # a cut-off last item is dropped as before the linear-time rewrite (test_align_linear)
        ("- Paris is big.)\n- Berlin (big.)\n- cut", ["Paris is big.)", "Berlin (big.)"]),
        ('- Paris is big!"\n- Berlin?]\n- cut', ["Paris is big!", "Berlin?]"]),
        ("- Paris is big\n- Berlin is big.\n- cut", ["Paris is big", "Berlin is big.", "cut"]),
        ("- Paris is big.\n- cut\n", ["Paris is big.", "cut"]),
    ],
)
def test_parse_bullets_survives_messy_output(raw: str, expected: list[str]) -> None:
    assert parse_bullets(raw) == expected


def test_sentence_spans_locate_remove_and_mask() -> None:
    text = "Document [1](Title: A) One here. Two there!\n____ Three.\n_____"  # header, filler
    assert [text[a:b] for a, b in sentence_spans(text)] == ["One here.", "Two there!", "Three."]
    text = format_documents(DOCS)
    exact = locate("Berlin is the capital of Germany.", text)
    assert exact is not None and text[slice(*exact)] == "Berlin is the capital of Germany."
    fuzzy = locate("Berlin is the capitol of germany", text)
    assert fuzzy is not None and text[slice(*fuzzy)] == "Berlin is the capital of Germany."
    fragment = locate("capital of France", text)  # grows to its sentence
    assert fragment is not None and text[slice(*fragment)] == "Paris is the capital of France."
    assert locate("Rome is the capital of Italy.", text) is None
    in_sentence = locate("Berlin", text)  # the sentence, not the "(Title: Berlin)" header
    assert in_sentence is not None and text[slice(*in_sentence)].startswith("Berlin is")
    assert locate("---", text) is None
    # remove cuts exactly the located spans; mask keeps the length
    cands = ["Paris is the capital of France.", "Berlin is the capitol of Germany", "Made up."]
    removed = remove_facts(cands, text)
    assert removed.spans[2] is None
    (a1, b1), (a2, b2) = removed.spans[:2]  # type: ignore[misc]
    assert removed.context == text[:a1] + text[b1:a2] + text[b2:]
    masked = mask_facts(cands, text)
    assert len(masked.context) == len(text) and masked.context == (
        text[:a1] + MASK_CHAR * (b1 - a1) + text[b1:a2] + MASK_CHAR * (b2 - a2) + text[b2:]
    )


def _fact_script(prompt: str) -> str:
    if prompt.startswith("Please retrieve"):
        context = prompt.split("The following are given documents.\n\n")[1]
        if "Berlin is the capital" in context and "Paris is the capital" in context:
            return "- Berlin is the capital of Germany.\n- Rome is the capital of Italy."
        if "Paris is the capital" in context:
            return "- Paris is the capitol of France"
        return "- Berlin is the capital of Germany.\n-"
    return "Paris and Berlin."


def test_fact_iterates_until_nothing_new() -> None:
    gen = Scripted(_fact_script)
    result = fact(QUESTION, DOCS, gen, max_iterations=5)
    its = result.trace.iterations
    assert len(its) == 3 and result.trace.stopped_because == "nothing_new"
    assert its[0].new_facts == ["Berlin is the capital of Germany."]
    assert its[0].hallucinated == ["Rome is the capital of Italy."]
    assert its[1].new_facts == ["Paris is the capital of France."]
    # re-retrieving a fact an earlier pass removed is a duplicate, not a hallucination
    assert its[2].new_facts == [] and its[2].hallucinated == [] and its[2].duplicates == 1
    assert result.trace.hallucinations == 1 and result.answer == "Paris and Berlin."
    # original context order, not discovery order; hallucinations are not facts
    assert result.facts == ["Paris is the capital of France.", "Berlin is the capital of Germany."]
    assert gen.prompts[-1] == render_qa(QUESTION, ["x"]).replace(
        "Document [1](Title: ) x",
        "- Paris is the capital of France.\n- Berlin is the capital of Germany.",
    )
    assert result.cost.lm_calls == 4 == len(gen.prompts)
    assert "Berlin is the capital" not in gen.prompts[1]  # removed from the context


def test_fact_max_iterations_mask_and_no_answer() -> None:
    gen = Scripted(_fact_script)
    result = fact(QUESTION, DOCS, gen, max_iterations=1, rewrite="mask", answer=False)
    assert result.trace.stopped_because == "max_iterations"
    assert result.answer == "" and result.trace.answer_prompt is None
    assert result.facts == ["Berlin is the capital of Germany."] and result.cost.lm_calls == 1
    gen = Scripted(_fact_script)  # the mask keeps the context's length between passes
    fact(QUESTION, DOCS, gen, max_iterations=2, rewrite="mask", answer=False)
    assert len(gen.prompts[0]) == len(gen.prompts[1])
    assert MASK_CHAR * len("Berlin is the capital of Germany.") in gen.prompts[1]


def test_fact_custom_retrieve_stop_and_string_context() -> None:
    context = "Alpha is one. Beta is two. Gamma is three."
    calls: list[str] = []

    def retrieve(question: str, ctx: str) -> list[str]:
        calls.append(ctx)
        return [s for s in ("Gamma is three.", "Alpha is one.") if s in ctx][:1]

    gen = Scripted(["answer"])
    result = fact("q?", context, gen, retrieve=retrieve, stop=lambda f, c: len(f) >= 2)
    assert result.trace.stopped_because == "stop"
    assert result.facts == ["Alpha is one.", "Gamma is three."]
    assert result.trace.iterations[0].raw is None and len(calls) == 2 and result.cost.lm_calls == 1


def test_fact_with_context_fallback_and_embedding_retrieve() -> None:
    gen = Scripted(_fact_script)
    result = fact(QUESTION, DOCS, gen, max_iterations=1, with_context=True)
    prompt = gen.prompts[-1]
    assert format_documents(DOCS) in prompt
    assert "Relevant sentences:\n- Berlin is the capital of Germany." in prompt
    empty = Scripted(["-", "no idea"])
    result = fact(QUESTION, DOCS, empty)
    assert result.facts == [] and result.trace.fell_back
    assert format_documents(DOCS) in empty.prompts[-1]
    emb = WordEmbedder(["capital", "france", "paris", "nile"])
    gen = Scripted(["Paris."])
    result = fact("capital france paris", DOCS, gen, retrieve=embedding_retrieve(emb, top_k=1))
    assert result.facts[0] == "Paris is the capital of France." and result.cost.lm_calls == 1


def test_fact_needle_retrieve_finds_the_values_pass_by_pass() -> None:
    context = (
        "Grass is green. One of the special magic numbers for cat is: 12. The sky is blue. "
        "One of the special magic numbers for cat is: 345. In 1999 it rained. "
        "One of the special magic numbers for cat is: 6789."
    )
    replies = iter(["12, 345 and 99.", "6789", "none"])
    gen = MeteredScripted(lambda prompt: next(replies))
    result = fact("cat", context, gen, retrieve=needle_retrieve(gen, "cat"), answer=False)
    assert "special magic numbers for cat mentioned" in gen.prompts[0]
    assert [s.rsplit(" ", 1)[-1] for s in result.facts] == ["12.", "345.", "6789."]
    assert result.trace.iterations[0].hallucinated == ["99"]
    assert "1999" in gen.prompts[2] and "345" not in gen.prompts[1]
    assert result.trace.stopped_because == "nothing_new" and result.cost.lm_calls == 3
    metered = fact(QUESTION, DOCS, MeteredScripted(_fact_script), max_iterations=1)
    assert metered.cost.lm_calls == 2 and metered.cost.prompt_tokens == 14  # the usage delta


def test_recite_grounds_misquoted_and_drops_invented_blocks() -> None:
    raw = (
        "# Document 3\nBerlin is the capital of germany. It is big.\n"
        "# Document 4\nThe moon is made of green cheese and nobody knows.\n"
        "# Document 1\nParis is the capital of France. It has many museums.\n"
        "# Document 1\nParis is the capital of France. It has many museums."
    )
    gen = Scripted([raw, "Paris and Berlin"])
    result = recite_then_solve(QUESTION, DOCS, gen)
    got = [(b.number, b.status, b.source) for b in result.trace.blocks]
    assert got == [(3, "replaced", 2), (4, "dropped", None), (1, "kept", 0), (1, "repeated", 0)]
    assert result.recited == [DOCS[0], DOCS[2]]  # exact source passages, context order
    assert gen.prompts[1] == render_qa(QUESTION, [DOCS[0], DOCS[2]])
    assert result.answer == "Paris and Berlin" and result.trace.outcome == "recited"
    assert result.trace.exact_rate == 0.25 and result.cost.lm_calls == 2


def test_recite_falls_back_to_the_context_or_not() -> None:
    gen = Scripted(["# Document 9\nSomething nobody wrote anywhere at all.", "x"])
    result = recite_then_solve(QUESTION, DOCS, gen)
    assert result.trace.fell_back and result.recited == []
    assert format_documents(DOCS) in gen.prompts[1]
    gen = Scripted([""])
    result = recite_then_solve(QUESTION, DOCS, gen, fallback="none")
    assert result.answer == "" and result.trace.outcome == "no_evidence"
    assert result.trace.exact_rate is None and result.cost.lm_calls == 1


def test_recite_plain_text_context() -> None:
    context = "Alpha is one. Beta is two. Gamma is three."
    gen = Scripted(["- Gamma is tree.\n- Delta is four hundred.\n- Alpha is one.", "ok"])
    result = recite_then_solve("q?", context, gen)
    assert "one recited sentence" not in gen.prompts[0] and "WORD BY WORD" in gen.prompts[0]
    assert [b.status for b in result.trace.blocks] == ["replaced", "dropped", "kept"]
    assert [p.text for p in result.recited] == ["Alpha is one.", "Gamma is three."]
    assert "Alpha is one.\nGamma is three.\n\nQuestion: q?" in gen.prompts[1]


def test_parse_blocks_variants() -> None:
    raw = "Intro\n# Document 2: Foo.\nDocument [3](Title: T) Bar.\n## Document 4\nBaz."
    assert parse_blocks(raw) == [(None, "Intro"), (2, "Foo."), (3, "Bar."), (4, "Baz.")]
    assert parse_blocks("just text") == [(None, "just text")]
    blocks = parse_blocks("A b.\n\nC d.\n# Document 1\nE.\n\nF.")
    assert blocks == [(None, "A b."), (None, "C d."), (1, "E.\n\nF.")] and parse_blocks("") == []


def test_medoid_picks_the_central_answer_in_one_batch() -> None:
    answers = ["Rome", "Paris capital", "Paris", "Paris capital city", "Berlin"]
    gen = Scripted(answers)
    result = medoid_vote(QUESTION, DOCS, gen, EMB, n_orders=5, seed=3, temperature=0.7)
    assert result.answer == "Paris capital"
    assert len(gen.kwargs) == 1 and gen.kwargs[0]["temperature"] == 0.7
    assert result.orders[0] == [0, 1, 2] and len({tuple(o) for o in result.orders}) == 5
    assert gen.prompts == [render_qa(QUESTION, [DOCS[i] for i in o]) for o in result.orders]
    sims = result.similarities
    assert all(s is not None for s in sims) and max(sims) == sims[1]  # type: ignore[type-var]
    assert result.cost.lm_calls == 5
    again = medoid_vote(QUESTION, DOCS, Scripted(answers), EMB, n_orders=5, seed=3)
    assert again.orders == result.orders


def test_medoid_absence_filtering() -> None:
    answers = ["No information found in context.", "The context does not mention it.", "Rome"]
    result = medoid_vote(QUESTION, DOCS, Scripted(answers), EMB, n_orders=3)
    assert result.answer == "Rome" and result.trace.absent == [0, 1]
    assert result.similarities == [None, None, 0.0]
    all_absent = ["I don't know.", "Not mentioned.", "I don\u2019t know."]
    result = medoid_vote(QUESTION, DOCS, Scripted(all_absent), EMB, n_orders=3)
    assert result.trace.voters == [0, 1, 2] and result.answer == "I don't know."
    nope = Scripted(["nope", "Rome"])
    custom = medoid_vote(QUESTION, DOCS, nope, EMB, n_orders=2, absence_phrases=["nope"])
    assert custom.answer == "Rome"
    assert is_absent("The CONTEXT does not contain that") and not is_absent("Paris")


def test_medoid_ties_go_to_the_lowest_index_and_n_orders_beyond_n_factorial() -> None:
    two = DOCS[:2]
    result = medoid_vote(QUESTION, two, Scripted(["Paris", "Berlin", "Rome"]), EMB, n_orders=3)
    assert result.answer == "Paris" and result.trace.chosen == 0
    assert result.orders == [[0, 1], [1, 0], [0, 1]]
    single = medoid_vote(QUESTION, two, Scripted(["Berlin"]), EMB, n_orders=1)
    assert single.answer == "Berlin" and single.orders == [[0, 1]]


def test_medoid_resampling_control_keeps_the_order_and_reseeds_each_sample() -> None:
    gen = Scripted(["Paris", "Paris capital", "Rome"])
    result = medoid_vote(
        QUESTION, DOCS, gen, EMB, n_orders=3, seed=5, temperature=0.7, permute=False
    )
    assert result.orders == [[0, 1, 2]] * 3 and gen.prompts == [render_qa(QUESTION, DOCS)] * 3
    seeds = [(kw["seed"], kw["temperature"]) for kw in gen.kwargs]  # one call a sample
    assert seeds == [(5, 0.7), (6, 0.7), (7, 0.7)]
    assert result.answer in ("Paris", "Paris capital") and result.cost.lm_calls == 3
    with pytest.raises(ValueError, match="temperature > 0"):
        medoid_vote(QUESTION, DOCS, gen, EMB, n_orders=3, permute=False)


def test_registry_generation_entries_answer_by_themselves() -> None:
    from rag_position.strategies import STRATEGIES

    rec = STRATEGIES["recite"](QUESTION, DOCS, generator=Scripted(_recite_paris))
    assert rec.answer == "Paris" and rec.cost.lm_calls == 2
    paris = Scripted(lambda p: "Paris")
    med = STRATEGIES["medoid"](QUESTION, DOCS, generator=paris, embedder=EMB, seed=1)
    assert med.answer == "Paris" and len(med.orders) == 3  # n_orders=3 unless told
    fct = STRATEGIES["fact"](QUESTION, DOCS, generator=Scripted(_fact_script), max_iterations=2)
    assert fct.facts and fct.answer
    for name in ("fact", "recite", "medoid"):
        with pytest.raises(ValueError, match="generator="):
            STRATEGIES[name](QUESTION, DOCS)


def _recite_paris(prompt: str) -> str:
    if "WORD BY WORD" in prompt:
        return "# Document 1\nParis is the capital of France. It is in Europe."
    return "Paris"


def test_bad_input() -> None:
    gen = Scripted(["x"])
    for call in (  # fact(QUESTION, [], gen): below, with its message
        lambda: fact(QUESTION, "   ", gen),
        lambda: fact(QUESTION, [Passage("  ")], gen),
        lambda: fact(QUESTION, DOCS, gen, max_iterations=0),
        lambda: fact(QUESTION, DOCS, gen, rewrite="erase"),  # type: ignore[arg-type]
        lambda: fact("", DOCS, gen),
        lambda: recite_then_solve(QUESTION, [], gen),
        lambda: recite_then_solve(QUESTION, DOCS, gen, fallback="maybe"),  # type: ignore[arg-type]
        *(
            lambda f=f, t=t: f(QUESTION, DOCS, gen, threshold=t)
            for f in (fact, recite_then_solve)
            for t in (float("nan"), 0.0, 1.5)
        ),
        lambda: medoid_vote(QUESTION, [], gen, EMB),
        lambda: medoid_vote(QUESTION, DOCS, gen, EMB, n_orders=0),
    ):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError, match="nothing to retrieve from"):
        fact(QUESTION, [], gen)
    with pytest.raises(TypeError):
        medoid_vote(QUESTION, "a context", gen, EMB)
    assert gen.prompts == []


def test_a_failing_generator_surfaces_the_partial_trace() -> None:
    gen = Scripted(_fact_script, fail_at=2)
    with pytest.raises(StrategyError, match="server down") as info:
        fact(QUESTION, DOCS, gen, max_iterations=5)
    assert isinstance(info.value.__cause__, RuntimeError)
    trace = info.value.trace
    assert len(trace.iterations) == 2 and trace.stopped_because == ""
    assert trace.iterations[0].new_facts == ["Berlin is the capital of Germany."]

    gen = Scripted(["# Document 1\n" + DOCS[0].text], fail_at=1)
    with pytest.raises(StrategyError) as info:
        recite_then_solve(QUESTION, DOCS, gen)
    assert info.value.trace.blocks[0].status == "kept" and info.value.trace.outcome == "unfinished"

    with pytest.raises(StrategyError) as info:
        medoid_vote(QUESTION, DOCS, Scripted(["a"] * 3, fail_at=0), EMB, n_orders=3)
    assert len(info.value.trace.prompts) == 3 and info.value.trace.chosen == -1


def test_fuzzy_alignment_never_changes_a_number() -> None:
    """A miscopied value is a different fact: not found at its neighbour, not repaired."""
    needles = "\n".join(f"One of the magic numbers for ember is: {v}." for v in (7838146, 1983963))
    first, second = needles.split("\n")
    assert locate(first, needles) == (0, len(first))
    assert locate("One of the magic numbers for ember is: 7838145.", needles) is None
    fuzzy = locate("One of the magic numbers for amber is: 1983963", needles)
    assert fuzzy is not None and needles[slice(*fuzzy)] == second
    gen = Scripted(
        ["- One of the magic numbers for ember is: 7838147.\n- One of the magic numbers "
         "for ember is: 1983963.", "", "1983963"]
    )  # fmt: skip
    result = fact("Magic numbers for ember?", needles, gen, max_iterations=2)
    assert result.facts == [second] and result.trace.hallucinations == 1
    lines = "ABCD = 45.\nEFGH = 12."
    gen = Scripted(["- ABCD = 46.\n- EFGH == 12.\n", "57"])
    recited = recite_then_solve("What is ABCD + EFGH?", lines, gen)
    assert [b.status for b in recited.trace.blocks] == ["dropped", "replaced"]
    assert [p.text for p in recited.recited] == ["EFGH = 12."]
