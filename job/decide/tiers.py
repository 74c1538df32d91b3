"""Restore in tiers: which of a namespace's restores go now, and which wait for the ones before them (pure:
no I/O, and `now` is a parameter).

Rules, in order:
1. A workload's tier is its `nsscaler.wubw.fun/restore-tier` annotation (a whole number from 0 to `MAX_TIER`)
   when it carries one, else the position of its kind in the restoring policy's `restore_order`, else the
   length of that list: every kind not listed comes last. With neither, everything is tier 0 and a restore
   is one step, as it always was, unless the namespace has a workload of a kind whose row puts it in the data
   tier (a database run by an operator: `job.model.kinds.rows`): then those are tier 0 and the others tier 1,
   so the apps come back once their database is ready.
2. A namespace's restore follows one policy: the first by name of those whose restores are pending there
   (nearly always the only one). Its `restore_order` and `restore_wait` apply to every workload there.
3. Of a namespace's pending restores, those of the lowest tier T go now when every workload of a lower tier
   in that namespace (not frozen: brought back before, or never frozen) is available as its kind defines it
   (`KindHandler.available`); or when `restore_wait` has passed since the earlier tier came back. That time is
   the latest of nsscaler's own writes on them (its restore, whose time the API server stamps in the same
   write: nothing to lose in a crash) and of the wait the policy's status remembers for that tier (a restore
   that leaves nsscaler owning no field, such as a DaemonSet's, leaves no stamp); with neither, the wait
   begins now and the status remembers it, unless the policy is gone (nothing could remember it: it goes).
   The later tiers wait for a later pass: in this run (`--restore-wait-in-run`) or the next one.
4. A tier that goes because the wait passed names the workloads that were not available in time.
5. A malformed annotation holds its workload back, frozen with its record, and says how to fix it.
Freezing is never tiered: a hold stops everything at once.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from job.decide.actions import Action, Problem, Verb
from job.decide.selection import Selection
from job.errors import shown, unexpected
from job.model.activity import parse_time
from job.model.kinds import Kind
from job.model.marks import ANNOTATION_RESTORE_TIER
from job.model.policy import InvalidPolicy, Policy, parse_duration
from job.model.workloads import Workload

#: the highest tier the annotation accepts
MAX_TIER = 9
#: the tier of the HTTPRoutes pointed at the waker: after every workload's (`job.decide.routes`)
ROUTES_TIER = MAX_TIER + 1
#: `restore_wait` of a restore whose policy is gone
DEFAULT_RESTORE_WAIT = parse_duration("5m")
#: what the annotation may say (`str.isdigit` would take "²", and `int` refuses 5,000 digits)
_TIER = re.compile(r"[0-9]")


@dataclass(frozen=True, slots=True)
class TierWait:
    """A namespace whose next tier waits: for which earlier workloads, since when, and until when at most."""

    namespace: str
    policy: str
    tier: int
    #: the earlier tiers' workloads not available yet (`kind/name`)
    waiting_for: tuple[str, ...]
    #: workloads of this tier and the later ones, still frozen
    pending: int
    since: dt.datetime
    until: dt.datetime
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class LateTier:
    """A tier brought back because `restore_wait` passed, and the earlier workloads that were not available."""

    namespace: str
    policy: str
    tier: int
    not_ready: tuple[str, ...]
    since: dt.datetime
    #: the HTTPRoutes given back because the wait passed (`job.decide.routes`), then `tier` is `ROUTES_TIER`
    routes: tuple[str, ...] = ()

    @property
    def what(self) -> str:
        """What came back late, in words: the tier, or the routes pointed at the waker."""
        return f"HTTPRoute {', '.join(self.routes)}" if self.routes else f"tier {self.tier}"


@dataclass(frozen=True)
class Tiering:
    """The restores that go now (every other action as it was), what waits, what went late, what is malformed."""

    actions: list[Action]
    waits: list[TierWait]
    late: list[LateTier]
    problems: list[Problem]


def tier_of(workload: Workload, order: Sequence[Kind], *, data_first: bool = False) -> int | None:
    """Rule 1: its tier; None when its annotation is malformed. `data_first`: its namespace has a workload of a
    data-tier kind (`has_data`)."""
    if workload.tier is not None:
        text = workload.tier.strip()
        return int(text) if _TIER.fullmatch(text) else None
    if not order and data_first:
        return 0 if is_data(workload) else 1
    kinds = [k for k in order if k in workload.selecting_kinds]
    return order.index(kinds[0]) if kinds else len(order)


def is_data(workload: Workload) -> bool:
    """A data-tier kind, or a StatefulSet of a paused operator whose row is (it comes back with its operator)."""
    paused = workload.paused_owner
    return bool(getattr(workload.handling, "data_tier", False)) or bool(paused and paused.data_tier)


def has_data(workloads: Iterable[Workload]) -> bool:
    """Rule 1: whether a namespace's restore puts its data-tier workloads first."""
    return any(is_data(w) for w in workloads)


