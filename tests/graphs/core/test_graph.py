import copy
import dataclasses
import hashlib
import json
import pickle

import pytest

from graphs.core import (
    DEFAULT_ATTRIBUTE_FIELDS,
    DEFAULT_NODE_TYPES,
    DEFAULT_RELATIONS,
    END,
    START,
    Edge,
    Graph,
    GraphError,
    Node,
    canonical_json,
    sha256_digest,
    skeleton,
)
from tests.graphs.core.builders import chain_graph, edge, five_node_graph, sentinels


def codes(diagnostics):
    return [d.code for d in diagnostics]


# -- the data model ---------------------------------------------------------------------------------------------------


def test_it_uses_the_paper_vocabularies_by_default():
    graph = Graph()
    assert graph.relations == DEFAULT_RELATIONS == ("LEADS_TO", "TRIGGERS", "PROVIDES_INPUT_FOR", "CONVERGES_TO")
    assert graph.attribute_fields == DEFAULT_ATTRIBUTE_FIELDS == ("condition", "guidance", "pitfalls")
    assert graph.node_types == DEFAULT_NODE_TYPES == ("ACTION", "REASONING", "STATUS")
    assert dict(graph.meta) == {}


def test_it_stores_types_and_relations_upper_case_but_keeps_ids_as_written():
    graph = Graph(
        nodes=[*sentinels(), Node("Search", " action "), Node("search", "Reasoning")],
        edges=(edge(START, "Search", "leads_to"), edge("Search", "search", "Triggers"), edge("search", END)),
        relations=("leads_to", "triggers"),
        node_types=("action", "reasoning", "status"),
    )
    assert graph.nodes["Search"].type == "ACTION"
    assert graph.nodes["search"].type == "REASONING"
    assert {e.relation for e in graph.edges} == {"LEADS_TO", "TRIGGERS"}
    assert graph.relations == ("LEADS_TO", "TRIGGERS")
    assert graph.validate() == []


@pytest.mark.parametrize("name", ["source", "target", "relation", "id"])
def test_it_refuses_an_attribute_field_named_like_a_structural_key(name):
    with pytest.raises(ValueError, match=name):
        Graph(attribute_fields=("condition", name))


def test_it_keeps_nodes_sorted_by_id_and_edges_by_triple():
    graph = five_node_graph()
    assert list(graph.nodes) == ["End", "Start", "answer", "read", "search"]
    assert [e.key for e in graph.edges] == sorted(e.key for e in graph.edges)


def test_it_refuses_two_nodes_with_one_id():
    with pytest.raises(GraphError) as caught:
        Graph(nodes=[*sentinels(), Node("a", "ACTION"), Node("a", "REASONING")])
    assert codes(caught.value.diagnostics) == ["duplicate_node"]


def test_it_is_immutable():
    graph = five_node_graph()
    with pytest.raises(dataclasses.FrozenInstanceError):
        graph.meta = {}
    with pytest.raises(TypeError):
        graph.nodes["x"] = Node("x", "ACTION")
    with pytest.raises(TypeError):
        graph.edges[0].attributes["guidance"] = "changed"
    meta = {"origin": {"kind": "seed"}}
    tagged = graph.with_meta(**meta)
    meta["origin"]["kind"] = "changed"
    assert tagged.meta["origin"] == {"kind": "seed"}


def test_it_fills_missing_attribute_fields_with_null():
    graph = Graph(nodes=sentinels(), edges=(Edge(START, "LEADS_TO", END, {"guidance": "go"}),))
    assert dict(graph.edges[0].attributes) == {"condition": None, "guidance": "go", "pitfalls": None}


def test_a_graph_survives_pickling_for_caches():
    graph = five_node_graph().with_nodes(
        [Node(n.id, n.type, n.description, "ref", {"k": [1]}) for n in five_node_graph().nodes.values()]
    )
    graph = graph.with_meta(origin="accepted")
    graph.neighborhood("search", 2)
    copied = pickle.loads(pickle.dumps(graph))
    assert copied == graph and copied.digest == graph.digest
    assert copied.neighborhood("search", 2) == graph.neighborhood("search", 2)
    assert copy.deepcopy(graph) == graph


