"""What the freezes of each policy gave back to the cluster (pure): Pods, requests and limits, per namespace.

A policy frees what it holds frozen after the run: the workloads whose record names it (`scaled-by`) and
that this run did not restore, plus those this run froze or handed over to it (dry-run: would). Each counts
its recorded footprint per unit (`job.model.resources`) times the units it was frozen from (its recorded
replicas; 1 for a running Job). Objects frozen through their owner (a Deployment's ReplicaSets, which copy
its annotations) are counted with that owner, never twice. A workload frozen before footprints were
recorded, or whose footprint could not be known, counts as unknown: never as zero, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from job.decide.actions import ActionResult, Verb
from job.model.kinds import MalformedRecord
from job.model.resources import NANO, Footprint, add, format_quantity, parse_record

__all__ = ["Footprint", "Freed", "by_policy", "frees", "summary", "top_namespaces"]
from job.model.workloads import Workload

#: resources shown on their own (`status.freed.gpus`, `kubectl get nss -o wide`): extended resources named so
GPU_SUFFIX = "/gpu"
_DONE = ("applied", "dry-run")


@dataclass(frozen=True)
class Freed:
    """The sum of what one policy's frozen workloads freed, in total and per namespace."""

    total: Footprint = field(default_factory=Footprint)
    workloads: int = 0
    #: frozen workloads whose footprint is unknown (frozen before it was recorded): not in `total`
    unknown: int = 0
    namespaces: Mapping[str, Footprint] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        """In nano-units, as every amount."""
        return sum(v for k, v in self.total.requests.items() if k.endswith(GPU_SUFFIX))


def plus(a: Footprint, b: Footprint) -> Footprint:
    return Footprint(a.pods + b.pods, add(a.requests, b.requests), add(a.limits, b.limits),
                     a.unrequested + b.unrequested)


def times(f: Footprint, units: int) -> Footprint:
    return Footprint(f.pods * units, add({}, f.requests, units), add({}, f.limits, units), f.unrequested * units)


def units_of(workload: Workload) -> int | None:
    """How many units it was (or is about to be) frozen from: its record, else its size now."""
    if workload.original is None:
        return workload.size
    try:
        return workload.handling.restored_size(workload.original)
    except MalformedRecord:
        return None


def footprint_of(workload: Workload, *, freezing: bool) -> Footprint | None:
    """Its footprint per unit: the one a freeze now records (whole objects), else the recorded one."""
    if freezing and workload.footprint is not None and workload.runtime_class is None:
        return parse_record(workload.footprint)
    return parse_record(workload.freed)


def frees(workload: Workload, *, freezing: bool) -> Footprint | None:
    """What freezing `workload` frees (or its freeze freed); None: unknown."""
    per_unit, units = footprint_of(workload, freezing=freezing), units_of(workload)
    return None if per_unit is None or units is None else times(per_unit, units)


def _held(workloads: Iterable[Workload], results: Sequence[ActionResult]) -> dict[tuple[str, str, str],
                                                                                   tuple[str, Workload, bool]]:
    """Every workload held frozen after the run: key -> (policy, the view to count, frozen by this run)."""
    held = {w.key: (w.scaled_by, w, False) for w in workloads
            if w.has_record and w.scaled_by and not w.frozen_with_its_owner}
    for r in results:
        w = r.action.workload
        if r.action.verb is Verb.RESTORE and r.outcome in (*_DONE, "gone"):
            held.pop(w.key, None)
        elif r.action.verb is Verb.FREEZE and r.outcome in _DONE:
            held[w.key] = (r.action.policy, w, True)
        elif r.action.verb is Verb.ADOPT and r.outcome in _DONE and w.key in held:
            held[w.key] = (r.action.policy, *held[w.key][1:])
        elif r.action.verb is Verb.FREEZE and r.outcome == "gone":
            held.pop(w.key, None)
    return held


def by_policy(workloads: Iterable[Workload], results: Sequence[ActionResult]) -> dict[str, Freed]:
    """Per policy name, what its frozen workloads free after this run. Policies freeing nothing are absent."""
    totals: dict[str, Footprint] = {}
    counted: dict[str, int] = {}
    unknown: dict[str, int] = {}
    spaces: dict[str, dict[str, Footprint]] = {}
    for policy, w, fresh in _held(workloads, results).values():
        counted[policy] = counted.get(policy, 0) + 1
        found = frees(w, freezing=fresh)
        if found is None:
            unknown[policy] = unknown.get(policy, 0) + 1
            continue
        totals[policy] = plus(totals.get(policy, Footprint()), found)
        per = spaces.setdefault(policy, {})
        per[w.namespace] = plus(per.get(w.namespace, Footprint()), found)
    return {p: Freed(totals.get(p, Footprint()), n, unknown.get(p, 0), spaces.get(p, {})) for p, n in counted.items()}


def top_namespaces(freed: Freed, limit: int) -> list[tuple[str, Footprint]]:
    """The namespaces freeing the most CPU (then memory, then Pods), at most `limit`; ties by name."""
    def rank(item: tuple[str, Footprint]) -> tuple[int, int, int, str]:
        ns, f = item
        return (-f.requests.get("cpu", 0), -f.requests.get("memory", 0), -f.pods, ns)
    return sorted(freed.namespaces.items(), key=rank)[:limit]


def plain(resource: str, nanos: int) -> float | int:
    """The number a metric carries: CPU in cores (a float), any other resource in its unit (bytes, devices)."""
    return nanos / NANO if resource == "cpu" or nanos % NANO else nanos // NANO


def summary(f: Footprint) -> str:
    """One line for a person: "3 Pods, 1500m CPU, 3Gi memory, 1 nvidia.com/gpu"."""
    parts = [f"{f.pods} Pod{'s' if f.pods != 1 else ''}"]
    for name in sorted(f.requests, key=lambda n: (n not in ("cpu", "memory"), n)):
        label = {"cpu": "CPU", "memory": "memory"}.get(name, name)
        parts.append(f"{format_quantity(f.requests[name])} {label}")
    if f.unrequested:
        parts.append(f"{f.unrequested} without requests")
    return ", ".join(parts)
