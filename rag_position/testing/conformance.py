"""The reorderer conformance kit: one set of property tests for every reorderer (tests only).

In the spirit of scikit-learn's ``check_estimator`` and ``langchain-tests``' standard
test classes: a test module subclasses :class:`ReordererConformance` (core functions) or
:class:`ComponentConformance` (a framework's components, one case per row of the
strategy table and :data:`COMPONENT_VARIANTS`) as a ``Test*`` class and fills in the
hooks: how to wrap passages as its objects, call a reorderer and read back metadata.
Checked on generated inputs (0 to 30 items, empty, emoji and long texts, the same object
more than once, nested metadata, NaN/inf scores, scripted scorers: a hash of the prompt,
a constant, NaN/inf): the output is a permutation of the input by identity where
identity is promised (a documented selection for Haystack's options and the selecting
rows), else each input once as a NEW copy with a new metadata dict (the caller's keys,
values shared) plus one record (``RECORD_KEYS`` and the row's ``record_keys``; ``rank``,
``original_rank``, a score that is never NaN); inputs and options unchanged; a scorer's
NaN/inf refused with a clear ``BackendError`` (or still a permutation), one batched call
from two items on; documented refusals a ``ValueError`` that changes nothing; no items
in, no items out; a NaN among the scores a reorderer reads (the caller's ``scores=``,
the items' own retriever scores, ``metadata[score_key]``) a ``ValueError`` naming the
item, predicted by :meth:`ReordererConformance.refusal`. Needs ``hypothesis`` and
``pytest`` (dev dependencies).
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_position._integration import METADATA_KEY, RECORD_KEYS, record_keys
from rag_position.strategies import STRATEGIES, PositionProfile
from rag_position.strategies._base import own_score
from rag_position.testing.conformance_checks import (
    Snapshot,
    check_permutation,
    containers,
)
from rag_position.testing.scripted import HashScorer, ScriptedScorer, tolerating_nonfinite
from rag_position.testing.strategies import (
    SCORE_KEY,
    bad_score_values,
    edge_modes,
    retriever_scores,
    score_values,
    scorers,
)

QUESTIONS = ["Who wrote Hamlet?", "¿Quién escribió 🎭 Hamlet?", "q"]
NONFINITE = [[math.nan], [math.inf], [-math.inf], [math.nan, math.inf, -math.inf, 1.0]]
"""What a scripted scorer answers in ``test_nan_and_infinite_likelihoods``."""
PROFILES: list[Any] = [
    PositionProfile((0.3, 0.1, 0.5)),
    PositionProfile((0.7,)),
    PositionProfile((0.2, 0.2, 0.1, 0.4, 0.9, 0.3, 0.3)),
    [0.4, 0.1, 0.6],  # lists of values (ProfileLike)
    [0.2, 0.2, 0.1, 0.4, 0.9, 0.3, 0.3],
]

# ---------------------------------------------------------------------- the strategy table
# The one place that reads the table and the record schema.


def record_of(component: type) -> tuple[str, frozenset[str]]:
    """The ``strategy`` a component class writes in its record, and the record's keys."""
    strategy: str = component.strategy_name  # type: ignore[attr-defined]
    return strategy, frozenset({*RECORD_KEYS, *record_keys(strategy)})


def needs(name: str) -> tuple[bool, bool]:
    """Whether strategy ``name`` needs a scorer, and a ``profile``."""
    row = STRATEGIES[name]
    return "scorer" in row.needs, "profile" in row.requires


# ---------------------------------------------------------------------- options

