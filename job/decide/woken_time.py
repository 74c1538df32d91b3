"""Woken time in a rolling window (pure arithmetic; no clock, no Kubernetes): how much of a window a namespace was
kept running by Wakes, how long a new wake may run before a budget is spent, and when a spent budget frees up.

Times are whole seconds (POSIX), intervals half-open `[start, end)`. Intervals are counted as a union: the same
time recorded twice (two Wakes at once, or one record written by two runs) is counted once.

The rule a budget keeps: in every window of length `window`, at most `allowance` of woken time. A wake that starts
at `s` may run until the first instant at which that would no longer hold. The woken time in the window ending at
`t >= s` grows by one second per second at the front (the new wake) and shrinks by one where the window's back
leaves earlier woken time: it never falls, so the wake's end is where it first passes the allowance.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Interval = tuple[int, int]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The union as sorted, disjoint intervals (empty ones dropped)."""
    out: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def woken_within(intervals: Iterable[Interval], *, since: int, until: int) -> int:
    """Seconds of the union of `intervals` inside `[since, until)`."""
    return sum(max(0, min(end, until) - max(start, since)) for start, end in merged(intervals))


def granted_end(history: Sequence[Interval], *, start: int, allowance: int, window: int) -> int:
    """The latest end a wake starting at `start` may have under the budget (`start` itself when none is left).
    The caller cuts it further to the wake's own end."""
    with_wake = merged([*history, (start, start + window + 1)])  # open-ended for as long as can matter

    def used(t: int) -> int:
        return woken_within(with_wake, since=t - window, until=t)

    if used(start) > allowance:
        return start
    # between these instants the woken time is linear (the window's back crosses no edge): test each in turn
    edges = sorted({edge + window for interval in with_wake for edge in interval if edge + window > start})
    before = start
    for at in edges:
        if used(at) > allowance:
            return before + (allowance - used(before))  # it grows one second per second on this stretch
        before = at
    return before  # not reached: `used` is the whole window, more than any allowance, at the last edge


def frees_at(history: Sequence[Interval], *, now: int, allowance: int, window: int) -> int:
    """The first instant from `now` at which a new wake would be granted any time at all."""
    spans = merged(history)
    # Between the edges the woken time is linear. A wake is granted from an instant where it is below the allowance,
    # or exactly at it while the window's back is inside woken time: the first such instant is an edge, or where a
    # falling stretch starting at an edge comes down to the allowance.
    edges = {at for span in spans for edge in span for at in (edge, edge + window) if at > now}
    candidates = {now, *edges}
    for at in sorted(candidates):
        left = allowance - woken_within(spans, since=at - window, until=at)
        for instant in (at, at + max(0, -left)):
            if granted_end(spans, start=instant, allowance=allowance, window=window) > instant:
                return instant
    return max(now, *(end for _, end in spans)) + window  # not reached: by then the window is empty
