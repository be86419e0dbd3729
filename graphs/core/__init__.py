"""Pure algorithms of graphs: no Django import, no I/O (from_human may read one JSON file it is given).

The engine (graph, validation, edits, serializer, guide) is exported here. The offline loop lives in its own modules,
imported from them by name: evaluation (traces, outcomes, evaluations, decisions), gates and objectives, rejections
(the rejection memory), traces (attempts block, sampling, sources), refiner and bootstrap (the model roles), budget
(meter and hooks), stores (the reference stores), evolve (Algorithm 1) and twohop (the spec §10 environment).
"""

from .diagnostics import (
    DIAGNOSTIC_CODES,
    ERROR,
    WARNING,
    Diagnostic,
    GraphError,
    errors_in,
    has_errors,
    warnings_in,
)
from .documents import SCHEMA_VERSION, canonical_json, sha256_digest
from .edits import EDIT_KEYS, EditSet, edit_set_from_dict, no_action, parse_edit_set, prepare_candidate, unified_diff
from .graph import (
    CYCLE_POLICIES,
    DEFAULT_ATTRIBUTE_FIELDS,
    DEFAULT_NODE_TYPES,
    DEFAULT_RELATIONS,
    END,
    START,
    Edge,
    Graph,
    Neighborhood,
    Node,
    skeleton,
)
from .guide import (
    MODES,
    ExactActionLocalizer,
    Guidance,
    GuidanceConfig,
    Guide,
    Localizer,
    Step,
    as_step,
    render_guidance_prompt,
)
from .serialize import (
    mermaid_aliases,
    render_step,
    render_trajectory,
    serialize_context,
    serialize_full,
    to_graph_json,
    to_markdown,
    to_mermaid,
)
from .validation import find_back_edges, nodes_without_terminal_path, repair_cycles, validate_graph

__all__ = [
    "CYCLE_POLICIES",
    "DEFAULT_ATTRIBUTE_FIELDS",
    "DEFAULT_NODE_TYPES",
    "DEFAULT_RELATIONS",
    "DIAGNOSTIC_CODES",
    "EDIT_KEYS",
    "END",
    "ERROR",
    "MODES",
    "SCHEMA_VERSION",
    "START",
    "WARNING",
    "Diagnostic",
    "Edge",
    "EditSet",
    "ExactActionLocalizer",
    "Graph",
    "GraphError",
    "Guidance",
    "GuidanceConfig",
    "Guide",
    "Localizer",
    "Neighborhood",
    "Node",
    "Step",
    "as_step",
    "canonical_json",
    "edit_set_from_dict",
    "errors_in",
    "find_back_edges",
    "has_errors",
    "mermaid_aliases",
    "no_action",
    "nodes_without_terminal_path",
    "parse_edit_set",
    "prepare_candidate",
    "render_guidance_prompt",
    "render_step",
    "render_trajectory",
    "repair_cycles",
    "serialize_context",
    "serialize_full",
    "sha256_digest",
    "skeleton",
    "to_graph_json",
    "to_markdown",
    "to_mermaid",
    "unified_diff",
    "validate_graph",
    "warnings_in",
]
