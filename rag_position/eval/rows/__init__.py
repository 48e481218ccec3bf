"""The eval's row table: which strategy rows each task runs, as data.

A task names a strategy only through these constants (``tests/test_eval_rows.py``
checks it): quick's rows, tune's candidates, the row every comparison is paired with,
multifact's and length's rows. The rows themselves are the strategy table's
(:data:`rag_position.strategies.STRATEGIES`) and the eval's own
(:mod:`rag_position.eval.rows.catalog`: the baselines and the frameworks' reorders;
:mod:`~rag_position.eval.rows.peers`, :mod:`~rag_position.eval.rows.lingua`,
:mod:`~rag_position.eval.rows.attention_sort`), which name the rows they define.
"""

from __future__ import annotations

from rag_position.strategies import STRATEGIES

RETRIEVER = "retriever"
"""The retriever's order, as ranked: the row every comparison is paired with."""
SELECT_AND_PLACE = "select_and_place"
"""Select-and-place, the selection row multifact and open-domain run by name."""
SANDWICH = "sandwich"
"""The query-aware prompt (the question before and after): a row, and multidoc's sweep."""
RECITE = "recite"
"""Recite-then-solve: length's second row."""
DIRECT = "direct"
"""Length's first row: the whole prompt answered directly."""
FACT = "fact"
"""FACT's iterative needle retrieval: multifact's rows ``fact@1`` ... ``fact@N``."""
SINGLE_PASS = "single_pass"
"""Multifact's one-pass answer from the whole haystack."""
GOLD_ALONE = "gold_alone"
"""The oracle: the gold passage alone, a bound compare's notes explain."""
FRAMEWORK_ROWS = ("langchain_reorder", "llamaindex_reorder")
"""LangChain's and LlamaIndex's ``LongContextReorder``, run where the package is installed."""

SEED_GROUPS = {"convex_score_profile": "convex_score", "convex_score_sandwich": "convex_score"}
"""Row -> the row whose per-question seed it shares (the ConvexScore variants score the
same prompts, so they differ only in placement or prompt: a paired comparison)."""
NOT_COMPARED = ("profile",)
"""Strategy rows ``compare`` runs only when named (the profile row's relevance is a choice)."""

PROFILE = "profile"
"""The option (``profile=``, ``--profile``) that gives the profile rows their profile."""
PROFILE_ROWS = tuple(name for name, spec in STRATEGIES.items() if PROFILE in spec.requires)
"""The strategy rows placed by a position profile: ``--profile`` (or the sweep's) goes to each."""

GOLD_RANDOM = "random"
"""Compare's gold setting: the gold passage at a seeded random position."""
GOLD_WORST = "worst"
"""Compare's gold setting: the gold passage at the sweep's worst position."""
GOLD_SETTINGS = (GOLD_RANDOM, GOLD_WORST)
"""Compare's gold settings, both by default."""

COMPARE_VERSUS = RETRIEVER
"""Compare's default ``--versus``: the row each strategy is paired with."""
QUICK_STRATEGIES = (
    RETRIEVER, "gold_first", "gold_last", "edge", SANDWICH, *FRAMEWORK_ROWS,
    "passage_likelihood_profile", SELECT_AND_PLACE,
)  # fmt: skip
"""Quick's rows: the retriever's order, the gold-first and gold-last bounds, the
frameworks' reorders (where installed), the strategies that need no scoring pass, and
two scoring strategies (ten one-passage prompts a question, shared)."""
QUICK_GOLD = (GOLD_RANDOM,)
"""Quick's gold setting: a random position (seeded per question)."""
QUICK_VERSUS = RETRIEVER
"""The row every other is paired with, in quick and in its 200-question reference."""
TUNE_STRATEGIES = (
    RETRIEVER,
    "edge",
    "passage_likelihood",
    "passage_likelihood:placement=last",
    "passage_likelihood_profile",
    SELECT_AND_PLACE,
    "select_and_place_profile",
)
"""Tune's candidates: the retriever's order, the frameworks' edge placement, passage
likelihood placed first, last and by the profile, and select-and-place (best last, and
by the profile). ConvexScore and likelihood selection cost 3.5 to 4.5 times the tokens
(docs/measurements.md) and lost there; name them with ``--strategies`` to include them."""
TUNE_GOLD = (GOLD_RANDOM,)
"""Tune's gold setting: a random position (seeded per question)."""
TUNE_REFERENCE = RETRIEVER
"""The candidate every other is paired with, listed first; the token budget's unit."""
OPEN_DOMAIN_STRATEGIES = (RETRIEVER,)
"""What open-domain's reader does with the top k by default: reads it as ranked."""
MULTIFACT_ROWS = (SINGLE_PASS, FACT)
"""What multifact runs by default; ``select_and_place`` is asked for by name."""
MULTIFACT_KNOWN_ROWS = (*MULTIFACT_ROWS, SELECT_AND_PLACE)
"""Every row multifact can run."""
LENGTH_ROWS = (DIRECT, RECITE)
"""Length's rows, in its report's order."""
