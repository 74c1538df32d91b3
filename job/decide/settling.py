"""Freezes that wait for their operator (pure): objects frozen the operator's way whose row names a condition
(`frozen.condition`, `job.model.kinds.rows`), such as a CloudNativePG Cluster hibernated by its annotation.

Such a freeze counts as done only when the operator reports its condition, besides its Pods being gone (the Pod
census, `job.decide.pods`). Until its row's `within` seconds after the freeze, the policy reports it in progress
(`done` false, the Drained condition says so); after them it is overdue: the policy's FreezeIncomplete condition
and one Warning Event name it with what the operator reports (`job.decide.status`, `job.decide.events`).

When it was frozen is what the API server recorded with the freeze: nsscaler's own entry in the object's
`managedFields`, whose time is set by the very write that froze it (no second write). A freeze of this run is
known from its result (its time is the run's `now`). An object whose record nsscaler no longer owns any field
of has no known time: it is overdue at once, since nothing says how long its operator has had.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from job.decide.actions import ActionResult, Verb
from job.model.activity import parse_time
from job.model.kinds.handler import KindHandler
from job.model.workloads import Workload

#: what a freeze of this very run waits for: its operator has not looked at it yet
JUST_FROZEN = "frozen by this run; its operator has not reported yet"


@dataclass(frozen=True, slots=True)
class Settling:
    """One object of a held namespace frozen by the policy, whose operator does not report it frozen yet."""

    namespace: str
    #: "Cluster.postgresql.cnpg.io/db"
    workload: str
    #: what the operator reports instead (`KindHandler.settled`)
    reports: str
    #: when it was frozen; None when no time is recorded on it
    since: dt.datetime | None
    #: how long its row gives the operator (`frozen.within`, seconds)
    within: float
    #: `within` has passed: the freeze is incomplete, not in progress
    overdue: bool

    @property
    def words(self) -> str:
        return f"{self.namespace} {self.workload}: {self.reports}"


def reports_frozen(workload: Workload) -> bool:
    """Whether its operator reports its freeze (its kind's row names a condition)."""
    return isinstance(workload.handler, KindHandler) and workload.handler.settle_within is not None


def _frozen_now(results: Iterable[ActionResult], policy: str) -> dict[tuple[str, str, str], Workload]:
    return {r.action.workload.key: r.action.workload for r in results
            if r.action.policy == policy and r.action.verb is Verb.FREEZE and r.outcome == "applied"}


def waiting(workloads: Iterable[Workload], *, policy: str, held: Sequence[str], results: Iterable[ActionResult],
            now: dt.datetime) -> list[Settling]:
    """The objects of `policy`'s held namespaces frozen the operator's way whose operator does not report them
    frozen yet, sorted by namespace and name: those frozen by this run (in progress from `now`), and those frozen
    before, read whole with the row's condition not reached."""
    namespaces = set(held)
    fresh = _frozen_now(results, policy)
    found: list[Settling] = []
    for w in workloads:
        if w.namespace not in namespaces or not reports_frozen(w):
            continue
        within = w.kind_handler.settle_within
        assert within is not None
        if w.key in fresh:
            found.append(Settling(w.namespace, w.short_ref, JUST_FROZEN, now, within, overdue=False))
        elif w.has_record and w.scaled_by == policy and w.unsettled is not None:
            since = parse_time(w.written_by_nsscaler)
            overdue = since is None or (now - since).total_seconds() >= within
            found.append(Settling(w.namespace, w.short_ref, w.unsettled, since, within, overdue=overdue))
    return sorted(found, key=lambda s: (s.namespace, s.workload))
