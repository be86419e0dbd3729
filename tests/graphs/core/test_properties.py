"""Hypothesis properties of the core: order independence, round trips, safe candidates, bounded neighbourhoods."""

import json
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from graphs.core import (
    DEFAULT_RELATIONS,
    END,
    START,
    Edge,
    EditSet,
    Graph,
    Node,
    canonical_json,
    prepare_candidate,
    to_graph_json,
)

IDS = ["a", "b", "c", "d", "e", "f"]
ALL_IDS = [START, END, *IDS]
TYPES = ["ACTION", "action", "REASONING", "STATUS", "Status"]
texts = st.none() | st.text(alphabet="xyz é→", max_size=6)
json_values = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)


@st.composite
def nodes(draw, ids=IDS, types=TYPES):
    chosen = draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids)))
    extra = [
        Node(
            node_id,
            draw(st.sampled_from(types)),
            draw(st.text(max_size=5)),
            draw(st.none() | st.just("skill://x")),
            draw(st.dictionaries(st.text(max_size=3), json_values, max_size=2)),
        )
        for node_id in chosen
    ]
    sentinels = [Node(s, "STATUS", s.lower()) for s in (START, END) if draw(st.booleans()) or s == END]
    return sentinels + extra


@st.composite
def edges(draw, endpoints=ALL_IDS, relations=DEFAULT_RELATIONS):
    triples = draw(
        st.lists(
            st.tuples(st.sampled_from(endpoints), st.sampled_from(relations), st.sampled_from(endpoints)),
            unique=True,
            max_size=14,
        )
    )
    return [
        Edge(s, r, t, {"condition": draw(texts), "guidance": draw(texts), "pitfalls": draw(texts)})
        for s, r, t in triples
    ]


@st.composite
def graphs(draw):
    return Graph(
        nodes=draw(nodes()),
        edges=tuple(draw(edges())),
        meta=draw(st.dictionaries(st.text(max_size=3), json_values, max_size=3)),
    )


@st.composite
def valid_graphs(draw):
    """Every node reaches End directly; Start reaches every node; random extra edges (cycles included)."""
    node_list = [Node(START, "STATUS", "Task start"), Node(END, "STATUS", "Task end")]
    chosen = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=len(IDS)))
    node_list += [Node(n, draw(st.sampled_from(["ACTION", "REASONING"])), draw(st.text(max_size=5))) for n in chosen]
    attributes = {"condition": None, "guidance": "go", "pitfalls": None}
    edge_list = {(START, "LEADS_TO", END): Edge(START, "LEADS_TO", END, attributes)}
    for n in chosen:
        edge_list[(START, "TRIGGERS", n)] = Edge(START, "TRIGGERS", n, attributes)
        edge_list[(n, "LEADS_TO", END)] = Edge(n, "LEADS_TO", END, attributes)
    for edge in draw(edges(endpoints=[START, *chosen])):
        edge_list.setdefault(edge.key, edge)
    return Graph(nodes=node_list, edges=tuple(edge_list.values()))


@st.composite
def edit_sets(draw):
    return EditSet(
        add_nodes=tuple(draw(nodes(ids=[*IDS, "g", "h"], types=[*TYPES, "TOOL"]))[-3:]),
        delete_nodes=tuple(draw(st.lists(st.sampled_from([*ALL_IDS, "zz"]), max_size=3))),
        add_edges=tuple(draw(edges(endpoints=[*ALL_IDS, "g", "h"], relations=[*DEFAULT_RELATIONS, "JUMPS"]))[:6]),
        delete_edges=tuple(draw(st.lists(st.tuples(st.sampled_from(ALL_IDS), st.sampled_from(ALL_IDS)), max_size=4))),
    )


@settings(max_examples=100)
@given(graphs(), st.randoms(use_true_random=False))
def test_the_digest_does_not_depend_on_construction_order(graph, random):
    node_list, edge_list = list(graph.nodes.values()), list(graph.edges)
    random.shuffle(node_list)
    random.shuffle(edge_list)
    rebuilt = Graph(nodes=node_list, edges=tuple(edge_list), meta=dict(graph.meta))
    assert rebuilt.digest == graph.digest
    assert rebuilt == graph


