"""The interfaces a kind's handler fills, and what the handlers share.

Two protocols, because not everything nsscaler records a freeze on is a workload:
- `RecordedKind`: any object held at zero and put back from a record on it, workload or not (a KEDA
  ScaledObject, `job.model.autoscalers`): where its kind lives, its record, its size, the patch fragments
  that hold it and put it back, and how a size reads in logs;
- `KindHandler`: a workload kind, which is also selected by policies, may run Pods from a template, may be
  waited for by a later restore tier, and records its own size when frozen.

Each workload handler owns everything about its kinds, so nothing outside this package switches on a kind's
name. Values only: nothing here calls the API or decides what to freeze.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from job.model.kinds.kind import Kind

#: where a replica's (a DaemonSet's, a Job's) Pod template is: `spec.template.spec`
POD_TEMPLATE = ("spec", "template", "spec")


class RecordedKind(Protocol):
    """Where a kind lives, how one of its objects is held at zero and put back, and its record."""

    @property
    def kind(self) -> Kind: ...
    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def api_version(self) -> str: ...
    @property
    def record_key(self) -> str: ...
    def size_of(self, obj: dict[str, Any]) -> int: ...
    def frozen_body(self) -> dict[str, Any]: ...
    def restored_body(self, original: str) -> dict[str, Any]:
        """The patch fragment that puts `original` back. Raises MalformedRecord."""
    def restored_size(self, original: str) -> int: ...
    def describe(self, size: int | None) -> str: ...


@runtime_checkable
class KindHandler(RecordedKind, Protocol):
    """A workload kind: besides its record, whose selection freezes it, what its freeze must guard, whether the
    Pod census follows it, what it runs, when it counts as available, and the record its own size makes."""

    @property
    def owner_selects(self) -> frozenset[Kind]:
        """Selecting one of these kinds also freezes the objects of this kind they control."""
    @property
    def freezes_controlled(self) -> bool:
        """Frozen even with a controller owner (a Job keeps running when its CronJob is suspended)."""
    @property
    def guard(self) -> Guard | None:
        """A field the freeze must set too, so that it deletes nothing (`Guard`)."""
    @property
    def data_tier(self) -> bool:
        """Given back before the apps of its namespace when no restore order says otherwise (`job.decide.tiers`)."""
    @property
    def paused_by(self) -> frozenset[PausedBy]:
        """The operator kinds paused before the objects of this kind they control are scaled (`PausedBy`)."""
    @property
    def followed(self) -> bool:
        """LISTed by the Pod census to follow owner chains (else the run's own reads seed it, or the chain
        ends there)."""
    def state_of(self, obj: dict[str, Any]) -> str | None:
        """What besides the size a restore must put back, read from the whole object (None: nothing)."""
    def blocked(self, obj: dict[str, Any]) -> str | None:
        """Why it may not be frozen now (a precondition its row states), or None."""
    def settled(self, obj: dict[str, Any]) -> str | None:
        """None when the operator reports its freeze done (or its kind has no such report); else what it says."""
    @property
    def settle_within(self) -> float | None:
        """Seconds its operator has, after a freeze, to report it done (`settled`); None: it reports nothing."""
    def available(self, obj: dict[str, Any]) -> bool:
        """Whether its controller reports it available in `status`: what a later restore tier waits for."""
    def pod_template(self, obj: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
        """The Pod spec of one unit (a replica, a running Job) and how many Pods that unit runs; None when the
        object has no Pod template where its kind keeps one."""
    def original_value(self, size: int, state: str | None = None) -> str: ...


def at(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at `path`, or None where the path ends early or passes through something that is not a map."""
    value = obj
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """{"spec": {"workers": {"count": value}}} for ("spec", "workers", "count"): a merge patch that sets
    exactly that field and leaves its siblings alone."""
    body: Any = value
    for key in reversed(path):
        body = {key: body}
    return dict(body)


def replica_template(obj: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
    """One replica runs one Pod of `spec.template`."""
    template = at(obj, POD_TEMPLATE)
    return (template, 1) if isinstance(template, Mapping) else (None, 0)


def status_of(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def whole(value: Any) -> int:
    """A count from a status: anything but an integer (a missing field, the API server's omitted zero) is 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def observed(obj: dict[str, Any]) -> bool:
    """Whether the controller's status speaks of the current spec (a kind without `observedGeneration`: yes)."""
    seen = status_of(obj).get("observedGeneration")
    generation = (obj.get("metadata") or {}).get("generation")
    return seen is None or generation is None or whole(seen) >= whole(generation)


@dataclass(frozen=True)
class Served:
    """Where the API serves a kind (what every handler needs to LIST, GET and PATCH it), and the facts of the
    registry that do not depend on how a kind is frozen (`KindHandler`), keyword-only so that each handler's
    own fields can follow."""

    kind: Kind
    group: str
    version: str
    plural: str
    owner_selects: frozenset[Kind] = field(default=frozenset(), kw_only=True)
    freezes_controlled: bool = field(default=False, kw_only=True)
    followed: bool = field(default=False, kw_only=True)
    guard: Guard | None = field(default=None, kw_only=True)
    #: given back before the apps of its namespace when no restore order says otherwise (a database: its row's
    #: tier, `job.model.kinds.rows`)
    data_tier: bool = field(default=False, kw_only=True)
    #: the operator kinds whose objects are paused before the ones of this kind they control are scaled
    #: (a `pause` row: `job.model.kinds.rows`)
    paused_by: frozenset[PausedBy] = field(default=frozenset(), kw_only=True)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def state_of(self, obj: dict[str, Any]) -> str | None:
        """Nothing besides the size to put back, unless a kind says otherwise (a DaemonSet's node selector)."""
        return None

    def blocked(self, obj: dict[str, Any]) -> str | None:
        """Why it may not be frozen now (a row's precondition: `job.model.kinds.field`), or None."""
        return None

    @property
    def settle_within(self) -> float | None:
        """No operator reports its freeze: done once its Pods are gone (the Pod census)."""
        return None

    @property
    def pods_from_operator(self) -> bool:
        """Its operator makes its Pods, from no template nsscaler can read: what its freeze frees is counted from
        the Pods that run for it then (`job.decide.operator_pods`). Only a row frozen by one value says so."""
        return False

    def settled(self, obj: dict[str, Any]) -> str | None:
        """None when its freeze has taken effect as far as the object says (an operator's own condition); else
        what it says instead."""
        return None


@dataclass(frozen=True)
class PausedBy:
    """An operator kind whose objects are paused (a `pause` row) before the StatefulSets they control are scaled
    to 0: such a StatefulSet is frozen, and selected, through its operator's object alone, and comes back in
    its tier (`data_tier`: its row's)."""

    kind: Kind
    data_tier: bool = False


@dataclass(frozen=True)
class Guard:
    """A field that must hold `safe` while a workload is frozen, because scaling it to zero with another value
    would delete data as a side effect (a StatefulSet whose claims go with its Pods). The freeze sets it in
    the same write as the size and records the value it replaces under `record_key`; the restore puts that
    value back in the same write as the size. A refused write leaves the workload running: never scaled to
    zero without it."""

    path: tuple[str, ...]
    safe: str
    record_key: str
    #: what a user reads when the write that sets it is refused
    refused: str

    def value_in(self, obj: dict[str, Any]) -> str | None:
        value = at(obj, self.path)
        return None if value is None else str(value)

    def body(self, value: str) -> dict[str, Any]:
        return nested(self.path, value)
