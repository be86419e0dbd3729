"""A straightforward implementation of learn_procedure (trajectory-mining §2.1), kept as the judge of the fast one.

It fills the whole DP table with concrete tuples for every pair of runs, exactly as the spec words it, and shares
nothing with procedures.core.learn except the value types it returns.
"""

import hashlib

from procedures.core.learn import ProcedureCandidate, ProcedureStep


def reference_lcs(first, second):
    table = [[() for _ in range(len(second) + 1)] for _ in range(len(first) + 1)]
    for i in range(1, len(first) + 1):
        for j in range(1, len(second) + 1):
            if first[i - 1] == second[j - 1]:
                table[i][j] = table[i - 1][j - 1] + (first[i - 1],)
            else:
                up, left = table[i - 1][j], table[i][j - 1]
                if len(up) != len(left):
                    table[i][j] = up if len(up) > len(left) else left
                else:
                    table[i][j] = min(up, left)
    return table[len(first)][len(second)]


def reference_learn_procedure(trajectories, *, intent):
    if not intent.strip() or not trajectories:
        raise ValueError("intent and at least one trajectory are required")
    for trajectory_id, steps in trajectories.items():
        if not trajectory_id.strip() or not steps or any(step.ok is not True for step in steps):
            raise ValueError("source trajectories must be identified, non-empty, and successful")
    ordered = sorted(trajectories.items())
    tools = tuple(step.tool for step in ordered[0][1])
    for _, steps in ordered[1:]:
        tools = reference_lcs(tools, tuple(step.tool for step in steps))
    if not tools:
        raise ValueError("successful trajectories share no procedure steps")
    collected = [[] for _ in tools]
    for _, steps in ordered:
        position = 0
        for tool_index, tool in enumerate(tools):
            while steps[position].tool != tool:
                position += 1
            collected[tool_index].append(steps[position].arguments)
            position += 1
    retained = []
    for mappings in collected:
        first = dict(mappings[0])
        retained.append(mappings[0] if all(dict(mapping) == first for mapping in mappings) else {})
    digest = hashlib.sha256("\0".join([intent.strip(), *tools]).encode("utf-8")).hexdigest()
    return ProcedureCandidate(
        procedure_id="procedure:" + digest[:16],
        intent=intent.strip(),
        steps=tuple(ProcedureStep(tool=tool, arguments=args) for tool, args in zip(tools, retained, strict=True)),
        source_trajectory_ids=tuple(trajectory_id for trajectory_id, _ in ordered),
        revision="sha256:" + digest,
    )


def skipping_reference_learn_procedure(trajectories, *, intent):
    """The literal reference with the one shortcut a competent engineer writes first: a run that already contains
    the current sequence leaves it unchanged (it is its own LCS with that run), so the fold skips the DP for it.
    Everything else is the literal reference. A benchmark baseline (bench/mining.py), not a test oracle."""
    if not intent.strip() or not trajectories:
        raise ValueError("intent and at least one trajectory are required")
    for trajectory_id, steps in trajectories.items():
        if not trajectory_id.strip() or not steps or any(step.ok is not True for step in steps):
            raise ValueError("source trajectories must be identified, non-empty, and successful")
    ordered = sorted(trajectories.items())
    tools = tuple(step.tool for step in ordered[0][1])
    for _, steps in ordered[1:]:
        run_tools = tuple(step.tool for step in steps)
        remaining = iter(run_tools)
        if not all(tool in remaining for tool in tools):
            tools = reference_lcs(tools, run_tools)
    if not tools:
        raise ValueError("successful trajectories share no procedure steps")
    collected = [[] for _ in tools]
    for _, steps in ordered:
        position = 0
        for tool_index, tool in enumerate(tools):
            while steps[position].tool != tool:
                position += 1
            collected[tool_index].append(steps[position].arguments)
            position += 1
    retained = []
    for mappings in collected:
        first = dict(mappings[0])
        retained.append(mappings[0] if all(dict(mapping) == first for mapping in mappings) else {})
    digest = hashlib.sha256("\0".join([intent.strip(), *tools]).encode("utf-8")).hexdigest()
    return ProcedureCandidate(
        procedure_id="procedure:" + digest[:16],
        intent=intent.strip(),
        steps=tuple(ProcedureStep(tool=tool, arguments=args) for tool, args in zip(tools, retained, strict=True)),
        source_trajectory_ids=tuple(trajectory_id for trajectory_id, _ in ordered),
        revision="sha256:" + digest,
    )
