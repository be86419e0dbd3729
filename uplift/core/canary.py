"""Canary assignment: which arm a run gets while a candidate is live for a share of runs.

A canary rollout serves the candidate (the new active version) to a share of runs and the version it replaced (the
control) to the rest. The arm is a pure function of the parent, the run key the agent sends on its per-step calls
(`X-Waymark-Run`; the Python client sends its run id) and the share, so every web process answers alike with no
state and no query:

    u = the first 8 bytes of sha256("waymark-canary\\0<parent>\\0<run key>") as an integer, over 2**64
    canary  iff  u < share

A run is pinned for its whole life by the revision it was first served (`X-Waymark-Revision`, sent back on every
later call): a pin naming either arm keeps that arm whatever the share has become since; a pin naming neither (a
version no longer live) is ignored. Without a run key a call gets the control: an agent that cannot say which run it
is in must not flip between versions from one step to the next.

Run keys and pins are read as printable ASCII of at most `MAX_KEY` characters; anything else (empty, too long,
control or non-ASCII characters) counts as absent, never as an error: a per-step call must not fail on a header.
"""

from __future__ import annotations

import hashlib
from typing import Literal

Arm = Literal["canary", "control"]
CANARY: Arm = "canary"
CONTROL: Arm = "control"
MAX_KEY = 200
_SCALE = float(2**64)


def clean_key(value: str | None) -> str:
    """The header's value when it is a usable key (printable ASCII, 1..MAX_KEY characters), else ""."""
    if not value or len(value) > MAX_KEY:
        return ""
    value = value.strip()
    if not value or not value.isascii() or not value.isprintable():
        return ""
    return value


def position(parent: str, run_key: str) -> float:
    """The run's place in [0, 1) for this parent (uniform over run keys, independent across parents)."""
    digest = hashlib.sha256(f"waymark-canary\0{parent}\0{run_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def arm_for(parent: str, run_key: str | None, share: float) -> Arm:
    """The arm of a run with no pin: the canary for a share of run keys, the control without a key."""
    key = clean_key(run_key)
    if not key or share <= 0:
        return CONTROL
    if share >= 1:
        return CANARY
    return CANARY if position(parent, key) < share else CONTROL


def serve(parent: str, *, run_key: str | None, pin: str | None, share: float, canary_ref: str, control_ref: str) -> Arm:
    """The arm to serve: the pinned one when the pin names the canary's or the control's revision, else arm_for."""
    pinned = clean_key(pin)
    if pinned:
        if pinned == canary_ref:
            return CANARY
        if pinned == control_ref:
            return CONTROL
    return arm_for(parent, run_key, share)
