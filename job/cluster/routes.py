"""HTTPRoutes on the API: read the routes that follow a hold, write what `job.decide.routes` decides (each
route's rules and record in one merge PATCH with its resourceVersion, the ReferenceGrant first), and, while an
awake namespace's routes wait for its workloads, look again at those workloads every 2 s within
`--restore-wait-in-run`; past the policy's `restore_wait` a route comes back anyway (`job.decide.routes`, rule 5).
Where the cluster serves no Gateway API, there is nothing to do unless a policy opted
in, which is then a problem saying so.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from job.cluster import read
from job.cluster.kube import Kube
from job.decide import routes as decide
from job.decide.decision import Decision
from job.decide.tiers import LateTier
from job.errors import ApiError, Conflict
from job.model import policy as policy_api
from job.model.kinds import BUILTIN, KindHandler
from job.model.kinds import httproute as hr
from job.model.marks import FINALIZER_ROUTES, SCALED_SELECTOR
from job.model.policy import InvalidPolicy, Policy
from job.model.settings import Settings
from job.model.snapshot import Snapshot

log = logging.getLogger(__name__)
POLL_SECONDS = 2.0
#: each route write, in the log
_DONE = {"point": "pointed at the waker:", "restore": "restored:", "mark": "marked when its wait began (or ended):"}


@dataclass(frozen=True)
class RoutesDone:
    """What went wrong in the routes' stage (each route it changed is logged), and what still waits."""

    problems: list[str] = field(default_factory=list)
    #: awake namespaces whose routes still wait for their workloads when the stage ended
    waiting: list[str] = field(default_factory=list)
    #: routes given back because their wait passed, before their workloads were available
    late: list[LateTier] = field(default_factory=list)


def _routes(kube: Kube, opted: dict[str, str]) -> list[dict[str, Any]] | None:
    """The routes with a record, and every route of the namespaces to point; None where HTTPRoute is not served."""
    try:
        found = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in kube.list_all(
            version=hr.API_VERSION, plural=hr.PLURAL, label_selector=SCALED_SELECTOR)}
        for ns in sorted(opted):
            for r in kube.list_all(version=hr.API_VERSION, plural=hr.PLURAL, namespace=ns):
                found[(ns, r["metadata"]["name"])] = r
    except ApiError as exc:
        # 404: the cluster serves no HTTPRoute. 403: nsscaler may not read them, so it never pointed one (the waker
        # component grants it); both are a problem only where a policy opts in
        if exc.status == 404 or (exc.status == 403 and not opted):
            return None
        raise
    return list(found.values())


@dataclass(frozen=True)
class FirstRead:
    """The routes as a run first reads them (`first_read`), before its first write: the hold's words name the hosts
    of the namespaces that wake on request (`hosts`), and `follow_holds` starts from the same read."""

    #: False: no route is read this run (a dry run, or no policy wakes on request nor carries the finalizer)
    read: bool = False
    #: None: the cluster serves no HTTPRoute (or nsscaler may not read them and no policy opted in)
    routes: list[dict[str, Any]] | None = None
    error: ApiError | None = None

    @property
    def hosts(self) -> dict[str, tuple[str, ...]]:
        return decide.hosts(self.routes or [])


def first_read(kube: Kube, snapshot: Snapshot, decision: Decision, *, settings: Settings) -> FirstRead:
    """The first read of `follow_holds`, taken early: the same requests, no more."""
    opted = decide.opted_in(decision.plan.held_by, snapshot.policies)
    if settings.dry_run or not decide.sweep_needed(opted, [*snapshot.policies, *snapshot.leaving]):
        return FirstRead()
    try:
        return FirstRead(read=True, routes=_routes(kube, opted))
    except ApiError as exc:
        return FirstRead(read=True, error=exc)


def _first(kube: Kube, opted: dict[str, str], first: FirstRead | None) -> list[dict[str, Any]] | None:
    if first is None or not first.read:
        return _routes(kube, opted)
    if first.error is not None:
        raise first.error
    return first.routes


def _not_awake(kube: Kube, snapshot: Snapshot, namespaces: Sequence[str]) -> dict[str, tuple[str, ...]]:
    handlers: dict[str, KindHandler] = {str(k): h for k, h in BUILTIN.items()}
    handlers |= {str(w.kind): w.handler for w in snapshot.workloads if isinstance(w.handler, KindHandler)}
    return decide.not_awake(read.whole_namespaces(kube, [], list(handlers.values()), namespaces), namespaces)


