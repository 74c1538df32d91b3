"""The read behind what an operator kind's freeze frees: the live Pods of the namespaces where a run is about to
freeze objects whose operator makes their Pods, whole (their requests are what counts), and the owners their chains
pass through (metadata only). What to count and how is `job.decide.operator_pods`'s.

Sent only in a run with such an object to freeze (none in a steady state): one Pod LIST per namespace where it
freezes one, never more than the freezes it comes with (whole Pods of a whole cluster would be a far heavier
request than a few namespaces' each), plus an owner LIST per kind a chain passes through (a StatefulSet an
operator's object controls), as the census sends them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from job.cluster.census import LIVE_PODS
from job.cluster.kube import Kube
from job.decide import pods
from job.decide.operator_pods import OperatorPods
from job.errors import ApiError
from job.model.workloads import Workload

log = logging.getLogger(__name__)


def with_operator_pods(kube: Kube, workloads: Sequence[Workload], targets: Sequence[Workload]) -> list[Workload]:
    """`workloads`, each of `targets` with the footprint of the Pods running for it now (`Workload.footprint`, which
    its freeze records). When the Pods cannot be read, the targets' footprints stay unknown and the run goes on."""
    if not targets:
        return list(workloads)
    try:
        found = _read(kube, sorted({w.namespace for w in targets}))
    except ApiError as exc:
        log.warning("could not read the Pods operators run, so what freezing their objects frees is unknown: %s",
                    exc, extra={"event": "read", "kind": "Pod"})
        return list(workloads)
    records = found.footprints(targets)
    return [replace(w, footprint=records[w.key]) if w.key in records else w for w in workloads]


def _read(kube: Kube, namespaces: list[str]) -> OperatorPods:
    found = OperatorPods()
    for namespace in namespaces:
        for pod in kube.list_all(version="v1", plural="pods", field_selector=LIVE_PODS, namespace=namespace):
            found.add_pod(pod)
    while lookups := found.census.lookups():
        for kind, where in lookups:
            api_version, plural = pods.LISTABLE[kind]
            try:
                found.census.add_owners(kind, where, kube.list_all(version=api_version, plural=plural,
                                                                   namespace=where, metadata_only=True))
            except ApiError as exc:  # that chain ends there: the objects it led to count as unknown
                found.census.failed(kind, where, str(exc))
    return found
