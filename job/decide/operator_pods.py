"""What the freeze of an object whose operator makes its Pods frees (pure): counted from those Pods.

A row kind frozen by one value (a CloudNativePG Cluster's hibernation annotation, a Zalando postgresql's
`numberOfInstances`, a Percona cluster's `pause`, a team's row), and a custom kind scaled through `/scale` that
keeps no `spec.template` (a Strimzi KafkaConnect, a CloudNativePG Pooler), keep no Pod template nsscaler can read
(`KindHandler.pods_from_operator`). Their footprint is counted from the Pods running for them when they are
frozen: every live Pod whose controller owner chain leads to the object (a CNPG instance Pod is controlled by the
Cluster itself; a Zalando Pod by a StatefulSet the custom object controls; a Pooler's through its Deployment and
ReplicaSet). The chains are the Pod census's (`job.decide.pods`).

The record keeps the format every kind's has, units x per-unit footprint. An object frozen by one value is one
unit (its size is 1 while it runs, `job.model.kinds.field`), so its footprint is the whole sum of its Pods, however
different their sizes (a primary and replicas of different requests stay exact). A scaled kind's unit is one
replica: the sum is split among its replicas when it splits evenly (they share one template), else unknown. Each
Pod counts as the scheduler counts it (`job.model.resources.pod_footprint`, with the overhead its admission set on
it). No Pod found (already stopped, or not made yet) is no footprint: the freeze counts as unknown, never as zero;
a Pod whose resources cannot be read makes its owner's footprint unknown too, never a part of it.

Which objects: those a run is about to freeze (running, held by a policy), so the Pods are read only in a run that
freezes one: a steady state, where they are at their frozen value, sends no request more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from job.decide.pods import Census, Ref, reduce
from job.decide.selection import Selection
from job.model.resources import Footprint, add, pod_footprint
from job.model.workloads import Workload


def counted_from_pods(workload: Workload) -> bool:
    """Its operator makes its Pods (its handler says so), so its footprint is counted from them."""
    return bool(getattr(workload.handler, "pods_from_operator", False))


def to_count(workloads: Iterable[Workload], selection: Selection) -> list[Workload]:
    """The objects of such kinds this run may freeze: read whole and running (a frozen one keeps the footprint its
    freeze recorded; one running again under its record is frozen again, and its record's footprint with it), not
    excluded, in a namespace a policy holds for their kind."""
    out = []
    for w in workloads:
        if not counted_from_pods(w) or not w.size or w.excluded or w.footprint is not None:
            continue
        verdict = selection.verdicts.get(w.namespace)
        if verdict is not None and not verdict.untouchable and verdict.holder_for(w.selecting_kinds) is not None:
            out.append(w)
    return out


def counted_before(fresh: Workload, before: Workload) -> Workload:
    """`fresh` (its object read again after a 409) with the footprint the run counted from its Pods moments before,
    rather than none: a write to the object in between (its operator's status) leaves its Pods as they were, and
    reading them again for one write would cost a LIST."""
    if fresh.footprint is None and before.footprint is not None and counted_from_pods(fresh):
        return replace(fresh, footprint=before.footprint)
    return fresh


def _plus(a: Footprint, b: Footprint) -> Footprint:
    return Footprint(a.pods + b.pods, add(a.requests, b.requests), add(a.limits, b.limits),
                     a.unrequested + b.unrequested)


@dataclass
class OperatorPods:
    """The live Pods of some namespaces, each reduced at once to its footprint summed on its first owner (or on
    itself, when bare), with the census that follows their owner chains (`census.lookups`: the owner LISTs still
    needed, sent by the caller)."""

    census: Census = field(default_factory=Census)
    by_owner: dict[Ref, Footprint] = field(default_factory=dict)
    #: first owners of a Pod whose resources could not be read: their chains' footprints are unknown
    unreadable: set[Ref] = field(default_factory=set)

    def add_pod(self, pod: Mapping[str, Any]) -> None:
        """One whole Pod (its spec, not metadata alone: its requests are what is counted)."""
        meta = pod.get("metadata") or {}
        self.census.add_pod(meta)
        link = reduce("Pod", meta)
        first = link.controller or link.ref
        try:
            own = pod_footprint(pod.get("spec") or {}, pods=1)
        except Exception:  # anything its spec holds is counted or unknown, never a crash of the run
            self.unreadable.add(first)
            return
        self.by_owner[first] = _plus(self.by_owner.get(first, Footprint()), own)

    def footprints(self, targets: Iterable[Workload]) -> dict[tuple[str, str, str], str]:
        """Per target (`Workload.key`) the record of its Pods' footprint per unit; absent when none was found, one
        could not be read, or an owner LIST failed (a Pod's chain then stops short of the object it may lead to:
        unknown, rather than a part of it)."""
        if self.census.errors:
            return {}
        wanted = {Ref(str(w.kind), w.namespace, w.name): w.key for w in targets}
        sums: dict[Ref, Footprint] = {}
        unknown: set[Ref] = set()
        for first in {*self.by_owner, *self.unreadable}:
            on_chain = [ref for ref, _ in self.census.chain(first) if ref in wanted]
            for ref in on_chain[:1]:
                if first in self.unreadable:
                    unknown.add(ref)
                if first in self.by_owner:
                    sums[ref] = _plus(sums.get(ref, Footprint()), self.by_owner[first])
        units = {Ref(str(w.kind), w.namespace, w.name): w.size or 0 for w in targets}
        shares = {ref: _share(f, units[ref]) for ref, f in sums.items() if ref not in unknown and f.pods}
        return {wanted[ref]: f.record() for ref, f in shares.items() if f is not None}


def _share(total: Footprint, units: int) -> Footprint | None:
    """One unit's footprint: `total` split among the `units` running it, when it splits evenly (a scaled kind's
    replicas share one template); None when it does not (a scale under way, Pods of different sizes): unknown,
    never approximated. An object frozen by one value is one unit: its whole sum."""
    counts = (total.pods, total.unrequested, *total.requests.values(), *total.limits.values())
    if units < 1 or any(n % units for n in counts):
        return None
    return Footprint(total.pods // units, {k: v // units for k, v in total.requests.items()},
                     {k: v // units for k, v in total.limits.items()}, total.unrequested // units)