@dataclass(frozen=True)
class _Leader:
    """Rule 2: the policy a namespace's restore follows (None: gone), its order and its wait."""

    name: str
    policy: Policy | None
    order: Sequence[Kind] = ()
    wait: dt.timedelta = DEFAULT_RESTORE_WAIT

    def waits_in(self, namespace: str) -> bool:
        """Whether its status remembers a tier of `namespace` waiting: its earlier tiers may be back already, so
        that no record says they are there (a data-tier row given back whole), and the namespace is read whole."""
        entries = (self.policy.status.get("restoring") or []) if self.policy is not None else []
        return any(isinstance(e, dict) and e.get("namespace") == namespace for e in entries)

    def remembered(self, namespace: str, tier: int) -> dt.datetime | None:
        """When the wait of `tier` in `namespace` began, as the policy's status remembers it."""
        entries = (self.policy.status.get("restoring") or []) if self.policy is not None else []
        found = [parse_time(e.get("since")) for e in entries if isinstance(e, dict)
                 and e.get("namespace") == namespace and e.get("tier") == tier]
        return next((t for t in found if t is not None), None)


def _leader(names: Iterable[str], policies: Mapping[str, Policy | InvalidPolicy]) -> _Leader:
    name = min(names)
    found = policies.get(name)
    if isinstance(found, Policy):
        return _Leader(name, found, found.spec.restore_order, found.restore_wait)
    return _Leader(name, None)


def in_tiers(actions: Sequence[Action], *, workloads: Iterable[Workload],
             policies: Mapping[str, Policy | InvalidPolicy], now: dt.datetime) -> Tiering:
    """Rules 2-5 over every namespace with a pending restore; other actions pass as they are."""
    restores: dict[str, list[Action]] = {}
    for a in actions:
        if a.verb is Verb.RESTORE:
            restores.setdefault(a.workload.namespace, []).append(a)
    if not restores:
        return Tiering(list(actions), [], [], [])
    around: dict[str, list[Workload]] = {ns: [] for ns in restores}
    for w in workloads:
        if w.namespace in around and not w.has_record and not w.excluded and not w.frozen_with_its_owner:
            around[w.namespace].append(w)
    held_back: set[int] = set()
    waits, late, problems = [], [], []
    for ns, pending in sorted(restores.items()):
        try:
            step = _namespace_step(ns, pending, around[ns], policies=policies, now=now)
        except Exception as exc:
            step = _Step([], [], [], [Problem(a.policy, a.workload, f"{a.workload.ref}: not restored yet: "
                                                                   f"{unexpected(exc)}") for a in pending[:1]])
        held_back.update(id(a) for a in pending if a not in step.going)
        waits += step.waits
        late += step.late
        problems += step.problems
    return Tiering([a for a in actions if id(a) not in held_back], waits, late, problems)


@dataclass(frozen=True)
class _Step:
    going: list[Action]
    waits: list[TierWait]
    late: list[LateTier]
    problems: list[Problem]


