"""Which HTTPRoutes follow their namespace's hold this run (pure: the routes and workloads as read, which
namespaces opted-in policies hold).

Rules, in order:
1. A route in a namespace held by a policy with `wake.on_request` (not in dry run), without a record, is pointed
   at the waker: its rules and the record of them in one write (`job.model.kinds.httproute`), scaled-by the
   first holding policy by name. The namespace's `ReferenceGrant` is created first, so the route is never
   pointed at a backend it may not use.
2. A route with a record, in a namespace no such policy holds any more (woken, active, out of scope, the policy
   gone or no longer opted in), is restored exactly once its namespace is awake: no workload there carries a
   record, and every one is available as its kind defines it. This is the last restore tier: until then the
   waker answers and its page polls. Its namespace's grant goes once no route there keeps a record.
3. A route already pointed (a record) while its namespace is still held is left as it is; so is one whose
   record is malformed, which is a problem naming it (restore it by hand, or delete the annotation). A mark of
   an earlier wait (rule 5) on a held route goes: the next wake waits afresh.
4. A policy gets nsscaler's routes finalizer before the first route it points, and keeps it while any route
   carries a record it wrote: deleted, it stays until those routes are back, and a run looks for records only
   while some policy wakes on request or carries the finalizer (`sweep_needed`).
5. The wait of rule 2 is bounded: the first run that finds a route waiting marks on it when the wait began
   (`ANNOTATION_ROUTE_WAITING`); once the `restore_wait` of the policy that pointed it (`DEFAULT_RESTORE_WAIT`
   if that policy is gone or invalid) has passed since, the route comes back anyway, and the workloads not
   available in time are named (`LateTier` of `ROUTES_TIER`: status.restoredLate, a RestoreTierLate Event). A
   broken app then shows its own error, not the waiting page, and no policy's deletion waits longer than that.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from job.decide.tiers import DEFAULT_RESTORE_WAIT, ROUTES_TIER, LateTier
from job.model.activity import parse_time
from job.model.kinds.httproute import Waker, frozen_rules, record, record_of, restored_rules, rules_of
from job.model.kinds.kind import MalformedRecord
from job.model.marks import (
    ANNOTATION_ORIGINAL_RULES,
    ANNOTATION_ROUTE_WAITING,
    ANNOTATION_SCALED_BY,
    FINALIZER_ROUTES,
    LABEL_SCALED,
)
from job.model.policy import InvalidPolicy, Policy
from job.model.stamps import utc_stamp
from job.model.workloads import Workload


@dataclass(frozen=True)
class RouteStep:
    """One merge PATCH of one route, with the resourceVersion it was read at."""

    #: "mark": only the annotation of rule 5 (set when a wait begins, removed when the namespace is held again)
    verb: Literal["point", "restore", "mark"]
    namespace: str
    name: str
    body: dict[str, Any]
    policy: str

    @property
    def ref(self) -> str:
        return f"HTTPRoute {self.namespace}/{self.name}"


@dataclass(frozen=True)
class RoutePlan:
    steps: list[RouteStep] = field(default_factory=list)
    #: namespaces whose ReferenceGrant must exist before their routes are pointed
    grants: list[str] = field(default_factory=list)
    #: namespaces whose ReferenceGrant goes once their routes are restored
    ungrants: list[str] = field(default_factory=list)
    #: awake namespaces whose routes wait for their workloads to be available
    waiting: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: routes given back because their wait passed, per namespace and policy (rule 5)
    late: list[LateTier] = field(default_factory=list)


def opted_in(held_by: Mapping[str, Sequence[str]], policies: Iterable[Policy | InvalidPolicy]) -> dict[str, str]:
    """Held namespace -> the first holding policy by name that wakes on request (and writes: not in dry run)."""
    wakes = {p.name for p in policies if isinstance(p, Policy) and p.spec.wake.on_request and p.spec.wake.allowed
             and not p.spec.dry_run}
    out = {}
    for ns, holders in held_by.items():
        names = sorted(h for h in holders if h in wakes)
        if names:
            out[ns] = names[0]
    return out


def not_awake(workloads: Iterable[Workload], namespaces: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Rule 2: per namespace, the workloads in the way of its routes (`kind/name`), none where it is awake: every
    one read whole is available and none keeps a record. A record on a controlled workload is its owner's, copied
    (the Deployment controller copies annotations to its ReplicaSets): only its availability counts. Named are
    the owners (a person knows the Deployment, not its ReplicaSet), or the controlled ones if only they stand."""
    owners: dict[str, list[str]] = {ns: [] for ns in namespaces}
    owned: dict[str, list[str]] = {ns: [] for ns in owners}
    for w in workloads:
        if w.namespace in owners and not w.excluded:
            if w.has_record and w.controller is None:
                owners[w.namespace].append(f"{w.short_ref} (still frozen)")
            elif w.available is not True:
                (owners if w.controller is None else owned)[w.namespace].append(w.short_ref)
    return {ns: tuple(refs or owned[ns]) for ns, refs in owners.items()}