@settings(max_examples=100)
@given(graphs())
def test_documents_round_trip_byte_for_byte(graph):
    text = canonical_json(graph.to_document())
    loaded = Graph.from_document(json.loads(text))
    assert canonical_json(loaded.to_document()) == text
    assert loaded == graph
    assert loaded.digest == graph.digest


@st.composite
def plausible_edit_sets(draw, graph):
    """Edits a careful refiner might write: known types and relations, new nodes wired to End, real deletions."""
    existing = [n for n in graph.nodes if n not in (START, END)]
    new_ids = draw(st.lists(st.sampled_from(["g", "h"]), unique=True, max_size=2))
    add_nodes = tuple(Node(n, draw(st.sampled_from(["ACTION", "REASONING"])), "new") for n in new_ids)
    sources, targets = [START, *existing, *new_ids], [END, *existing, *new_ids]
    wiring = [Edge(n, "LEADS_TO", END, {"guidance": "finish"}) for n in new_ids]
    extra = draw(edges(endpoints=sources, relations=DEFAULT_RELATIONS))[:3]
    extra = [Edge(e.source, e.relation, draw(st.sampled_from(targets)), e.attributes) for e in extra]
    pairs = sorted({(e.source, e.target) for e in graph.edges})
    return EditSet(
        add_nodes=add_nodes,
        delete_nodes=tuple(draw(st.lists(st.sampled_from(existing), max_size=1))) if existing else (),
        add_edges=tuple(wiring + extra),
        delete_edges=tuple(draw(st.lists(st.sampled_from(pairs), max_size=2))) if pairs else (),
    )


@settings(max_examples=150)
@given(graphs() | valid_graphs(), st.data(), st.sampled_from(["repair", "allow"]), st.booleans())
def test_prepare_candidate_never_returns_a_graph_with_an_error(graph, data, policy, with_tools):
    edits = data.draw(plausible_edit_sets(graph) | edit_sets())
    tools = ["a", "b"] if with_tools else None
    candidate, diagnostics = prepare_candidate(graph, edits, cycle_policy=policy, available_tools=tools)
    if candidate is None:
        assert any(d.is_error for d in diagnostics)
    else:
        assert not any(d.is_error for d in diagnostics)
        assert not any(d.is_error for d in candidate.validate(policy))
        assert "repairs" not in candidate.meta or policy == "repair"


def distances_from(graph, start):
    """Plain breadth-first distances over every edge, independent of Graph.neighborhood."""
    distance = {start: 0}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for edge in graph.edges:
            if edge.source == current and edge.target not in distance:
                distance[edge.target] = distance[current] + 1
                queue.append(edge.target)
    return distance


@settings(max_examples=100)
@given(graphs(), st.integers(1, 4), st.data())
def test_a_neighbourhood_never_reaches_past_h_hops(graph, hops, data):
    active = data.draw(st.sampled_from(list(graph.nodes)))
    hood = graph.neighborhood(active, hops)
    distance = distances_from(graph, active)
    for hop, edge in hood.edges:
        assert 1 <= hop <= hops
        assert distance[edge.source] == hop - 1
    expected = [e for e in graph.edges if distance.get(e.source, hops) < hops]
    assert sorted(e.key for _, e in hood.edges) == sorted(e.key for e in expected)
    assert [h for h, _ in hood.edges] == sorted(h for h, _ in hood.edges)
    for hop in range(1, hops + 1):
        keys = [e.key for e in hood.edges_at(hop)]
        assert keys == sorted(keys)


@settings(max_examples=100)
@given(valid_graphs())
def test_an_exported_graph_loads_back_equal(graph):
    assert graph.validate() == []
    from_json, warnings = Graph.from_human(json.loads(to_graph_json(graph)))
    assert from_json == graph
    assert not any(d.code == "skeleton_completed" for d in warnings)
    assert Graph.from_document(json.loads(json.dumps(graph.to_document()))) == graph