profile_score_values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=True), st.integers(-3, 3), st.just(math.nan)
)
OPTIONS: dict[str, tuple[Any, Any]] = {
    "seed": (st.integers(0, 2**16), 3),
    "profile": (st.sampled_from(PROFILES), PROFILES[0]),
    "metadata_key": (st.sampled_from([METADATA_KEY, METADATA_KEY, "pos", None]), METADATA_KEY),
    "mode": (edge_modes, "langchain"),
    "rest": (st.sampled_from([None, "keep"]), None),
    "top_k": (st.one_of(st.none(), st.integers(1, 32)), 2),
    "top_n": (st.one_of(st.none(), st.integers(1, 5)), 2),
    "mass": (st.one_of(st.none(), st.floats(0.01, 1.0)), 0.5),
    "word_count_threshold": (st.integers(1, 40), 3),
    "replace_score": (st.booleans(), True),
    "use_scores": (st.booleans(), True),
    "edge_scores": (lambda n: st.lists(retriever_scores, min_size=n, max_size=n),
                    lambda n: [None if i % 3 == 0 else float(i) for i in range(n)]),
    "profile_scores": (lambda n: st.lists(profile_score_values, min_size=n, max_size=n),
                       lambda n: [float(-i) for i in range(n)]),
}  # fmt: skip
"""Option name -> (what is drawn, the plain value); a function: of the number of items."""

SCORE_OPTIONS = ("edge_scores", "profile_scores")
"""The options that are the caller's ``scores=``, one per item (a NaN: a ``ValueError``)."""
NAN_REFUSAL = "is NaN: give every"
"""What the ``ValueError`` for a NaN score says (after naming the item: ``scores[1]``,
``the own score of passages[1]``, ``nodes[1].score``)."""


def never(options: Mapping[str, Any]) -> bool:
    """A reorderer that never ranks by the items' own retriever scores."""
    return False


def always(options: Mapping[str, Any]) -> bool:
    """A reorderer that always ranks by the items' own retriever scores (profile placement
    with no ``scores``, ``scorer`` or ``score_key``; ``edge_reorder(mode="llamaindex")``)."""
    return True


def edge_reads_own(options: Mapping[str, Any]) -> bool:
    """An edge component without ``score_key``: ``mode="llamaindex"`` reads the items' own
    scores, the other modes with ``use_scores`` (where the component has it; default on:
    a framework's objects without scores of their own never have a NaN one)."""
    if "score_key" in options:
        return False
    return options.get("mode") == "llamaindex" or bool(options.get("use_scores", True))


