"""Workload kinds: one small handler per kind behind one interface, and a generic one for `/scale` kinds.

A handler knows where its kind lives in the API (group, version, plural), whether an object is running,
the patch fragment that freezes it, the one that restores it, and which annotation keeps the record.
The built-in kinds are known here. A scalable custom resource, named `<Kind>.<group>` in a policy, gets
the same replica handler, parameterised from its CRD's scale subresource (`specReplicasPath`, possibly
nested) once per run: see `resolve`. Nothing here calls the API or decides what to freeze.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from job.model import readiness
from job.model.marks import (
    ANNOTATION_ORIGINAL_NODE_SELECTOR,
    ANNOTATION_ORIGINAL_REPLICAS,
    ANNOTATION_ORIGINAL_SUSPEND,
    ANNOTATION_ORIGINAL_WHEN_SCALED,
    FROZEN_NODE_LABEL,
)

BUILTIN_NAMES = ("Deployment", "StatefulSet", "CronJob", "Job", "ReplicaSet", "ReplicationController", "DaemonSet")
#: What `spec.kinds` accepts: a built-in kind (`Job`) or `<Kind>.<group>` (`Rollout.argoproj.io`).
KIND_PATTERN = (rf"^({'|'.join(BUILTIN_NAMES)}|[A-Z][A-Za-z0-9]{{0,62}}(\.[a-z0-9]([-a-z0-9]{{0,61}}[a-z0-9])?)+)$")
_KIND = re.compile(KIND_PATTERN)
_WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")


class MalformedRecord(ValueError):
    """A workload carries our record but its value cannot be restored (someone edited it)."""


class Kind(str):
    """A workload kind as a policy names it. Built-ins are bare (`Deployment`); any other kind carries
    its API group (`Rollout.argoproj.io`). A value type resolved per run, because custom kinds are
    only known once the cluster has been asked."""

    DEPLOYMENT: ClassVar[Kind]
    DAEMONSET: ClassVar[Kind]
    STATEFULSET: ClassVar[Kind]
    CRONJOB: ClassVar[Kind]
    JOB: ClassVar[Kind]
    REPLICASET: ClassVar[Kind]
    REPLICATIONCONTROLLER: ClassVar[Kind]

    __slots__ = ()

    @classmethod
    def parse(cls, text: str) -> Kind:
        if not _KIND.fullmatch(text):
            raise ValueError(f"{text!r} is not a kind nsscaler can freeze: use one of {', '.join(BUILTIN_NAMES)}, "
                             f"or <Kind>.<group> for a kind with a /scale subresource (e.g. Rollout.argoproj.io)")
        return cls(text)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls.parse, core_schema.str_schema())

    @property
    def value(self) -> str:
        return str(self)

    @property
    def short(self) -> str:
        """The kind without its group: what `kind:` says in the object."""
        return self.partition(".")[0]

    @property
    def group(self) -> str:
        return self.partition(".")[2]


Kind.DEPLOYMENT = Kind("Deployment")
Kind.DAEMONSET = Kind("DaemonSet")
Kind.STATEFULSET = Kind("StatefulSet")
Kind.CRONJOB = Kind("CronJob")
Kind.JOB = Kind("Job")
Kind.REPLICASET = Kind("ReplicaSet")
Kind.REPLICATIONCONTROLLER = Kind("ReplicationController")


class KindHandler(Protocol):
    """Where a kind lives, how its objects are frozen and restored, and which annotation keeps the record."""

    @property
    def kind(self) -> Kind: ...
    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def record_key(self) -> str: ...
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
    def followed(self) -> bool:
        """LISTed by the Pod census to follow owner chains (else the run's own reads seed it, or the chain
        ends there)."""
    @property
    def api_version(self) -> str: ...
    def size_of(self, obj: dict[str, Any]) -> int: ...
    def frozen_body(self) -> dict[str, Any]: ...
    def state_of(self, obj: dict[str, Any]) -> str | None:
        """What besides the size a restore must put back, read from the whole object (None: nothing)."""
    def available(self, obj: dict[str, Any]) -> bool:
        """Whether its controller reports it available (`job.model.readiness`): what a later restore tier waits for."""
    def original_value(self, size: int, state: str | None = None) -> str: ...
    def restored_body(self, original: str) -> dict[str, Any]: ...
    def restored_size(self, original: str) -> int: ...
    def describe(self, size: int | None) -> str: ...


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """{"spec": {"workers": {"count": value}}} for ("spec", "workers", "count"): a merge patch that sets
    exactly that field and leaves its siblings alone."""
    body: Any = value
    for key in reversed(path):
        body = {key: body}
    return dict(body)


@dataclass(frozen=True)
class _Served:
    """Where the API serves a kind: what every handler needs to LIST, GET and PATCH it."""

    kind: Kind
    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return _api_version(self.group, self.version)

    def state_of(self, obj: dict[str, Any]) -> str | None:
        """Nothing besides the size to put back, unless a kind says otherwise (a DaemonSet's node selector)."""
        return None


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
        value: Any = obj
        for key in self.path:
            value = value.get(key) if isinstance(value, dict) else None
        return None if value is None else str(value)

    def body(self, value: str) -> dict[str, Any]:
        return _nested(self.path, value)


#: StatefulSets: claims kept whatever the retention policy says (`whenScaled: Delete` would delete them).
CLAIMS_KEPT = Guard(
    path=("spec", "persistentVolumeClaimRetentionPolicy", "whenScaled"), safe="Retain",
    record_key=ANNOTATION_ORIGINAL_WHEN_SCALED,
    refused="nsscaler sets persistentVolumeClaimRetentionPolicy.whenScaled: Retain in the same write as replicas 0, "
            "so that the freeze deletes no PersistentVolumeClaim, and never scales the StatefulSet to 0 without "
            "it: allow that change (admission policy, RBAC), or set whenScaled: Retain on it yourself")


@dataclass(frozen=True)
class ReplicasHandler(_Served):
    """Frozen means the replica field is 0. Deployments, StatefulSets, ReplicaSets, ReplicationControllers,
    and every custom kind with a `/scale` subresource, whose replica field may be nested."""

    path: tuple[str, ...] = ("spec", "replicas")
    record_key: str = ANNOTATION_ORIGINAL_REPLICAS
    owner_selects: frozenset[Kind] = frozenset()
    freezes_controlled: bool = False
    followed: bool = False
    guard: Guard | None = None

    def size_of(self, obj: dict[str, Any]) -> int:
        value: Any = obj
        for key in self.path:
            value = value.get(key) if isinstance(value, dict) else None
        # The API server defaults an unset count to 1 for built-ins; a custom resource's controller
        # usually does the same. Counted as running, it is frozen with an explicit record of 1.
        return 1 if value is None else int(value)

    def available(self, obj: dict[str, Any]) -> bool:
        return readiness.replicas_available(obj, self.size_of(obj), built_in=not self.kind.group)

    def frozen_body(self) -> dict[str, Any]:
        return _nested(self.path, 0)

    def original_value(self, size: int, state: str | None = None) -> str:
        return str(size)

    def restored_body(self, original: str) -> dict[str, Any]:
        if not _WHOLE_NUMBER.fullmatch(original):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_REPLICAS}={original!r} is not a whole number")
        return _nested(self.path, int(original))

    def restored_size(self, original: str) -> int:
        self.restored_body(original)
        return int(original)

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else str(size)


