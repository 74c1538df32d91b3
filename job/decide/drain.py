"""After the PATCHes: what still runs in held namespaces and why, and who scaled a frozen workload back up.

`census` reads (Pods and their owners, metadata-only); `job/pods.py` and `job/gitops.py` decide what it
means. Nothing here writes: the caller sends the Events and the statuses.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from job.cluster.kube import Kube
from job.cluster.write import ActionResult
from job.decide import gitops, listing, pods
from job.decide.plan import Plan, Verb
from job.errors import ApiError
from job.model import managed
from job.model.policy import InvalidPolicy, Policy
from job.model.workloads import Workload

log = logging.getLogger(__name__)

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


def census(kube: Kube, held: Iterable[str], found: pods.Census | None = None, *,
           all_namespaces: int = 0) -> pods.Census:
    """Live Pods of held namespaces grouped by owner, from one metadata-only LIST however many namespaces
    are held (or one per held namespace when they are a small part of a busy cluster: `job.decide.listing`);
    then their owner chains, from metadata-only LISTs sent only while some chain is incomplete (none when
    no Pod is left; a constant number per kind otherwise: see job/pods.py). `found` may come seeded with
    owners already known (`known_owners`)."""
    found = pods.Census() if found is None else found
    wanted = set(held)
    if not wanted:
        return found
    for pod in _live_pods(kube, wanted, all_namespaces=all_namespaces):
        meta = pod.get("metadata") or {}
        if meta.get("namespace", "") in wanted:
            found.add_pod(meta)
    while lookups := found.lookups():
        for kind, namespace in lookups:
            api_version, plural = pods.LISTABLE[kind]
            try:
                found.add_owners(kind, namespace, kube.list_all(version=api_version, plural=plural,
                                                                namespace=namespace, metadata_only=True))
            except ApiError as exc:  # the chain stops there; `explain` says why
                found.failed(kind, namespace, str(exc))
                log.warning("could not list %s to explain the Pods left: %s", plural, exc,
                            extra={"event": "owners-failed", "kind": kind})
    return found


def _live_pods(kube: Kube, held: set[str], *, all_namespaces: int) -> Iterator[dict[str, Any]]:
    """Live Pods, metadata only: cluster-wide, or per held namespace when that costs the API server less
    (learnt from the first page of an unfiltered LIST: a field selector hides the item count). The probe is
    a request of its own, so it is sent only for a held set that is a tiny part of a large cluster."""
    if len(held) * listing.REQUEST_COST < all_namespaces:
        probe, remaining, _ = kube.first_page(version="v1", plural="pods", limit=listing.PROBE_LIMIT,
                                              metadata_only=True)
        total = None if remaining is None else len(probe) + remaining
        if listing.per_namespace(total=total, namespaces=len(held), all_namespaces=all_namespaces,
                                 page_size=kube.settings.page_size):
            log.debug("reading pods per namespace: %d held, %s in the cluster", len(held), total,
                      extra={"event": "read", "kind": "Pod", "way": "per-namespace"})
            for namespace in sorted(held):
                yield from kube.list_all(version="v1", plural="pods", field_selector=LIVE_PODS, metadata_only=True,
                                         namespace=namespace)
            return
    yield from kube.list_all(version="v1", plural="pods", field_selector=LIVE_PODS, metadata_only=True)


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
    """A log line for each revert; the Warning Events (involved object, message) for those really frozen
    again, for the caller to send."""
    events = []
    for r in results:
        w = r.action.workload
        for revert in reverts([r]):
            log.warning(revert.message, extra={"event": "reverted", "policy": revert.policy, "namespace": w.namespace,
                                               "kind": revert.kind, "workload": w.name, "manager": revert.manager,
                                               "gitops": revert.tool, "fix": revert.fix})
            if r.outcome == "applied":
                # the object's own `kind:` (Rollout, not Rollout.argoproj.io), or `kubectl describe` misses it
                events.append(({"apiVersion": w.handling.api_version, "kind": w.kind.short, "name": w.name,
                                "namespace": w.namespace, "uid": w.uid}, revert.message))
    return events


@dataclass
class Drain:
    """What the run learned about the Pods of held namespaces, for every policy's status."""

    census: pods.Census
    unknown: str | None = None  # why the Pods could not be read
    gitops_managed: Counter[str] = field(default_factory=Counter)


def failed_refs(plan: Plan, results: list[ActionResult]) -> dict[pods.Ref, str]:
    failed = {pods.Ref(str(r.action.workload.kind), r.action.workload.namespace, r.action.workload.name): r.message
              for r in results if r.outcome == "failed"}
    failed.update({pods.Ref(str(pr.workload.kind), pr.workload.namespace, pr.workload.name): pr.message
                   for pr in plan.problems})
    return failed