def waits_of(policies: Iterable[Policy | InvalidPolicy]) -> dict[str, dt.timedelta]:
    """Rule 5: each valid policy's `restore_wait`, by name (those being deleted too: they still say it). The
    first of a name wins: a release lists its released copies (their wait bounded by the release's) before the
    policies as they are."""
    out: dict[str, dt.timedelta] = {}
    for p in policies:
        if isinstance(p, Policy):
            out.setdefault(p.name, p.restore_wait)
    return out


def _meta(route: dict[str, Any], annotations: dict[str, Any], labels: dict[str, Any]) -> dict[str, Any]:
    return {"resourceVersion": route["metadata"]["resourceVersion"], "annotations": annotations, "labels": labels}


def _scaled_by(route: dict[str, Any]) -> str:
    return str((route["metadata"].get("annotations") or {}).get(ANNOTATION_SCALED_BY, ""))


def _waiting_since(route: dict[str, Any]) -> dt.datetime | None:
    return parse_time((route["metadata"].get("annotations") or {}).get(ANNOTATION_ROUTE_WAITING))


@dataclass(frozen=True)
class RouteWorld:
    """What a plan of the routes is decided from, besides the routes: which held namespaces are opted in, what
    stands in the way of the others (`not_awake`), each policy's `restore_wait` (`waits_of`), and when."""

    opted: Mapping[str, str]
    blocking: Mapping[str, tuple[str, ...]]
    waits: Mapping[str, dt.timedelta]
    now: dt.datetime


def plan_routes(routes: Sequence[dict[str, Any]], *, world: RouteWorld, waker: Waker) -> RoutePlan:
    plan = RoutePlan()
    kept: dict[str, bool] = {}  # namespace -> some route there keeps its record after this run
    late: dict[tuple[str, str], list[str]] = {}  # (namespace, policy) -> the routes given back late (rule 5)
    for route in routes:
        meta = route["metadata"]
        ns, name, original = meta["namespace"], meta["name"], record_of(route)
        if ns in world.opted:
            kept[ns] = True
            _held(plan, route, policy=world.opted[ns], waker=waker)
            continue
        if original is None:
            continue
        try:
            rules = restored_rules(original)
        except MalformedRecord as exc:  # rule 3
            plan.problems.append(f"HTTPRoute {ns}/{name}: {exc}; restore its rules by hand and remove the annotation")
            kept[ns] = True
            continue
        if world.blocking.get(ns):
            since = _waiting_since(route)
            if since is None or world.now < since + world.waits.get(_scaled_by(route), DEFAULT_RESTORE_WAIT):
                kept[ns] = True
                if ns not in plan.waiting:
                    plan.waiting.append(ns)
                if since is None:  # rule 5: the wait begins now
                    plan.steps.append(RouteStep("mark", ns, name, {"metadata": _meta(route, {
                        ANNOTATION_ROUTE_WAITING: utc_stamp(world.now)}, {})}, _scaled_by(route)))
                continue
            late.setdefault((ns, _scaled_by(route)), []).append(name)
        body = {"metadata": _meta(route, {ANNOTATION_ORIGINAL_RULES: None, ANNOTATION_SCALED_BY: None,
                                          ANNOTATION_ROUTE_WAITING: None}, {LABEL_SCALED: None}),
                "spec": {"rules": rules}}
        plan.steps.append(RouteStep("restore", ns, name, body, _scaled_by(route)))
        kept.setdefault(ns, False)
    plan.ungrants.extend(ns for ns, keeps in sorted(kept.items()) if not keeps)
    plan.late.extend(_late(routes, late, world=world))
    return plan


