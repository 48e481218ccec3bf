"""The framework-free support behind the LangChain and LlamaIndex integrations (private).

Both integrations only map their framework's objects onto what is here (a Document or a
NodeWithScore to a :class:`~rag_position.passages.Passage`, a framework LLM to a
``Generator``, framework embeddings to an ``Embedder``); everything they share lives
here once, in five modules by concern:

- :mod:`.models`: resolving ``scorer=`` / ``llm=`` / embeddings arguments;
- :mod:`.options`: the framework-side options and their checks;
- :mod:`.components`: which strategy rows become components, and their records;
- :mod:`.reorder`: running a strategy row and the metadata record it writes;
- :mod:`.tuned`: the component a tuned file (:mod:`rag_position.tuned`) chose.

A reordering component's own options and record come from its row of the strategy
table (:data:`rag_position.strategies.STRATEGIES`). Nothing here imports LangChain or
LlamaIndex.
"""

from __future__ import annotations

from rag_position._integration.components import (
    COMPONENT_TABLE,
    Component,
    component_of,
    component_row,
    component_rows,
    record_keys,
    strategy_components,
)
from rag_position._integration.models import (
    EMBEDDER_FORMS,
    GENERATOR_FORMS,
    SCORER_FORMS,
    AdaptedGenerator,
    GenerationOptions,
    conversation,
    model_label,
    need_scorer,
    openai_scorer,
    optional_embedder,
    resolve_embedder,
    resolve_generator,
    resolve_scorer,
    secret_name,
    serialised_model,
    shareable_kwargs,
    unit_rows,
)
from rag_position._integration.options import (
    METADATA_KEY,
    EdgeOptions,
    FactOptions,
    GeneratorOptions,
    MedoidOptions,
    ProfileOptions,
    ReciteOptions,
    ReorderOptions,
    ScorerOptions,
    check_edge_options,
    check_option_names,
    check_profile_options,
    core_options,
    profile_to_json,
    read_scores,
    refuse_nan_scores,
)
from rag_position._integration.reorder import (
    RECORD_KEYS,
    Reordering,
    edge_reordering,
    profile_reordering,
    reorder_record,
    reorder_records,
    reordering,
    table_class,
    with_record,
)
from rag_position._integration.tuned import (
    GIVEN_ORDER,
    TunedComponent,
    build_tuned,
    check_tuned_strategy,
    tuned_component,
)
from rag_position.models import check_spec
from rag_position.models.lazy import LazyModel
from rag_position.models.protocols import cut_at_stop

__all__ = [
    "COMPONENT_TABLE",
    "EMBEDDER_FORMS",
    "GENERATOR_FORMS",
    "GIVEN_ORDER",
    "METADATA_KEY",
    "RECORD_KEYS",
    "SCORER_FORMS",
    "AdaptedGenerator",
    "Component",
    "EdgeOptions",
    "FactOptions",
    "GenerationOptions",
    "GeneratorOptions",
    "LazyModel",
    "MedoidOptions",
    "ProfileOptions",
    "ReciteOptions",
    "ReorderOptions",
    "Reordering",
    "ScorerOptions",
    "TunedComponent",
    "build_tuned",
    "check_edge_options",
    "check_option_names",
    "check_profile_options",
    "check_spec",
    "check_tuned_strategy",
    "component_of",
    "component_row",
    "component_rows",
    "conversation",
    "core_options",
    "cut_at_stop",
    "edge_reordering",
    "model_label",
    "need_scorer",
    "openai_scorer",
    "optional_embedder",
    "profile_reordering",
    "profile_to_json",
    "read_scores",
    "record_keys",
    "refuse_nan_scores",
    "reorder_record",
    "reorder_records",
    "reordering",
    "resolve_embedder",
    "resolve_generator",
    "resolve_scorer",
    "secret_name",
    "serialised_model",
    "shareable_kwargs",
    "strategy_components",
    "table_class",
    "tuned_component",
    "unit_rows",
    "with_record",
]
