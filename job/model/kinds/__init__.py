"""Workload kinds: one handler per way of freezing, behind one interface, and the registry of built-in kinds.

A handler knows everything about its kinds: where they live in the API (group, version, plural), whether an
object is running, the patch fragment that freezes it and the one that restores it, the annotation that keeps
the record, where its Pod template is, when its controller reports it available, and how its size reads.
- `builtin`: the built-in kinds as rows of data (`BUILTIN_DATA`, `BUILTIN_NAMES`);
- `kind`: the `Kind` value type, what `spec.kinds` accepts, `MalformedRecord`;
- `handler`: the interfaces (`RecordedKind` for anything with a record, `KindHandler` for workloads) and
  what the handlers share (`Guard`, the walk into an object, the status counts);
- `replicas`: a replica count of 0 (Deployment, StatefulSet, ReplicaSet, ReplicationController, and every
  custom kind with a `/scale` subresource, parameterised from its CRD by `job.model.custom`);
- `suspend`: `spec.suspend` (CronJob, Job);
- `node_selector`: a node selector no node matches (DaemonSet);
- `registry`: the built-in kinds' handlers made from their rows (`BUILTIN`) and what derives from them.
Nothing here calls the API or decides what to freeze. The names below are this package's public ones.
"""

from job.model.kinds.builtin import BUILTIN_NAMES
from job.model.kinds.handler import Guard, KindHandler, PausedBy, RecordedKind
from job.model.kinds.kind import KIND_PATTERN, Kind, MalformedRecord
from job.model.kinds.node_selector import NodeSelectorHandler
from job.model.kinds.registry import (
    BUILTIN,
    BUILTIN_GROUPS,
    FOLLOWED,
    FREEZES_CONTROLLED,
    listed_for,
    paused_owner,
    selecting_kinds,
)
from job.model.kinds.replicas import CLAIMS_KEPT, ReplicasHandler
from job.model.kinds.suspend import SuspendHandler

__all__ = [
    "BUILTIN", "BUILTIN_GROUPS", "BUILTIN_NAMES", "CLAIMS_KEPT", "FOLLOWED", "FREEZES_CONTROLLED", "KIND_PATTERN",
    "Guard", "Kind", "KindHandler", "MalformedRecord", "NodeSelectorHandler", "PausedBy", "RecordedKind",
    "ReplicasHandler", "SuspendHandler", "listed_for", "paused_owner", "selecting_kinds",
]
