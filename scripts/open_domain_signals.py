"""Which chunk each signal ranks first, and whether it holds an answer: the likelihood
(``select_and_place``'s scores), MiniLM's cosine (``EmbeddingsFilter``'s), and a fused
rank ``log-likelihood + w * cosine`` (the likelihood posterior with a similarity prior),
on open-domain BM25 one-sentence chunks (the top 10 of the first 200 questions).

    .venv/bin/python scripts/open_domain_signals.py score --out results/open-domain-signals/signals.json
    .venv/bin/python scripts/open_domain_signals.py report results/open-domain-signals/signals.json

``score`` (about 11 minutes on one core, bfloat16) writes each question's ten chunk
log-likelihoods (SmolLM2, each chunk alone, as ``select_and_place`` scores them), cosines
(the packaged all-MiniLM-L6-v2 on ``embedding_text``) and whether each chunk holds an
answer (the chunk as the reader's prompt shows it, title included). ``report`` prints, for
each weight ``w``, how often the fused top chunk holds an answer, its wins and losses
against MiniLM's top chunk (sign test), and what ``mass=0.9`` of the fused posterior keeps;
then how often each signal's top n chunks hold an answer, n = 1 to 4; then MiniLM at the
count ``mass`` keeps, question by question.
Answer-holding is the reader-free measure of a selection: no reader runs here.
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

WEIGHTS = (0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 100, 1000)


def score(first: int, last: int, k: int, out: Path) -> None:
    """Score the top ``k`` chunks of questions ``first..last-1``; write them to ``out``."""
    from rag_position.data.loaders import load_qa
    from rag_position.data.metrics import contains_answer
    from rag_position.eval.tasks.datasets import default_oracle_path
    from rag_position.eval.tasks.ranked import distinct_passages, rank_corpus, sentence_chunks
    from rag_position.eval.tasks.retrieval import BM25Retriever
    from rag_position.models import load_model
    from rag_position.models.embedders import load_embedder
    from rag_position.passages import embedding_text
    from rag_position.strategies._passage_likelihood import score_alone

    records = load_qa(default_oracle_path())
    corpus = sentence_chunks(distinct_passages(records), 1)
    ranked = rank_corpus(records[first:last], corpus, BM25Retriever(corpus), k)
    scorer = load_model("embedded", dtype="bfloat16")
    embedder = load_embedder("embedded")
    rows = []
    for n, item in enumerate(ranked):
        inst = item.question
        spans, _ = score_alone(inst.question, list(inst.passages), scorer)
        texts = [inst.question, *(embedding_text(p) for p in inst.passages)]
        vectors = np.asarray(embedder.embed(texts), dtype=float)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows.append({
            "question": first + n,
            "log_likelihood": [s.sum for s in spans],
            "cosine": (vectors[1:] @ vectors[0]).tolist(),
            "holds_answer": [
                contains_answer(f"(Title: {p.title}) {p.text}", inst.answers)
                for p in inst.passages
            ],
        })  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"k": k, "questions": [first, last], "rows": rows}) + "\n")


def fused(row: dict[str, Any], weight: float) -> np.ndarray:
    """Each chunk's fused score: its log-likelihood plus ``weight`` times its cosine."""
    return np.asarray(row["log_likelihood"]) + weight * np.asarray(row["cosine"])


def mass_kept(scores: np.ndarray, mass: float = 0.9) -> list[int]:
    """What ``select_and_place``'s rule keeps of chunks scored ``scores``: the fewest top
    chunks holding ``mass`` of their softmax (its own ``posterior`` and ``kept_count``)."""
    from rag_position.strategies._select_and_place import kept_count, posterior

    ranked = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    shares = posterior([float(x) for x in scores])
    return ranked[: kept_count(shares, ranked, mass, None)]


def paired(ours: list[bool], theirs: list[bool]) -> dict[str, Any]:
    """Questions where only ``ours`` holds an answer (wins), only ``theirs`` (losses), and
    the sign test's p."""
    from rag_position.eval.engine.stats import sign_test

    wins = sum(a and not b for a, b in zip(ours, theirs, strict=True))
    losses = sum(b and not a for a, b in zip(ours, theirs, strict=True))
    return {"wins": wins, "losses": losses, "p": sign_test(wins, losses)}