def _namespace_step(ns: str, pending: list[Action], around: list[Workload], *,
                    policies: Mapping[str, Policy | InvalidPolicy], now: dt.datetime) -> _Step:
    leader = _leader((a.policy for a in pending), policies)
    data_first = has_data([*around, *(a.workload for a in pending)])
    tiers = {id(a): tier_of(a.workload, leader.order, data_first=data_first) for a in pending}
    problems = [Problem(a.policy, a.workload, _malformed(a.workload)) for a in pending if tiers[id(a)] is None]
    valid = [a for a in pending if tiers[id(a)] is not None]
    if not valid:
        return _Step([], [], [], problems)
    lowest = min(tiers[id(a)] or 0 for a in valid)
    earlier = [w for w in around if (tier_of(w, leader.order, data_first=data_first) or 0) < lowest]
    not_ready = tuple(w.short_ref for w in earlier if w.available is not True)
    since = _since(earlier, leader, ns, lowest, now=now) if not_ready else None
    dry_run = all(a.dry_run for a in valid)
    if since is not None and now - since < leader.wait:
        return _Step([], [TierWait(ns, leader.name, lowest, not_ready, len(valid), since, since + leader.wait,
                                   dry_run=dry_run)], [], problems)
    going = [a for a in valid if tiers[id(a)] == lowest]
    late = [LateTier(ns, leader.name, lowest, not_ready, since)] if since is not None else []
    later = [a for a in valid if tiers[id(a)] != lowest]
    if not later:
        return _Step(going, [], late, problems)
    next_tier = min(tiers[id(a)] or 0 for a in later)
    # what the next tier waits for: this tier, on its way back now, and whatever of the earlier ones is not there
    coming = tuple(a.workload.short_ref for a in going if a.after)
    waiting = TierWait(ns, leader.name, next_tier, (*not_ready, *coming), len(later), now, now + leader.wait,
                       dry_run=dry_run)
    return _Step(going, [waiting], late, problems)


#: how far ahead of the run's clock a stamp of the API server's is believed (clocks of two machines differ a little)
CLOCK_SKEW = dt.timedelta(minutes=10)


def _since(earlier: list[Workload], leader: _Leader, ns: str, tier: int, *, now: dt.datetime) -> dt.datetime | None:
    """Rule 3: when the earlier tier came back (None: the policy is gone and nothing says; it goes)."""
    known = [t for w in earlier if (t := parse_time(w.written_by_nsscaler)) is not None]
    remembered = leader.remembered(ns, tier)
    if remembered is not None:
        known.append(remembered)
    if known:
        # the API server's clock may be a little ahead of the run's; a stamp far in the future is not nsscaler's
        # (anyone who may update the object may write managedFields): taken as at most CLOCK_SKEW ahead, so it
        # delays its own namespace's tier by that at most, and never overflows
        return min(max(known), now + CLOCK_SKEW)
    return now if leader.policy is not None else None


def _malformed(workload: Workload) -> str:
    return (f"{workload.ref}: {ANNOTATION_RESTORE_TIER}={shown(workload.tier)} is not a whole number from 0 to "
            f"{MAX_TIER}; it stays frozen with its record until the annotation is fixed or removed")


def namespaces_to_read(workloads: Iterable[Workload], *, selection: Selection,
                       policies: Mapping[str, Policy | InvalidPolicy]) -> list[str]:
    """The namespaces whose lowest pending restore tier is not 0: the read stage reads every workload there
    whole, for whether the earlier tiers are available (a steady state and a one-step restore read nothing more).
    Pending means what the planner restores: a valid record in a namespace not held for its kind, of a policy
    that is gone or serves and restores."""
    pending: dict[str, list[Workload]] = {}
    data: set[str] = set()
    for w in workloads:
        if is_data(w):
            data.add(w.namespace)
        if not w.has_record or w.excluded or w.frozen_with_its_owner or not w.record_is_valid():
            continue
        verdict = selection.verdicts.get(w.namespace)
        if verdict is not None and (verdict.untouchable or verdict.holder_for(w.selecting_kinds) is not None):
            continue
        owner = policies.get(w.scaled_by or "")
        if isinstance(owner, InvalidPolicy) or (owner is not None and owner.keeps_frozen):
            continue
        pending.setdefault(w.namespace, []).append(w)
    out = []
    for ns, found in sorted(pending.items()):
        leader = _leader((w.scaled_by or "" for w in found), policies)
        tiers = [t for w in found if (t := tier_of(w, leader.order, data_first=ns in data)) is not None]
        if (tiers and min(tiers) > 0) or leader.waits_in(ns):
            out.append(ns)
    return out
