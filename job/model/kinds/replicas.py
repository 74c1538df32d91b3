"""Kinds frozen by a replica count of 0: Deployments, StatefulSets, ReplicaSets, ReplicationControllers, and
every custom kind with a `/scale` subresource (its replica field, from its CRD, may be nested:
`job.model.custom`). The record is the count before the freeze. A StatefulSet's freeze also guards its
claims (`CLAIMS_KEPT`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from job.errors import shown
from job.model.kinds.handler import Guard, Served, at, nested, observed, replica_template, status_of, whole
from job.model.kinds.kind import MalformedRecord
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_ORIGINAL_WHEN_SCALED

_WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")

#: StatefulSets: claims kept whatever the retention policy says (`whenScaled: Delete` would delete them).
CLAIMS_KEPT = Guard(
    path=("spec", "persistentVolumeClaimRetentionPolicy", "whenScaled"), safe="Retain",
    record_key=ANNOTATION_ORIGINAL_WHEN_SCALED,
    refused="nsscaler sets persistentVolumeClaimRetentionPolicy.whenScaled: Retain in the same write as replicas 0, "
            "so that the freeze deletes no PersistentVolumeClaim, and never scales the StatefulSet to 0 without "
            "it: allow that change (admission policy, RBAC), or set whenScaled: Retain on it yourself")
#: a built-in row's `guard` -> the guard (`job.model.kinds.builtin`)
GUARDS: Mapping[str, Guard] = {"claimsKept": CLAIMS_KEPT}


@dataclass(frozen=True)
class ReplicasHandler(Served):
    """Frozen means the replica field is 0; one unit is one replica, a Pod of `spec.template` (a custom kind
    that keeps its template elsewhere: counted from the Pods its operator runs for it)."""

    path: tuple[str, ...] = ("spec", "replicas")
    record_key: str = ANNOTATION_ORIGINAL_REPLICAS

    @property
    def pods_from_operator(self) -> bool:
        """A custom kind's operator makes its Pods; where it keeps no `spec.template` (a Strimzi KafkaConnect, a
        CloudNativePG Pooler), what its freeze frees is counted from them (`job.decide.operator_pods`)."""
        return bool(self.kind.group)

    def size_of(self, obj: dict[str, Any]) -> int:
        value = at(obj, self.path)
        # The API server defaults an unset count to 1 for built-ins; a custom resource's controller
        # usually does the same. Counted as running, it is frozen with an explicit record of 1.
        return 1 if value is None else int(value)

    def available(self, obj: dict[str, Any]) -> bool:
        """As many available replicas as the spec asks for, counted by a controller that has seen the current
        spec. The API server leaves a zero count out of a status, so a missing one is 0: a built-in kind is
        judged by `availableReplicas` alone (Ready Pods within `minReadySeconds` are not yet available); a
        custom kind by it, or by `readyReplicas` where it reports only that."""
        status = status_of(obj)
        field = "availableReplicas" if not self.kind.group or "availableReplicas" in status else "readyReplicas"
        return observed(obj) and whole(status.get(field)) >= self.size_of(obj)

    def pod_template(self, obj: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
        return replica_template(obj)

    def frozen_body(self) -> dict[str, Any]:
        return nested(self.path, 0)

    def original_value(self, size: int, state: str | None = None) -> str:
        return str(size)

    def restored_body(self, original: str) -> dict[str, Any]:
        if not _WHOLE_NUMBER.fullmatch(original):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_REPLICAS}={shown(original)} is not a whole number")
        return nested(self.path, int(original))

    def restored_size(self, original: str) -> int:
        self.restored_body(original)
        return int(original)

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else str(size)