@dataclass(frozen=True)
class Case:
    """One reorderer to check. ``build(scorer, options)`` makes it; ``options``, one per
    name in ``takes``, are drawn from :data:`OPTIONS`; ``fixed``: a component's other
    arguments. ``scores``: it calls the scorer (once, batched, from 2 items on);
    ``all_scores``: every item needs a value under ``score_key``; ``max_n``: the most items
    (N² designs kept small); ``record``: ``(strategy, keys)`` of the record it writes;
    ``selects``: a selecting row (it may keep a subset, and lists the rest as dropped);
    ``own_scores(options)``: whether, with these options (``fixed`` and drawn), it ranks
    by the items' own retriever scores (:meth:`ReordererConformance.own_score`), where a
    NaN is a documented ``ValueError`` from two items on."""

    build: Callable[[Any, dict[str, Any]], Any] = lambda s, o: None
    takes: tuple[str, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    scores: bool = False
    all_scores: bool = False
    max_n: int = 30
    record: tuple[str, frozenset[str]] = ("", frozenset())
    selects: bool = False
    own_scores: Callable[[Mapping[str, Any]], bool] = never

    @property
    def score_key(self) -> bool:
        """It reads ``metadata[score_key]`` (NaN, non-numbers: a documented ``ValueError``)."""
        return "score_key" in self.fixed

    @property
    def drops(self) -> bool:
        """A documented selection, not a permutation: Haystack's options, a selecting row."""
        return "top_k" in self.takes or self.selects

    def options(self, n: int) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({k: _of(OPTIONS[k][0], n) for k in self.takes})

    def plain(self, n: int) -> dict[str, Any]:
        return {k: _of(OPTIONS[k][1], n) for k in self.takes}


def _of(value: Any, n: int) -> Any:
    return value(n) if callable(value) else value


def v(
    *takes: str,
    scores: bool = False,
    all_scores: bool = False,
    own_scores: Callable[[Mapping[str, Any]], bool] = never,
    **fixed: Any,
) -> Case:
    return Case(
        takes=takes, fixed=fixed, scores=scores, all_scores=all_scores, own_scores=own_scores
    )


DEFAULT_TAKES = ("seed", "metadata_key")
"""What a component without its own entry in :data:`COMPONENT_VARIANTS` is drawn with:
those of these options it takes (the rest at their defaults)."""

COMPONENT_VARIANTS: dict[str, dict[str, Case]] = {
    "likelihood_selection": {
        "": v("seed", "metadata_key"),
        "_options": v(n_orders=3, include_given=False, query_aware=True, title_key=None),
    },
    "convex_score": {
        "": v("seed", "metadata_key"),
        "_last_authors": v(placement="last", rest="scores", variant="authors", n_base_orders=2),
        "_profile": v("profile", "metadata_key", placement="profile"),
    },
    "passage_likelihood": {
        "": v("metadata_key"),
        "_last_scores": v(placement="last", rest="scores", title_key=None),
        "_profile": v("profile", "rest", "metadata_key", placement="profile"),
    },
    "profile": {  # the retriever's scores where all have one, else the order
        "": v("profile", "metadata_key", own_scores=always),
        "_score_key": v("profile", "metadata_key", all_scores=True, score_key=SCORE_KEY),
        "_scorer": v("profile", "metadata_key", scores=True),  # passage likelihood
        "_scorer_convex": v("profile", "metadata_key", scores=True, relevance="convex_score",
                            convex_options={"n_rotations": 2, "seed": 5}),
    },
    "select_and_place": {
        "": v("mass", "top_n", "metadata_key"),
        "_profile": v("profile", "metadata_key", placement="profile"),
        "_first_all": v(placement="first", mass=None),
    },
    "edge": {  # metadata[score_key], else the retriever's scores (see edge_reads_own)
        "": v("mode", "metadata_key", own_scores=edge_reads_own),
        "_score_key": v("mode", "metadata_key", score_key=SCORE_KEY),
        "_haystack_options": v("top_k", "word_count_threshold", mode="haystack",
                               own_scores=edge_reads_own),
    },
}  # fmt: skip
"""Record strategy -> suffix -> the options every framework's component is checked with."""

# ---------------------------------------------------------------------- the suites

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


class ReordererConformance:
    """The checks every reorderer passes; subclass as ``Test*`` and fill in the hooks."""

    max_examples: ClassVar[int] = 60
    has_async: ClassVar[bool] = False
    optional_question: ClassVar[bool] = False  # ``None`` as the query, where none is needed

    # -- hooks (a subclass defines the first five)
    cases: Callable[[], Mapping[str, Case]]
    items: Callable[[int, st.SearchStrategy[Any]], st.SearchStrategy[list[Any]]]
    """``items(max_n, scores)``: 0..max_n items, ``scores`` drawn under ``score_key``."""
    run: Callable[[Any, Sequence[Any], Any, bool], Any]
    """``run(reorderer, items, question, use_async)``: what it returns."""
    check_output: Callable[..., None]
    """``check_output(given, out, case, key, replace=False)``: ``out`` as documented."""
    nonfinite_items: Callable[[], list[Any]]
    """The items of ``test_nan_and_infinite_likelihoods``."""

    def state(self, item: Any) -> Any:
        """What must not change in an item (deep-copied, then compared)."""
        return item

    def inner(self, item: Any) -> list[int]:
        """The ids of the objects inside an item that must stay the same objects."""
        return containers(item)

    def own_score(self, item: Any) -> float | None:
        """An item's own retriever score, as the reorderers read it (``None``: none)."""
        return own_score(item)

    def refusal(self, case: Case, items: Sequence[Any], options: dict[str, Any]) -> str | None:
        """The documented ``ValueError`` (its ``match``) these arguments make, if any.

        A NaN among the scores the reorderer reads: the caller's ``scores=``
        (:data:`SCORE_OPTIONS`) or, where ``case.own_scores``, the items' own scores.
        Never for 0 or 1 items: they come back as given, no score read.
        """
        if len(items) < 2:
            return None
        given = [options[k] for k in SCORE_OPTIONS if k in options]
        for scores in given:
            if any(s is not None and math.isnan(s) for s in scores):
                return NAN_REFUSAL
        if case.own_scores({**case.fixed, **options}):
            scores = [self.own_score(x) for x in items]
            if any(s is not None and math.isnan(s) for s in scores):
                return NAN_REFUSAL
        return None

    # -- helpers
    def snapshot(self, items: Sequence[Any], *others: Any) -> Snapshot:
        return Snapshot(items, *others, state=self.state, inner=self.inner)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        cases = self.cases()
        if "values" in metafunc.fixturenames:
            scoring = [n for n in sorted(cases) if cases[n].scores]
            metafunc.parametrize(("name", "values"), [(n, x) for n in scoring for x in NONFINITE])
        elif "name" in metafunc.fixturenames:
            metafunc.parametrize("name", sorted(cases))

    def settings_of(self, reorderer: Any) -> tuple[str | None, bool]:
        key, replace = (getattr(reorderer, k, None) for k in ("metadata_key", "replace_score"))
        return key, bool(replace)

    # -- the checks
    def test_every_item_once_and_nothing_changed(self, name: str) -> None:
        case = self.cases()[name]
        bad = st.one_of(score_values, bad_score_values) if case.score_key else score_values

        @settings(SETTINGS, max_examples=self.max_examples)
        @given(data=st.data())
        def check(data: st.DataObject) -> None:
            items = data.draw(self.items(case.max_n, bad), label="items")
            given_as = data.draw(st.sampled_from([list, tuple]), label="container")(items)
            options = data.draw(case.options(len(items)), label="options")
            scorer = data.draw(scorers, label="scorer")
            asked = [*QUESTIONS, None] if self.optional_question and not case.scores else QUESTIONS
            question = data.draw(st.sampled_from(asked), label="question")
            use_async = self.has_async and data.draw(st.integers(0, 7), label="async") == 0
            reorderer = case.build(scorer, options)
            before = self.snapshot(given_as, options)
            refusal = self.refusal(case, given_as, options)
            if refusal is not None:
                with pytest.raises(ValueError, match=refusal):
                    self.run(reorderer, given_as, question, use_async)
                before.check()
                return
            out = tolerating_nonfinite(
                scorer, lambda: self.run(reorderer, given_as, question, use_async)
            )
            before.check()
            assert scorer.calls == (1 if case.scores and len(items) >= 2 else 0), "one call"
            if out is not None:  # else the scorer's NaN/inf was refused
                self.check_output(given_as, out, case, *self.settings_of(reorderer))

        check()

    def test_no_items_give_no_items(self, name: str) -> None:
        case = self.cases()[name]
        scorer = HashScorer()
        reorderer = case.build(scorer, case.plain(0))
        empties: tuple[Sequence[Any], ...] = ([], ())
        for empty in empties:
            for use_async in {False, self.has_async}:
                out = self.run(reorderer, empty, QUESTIONS[0], use_async)
                self.check_output(empty, out, case, *self.settings_of(reorderer))
        assert scorer.calls == 0

    def test_nan_and_infinite_likelihoods(self, name: str, values: list[float]) -> None:
        """A scorer answering NaN/inf: a clear ``BackendError``, or still every item once."""
        case, items = self.cases()[name], self.nonfinite_items()
        options = case.plain(len(items))
        before = self.snapshot(items, options)
        scorer = ScriptedScorer(values)
        reorderer = case.build(scorer, options)
        out = tolerating_nonfinite(scorer, lambda: self.run(reorderer, items, QUESTIONS[0], False))
        before.check()
        assert scorer.calls == 1
        if out is not None:
            self.check_output(items, out, case, *self.settings_of(reorderer))


class ComponentConformance(ReordererConformance):
    """A framework's reordering components, from its strategy name -> class table."""

    has_async = True
    components: ClassVar[Mapping[str, type]]  # the integration's COMPONENTS
    alike: ClassVar[Mapping[type, type]] = {}  # a reorderer outside the table -> a class like it
    package: ClassVar[ModuleType]  # every reorderer it exports must be checked
    reorderer_base: ClassVar[tuple[type, ...]]
    item_type: ClassVar[type]

    # -- hooks (a subclass defines the first four)
    wrap: Callable[[str, dict[str, Any], str], Any]
    """``wrap(text, metadata, id)``: a passage as the framework's object (score 0.5)."""
    metadata: Callable[[Any], dict[str, Any]]
    check_copy: Callable[[Any, Any, str, float | None, bool], None]
    """``check_copy(src, out, key, score, replace)``: ``out`` is the documented copy of
    ``src`` (``score``: its record's, under ``key``; ``replace``: ``replace_score``)."""
    retriever: Callable[[list[Any], str, dict[str, Any], st.DataObject], tuple[Any, list[Any]]]
    """``retriever(items, name, options, data)``: a ``PositionAwareRetriever`` over
    ``items``, as ``(call(question, use_async), the items it keeps)``: those its strategy
    reorders (and :meth:`refusal` looks at)."""

    def mutations(self, items: list[Any]) -> list[Callable[[], Any]]:
        """Ways to mutate the caller's items that the snapshot must catch."""
        return []

    def broken(self, given: list[Any], out: list[Any]) -> list[list[Any]]:
        """Outputs with a record that the checks must refuse (deep copies, other scores...)."""
        return []

    def parts(self, item: Any) -> tuple[Any, ...]:
        """The objects a copy must not share with the caller's (e.g. a wrapper and its node)."""
        return (item,)

    def identity(self, item: Any) -> int:
        return id(item)

    def copy_of(self, item: Any) -> Any:
        """A copy of a caller's item, as ``metadata_key=None`` must never return."""
        return copy.copy(item)

    # -- the cases, from the table
    def cases(self) -> dict[str, Case]:
        cases = {}
        classes = {cls: cls for cls in self.components.values()} | dict(self.alike)
        for cls, like in classes.items():
            record = record_of(like)
            scores = needs(record[0])[0]
            default = {"": v(*(k for k in DEFAULT_TAKES if k in _fields(cls)))}
            for suffix, variant in COMPONENT_VARIANTS.get(record[0], default).items():
                extra = tuple(k for k in ("replace_score", "use_scores") if k in _fields(cls))
                cases[cls.__name__ + suffix] = replace(
                    variant,
                    build=_builder(cls, variant.fixed, scores or variant.scores),
                    takes=variant.takes + extra,
                    scores=scores or variant.scores,
                    record=record,
                    selects=STRATEGIES[record[0]].selects,
                )
        return cases

    def refusal(self, case: Case, items: Sequence[Any], options: dict[str, Any]) -> str | None:
        """Under ``score_key``: a NaN, a non-number, no value at all (or, ``all_scores``,
        one missing); else the base class's (a NaN among the scores it reads)."""
        if not case.score_key:
            return super().refusal(case, items, options)
        if not items:
            return None
        values = [self.metadata(x).get(SCORE_KEY) for x in items]
        for value in values:
            try:
                if value is not None and math.isnan(float(value)):
                    return SCORE_KEY
            except (TypeError, ValueError):
                return SCORE_KEY
        missing = [value is None for value in values]
        return SCORE_KEY if all(missing) or (case.all_scores and any(missing)) else None

    def nonfinite_items(self) -> list[Any]:
        items = [self.wrap(t, {"tags": [i]}, t) for i, t in enumerate("abcde")]
        return [*items, items[0]]

    def check_output(
        self, given: Sequence[Any], out: Any, case: Case, key: str | None, replace: bool = False
    ) -> None:
        assert isinstance(out, list) and all(isinstance(x, self.item_type) for x in out)
        if key is None:  # the caller's very objects
            check_permutation(given, out, drops=case.drops, identity=self.identity)
        else:
            self.check_records(given, out, case.record, key, replace, case.drops)

    def check_records(
        self,
        given: Sequence[Any],
        out: list[Any],
        record: tuple[str, frozenset[str]],
        key: str,
        replace: bool = False,
        drops: bool = False,
    ) -> None:
        """Each input once (a selection if ``drops``), as the documented copy with a record."""
        assert isinstance(out, list) and out is not given
        metas = [self.metadata(x) for x in out]
        assert all(isinstance(m.get(key), dict) for m in metas), "an item without a record"
        ranks = [m[key]["original_rank"] for m in metas]
        assert len(set(ranks)) == len(ranks) and all(0 <= i < len(given) for i in ranks)
        if not drops:
            assert sorted(ranks) == list(range(len(given))), f"ranks {ranks}: lost or duplicated"
        for rank, (x, meta, i) in enumerate(zip(out, metas, ranks, strict=True)):
            src = self.metadata(given[i])
            assert meta is not src, "the caller's metadata dict was reused"
            assert list(meta) == list({**src, key: None}), "metadata keys lost or added"
            for k, value in src.items():
                assert k == key or meta[k] is value, f"metadata[{k!r}] copied, not shared"
            written = meta[key]
            assert set(written) == record[1] and written["strategy"] == record[0]
            assert written["rank"] == rank and written["original_rank"] == i
            score = written["score"]
            assert score is None or (isinstance(score, float) and not math.isnan(score))
            self.check_copy(given[i], x, key, score, replace)
        ids = Counter(id(part) for x in out for part in self.parts(x))
        assert all(n == 1 for n in ids.values()), "the same copy returned twice"
        callers = {id(part) for x in given for part in self.parts(x)}
        assert not set(ids) & callers, "a caller's object returned, not a copy"

    # -- the checks only components have
    def test_position_aware_retriever_returns_the_kept_items_once(self) -> None:
        @settings(SETTINGS, max_examples=self.max_examples)
        @given(data=st.data())
        def check(data: st.DataObject) -> None:
            items = data.draw(self.items(30, score_values), label="items")
            name = data.draw(st.sampled_from(sorted(self.components)), label="strategy")
            scorer = data.draw(scorers, label="scorer")
            use_async = data.draw(st.booleans(), label="async")
            scored, profiled = needs(name)
            options: dict[str, Any] = {"profile": [0.2, 0.1, 0.6]} if profiled else {}
            options.update({"scorer": scorer} if scored else {})
            call, kept = self.retriever(items, name, options, data)
            before = self.snapshot(items)
            case = self.cases()[self.components[name].__name__]  # the component's plain case
            refusal = self.refusal(case, kept, dict(options))
            if refusal is not None:
                with pytest.raises(ValueError, match=refusal):
                    call(QUESTIONS[0], use_async)
                before.check()
                return
            out = tolerating_nonfinite(scorer, lambda: call(QUESTIONS[0], use_async))
            before.check()
            if out is not None:  # the record names the component's strategy
                record = record_of(self.components[name])
                drops = STRATEGIES[name].selects
                self.check_records(kept, list(out), record, METADATA_KEY, drops=drops)

        check()

    def test_every_reorderer_of_the_package_is_covered(self) -> None:
        exported = [getattr(self.package, name) for name in self.package.__all__]
        reorderers = {
            c for c in exported if isinstance(c, type) and issubclass(c, self.reorderer_base)
        }
        assert {c.__name__ for c in reorderers} == {name.split("_")[0] for name in self.cases()}

    def test_the_checks_catch_a_lost_shared_or_copied_item(self) -> None:
        given = [self.wrap(t, {"tags": [t]}, t) for t in "abc"]
        case = self.cases()[self.components["edge"].__name__]
        out = self.run(case.build(None, {}), given, "q", False)
        self.check_output(given, out, case, METADATA_KEY)
        lost, twice, own = out[:2], [out[0], out[0], out[2]], [given[0], *out[1:]]
        for broken in (lost, twice, own, *self.broken(given, out)):
            with pytest.raises(AssertionError):
                self.check_output(given, broken, case, METADATA_KEY)
        for broken in ([given[0], given[0], given[2]], [self.copy_of(given[0]), *given[1:]]):
            with pytest.raises(AssertionError):  # duplicated; copied
                self.check_output(given, broken, case, None, replace=True)
        for mutate in (
            lambda: self.metadata(given[0])["tags"].append("x"),
            lambda: self.metadata(given[1]).__setitem__("tags", ["b"]),  # an equal new list
            *self.mutations(given),
            given.reverse,
        ):
            before = self.snapshot(given)
            mutate()
            with pytest.raises(AssertionError):
                before.check()


def _fields(cls: type) -> Mapping[str, Any]:
    fields: Mapping[str, Any] = getattr(cls, "model_fields", {})
    return fields


def _builder(
    cls: type, fixed: Mapping[str, Any], scores: bool
) -> Callable[[Any, dict[str, Any]], Any]:
    def build(scorer: Any, options: dict[str, Any]) -> Any:
        return cls(**({"scorer": scorer} if scores else {}), **fixed, **options)

    return build