def test_equal_graphs_hash_alike_and_can_live_in_sets():
    assert five_node_graph() == five_node_graph()
    assert len({five_node_graph(), five_node_graph(), skeleton()}) == 2


# -- skeleton and sentinels -------------------------------------------------------------------------------------------


def test_the_skeleton_is_start_to_end_with_null_attributes():
    graph = skeleton()
    assert graph.is_skeleton
    assert [(n.id, n.type, n.description) for n in graph.nodes.values()] == [
        (END, "STATUS", "Task end"),
        (START, "STATUS", "Task start"),
    ]
    (only,) = graph.edges
    assert only.key == (START, "LEADS_TO", END)
    assert dict(only.attributes) == {"condition": None, "guidance": None, "pitfalls": None}
    assert graph.validate() == []
    assert Graph.skeleton() == graph


def test_the_skeleton_uses_the_first_configured_relation_and_fields():
    graph = skeleton(relations=["next", "jumps"], attribute_fields=["hint"])
    assert graph.edges[0].relation == "NEXT"
    assert dict(graph.edges[0].attributes) == {"hint": None}


def test_is_skeleton_is_structural():
    assert not five_node_graph().is_skeleton
    doubled = skeleton().with_edges([*skeleton().edges, edge(START, END, "TRIGGERS")])
    assert not doubled.is_skeleton
    assert skeleton().with_meta(origin="skeleton").is_skeleton


# -- documents and digests --------------------------------------------------------------------------------------------


def test_the_document_has_the_stored_shape():
    graph = five_node_graph().with_meta(origin="onboarded")
    document = graph.to_document()
    assert list(document) == ["schema", "nodes", "edges", "relations", "attribute_fields", "node_types", "meta"]
    assert document["schema"] == 1
    assert document["nodes"][0] == {"id": "End", "type": "STATUS", "description": "Task end", "ref": None, "meta": {}}
    assert document["edges"][0] == {
        "source": "Start",
        "target": "search",
        "relation": "LEADS_TO",
        "condition": None,
        "guidance": "Search for the question's subject",
        "pitfalls": None,
    }
    assert document["meta"] == {"origin": "onboarded"}


# The skeleton with meta {"origin": "café"}, written out by hand as the spec defines the stored document and its
# canonical JSON (keys sorted at every level, compact separators, UTF-8 kept), and its SHA-256 computed once with
# hashlib over these bytes. Neither literal comes from graphs.core.
SKELETON_CAFE_CANONICAL = (
    '{"attribute_fields":["condition","guidance","pitfalls"],'
    '"edges":[{"condition":null,"guidance":null,"pitfalls":null,"relation":"LEADS_TO","source":"Start","target":"End"}],'
    '"meta":{"origin":"café"},'
    '"node_types":["ACTION","REASONING","STATUS"],'
    '"nodes":[{"description":"Task end","id":"End","meta":{},"ref":null,"type":"STATUS"},'
    '{"description":"Task start","id":"Start","meta":{},"ref":null,"type":"STATUS"}],'
    '"relations":["LEADS_TO","TRIGGERS","PROVIDES_INPUT_FOR","CONVERGES_TO"],'
    '"schema":1}'
)
SKELETON_CAFE_DIGEST = "89138f8aa48b8b4be1ed6c4c059d3fc59b8a96bc933cbb3c9f0d95e2c4229cc3"


def test_the_digest_is_sha256_of_the_canonical_document():
    assert (
        hashlib.sha256(SKELETON_CAFE_CANONICAL.encode("utf-8")).hexdigest() == SKELETON_CAFE_DIGEST
    )  # the literals agree
    graph = skeleton().with_meta(origin="café")
    assert canonical_json(graph.to_document()) == SKELETON_CAFE_CANONICAL
    assert graph.digest == SKELETON_CAFE_DIGEST
    assert sha256_digest(json.loads(SKELETON_CAFE_CANONICAL)) == SKELETON_CAFE_DIGEST
    # Loaded with its nodes in another order, it has the same digest (nodes are kept sorted by id).
    shuffled = json.loads(SKELETON_CAFE_CANONICAL)
    shuffled["nodes"].reverse()
    assert Graph.from_document(shuffled).digest == SKELETON_CAFE_DIGEST