def follow_holds(kube: Kube, snapshot: Snapshot, decision: Decision, *, settings: Settings, now: dt.datetime,
                 may_write: Callable[[], bool] = lambda: True, first: FirstRead | None = None) -> RoutesDone:
    """Point the routes of held, opted-in namespaces at the waker; restore those of awake ones. Before its first
    write it asks `may_write` (the run Lease): if another run holds it, that run follows the routes. Reads no
    route while no policy wakes on request or carries the routes finalizer; `first`: the run's `first_read`."""
    if settings.dry_run:
        return RoutesDone()
    waker = hr.Waker(namespace=settings.own_namespace or "nsscaler")
    opted = decide.opted_in(decision.plan.held_by, snapshot.policies)
    policies = [*snapshot.policies, *snapshot.leaving]
    done = RoutesDone()
    if not decide.sweep_needed(opted, policies):
        return done
    started, waits = time.monotonic(), decide.waits_of(policies)
    try:
        routes = _first(kube, opted, first)
        if routes is None:
            if opted:  # 404 only: a 403 with a policy opted in is raised, and said below
                done.problems.append("policies wake on request but this cluster serves no Gateway API HTTPRoute "
                                     "(gateway.networking.k8s.io/v1): no route was pointed at the waker")
            return done
        while True:
            recorded = {r["metadata"]["namespace"] for r in routes if hr.record_of(r) is not None}
            candidates = sorted(recorded - set(opted))
            at = now + dt.timedelta(seconds=time.monotonic() - started)  # the run's clock, moved on by the waits
            plan = decide.plan_routes(routes, world=decide.RouteWorld(
                opted=opted, blocking=_not_awake(kube, snapshot, candidates), waits=waits, now=at), waker=waker)
            adding = decide.finalizers_to_add(plan, policies)
            if (plan.steps or plan.grants or plan.ungrants or adding) and not may_write():
                break
            finalized = _finalize(kube, policies, adding, done, add=True)
            plan = replace(plan, steps=[st for st in plan.steps if st.verb != "point" or st.policy not in adding
                                        or st.policy in finalized])
            restored = _carry_out(kube, plan, waker, done)
            done.late.extend(_back(plan.late, restored))
            leaving = decide.finalizers_to_remove(routes, policies, restored=restored,
                                                  pointed_by={st.policy for st in plan.steps if st.verb == "point"})
            if leaving and may_write():
                _finalize(kube, policies, leaving, done, add=False)
            if not plan.waiting or time.monotonic() + POLL_SECONDS > started + settings.restore_wait_in_run:
                done.waiting[:] = plan.waiting
                break
            time.sleep(POLL_SECONDS)
            routes = [r for r in _routes(kube, {}) or [] if r["metadata"]["namespace"] in plan.waiting]
            policies = [p for p in policies if p.name not in leaving]
    except ApiError as exc:
        done.problems.append(f"HTTPRoutes: {exc}")
    for problem in done.problems:
        log.warning(problem, extra={"event": "routes"})
    return done


def _back(late: Sequence[LateTier], restored: set[tuple[str, str]]) -> list[LateTier]:
    """The late routes that did come back (one changed since it was read waits for the next run), each logged:
    a policy already gone has no status to carry it."""
    out = []
    for t in late:
        back = tuple(name for name in t.routes if (t.namespace, name) in restored)
        if back:
            out.append(replace(t, routes=back))
            log.warning("%s: HTTPRoute %s given back after restore_wait, before %s was available", t.namespace,
                        ", ".join(back), ", ".join(t.not_ready[:5]),
                        extra={"event": "route-late", "namespace": t.namespace, "policy": t.policy})
    return out


def _finalize(kube: Kube, policies: Sequence[Policy | InvalidPolicy], names: Sequence[str], done: RoutesDone, *,
              add: bool) -> set[str]:
    """Add (or remove) the routes finalizer on each policy named, conditioned on the resourceVersion read: a
    policy changed since is left to the next run. The names done."""
    by_name = {p.name: p for p in policies}
    changed = set()
    for name in names:
        life = by_name[name].life
        kept = [f for f in life.finalizers if f != FINALIZER_ROUTES]
        try:
            kube.patch(version=policy_api.API_VERSION, plural=policy_api.PLURAL, namespace=None, name=name,
                       dry_run=False, body={"metadata": {"resourceVersion": life.resource_version,
                                                         "finalizers": [*kept, FINALIZER_ROUTES] if add else kept}})
        except ApiError as exc:  # a Conflict too: the policy changed since it was read
            if add:
                done.problems.append(f"NSScaler {name}: could not add the finalizer {FINALIZER_ROUTES} ({exc}); its "
                                     f"routes are left as they are")
            continue
        changed.add(name)
        log.info("%s the routes finalizer %s NSScaler %s", "added" if add else "removed", "to" if add else "from",
                 name, extra={"event": "route-finalizer", "policy": name})
    return changed


def _carry_out(kube: Kube, plan: decide.RoutePlan, waker: hr.Waker, done: RoutesDone) -> set[tuple[str, str]]:
    """The plan's writes; returns the routes restored."""
    restored: set[tuple[str, str]] = set()
    done.problems.extend(plan.problems)
    granted = set()
    for ns in plan.grants:
        try:
            kube.create(version=hr.GRANT_API_VERSION, plural=hr.GRANT_PLURAL, namespace=waker.namespace,
                        body=hr.grant(ns, waker))
            granted.add(ns)
        except Conflict:  # it exists already
            granted.add(ns)
        except ApiError as exc:
            done.problems.append(f"ReferenceGrant {waker.namespace}/{hr.grant_name(ns)}: {exc}; the routes of {ns} "
                                 f"are left as they are")
    for step in plan.steps:
        if step.verb == "point" and step.namespace not in granted:
            continue
        try:
            kube.patch(version=hr.API_VERSION, plural=hr.PLURAL, namespace=step.namespace, name=step.name,
                       body=step.body, dry_run=False)
        except Conflict:
            log.info("%s changed while this run read it: the next run looks again", step.ref,
                     extra={"event": "route-conflict"})
            continue
        except ApiError as exc:
            done.problems.append(f"{step.verb} {step.ref}: {exc}")
            continue
        if step.verb == "restore":
            restored.add((step.namespace, step.name))
        log.info("%s %s (%s)", _DONE[step.verb], step.ref, step.policy,
                 extra={"event": f"route-{step.verb}", "namespace": step.namespace})
    for ns in plan.ungrants:
        try:
            kube.delete(version=hr.GRANT_API_VERSION, plural=hr.GRANT_PLURAL, namespace=waker.namespace,
                        name=hr.grant_name(ns))
        except ApiError as exc:
            if exc.status != 404:
                done.problems.append(f"ReferenceGrant {waker.namespace}/{hr.grant_name(ns)}: {exc}")
    return restored
