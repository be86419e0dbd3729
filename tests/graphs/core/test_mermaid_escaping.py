"""Mermaid text from hostile node ids: nodes are defined by alias only, labels are entity codes wherever they are not
plain text, so no id can end a label, start a directive, become markdown or an element inside the drawing."""

import re

import pytest

from graphs.core import END, START, Edge, Graph, Node, to_mermaid

HOSTILE = [
    '%%{init: {"securityLevel": "loose", "theme": "dark"}}%%',
    "%%{init: {'flowchart': {'htmlLabels': true}}}%%\nclick n0 call alert(1)",
    "`**markdown** string`",
    "<img src=x onerror=alert(1)>",
    "<b>bold</b>",
    'a"]; n9["injected',
    "end",
    "A-->B",
    "x|y|z",
    "semi;colon #quot; #35; & amp",
    "line\nbreak",
    "(round) {curly} [square]",
    "café ünïcode",
]

NODE_LINE = re.compile(r'^    n\d+(\(\["|\[")[\w .,:/\-#;]*("\]\)|"\])$')
EDGE_LINE = re.compile(r'^    (n\d+|missing_\w+) -->\|(\w+|"[\w .,:/\-#;]*")\| (n\d+|missing_\w+)$')


def graph_of(*ids: str, relation: str = "LEADS_TO") -> Graph:
    nodes = [Node(START, "STATUS"), Node(END, "STATUS"), *(Node(i, "ACTION") for i in ids)]
    edges = [Edge(START, relation, i) for i in ids] + [Edge(i, relation, END) for i in ids]
    return Graph(nodes=nodes, edges=edges, relations=(relation,))


def decode(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label.replace("#quot;", '"'))


@pytest.mark.parametrize("node_id", HOSTILE)
def test_every_line_is_an_alias_definition_or_an_alias_edge(node_id):
    text = to_mermaid(graph_of(node_id))
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    for line in lines[1:]:
        assert NODE_LINE.match(line) or EDGE_LINE.match(line), line
    body = "\n".join(lines[1:])
    for forbidden in ("%%", "`", "<", ">", "{", "}", "&", "|click", "\n    click"):
        assert forbidden not in body.replace("-->|", "").replace("| n", "").replace("| m", ""), forbidden


@pytest.mark.parametrize("node_id", HOSTILE)
def test_the_label_decodes_to_the_id(node_id):
    text = to_mermaid(graph_of(node_id))
    labels = [decode(m.group(1)) for m in re.finditer(r'^    n\d+\[?\(?\["([^"]*)"', text, re.M)]
    assert node_id in labels


def test_ids_never_define_nodes_and_html_tags_are_entity_codes():
    text = to_mermaid(graph_of("<img src=x onerror=alert(1)>", "<b>bold</b>"))
    assert '["#60;img src#61;x onerror#61;alert#40;1#41;#62;"]' in text
    assert '["#60;b#62;bold#60;/b#62;"]' in text


def test_plain_ids_and_relations_stay_readable():
    text = to_mermaid(graph_of("lookup_order", "say hi"))
    assert 'n2["lookup_order"]' in text and 'n3["say hi"]' in text
    assert "    n1 -->|LEADS_TO| n2" in text


def test_an_odd_relation_is_quoted_and_escaped():
    text = to_mermaid(graph_of("a", relation="LEADS|TO<B>"))
    assert '-->|"LEADS#124;TO#60;B#62;"|' in text