def test_meta_changes_the_digest_but_not_the_content_digest():
    plain = five_node_graph()
    noted = plain.with_meta(origin="accepted", validation_score=1.0)
    referenced = plain.with_nodes(
        [Node(n.id, n.type, n.description, ref="skill://x", meta={"a": 1}) for n in plain.nodes.values()]
    )
    assert len({plain.digest, noted.digest, referenced.digest}) == 3
    assert plain.content_digest() == noted.content_digest() == referenced.content_digest()
    assert plain.content_digest(exclude_meta=True) == plain.content_digest()
    assert noted.content_digest(exclude_meta=False) == noted.digest
    changed = plain.with_edges([*plain.edges[:-1], edge("search", "read", guidance="other")])
    assert changed.content_digest() != plain.content_digest()


def test_canonical_json_sorts_keys_is_compact_keeps_utf8_and_refuses_nan():
    assert canonical_json({"b": 1, "a": [1, {"d": "é", "c": None}]}) == '{"a":[1,{"c":null,"d":"é"}],"b":1}'
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    with pytest.raises(ValueError):
        Graph(meta={"x": float("inf")})


def test_the_refiner_shape_has_only_ids_types_descriptions_and_flat_edges():
    shape = five_node_graph().to_refiner_json()
    assert set(shape) == {"nodes", "edges"}
    assert shape["nodes"][2] == {"id": "answer", "type": "ACTION", "description": "Answer the question"}
    assert list(shape["edges"][0]) == ["source", "target", "relation", "condition", "guidance", "pitfalls"]


def test_a_document_round_trips_byte_for_byte():
    graph = five_node_graph().with_meta(origin="accepted", repairs=[], note="café")
    text = canonical_json(graph.to_document())
    loaded = Graph.from_document(json.loads(text))
    assert loaded == graph
    assert canonical_json(loaded.to_document()) == text
    assert loaded.digest == graph.digest


def test_an_absent_or_null_vocabulary_means_the_default_and_an_empty_list_means_empty():
    document = skeleton().to_document()
    del document["relations"]
    document["node_types"] = None
    loaded = Graph.from_document(document)
    assert loaded.relations == DEFAULT_RELATIONS
    assert loaded.node_types == DEFAULT_NODE_TYPES
    document["attribute_fields"] = []
    document["edges"][0] = {"source": START, "target": END, "relation": "LEADS_TO"}
    empty = Graph.from_document(document)
    assert empty.attribute_fields == ()
    assert Graph.from_document(empty.to_document()).attribute_fields == ()


def test_loading_a_document_never_completes_it():
    document = skeleton().to_document()
    document["nodes"] = [n for n in document["nodes"] if n["id"] != END]
    loaded = Graph.from_document(document)
    assert END not in loaded.nodes
    assert "missing_sentinel" in codes(loaded.validate())


def test_a_newer_schema_is_refused_with_an_upgrade_message():
    document = skeleton().to_document()
    document["schema"] = 2
    with pytest.raises(GraphError, match="upgrade"):
        Graph.from_document(document)
    with pytest.raises(GraphError, match="upgrade"):
        Graph.from_human({"schema": 3, "nodes": [], "edges": []})


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d.update(extra=1),
        lambda d: d.pop("nodes"),
        lambda d: d.update(edges={}),
        lambda d: d["nodes"].append("Start"),
        lambda d: d["nodes"][0].pop("type"),
        lambda d: d["nodes"][0].update(colour="red"),
        lambda d: d["edges"][0].pop("relation"),
        lambda d: d["edges"][0].update(guidance=3),
        lambda d: d.update(relations="LEADS_TO"),
        lambda d: d.update(meta=[]),
        lambda d: d.update(schema="1"),
    ],
)
def test_a_malformed_document_is_refused(spoil):
    document = skeleton().to_document()
    spoil(document)
    with pytest.raises(GraphError) as caught:
        Graph.from_document(document)
    assert codes(caught.value.diagnostics) and set(codes(caught.value.diagnostics)) == {"malformed_edit"}


def test_a_document_that_is_not_an_object_is_refused():
    with pytest.raises(GraphError):
        Graph.from_document([1, 2])


# -- human input ------------------------------------------------------------------------------------------------------


