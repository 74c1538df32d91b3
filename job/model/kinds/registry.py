"""The registry of built-in kinds (`BUILTIN`): where each lives, how it is frozen (its handler's module),
whose selection freezes it, and whether the Pod census LISTs it to follow owner chains; and the facts derived
from it. A built-in kind that freezes like another is one entry here; one frozen a new way is one module in
this package plus its entry. What else names the built-in kinds is checked against this table by tests that
name the file to change (the CRD's kind patterns, the ClusterRole, the docs' kind table:
tests/unit/test_kinds.py)."""

from __future__ import annotations

from collections.abc import Mapping

from job.model.kinds.handler import KindHandler, PausedBy
from job.model.kinds.kind import Kind
from job.model.kinds.node_selector import NodeSelectorHandler
from job.model.kinds.replicas import CLAIMS_KEPT, ReplicasHandler
from job.model.kinds.suspend import SuspendHandler, cronjob_running, cronjob_template, job_running, job_template

#: ReplicationControllers are not followed: a run that freezes them reads them whole already, and seeds the
#: census with them.
BUILTIN: Mapping[Kind, KindHandler] = {
    Kind.DEPLOYMENT: ReplicasHandler(Kind.DEPLOYMENT, "apps", "v1", "deployments", followed=True),
    Kind.STATEFULSET: ReplicasHandler(Kind.STATEFULSET, "apps", "v1", "statefulsets", followed=True,
                                      guard=CLAIMS_KEPT),
    Kind.REPLICASET: ReplicasHandler(Kind.REPLICASET, "apps", "v1", "replicasets", followed=True),
    Kind.REPLICATIONCONTROLLER: ReplicasHandler(Kind.REPLICATIONCONTROLLER, "", "v1", "replicationcontrollers"),
    Kind.CRONJOB: SuspendHandler(Kind.CRONJOB, "batch", "v1", "cronjobs", cronjob_running, cronjob_template,
                                 followed=True),
    # A suspended CronJob does not stop the Job it already started: selecting CronJob selects its Jobs too.
    Kind.JOB: SuspendHandler(Kind.JOB, "batch", "v1", "jobs", job_running, job_template,
                             owner_selects=frozenset({Kind.CRONJOB}), freezes_controlled=True, followed=True),
    # No replica count: frozen by a node selector that no node matches (see NodeSelectorHandler).
    Kind.DAEMONSET: NodeSelectorHandler(Kind.DAEMONSET, "apps", "v1", "daemonsets", followed=True),
}
#: What the census LISTs to follow a Pod's owner chain: kind -> where it lives.
FOLLOWED: Mapping[str, KindHandler] = {str(k): h for k, h in BUILTIN.items() if h.followed}
#: The API groups of the built-in kinds: an owner reference outside them names a custom kind
#: (`Rollout.argoproj.io`).
BUILTIN_GROUPS = frozenset(h.group for h in BUILTIN.values())
#: Kinds frozen even under a controller: a Pod whose chain passes through one stops when it is frozen.
FREEZES_CONTROLLED = frozenset(str(k) for k, h in BUILTIN.items() if h.freezes_controlled)


def paused_owner(handler: KindHandler, controller: str | None) -> PausedBy | None:
    """The paused operator kind whose object controls this one (`controller`: the kind an ownerReference names,
    without its group), if the run serves one."""
    if controller is None:
        return None
    return next((p for p in handler.paused_by if p.kind.short == controller), None)


def selecting_kinds(handler: KindHandler, controller: str | None) -> frozenset[Kind]:
    """The kinds a policy may select to freeze one object: its own, or its controller's where that
    controller's freeze does not stop it (a CronJob's Job); only its operator's kind where that operator is
    paused before it is scaled (never frozen on its own while its operator runs)."""
    paused = paused_owner(handler, controller)
    if paused is not None:
        return frozenset({paused.kind})
    if controller is not None and controller in handler.owner_selects:
        return frozenset({handler.kind, Kind(controller)})
    return frozenset({handler.kind})


def listed_for(handler: KindHandler, selected: frozenset[Kind]) -> bool:
    """Whether a LIST of this kind must return every object (else only those with our record)."""
    return (handler.kind in selected or bool(handler.owner_selects & selected)
            or any(p.kind in selected for p in handler.paused_by))
