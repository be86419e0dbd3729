"""The built-in two-hop question-answering environment (spec §10): corpus, scripted solver, collector and evaluator.

It needs no agent, no model and no API key, so it serves as the acceptance scenario of the evolution loop, as the
demo workspace's evaluator and as a benchmark. The solver is guided by a `raw_subgraph` Guide with two hops and
follows a second hop only when the guidance shows one: at `search` it reads the top hit when the context offers
`→ [read]`, and at `read` it searches the hit's bridge entity when the context offers `→ [search]`. So the skeleton
scores 0.5 on validation (the one-hop questions pass), the round-1 graph 1.0, and the same graph without read→search
0.5 again (both Dara Quinn questions fail).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from .evaluation import Evaluation, TaskOutcome, Trace
from .graph import END, START, Graph
from .guide import GuidanceConfig, Guide, Step
from .serialize import render_step

__all__ = [
    "CORPUS",
    "ROUND_1_BUILD",
    "ROUND_2_BROKEN",
    "ROUND_3_DROP_SECOND_HOP",
    "ROUND_4_DUPLICATE",
    "SCRIPTED_REPLIES",
    "TASK_DESCRIPTION",
    "TOOLS",
    "TRAIN_SET",
    "UNKNOWN_ANSWER",
    "VALIDATION_SET",
    "Document",
    "Episode",
    "Question",
    "TwoHopEnvironment",
    "document",
    "search",
    "solve",
]

TASK_DESCRIPTION = "two-hop question answering over a small corpus"
TOOLS: tuple[str, ...] = ("search", "read", "answer")
UNKNOWN_ANSWER = "unknown"
READ_MARK = "→ [read]"
SEARCH_MARK = "→ [search]"
_STRIP = "?.,'s"


@dataclass(frozen=True)
class Document:
    """One corpus entry: its title, its text, the fact that answers a one-hop question, and an optional bridge."""

    title: str
    text: str
    fact: str
    bridge: str | None = None


CORPUS: tuple[Document, ...] = (
    Document(
        "Alice Martin",
        "Alice Martin is a painter known for large harbour scenes. She was born in Lyon.",
        "Alice Martin is a painter",
        "Lyon",
    ),
    Document("Lyon", "Lyon is a city on the Rhône and the Saône, in France.", "France"),
    Document(
        "Bram Okafor",
        "Bram Okafor founded Okafor Motors, a maker of small buses, which is based in Kumasi.",
        "Bram Okafor founded Okafor Motors",
        "Kumasi",
    ),
    Document("Kumasi", "Kumasi is a city in the Ashanti Region of Ghana.", "Ghana"),
    Document(
        "Chen Wei",
        "Chen Wei is a composer; his best-known work is the suite Silver River.",
        "Chen Wei composed Silver River",
    ),
    Document(
        "Dara Quinn",
        "Dara Quinn is a marathon runner who trains on the coast road near Galway, her home city.",
        "Dara Quinn is a marathon runner",
        "Galway",
    ),
    Document("Galway", "Galway is a harbour city on the west coast of Ireland.", "Ireland"),
    Document(
        "Eli Sato",
        "Eli Sato is a novelist; Paper Lanterns, a book about a night market, is his first.",
        "Eli Sato wrote Paper Lanterns",
    ),
)
_BY_TITLE = {doc.title: doc for doc in CORPUS}


def _words(text: str) -> set[str]:
    """Lower-cased words with `?.,'s` stripped from both ends of each; words that strip to nothing are dropped."""
    return {word for word in (raw.strip(_STRIP) for raw in text.lower().split()) if word}


_TITLE_WORDS = {doc.title: _words(doc.title) for doc in CORPUS}


def search(query: str) -> list[str]:
    """The titles that share any word with `query` (after normalization), in corpus order."""
    wanted = _words(query)
    return [doc.title for doc in CORPUS if _TITLE_WORDS[doc.title] & wanted]


def document(title: str) -> Document:
    """The document with this title (KeyError when there is none)."""
    return _BY_TITLE[title]


@dataclass(frozen=True)
class Question:
    question: str
    answer: str
    hops: int


TRAIN_SET: tuple[Question, ...] = (
    Question("Who is Alice Martin?", "Alice Martin is a painter", 1),
    Question("In which country was Alice Martin born?", "France", 2),
    Question("What did Bram Okafor do?", "Bram Okafor founded Okafor Motors", 1),
    Question("Which country is Bram Okafor's company based in?", "Ghana", 2),
)
VALIDATION_SET: tuple[Question, ...] = (
    Question("What did Chen Wei compose?", "Chen Wei composed Silver River", 1),
    Question("Which country is Dara Quinn from?", "Ireland", 2),
    Question("What did Eli Sato write?", "Eli Sato wrote Paper Lanterns", 1),
    Question("Where is Dara Quinn's home city?", "Ireland", 2),
)


@dataclass(frozen=True)
class Episode:
    """One scripted rollout: the answer given, the steps taken, the nodes the Guide localized and its texts."""

    question: str
    answer: str
    steps: tuple[Step, ...]
    nodes_visited: tuple[str, ...]
    guidance: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(render_step(step) for step in self.steps)


def _search_step(query: str) -> tuple[Step, list[str]]:
    hits = search(query)
    return Step("search", query, ", ".join(hits) if hits else "no documents found"), hits


def _read_step(title: str) -> tuple[Step, Document]:
    doc = document(title)
    return Step("read", title, doc.text), doc


def solve(graph: Graph | None, question: str) -> Episode:
    """Answer `question` the scripted way (spec §10, steps 1–6) under a raw_subgraph, two-hop Guide over `graph`.
    With no graph (a certificate's control arm when nothing is active) the solver gets no guidance at all: it never
    sees a mark, so it answers with the top hit's fact, as under the skeleton."""
    guide = None
    if graph is not None:
        guide = Guide(graph, config=GuidanceConfig(mode="raw_subgraph", hops=2, task_description=TASK_DESCRIPTION))
    steps: list[Step] = []
    texts: list[str] = []

    def guidance() -> str:
        if guide is None:
            return ""
        text = guide.guidance(question, steps).text
        texts.append(text)
        return text

    def finish(answer: str) -> Episode:
        steps.append(Step("answer", answer))
        visited = tuple(guide.visited) if guide is not None else ()
        return Episode(question, answer, tuple(steps), visited, tuple(texts))

    guidance()  # 1. at Start
    step, hits = _search_step(question)
    steps.append(step)
    if not hits:  # 2.
        return finish(UNKNOWN_ANSWER)
    top = document(hits[0])
    if READ_MARK not in guidance():  # 3.
        return finish(top.fact)
    step, current = _read_step(top.title)  # 4.
    steps.append(step)
    text = guidance()
    if current.bridge is not None and SEARCH_MARK in text:  # 5.
        step, bridge_hits = _search_step(current.bridge)
        steps.append(step)
        guidance()
        if bridge_hits:
            step, current = _read_step(bridge_hits[0])
            steps.append(step)
            guidance()
    return finish(current.fact)  # 6.


def _outcome(task_id: str, item: Question, episode: Episode) -> TaskOutcome:
    passed = episode.answer == item.answer
    return TaskOutcome(
        task_id=task_id,
        score=1.0 if passed else 0.0,
        passed=passed,
        prediction=episode.answer,
        truth=item.answer,
        meta={"question": item.question, "hops": item.hops},
    )


def _trace(trace_id: str, task_id: str, item: Question, graph: Graph | None, graph_ref: str | None) -> Trace:
    episode = solve(graph, item.question)
    return Trace(
        id=trace_id,
        outcome=_outcome(task_id, item, episode),
        text=episode.text,
        steps=episode.steps,
        meta={"question": item.question},
        graph_ref=graph_ref,
        nodes_visited=episode.nodes_visited,
        guidance=episode.guidance,
    )


class TwoHopEnvironment:
    """Collector and evaluator over the fixed sets: training traces for the refiner, validation for the gate.

    Training traces are `it{k}-train{i}` (task `train{i}`), validation traces and tasks `val{i}`; i counts from 0.
    `collections` and `evaluations` count the calls. `evaluate` takes graph None: the solver then runs unguided
    (evaluates_without_graph).
    """

    task_description = TASK_DESCRIPTION
    tools = TOOLS
    evaluates_without_graph = True

    def __init__(
        self,
        train_set: Sequence[Question] = TRAIN_SET,
        validation_set: Sequence[Question] = VALIDATION_SET,
    ) -> None:
        self.train_set = tuple(train_set)
        self.validation_set = tuple(validation_set)
        self.collections = 0
        self.evaluations = 0

    def collect(self, graph: Graph, *, graph_ref: str | None, iteration: int) -> list[Trace]:
        """Roll out the training set under `graph`."""
        self.collections += 1
        return [
            _trace(f"it{iteration}-train{i}", f"train{i}", item, graph, graph_ref)
            for i, item in enumerate(self.train_set)
        ]

    def validation_traces(self, graph: Graph | None, *, graph_ref: str | None = None) -> list[Trace]:
        """Roll out the validation set under `graph` (counted by nothing; `evaluate` uses it)."""
        return [_trace(f"val{i}", f"val{i}", item, graph, graph_ref) for i, item in enumerate(self.validation_set)]

    def evaluate(self, ref: str | None, graph: Graph | None, *, iteration: int, purpose: str) -> Evaluation:
        """The validation set's mean score, with aggregate {purpose, iteration} and the per-task outcomes."""
        self.evaluations += 1
        outcomes = [trace.outcome for trace in self.validation_traces(graph, graph_ref=ref)]
        return Evaluation.from_outcomes(ref, outcomes, {"purpose": purpose, "iteration": iteration})


# -- the four scripted refiner replies ---------------------------------------------------------------------------------


def _edge(
    source: str,
    target: str,
    guidance: str,
    *,
    relation: str = "LEADS_TO",
    condition: str | None = None,
    pitfalls: str | None = None,
) -> dict[str, str | None]:
    return {
        "source": source,
        "target": target,
        "relation": relation,
        "condition": condition,
        "guidance": guidance,
        "pitfalls": pitfalls,
    }


def _reply(
    *,
    add_nodes: Sequence[dict] = (),
    delete_nodes: Sequence[str] = (),
    add_edges: Sequence[dict] = (),
    delete_edges: Sequence[tuple[str, str]] = (),
) -> str:
    return json.dumps(
        {
            "add_nodes": list(add_nodes),
            "delete_nodes": list(delete_nodes),
            "add_edges": list(add_edges),
            "delete_edges": [{"source": source, "target": target} for source, target in delete_edges],
        },
        indent=1,
        ensure_ascii=False,
    )


ROUND_1_BUILD = _reply(
    add_nodes=[
        {"id": "search", "type": "ACTION", "description": "Search the corpus for documents whose title matches"},
        {"id": "read", "type": "ACTION", "description": "Read a document's text"},
        {"id": "answer", "type": "ACTION", "description": "Give the final answer"},
    ],
    add_edges=[
        _edge(START, "search", "Search with the question's subject, the person it names"),
        _edge(
            "search",
            "read",
            "Read the top hit before answering",
            condition="search returned at least one document",
            pitfalls="Answering from the search hit's title alone misses two-hop questions",
        ),
        _edge(
            "read",
            "answer",
            "Answer with the fact of the document you read last",
            condition="the document answers the question directly",
        ),
        _edge(
            "read",
            "search",
            "Search the bridge entity the document names, then read that hit",
            relation="PROVIDES_INPUT_FOR",
            condition="the question asks about something the document only names (a city, a company)",
            pitfalls="Do not answer with the first document's fact when the question needs a second hop",
        ),
        _edge("answer", END, "Stop after answering"),
    ],
    delete_edges=[(START, END)],
)
ROUND_2_BROKEN = _reply(
    add_edges=[
        _edge(
            "answer",
            "verify_answer",
            "Check the answer against the document before finishing",
            condition="the answer was given",
        )
    ]
)
ROUND_3_DROP_SECOND_HOP = _reply(delete_edges=[("read", "search")])
ROUND_4_DUPLICATE = ROUND_3_DROP_SECOND_HOP
SCRIPTED_REPLIES: tuple[str, ...] = (ROUND_1_BUILD, ROUND_2_BROKEN, ROUND_3_DROP_SECOND_HOP, ROUND_4_DUPLICATE)