def human_qa():
    return {
        "nodes": [
            {"id": "search", "type": "action", "description": "Search"},
            {"id": "answer", "type": "ACTION", "description": "Answer"},
        ],
        "edges": [
            {"source": "Start", "target": "search", "relation": "leads_to", "guidance": "search first"},
            {"source": "search", "target": "answer", "relation": "LEADS_TO", "guidance": "answer"},
            {"source": "answer", "target": "End", "relation": "LEADS_TO", "guidance": "stop"},
        ],
    }


def test_from_human_adds_missing_sentinels_with_a_warning_and_fills_attributes():
    graph, warnings = Graph.from_human(human_qa())
    assert [(w.code, w.subject, w.severity) for w in warnings] == [
        ("skeleton_completed", START, "warning"),
        ("skeleton_completed", END, "warning"),
    ]
    assert graph.nodes[START].type == "STATUS" and graph.nodes[END].description == "Task end"
    first = graph.successors(START)[0]
    assert dict(first.attributes) == {"condition": None, "guidance": "search first", "pitfalls": None}
    assert graph.nodes["search"].type == "ACTION"


def test_from_human_adds_the_start_end_edge_to_a_bare_pair_of_sentinels():
    graph, warnings = Graph.from_human({"nodes": [{"id": "Start", "type": "STATUS"}, {"id": "End", "type": "STATUS"}]})
    assert graph.is_skeleton
    assert codes(warnings) == ["skeleton_completed"]
    assert warnings[0].subject == "Start→End"


def test_from_human_gives_the_quiet_skeleton_for_empty_input():
    graph, warnings = Graph.from_human({"nodes": [], "edges": []})
    assert graph == skeleton()
    assert warnings == []


def test_from_human_passes_validation_warnings_through():
    data = human_qa()
    data["nodes"].append({"id": "orphan", "type": "REASONING", "description": "never reached"})
    data["edges"].append({"source": "orphan", "target": "End", "relation": "LEADS_TO", "tone": "dry"})
    _, warnings = Graph.from_human(data)
    assert "unreachable_from_start" in codes(warnings)
    assert "unknown_attribute" in codes(warnings)


def test_from_human_reads_a_json_file_by_path(tmp_path):
    path = tmp_path / "expert.json"
    path.write_text(json.dumps(human_qa()), encoding="utf-8")
    from_path, _ = Graph.from_human(path)
    from_text, _ = Graph.from_human(str(path))
    assert from_path == from_text == Graph.from_human(human_qa())[0]


@pytest.mark.parametrize(
    ("spoil", "code"),
    [
        (lambda d: d["nodes"][0].pop("type"), "unknown_node_type"),
        (lambda d: d["nodes"][0].update(type="TOOL"), "unknown_node_type"),
        (lambda d: d["edges"][0].pop("relation"), "unknown_relation"),
        (lambda d: d["edges"][1].update(target="verify"), "missing_endpoint"),
        (lambda d: d["edges"].append(dict(d["edges"][0])), "duplicate_edge"),
        (lambda d: d["nodes"].append({"id": "search", "type": "ACTION"}), "duplicate_node"),
        (lambda d: d["nodes"].append({"type": "ACTION"}), "malformed_edit"),
        (lambda d: d["nodes"].append({"id": "  ", "type": "ACTION"}), "malformed_edit"),
        (lambda d: d["edges"].append({"source": "search"}), "malformed_edit"),
        (lambda d: d.update(nodes="search"), "malformed_edit"),
        (lambda d: d["edges"].append({"source": "answer", "target": "search", "relation": "LEADS_TO"}), None),
    ],
)
def test_from_human_refuses_what_it_cannot_complete(spoil, code):
    data = human_qa()
    spoil(data)
    if code is None:  # a cycle with an exit is allowed in a hand-written graph
        Graph.from_human(data)
        return
    with pytest.raises(GraphError) as caught:
        Graph.from_human(data)
    assert code in codes(caught.value.diagnostics)
    assert all(d.is_error for d in caught.value.diagnostics)


