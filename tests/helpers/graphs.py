"""Graph tests' helpers: a long chain graph (`big_graph`, for query counts) and the CSRF header of a logged-in
client's cookie (`csrf`, for htmx posts)."""

from graphs.core import END, START, Edge, Graph, Node


def big_graph(width: int) -> Graph:
    nodes = [Node(START, "STATUS", "Task start"), Node(END, "STATUS", "Task end")]
    nodes += [Node(f"t{i}", "ACTION", f"tool {i}") for i in range(width)]
    edges = [Edge(START, "LEADS_TO", "t0", {"guidance": "begin"})]
    edges += [Edge(f"t{i}", "LEADS_TO", f"t{i + 1}", {"guidance": "next"}) for i in range(width - 1)]
    edges.append(Edge(f"t{width - 1}", "LEADS_TO", END, {"guidance": "stop"}))
    return Graph(nodes=nodes, edges=tuple(edges))


def csrf(client):
    return {"X-CSRFToken": client.cookies["csrftoken"].value} if "csrftoken" in client.cookies else {}
