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
   record is malformed, which is a problem naming it (restore it by hand, or delete the annotation).
4. A policy gets nsscaler's routes finalizer before the first route it points, and keeps it while any route
   carries a record it wrote: deleted, it stays until those routes are back, and a run looks for records only
   while some policy wakes on request or carries the finalizer (`sweep_needed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from job.model.kinds.httproute import Waker, frozen_rules, record, record_of, restored_rules, rules_of
from job.model.kinds.kind import MalformedRecord
from job.model.marks import ANNOTATION_ORIGINAL_RULES, ANNOTATION_SCALED_BY, FINALIZER_ROUTES, LABEL_SCALED
from job.model.policy import InvalidPolicy, Policy
from job.model.workloads import Workload


@dataclass(frozen=True)
class RouteStep:
    """One merge PATCH of one route, with the resourceVersion it was read at."""

    verb: Literal["point", "restore"]
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


def awake(workloads: Iterable[Workload], namespaces: Iterable[str]) -> frozenset[str]:
    """Rule 2: the namespaces where no workload keeps a record and every one read whole is available. A record
    on a controlled workload is its owner's, copied (the Deployment controller copies annotations to its
    ReplicaSets): only its availability counts."""
    wanted = set(namespaces)
    blocked = {w.namespace for w in workloads if w.namespace in wanted and not w.excluded
               and ((w.has_record and w.controller is None) or w.available is not True)}
    return frozenset(wanted - blocked)


def _meta(route: dict[str, Any], annotations: dict[str, Any], labels: dict[str, Any]) -> dict[str, Any]:
    return {"resourceVersion": route["metadata"]["resourceVersion"], "annotations": annotations, "labels": labels}


def plan_routes(routes: Sequence[dict[str, Any]], *, opted: Mapping[str, str], ready: frozenset[str],
                waker: Waker) -> RoutePlan:
    plan = RoutePlan()
    kept: dict[str, bool] = {}  # namespace -> some route there keeps its record after this run
    for route in routes:
        meta = route["metadata"]
        ns, name, original = meta["namespace"], meta["name"], record_of(route)
        if ns in opted:
            kept[ns] = True
            if original is None and rules_of(route):  # rule 1
                if ns not in plan.grants:
                    plan.grants.append(ns)
                body = {"metadata": _meta(route, {ANNOTATION_ORIGINAL_RULES: record(rules_of(route)),
                                                  ANNOTATION_SCALED_BY: opted[ns]}, {LABEL_SCALED: "true"}),
                        "spec": {"rules": frozen_rules(rules_of(route), namespace=ns, waker=waker)}}
                plan.steps.append(RouteStep("point", ns, name, body, opted[ns]))
            continue
        if original is None:
            continue
        try:
            rules = restored_rules(original)
        except MalformedRecord as exc:  # rule 3
            plan.problems.append(f"HTTPRoute {ns}/{name}: {exc}; restore its rules by hand and remove the annotation")
            kept[ns] = True
            continue
        if ns not in ready:
            kept[ns] = True
            if ns not in plan.waiting:
                plan.waiting.append(ns)
            continue
        body = {"metadata": _meta(route, {ANNOTATION_ORIGINAL_RULES: None, ANNOTATION_SCALED_BY: None},
                                  {LABEL_SCALED: None}), "spec": {"rules": rules}}
        plan.steps.append(RouteStep("restore", ns, name, body, str(meta.get("annotations", {}).get(
            ANNOTATION_SCALED_BY, ""))))
        kept.setdefault(ns, False)
    plan.ungrants.extend(ns for ns, keeps in sorted(kept.items()) if not keeps)
    return plan


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