def _not_suspended(obj: dict[str, Any]) -> bool:
    return not (obj.get("spec") or {}).get("suspend")


def _job_running(obj: dict[str, Any]) -> bool:
    """Not suspended and not finished: a Complete or Failed Job is never touched."""
    status = obj.get("status") or {}
    finished = status.get("completionTime") or any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in status.get("conditions") or [])
    return _not_suspended(obj) and not finished


@dataclass(frozen=True)
class SuspendHandler(_Served):
    """Frozen means `spec.suspend: true`; the record keeps the previous flag. CronJobs and Jobs."""

    running: Callable[[dict[str, Any]], bool] = field(compare=False)
    record_key: str = ANNOTATION_ORIGINAL_SUSPEND
    owner_selects: frozenset[Kind] = frozenset()
    freezes_controlled: bool = False
    followed: bool = False
    guard: Guard | None = None

    def size_of(self, obj: dict[str, Any]) -> int:
        return 1 if self.running(obj) else 0

    def available(self, obj: dict[str, Any]) -> bool:
        return True  # nothing waits for a batch run

    def frozen_body(self) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def original_value(self, size: int, state: str | None = None) -> str:
        return "false" if size else "true"

    def restored_body(self, original: str) -> dict[str, Any]:
        if original not in ("true", "false"):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_SUSPEND}={original!r} is neither true nor false")
        return {"spec": {"suspend": original == "true"}}

    def restored_size(self, original: str) -> int:
        return 0 if self.restored_body(original)["spec"]["suspend"] else 1

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else ("active" if size else "suspended")


_TEMPLATE_SELECTOR = ("spec", "template", "spec", "nodeSelector")


