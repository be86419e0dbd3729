"""Runs for the procedure-learning tests: `run` (one run's steps from tool names) and the Hypothesis strategies of
runs (`tool_runs`, `repeated_runs`) with the tools and arguments they draw from, and `WHOLE_STEPS`: the values of
`learn._WHOLE_STEPS` that take each path (0: every input streamed in batches; the default: small inputs whole)."""

from collections.abc import Mapping
from types import MappingProxyType

from hypothesis import strategies as st

from procedures.core import learn
from trajectories.core import TrajectoryStep

WHOLE_STEPS = (0, learn._WHOLE_STEPS)


def run(*tools, ok=True, arguments=None):
    arguments = arguments or {}
    return [
        TrajectoryStep(ordinal, tool, "execute", arguments.get(ordinal, {}), ok=ok)
        for ordinal, tool in enumerate(tools)
    ]


class PlainMapping(Mapping):
    """A caller's own read-only mapping type: compared as a plain dict, like any other mapping."""

    def __init__(self, data):
        self._data = dict(data)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


TOOLS = st.sampled_from(["a", "b", "c", "d"])
ARGUMENTS = st.sampled_from([{}, {"k": 1}, {"k": 1.0}, {"k": True}, {"k": 2}, {"k": "1"}, {"k": 1, "j": None}]).flatmap(
    lambda data: st.sampled_from([data, MappingProxyType(dict(data)), PlainMapping(data)])
)


@st.composite
def tool_runs(draw, names=("a", "b", "c", "d")):
    alphabet = draw(st.integers(min_value=1, max_value=len(names)))
    tools = st.sampled_from(names[:alphabet])
    count = draw(st.integers(min_value=1, max_value=6))
    ids = draw(st.lists(st.text("0123:x", min_size=1, max_size=3), min_size=count, max_size=count, unique=True))
    runs = {}
    for trajectory_id in ids:
        names = draw(st.lists(tools, min_size=0, max_size=12))
        runs[trajectory_id] = [
            TrajectoryStep(ordinal, tool, "execute", draw(ARGUMENTS), ok=True) for ordinal, tool in enumerate(names)
        ]
    return runs


VALUES = st.sampled_from([1, 1.0, True, 2, "1", None])


@st.composite
def repeated_runs(draw):
    """Many runs over few tool sequences (so alignments are shared), arguments often equal as Python values
    (1 == 1.0 == True), and differences only from some position on."""
    sequences = draw(st.lists(st.lists(TOOLS, min_size=1, max_size=6), min_size=1, max_size=3))
    count = draw(st.integers(min_value=1, max_value=40))
    differ_from = draw(st.integers(min_value=0, max_value=6))
    runs = {}
    for number in range(count):
        tools = draw(st.sampled_from(sequences))
        runs[f"{number:03}"] = [
            TrajectoryStep(
                ordinal,
                tool,
                "execute",
                {"k": draw(VALUES) if ordinal >= differ_from else 1},
                ok=True,
            )
            for ordinal, tool in enumerate(tools)
        ]
    return runs