def test_from_human_refuses_a_cycle_with_no_exit():
    data = human_qa()
    data["edges"] = [e for e in data["edges"] if e["source"] != "answer"]
    data["edges"].append({"source": "answer", "target": "search", "relation": "LEADS_TO"})
    with pytest.raises(GraphError) as caught:
        Graph.from_human(data)
    failures = caught.value.diagnostics
    assert [(d.code, d.subject) for d in failures] == [
        ("no_path_to_terminal", START),
        ("no_path_to_terminal", "answer"),
        ("no_path_to_terminal", "search"),
    ]


@pytest.mark.parametrize("content", ["{not json", "[1, 2]"])
def test_from_human_refuses_a_broken_file(tmp_path, content):
    path = tmp_path / "broken.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(GraphError):
        Graph.from_human(path)


def test_from_human_refuses_a_missing_file(tmp_path):
    with pytest.raises(GraphError, match="cannot read"):
        Graph.from_human(tmp_path / "absent.json")


def test_from_human_honours_a_custom_vocabulary():
    data = {
        "nodes": [{"id": "plan", "type": "thought"}],
        "edges": [
            {"source": "Start", "target": "plan", "relation": "next"},
            {"source": "plan", "target": "End", "relation": "next", "hint": "finish"},
        ],
    }
    graph, warnings = Graph.from_human(
        data, relations=["NEXT"], node_types=["THOUGHT", "STATUS"], attribute_fields=["hint"]
    )
    assert graph.relations == ("NEXT",)
    assert graph.edges[0].attributes["hint"] is None
    assert "unknown_attribute" not in codes(warnings)


# -- neighbourhood ----------------------------------------------------------------------------------------------------


def test_the_neighbourhood_tags_each_edge_with_its_hop():
    hood = five_node_graph().neighborhood("search", 2)
    assert [(hop, e.source, e.target) for hop, e in hood.edges] == [
        (1, "search", "read"),
        (2, "read", "answer"),
        (2, "read", "search"),
    ]
    assert hood.node_ids == ("search", "read", "answer")
    assert hood.edges_at(2)[1].relation == "PROVIDES_INPUT_FOR"
    assert hood.max_hop == 2


def test_the_neighbourhood_expands_each_node_once_and_orders_a_hop_by_edge_sort_order():
    nodes = [*sentinels(), *(Node(x, "ACTION") for x in "abcd")]
    edges = (
        edge(START, "b", "LEADS_TO"),
        edge(START, "a", "TRIGGERS"),
        edge("b", "c"),
        edge("a", "d"),
        edge("a", "b"),
        edge("c", START),
        edge("d", END),
        edge("c", END),
    )
    hood = Graph(nodes=nodes, edges=edges).neighborhood(START, 3)
    assert [(h, e.source, e.target) for h, e in hood.edges] == [
        (1, START, "b"),
        (1, START, "a"),
        (2, "a", "b"),
        (2, "a", "d"),
        (2, "b", "c"),
        (3, "c", END),
        (3, "c", START),
        (3, "d", END),
    ]


def test_the_neighbourhood_stops_when_nothing_is_left_to_expand():
    hood = five_node_graph().neighborhood("answer", 5)
    assert [(h, e.target) for h, e in hood.edges] == [(1, END)]
    assert hood.hops == 5


def test_the_neighbourhood_digest_covers_active_hops_and_edges():
    graph = five_node_graph()
    one, two = graph.neighborhood("search", 1), graph.neighborhood("search", 2)
    assert one.digest != two.digest
    assert two.digest == five_node_graph().neighborhood("search", 2).digest
    revised = graph.with_edges([*graph.edges[:-1], edge("search", "read", guidance="read twice")])
    assert revised.neighborhood("search", 1).digest != one.digest


def test_the_neighbourhood_of_an_unknown_node_or_with_no_hops_is_refused():
    with pytest.raises(KeyError):
        five_node_graph().neighborhood("nowhere", 2)
    with pytest.raises(ValueError):
        five_node_graph().neighborhood("search", 0)


def test_adjacency_queries_follow_the_edge_order():
    graph = chain_graph(3)
    assert [e.target for e in graph.successors("s0")] == [END, "s1"]
    assert [e.source for e in graph.predecessors(END)] == ["s0", "s1", "s2", "s2"]
    assert graph.terminals() == [END]
    assert graph.reachable_from("s1") == {"s1", "s2", END}
    assert graph.edges_between("s0", END)[0].relation == "CONVERGES_TO"
