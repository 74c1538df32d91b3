"""Whether a workload is available, as its kind's controller reports it in `status` (pure, no I/O).

A restore in tiers (`job.decide.tiers`) brings a namespace's next tier back only once every workload of the
earlier ones is available. Each kind says what that means; the handler of the kind (`job.model.kinds`) names
which of these it uses:
- replica kinds (Deployments, StatefulSets, ReplicaSets, ReplicationControllers, custom `/scale` kinds): as
  many available replicas as the spec asks for (`availableReplicas`; a custom kind that reports only
  `readyReplicas`, by that), counted by a controller that has seen the current spec (`observedGeneration`);
- DaemonSets: every node that should run one runs an available, up-to-date Pod;
- CronJobs and Jobs: always: nothing waits for a batch run to finish.
"""

from __future__ import annotations

from typing import Any


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def observed(obj: dict[str, Any]) -> bool:
    """Whether the controller's status speaks of the current spec (a kind without `observedGeneration`: yes)."""
    seen = _status(obj).get("observedGeneration")
    generation = (obj.get("metadata") or {}).get("generation")
    return seen is None or generation is None or _whole(seen) >= _whole(generation)


def replicas_available(obj: dict[str, Any], wanted: int, *, built_in: bool = True) -> bool:
    """`wanted` replicas available. The API server leaves a zero count out of a status, so a missing one is 0:
    a built-in kind is judged by `availableReplicas` alone (Ready Pods within `minReadySeconds` are not yet
    available); a custom kind by it, or by `readyReplicas` where it reports only that."""
    status = _status(obj)
    field = "availableReplicas" if built_in or "availableReplicas" in status else "readyReplicas"
    return observed(obj) and _whole(status.get(field)) >= wanted


def daemons_available(obj: dict[str, Any]) -> bool:
    status = _status(obj)
    desired = _whole(status.get("desiredNumberScheduled"))
    return (observed(obj) and _whole(status.get("numberAvailable")) >= desired
            and _whole(status.get("updatedNumberScheduled")) >= desired)