def _held(plan: RoutePlan, route: dict[str, Any], *, policy: str, waker: Waker) -> None:
    """Rules 1 and 3: a route of a held namespace is pointed at the waker, or kept pointed without a mark of an
    earlier wait."""
    ns, name = route["metadata"]["namespace"], route["metadata"]["name"]
    if record_of(route) is None and rules_of(route):  # rule 1
        if ns not in plan.grants:
            plan.grants.append(ns)
        body = {"metadata": _meta(route, {ANNOTATION_ORIGINAL_RULES: record(rules_of(route)),
                                          ANNOTATION_SCALED_BY: policy}, {LABEL_SCALED: "true"}),
                "spec": {"rules": frozen_rules(rules_of(route), namespace=ns, waker=waker)}}
        plan.steps.append(RouteStep("point", ns, name, body, policy))
    elif record_of(route) is not None and ANNOTATION_ROUTE_WAITING in (route["metadata"].get("annotations") or {}):
        plan.steps.append(RouteStep("mark", ns, name, {"metadata": _meta(route, {ANNOTATION_ROUTE_WAITING: None},
                                                                         {})}, _scaled_by(route)))


def _late(routes: Sequence[dict[str, Any]], late: Mapping[tuple[str, str], list[str]], *,
          world: RouteWorld) -> list[LateTier]:
    """Rule 5: per namespace and policy, the routes given back late, the workloads in the way, since when."""
    began = {(r["metadata"]["namespace"], r["metadata"]["name"]): _waiting_since(r) for r in routes}
    return [LateTier(ns, policy, ROUTES_TIER, world.blocking[ns],
                     min(began[(ns, n)] or world.now for n in names), routes=tuple(sorted(names)))
            for (ns, policy), names in sorted(late.items())]


def hosts(routes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Per namespace, the hostnames its routes answer for (`spec.hostnames`), sorted, once each: where a person
    opens a namespace that wakes on request."""
    out: dict[str, set[str]] = {}
    for route in routes:
        names = (route.get("spec") or {}).get("hostnames") or []
        out.setdefault(route["metadata"]["namespace"], set()).update(str(n) for n in names)
    return {ns: tuple(sorted(names)) for ns, names in out.items() if names}


def sweep_needed(opted: Mapping[str, str], policies: Iterable[Policy | InvalidPolicy]) -> bool:
    """Whether any route can carry a record or must be pointed (rule 4): a held namespace opted in, or a policy
    (valid, invalid or leaving) that carries the finalizer. Otherwise the run reads no route at all."""
    return bool(opted) or any(FINALIZER_ROUTES in p.life.finalizers for p in policies)


def finalizers_to_add(plan: RoutePlan, policies: Iterable[Policy | InvalidPolicy]) -> list[str]:
    """The policies that point a route this run and do not carry the finalizer yet (rule 4), by name."""
    carrying = {p.name for p in policies if FINALIZER_ROUTES in p.life.finalizers}
    return sorted({s.policy for s in plan.steps if s.verb == "point"} - carrying)


def finalizers_to_remove(routes: Sequence[dict[str, Any]], policies: Iterable[Policy | InvalidPolicy], *,
                         restored: Iterable[tuple[str, str]], pointed_by: Iterable[str]) -> list[str]:
    """The policies carrying the finalizer whose every route is back: no route read keeps a record it wrote,
    once the routes `restored` this run are counted back (rule 4), by name."""
    back = set(restored)
    keeping = {str((r["metadata"].get("annotations") or {}).get(ANNOTATION_SCALED_BY, "")) for r in routes
               if record_of(r) is not None and (r["metadata"]["namespace"], r["metadata"]["name"]) not in back}
    keeping |= set(pointed_by)
    return sorted(p.name for p in policies if FINALIZER_ROUTES in p.life.finalizers and p.name not in keeping)
