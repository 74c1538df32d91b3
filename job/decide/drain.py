"""After the PATCHes (pure): what the Pod census starts from, who scaled a frozen workload back up, and which
changes failed. `job.cluster.census` reads the Pods; `job.decide.pods` and `job.decide.gitops` say what they mean.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable, Sequence
from dataclasses import replace

from job.decide import gitops, pods
from job.decide.actions import ActionResult, Problem, Verb, failure_message
from job.decide.plan import Plan
from job.model import managed
from job.model.policy import InvalidPolicy, Policy
from job.model.workloads import Workload

#: Pods that still hold resources: the field selector keeps finished ones out of the `done` check.
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
#: the Warning Event on a frozen workload found scaled up again
REASON_REVERTED = "ScaledUpWhileFrozen"


def known_owners(workloads: Iterable[Workload], held: Container[str]) -> list[pods.Meta]:
    """The chain ends the census cannot LIST (ReplicationControllers, custom kinds), from the workloads the
    run read whole: only those in held namespaces, reduced to their marks, so they cost no request and
    little memory. Their own controller, rare for these kinds, is not followed."""
    return [pods.Meta(ref=pods.Ref(str(w.kind), w.namespace, w.name), excluded=w.excluded, frozen=w.has_record)
            for w in workloads if w.namespace in held and str(w.kind) not in pods.LISTABLE]


def frozen_now(found: pods.Census, results: Iterable[ActionResult]) -> None:
    """Owners seeded before the PATCHes, as this run left them: frozen (or restored) by it."""
    for r in results:
        w = r.action.workload
        ref = pods.Ref(str(w.kind), w.namespace, w.name)
        if r.outcome == "applied" and r.action.verb in (Verb.FREEZE, Verb.RESTORE) and ref in found.known:
            found.known[ref] = replace(found.known[ref], frozen=r.action.verb is Verb.FREEZE)


def gitops_managed(policies: Sequence[Policy | InvalidPolicy], *, plan: Plan,
                   workloads: Iterable[Workload]) -> Counter[str]:
    """Per policy: workloads it would freeze, in namespaces it holds, that Argo CD or Flux manages. Excluded
    ones and those frozen through their owner (a Deployment's ReplicaSets carry its tracking marks) are not
    counted: they are not nsscaler's to fight over."""
    kinds = {p.name: p.kinds for p in policies if isinstance(p, Policy)}
    managed: Counter[str] = Counter()
    for w in workloads:
        if not w.gitops or w.excluded or w.frozen_with_its_owner or w.owner_key in plan.excluded_owners:
            continue
        managed.update(name for name in plan.held_by.get(w.namespace, ())
                       if w.selecting_kinds & kinds.get(name, frozenset()))
    return managed


def reverts(results: list[ActionResult]) -> list[gitops.Revert]:
    """Frozen workloads found scaled up again (a freeze of one that carries our record), and by whom."""
    found = []
    for r in results:
        w = r.action.workload
        if r.action.verb is Verb.FREEZE and w.has_record and r.outcome in ("applied", "dry-run"):
            handler = w.handling
            found.append(gitops.revert(policy=r.action.policy, namespace=w.namespace, kind=w.kind.value,
                                       api_version=handler.api_version, name=w.name, manager=w.replicas_manager,
                                       size_path=managed.size_path(handler.frozen_body()), managed_by=w.gitops))
    return found


def report_reverts(results: list[ActionResult]) -> list[tuple[dict[str, str], str]]:
    """The Warning Events (involved object, message) for the workloads really frozen again."""
    events = []
    for r in results:
        w = r.action.workload
        for revert in reverts([r]):
            if r.outcome == "applied":
                # the object's own `kind:` (Rollout, not Rollout.argoproj.io), or `kubectl describe` misses it
                events.append(({"apiVersion": w.handling.api_version, "kind": w.kind.short, "name": w.name,
                                "namespace": w.namespace, "uid": w.uid}, revert.message))
    return events


def failed_refs(results: Iterable[ActionResult], problems: Iterable[Problem]) -> dict[pods.Ref, str]:
    """The objects whose change failed this run, or that a problem stopped, with why."""
    failed = {pods.Ref(str(r.action.workload.kind), r.action.workload.namespace, r.action.workload.name):
              failure_message(r) for r in results if r.outcome == "failed"}
    failed.update({pods.Ref(str(pr.workload.kind), pr.workload.namespace, pr.workload.name): pr.message
                   for pr in problems})
    return failed
