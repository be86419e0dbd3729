"""A run's steps as a waterfall: each timed step's start and length as fractions of the run's span."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    index: int
    offset: float  # seconds after the waterfall starts
    duration: float  # seconds
    left: float  # 0..1 of the span
    width: float  # 0..1 of the span (a zero-length step still gets a visible sliver when drawn)


@dataclass(frozen=True)
class Waterfall:
    span: float  # seconds from the first start to the last end
    bars: tuple[Bar | None, ...]  # one per step, None for a step without both timestamps

    @property
    def timed(self) -> int:
        return sum(bar is not None for bar in self.bars)


def waterfall(steps: Sequence[tuple[float | None, float | None]], *, run_start: float | None = None) -> Waterfall:
    """Bars for (started_at, ended_at) pairs in Unix seconds. The waterfall starts at the run's start when it is
    known and not after the first step, else at the first step; an end before its start counts as zero length."""
    timed = [(start, max(start, end)) for start, end in steps if start is not None and end is not None]
    if not timed:
        return Waterfall(span=0.0, bars=tuple(None for _ in steps))
    origin = min(start for start, _ in timed)
    if run_start is not None and run_start <= origin:
        origin = run_start
    span = max(end for _, end in timed) - origin
    bars: list[Bar | None] = []
    for index, (start, end) in enumerate(steps):
        if start is None or end is None:
            bars.append(None)
            continue
        end = max(start, end)
        offset, duration = start - origin, end - start
        left = offset / span if span > 0 else 0.0
        width = duration / span if span > 0 else 1.0
        bars.append(Bar(index=index, offset=offset, duration=duration, left=left, width=width))
    return Waterfall(span=span, bars=tuple(bars))