@dataclass(frozen=True)
class NodeSelectorHandler(_Served):
    """Frozen means its Pod template requires a node label no node carries (`FROZEN_NODE_LABEL`): the
    DaemonSet controller then removes its Pods from every node, and keeps none. The record is the template's
    `nodeSelector` before the freeze, as JSON (`null`: it had none), so the restore puts it back exactly.
    DaemonSets: they have no replica count to set to zero."""

    record_key: str = ANNOTATION_ORIGINAL_NODE_SELECTOR
    owner_selects: frozenset[Kind] = frozenset()
    freezes_controlled: bool = False
    followed: bool = True
    guard: Guard | None = None

    def size_of(self, obj: dict[str, Any]) -> int:
        return 0 if FROZEN_NODE_LABEL in (_selector(obj) or {}) else 1

    def available(self, obj: dict[str, Any]) -> bool:
        return readiness.daemons_available(obj)

    def frozen_body(self) -> dict[str, Any]:
        return _nested((*_TEMPLATE_SELECTOR, FROZEN_NODE_LABEL), "true")

    def state_of(self, obj: dict[str, Any]) -> str | None:
        return json.dumps(_selector(obj), sort_keys=True, separators=(",", ":"))

    def original_value(self, size: int, state: str | None = None) -> str:
        return state or "null"

    def restored_body(self, original: str) -> dict[str, Any]:
        try:
            selector = json.loads(original)
        except ValueError:
            selector = []  # not a map: reported below
        if selector is not None and not (isinstance(selector, dict)
                                         and all(isinstance(v, str) for v in selector.values())):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_NODE_SELECTOR}={original!r} is neither null nor a JSON "
                                  f"object of strings")
        return _nested(_TEMPLATE_SELECTOR, {**(selector or {}), FROZEN_NODE_LABEL: None})

    def restored_size(self, original: str) -> int:
        self.restored_body(original)
        return 1

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else ("on its nodes" if size else "off every node")


def _selector(obj: dict[str, Any]) -> dict[str, Any] | None:
    value: Any = obj
    for key in _TEMPLATE_SELECTOR:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) and value else None


#: The registry of built-in kinds: where each lives, how it is frozen, whose selection freezes it, and
#: whether the Pod census LISTs it to follow owner chains. ReplicationControllers are not followed: a run
#: that freezes them reads them whole already, and seeds the census with them.
BUILTIN: Mapping[Kind, KindHandler] = {
    Kind.DEPLOYMENT: ReplicasHandler(Kind.DEPLOYMENT, "apps", "v1", "deployments", followed=True),
    Kind.STATEFULSET: ReplicasHandler(Kind.STATEFULSET, "apps", "v1", "statefulsets", followed=True,
                                      guard=CLAIMS_KEPT),
    Kind.REPLICASET: ReplicasHandler(Kind.REPLICASET, "apps", "v1", "replicasets", followed=True),
    Kind.REPLICATIONCONTROLLER: ReplicasHandler(Kind.REPLICATIONCONTROLLER, "", "v1", "replicationcontrollers"),
    Kind.CRONJOB: SuspendHandler(Kind.CRONJOB, "batch", "v1", "cronjobs", _not_suspended, followed=True),
    # A suspended CronJob does not stop the Job it already started: selecting CronJob selects its Jobs too.
    Kind.JOB: SuspendHandler(Kind.JOB, "batch", "v1", "jobs", _job_running,
                             owner_selects=frozenset({Kind.CRONJOB}), freezes_controlled=True, followed=True),
    # No replica count: frozen by a node selector that no node matches (see NodeSelectorHandler).
    Kind.DAEMONSET: NodeSelectorHandler(Kind.DAEMONSET, "apps", "v1", "daemonsets"),
}
#: What the census LISTs to follow a Pod's owner chain: kind -> where it lives.
FOLLOWED: Mapping[str, KindHandler] = {str(k): h for k, h in BUILTIN.items() if h.followed}
#: The API groups of the built-in kinds: an owner reference outside them names a custom kind
#: (`Rollout.argoproj.io`).
BUILTIN_GROUPS = frozenset(h.group for h in BUILTIN.values())
#: Kinds frozen even under a controller: a Pod whose chain passes through one stops when it is frozen.
FREEZES_CONTROLLED = frozenset(str(k) for k, h in BUILTIN.items() if h.freezes_controlled)


def selecting_kinds(handler: KindHandler, controller: str | None) -> frozenset[Kind]:
    """The kinds a policy may select to freeze one object: its own, or its controller's where that
    controller's freeze does not stop it (a CronJob's Job)."""
    if controller is not None and controller in handler.owner_selects:
        return frozenset({handler.kind, Kind(controller)})
    return frozenset({handler.kind})


def listed_for(handler: KindHandler, selected: frozenset[Kind]) -> bool:
    """Whether a LIST of this kind must return every object (else only those with our record)."""
    return handler.kind in selected or bool(handler.owner_selects & selected)