def report(path: Path) -> list[dict[str, Any]]:
    """The table ``report`` prints, one dict per weight."""
    rows = json.loads(path.read_text())["rows"]
    closest = [bool(r["holds_answer"][int(np.argmax(r["cosine"]))]) for r in rows]
    table = []
    for weight in WEIGHTS:
        top = [bool(r["holds_answer"][int(np.argmax(fused(r, weight)))]) for r in rows]
        kept = [mass_kept(fused(r, weight)) for r in rows]
        table.append({
            "weight": weight,
            "top1_holds": float(np.mean(top)),
            "minilm_top1_holds": float(np.mean(closest)),
            **paired(top, closest),
            "mass_kept": float(np.mean([len(k) for k in kept])),
            "mass_holds": float(np.mean([any(r["holds_answer"][i] for i in k)
                                         for r, k in zip(rows, kept, strict=True)])),
        })  # fmt: skip
    return table


def top_n_holds(path: Path, counts: tuple[int, ...] = (1, 2, 3, 4)) -> list[dict[str, Any]]:
    """How often each signal's top ``n`` chunks hold an answer, for each ``n``."""
    rows = json.loads(path.read_text())["rows"]

    def holds(row: dict[str, Any], key: str, n: int) -> bool:
        order = np.argsort(-np.asarray(row[key]), kind="stable")[:n]
        return any(row["holds_answer"][int(i)] for i in order)

    return [
        {"n": n, **{key: float(np.mean([holds(r, key, n) for r in rows]))
                    for key in ("log_likelihood", "cosine")}}
        for n in counts
    ]  # fmt: skip


def count_matched(path: Path, masses: tuple[float, ...] = (0.9, 0.99)) -> list[dict[str, Any]]:
    """Each question's count set by ``select_and_place``'s rule (``mass``), and MiniLM's top
    chunks at that same count: how often each kept set holds an answer, and the paired
    wins and losses of the likelihood's set (an equal count per question, not one for all)."""
    rows = json.loads(path.read_text())["rows"]
    table = []
    for mass in masses:
        ours, theirs, counts = [], [], []
        for row in rows:
            kept = mass_kept(np.asarray(row["log_likelihood"]), mass)
            closest = np.argsort(-np.asarray(row["cosine"]), kind="stable")[: len(kept)]
            ours.append(any(row["holds_answer"][i] for i in kept))
            theirs.append(any(row["holds_answer"][int(i)] for i in closest))
            counts.append(len(kept))
        table.append({"mass": mass, "kept": float(np.mean(counts)),
                      "likelihood_holds": float(np.mean(ours)),
                      "minilm_holds": float(np.mean(theirs)), **paired(ours, theirs)})  # fmt: skip
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    scoring = sub.add_parser("score", help="score the chunks (SmolLM2 and MiniLM)")
    scoring.add_argument("--first", type=int, default=0)
    scoring.add_argument("--last", type=int, default=200)
    scoring.add_argument("--k", type=int, default=10)
    scoring.add_argument("--out", type=Path, required=True)
    reporting = sub.add_parser("report", help="the table, from a scored file")
    reporting.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.command == "score":
        score(args.first, args.last, args.k, args.out)
        return
    table = report(args.path)
    print(f"MiniLM's top chunk holds an answer: {table[0]['minilm_top1_holds']:.3f}")
    print("| w | top chunk holds an answer | wins / losses vs MiniLM's top (p) "
          "| mass=0.9: chunks kept | mass=0.9: an answer kept |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for t in table:
        print(f"| {t['weight']} | {t['top1_holds']:.3f} | {t['wins']} / {t['losses']} "
              f"({t['p']:.2f}) | {t['mass_kept']:.2f} | {t['mass_holds']:.3f} |")  # fmt: skip
    print("\n| chunks kept | the likelihood's top n hold an answer | MiniLM's top n |")
    print("| --- | --- | --- |")
    for t in top_n_holds(args.path):
        print(f"| {t['n']} | {t['log_likelihood']:.3f} | {t['cosine']:.3f} |")
    print("\n| mass | chunks kept (mean) | an answer kept: likelihood / MiniLM at the same count "
          "| wins / losses (p) |")  # fmt: skip
    print("| --- | --- | --- | --- |")
    for t in count_matched(args.path):
        print(
            f"| {t['mass']} | {t['kept']:.2f} | {t['likelihood_holds']:.3f} / "
            f"{t['minilm_holds']:.3f} | {t['wins']} / {t['losses']} ({t['p']:.2f}) |"
        )


if __name__ == "__main__":
    main()
