"""Who holds a namespace now, and until when: the one rule the run's selection, the waker and the plugin share.

Pure: policies, a namespace's name and `now` in; no I/O and no clock. The run's selection
(`job.decide.selection`, rules 2 to 4) builds on these functions, so the waker's door and the plugin's words
cannot drift from what the run does.

Rules:
1. A policy holds at `now` when it is neither suspended nor being deleted (a finalizer keeps it only until nsscaler
   has given back what it froze) and its schedule holds (inside one of its `hold_windows`, in its `time_zone`,
   before `until`; always, without either).
2. Of the policies holding at `now`, those with the namespace in scope that do not keep it running hold it;
   any that keeps it running (its active list names it, or, in the run, it is one of its `keep_recent`) keeps
   the namespace running for all of them: "active wins".
3. Of several holders the first by name is the holding policy (the one the run records in `scaled-by`).

Outside the run, activity is not known: `holder_of` keeps what the active lists name, and a namespace a policy
keeps for recent activity (or a Wake keeps running) is said to be held by it; the run, which knows both, says
otherwise and leaves the namespace running.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from job.model.policy import Policy

#: whether `policy` keeps namespace `name` running (the run: active list and keep_recent; elsewhere: the list)
Keeps = Callable[[Policy, str], bool]


@dataclass(frozen=True)
class Holding:
    """The policies holding a namespace now (by name, never empty), and when the first of them, the holding policy,
    next stops holding by its schedule (None: it never will). Another holder may hold it on after that instant."""

    holders: tuple[Policy, ...]
    until: dt.datetime | None

    @property
    def policy(self) -> Policy:
        """The holding policy: the first holder by name, recorded in `scaled-by` (rule 3)."""
        return self.holders[0]


def holds_now(policy: Policy, now: dt.datetime | None) -> bool:
    """Rule 1. `now` may be None only for a policy without hold_windows or until (ValueError otherwise)."""
    if policy.spec.suspend or policy.life.deleting:
        return False
    if policy.schedule.always:
        return True
    if now is None:
        raise ValueError(f"policy {policy.name} has hold_windows or until: deciding whether it holds needs `now`")
    return policy.schedule.holds(now)


def holding_now(policies: Iterable[Policy], now: dt.datetime | None) -> list[Policy]:
    """The policies holding at `now`, by name."""
    return [p for p in sorted(policies, key=lambda p: p.name) if holds_now(p, now)]


def holders(namespace: str, holding: Sequence[Policy], *,
            keeps: Keeps = Policy.lists_active) -> tuple[tuple[Policy, ...], tuple[str, ...]]:
    """Rule 2: of the policies `holding` now (by name), those that would hold `namespace` and the names of those
    keeping it running. It is held when the first is not empty and the second is."""
    return (tuple(p for p in holding if p.in_scope(namespace) and not keeps(p, namespace)),
            tuple(p.name for p in holding if p.in_scope(namespace) and keeps(p, namespace)))


def holder_of(policies: Iterable[Policy], namespace: str, *, now: dt.datetime | None,
              keeps: Keeps = Policy.lists_active) -> Holding | None:
    """Which policy holds `namespace` at `now` (rules 1 to 3), and until when; None when none does."""
    found, keepers = holders(namespace, holding_now(policies, now), keeps=keeps)
    if keepers or not found:
        return None
    first = found[0]
    return Holding(found, None if first.schedule.always or now is None else first.schedule.next_change(now))
