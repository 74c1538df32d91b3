"""Workload kinds: one small handler per kind behind one interface, and a generic one for `/scale` kinds.

A handler knows where its kind lives in the API (group, version, plural), whether an object is running,
the patch fragment that freezes it, the one that restores it, and which annotation keeps the record.
The built-in kinds are known here. A scalable custom resource, named `<Kind>.<group>` in a policy, gets
the same replica handler, parameterised from its CRD's scale subresource (`specReplicasPath`, possibly
nested) once per run: see `resolve`. Nothing here calls the API or decides what to freeze.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_ORIGINAL_SUSPEND, ANNOTATION_ORIGINAL_WHEN_SCALED

BUILTIN_NAMES = ("Deployment", "StatefulSet", "CronJob", "Job", "ReplicaSet", "ReplicationController")
#: What `spec.kinds` accepts: a built-in kind (`Job`) or `<Kind>.<group>` (`Rollout.argoproj.io`).
KIND_PATTERN = (rf"^({'|'.join(BUILTIN_NAMES)}|[A-Z][A-Za-z0-9]{{0,62}}(\.[a-z0-9]([-a-z0-9]{{0,61}}[a-z0-9])?)+)$")
_KIND = re.compile(KIND_PATTERN)
_WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")
_PATH_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")


class MalformedRecord(ValueError):
    """A workload carries our record but its value cannot be restored (someone edited it)."""


class Kind(str):
    """A workload kind as a policy names it. Built-ins are bare (`Deployment`); any other kind carries
    its API group (`Rollout.argoproj.io`). A value type resolved per run, because custom kinds are
    only known once the cluster has been asked."""

    DEPLOYMENT: ClassVar[Kind]
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
    def original_value(self, size: int) -> str: ...
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

    def frozen_body(self) -> dict[str, Any]:
        return _nested(self.path, 0)

    def original_value(self, size: int) -> str:
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

    def frozen_body(self) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def original_value(self, size: int) -> str:
        return "false" if size else "true"

    def restored_body(self, original: str) -> dict[str, Any]:
        if original not in ("true", "false"):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_SUSPEND}={original!r} is neither true nor false")
        return {"spec": {"suspend": original == "true"}}

    def restored_size(self, original: str) -> int:
        return 0 if self.restored_body(original)["spec"]["suspend"] else 1

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else ("active" if size else "suspended")


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
}
#: Owners of Pods that nsscaler does not freeze, followed all the same to say why their Pods run.
UNFROZEN_OWNERS: Mapping[str, _Served] = {"DaemonSet": _Served(Kind("DaemonSet"), "apps", "v1", "daemonsets")}
#: What the census LISTs to follow a Pod's owner chain: kind -> where it lives.
FOLLOWED: Mapping[str, _Served | KindHandler] = {
    **{str(k): h for k, h in BUILTIN.items() if h.followed}, **UNFROZEN_OWNERS}
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


@dataclass(frozen=True)
class Resolution:
    """The kinds this run can serve, and why the others cannot be."""

    handlers: dict[Kind, KindHandler]
    unknown: dict[Kind, str]


def _replica_path(text: str) -> tuple[str, ...] | None:
    parts = tuple(text.removeprefix(".").split("."))
    return parts if text.startswith(".spec.") and all(_PATH_SEGMENT.fullmatch(p) for p in parts) else None


def _from_crd(kind: Kind, crd: dict[str, Any]) -> KindHandler | str:
    spec = crd.get("spec") or {}
    if spec.get("scope") != "Namespaced":
        return f"kind {kind} is cluster-scoped; nsscaler freezes namespaced workloads only"
    versions = sorted((v for v in spec.get("versions") or [] if v.get("served")),
                      key=lambda v: not v.get("storage"))  # the storage version first
    for version in versions:
        scale = (version.get("subresources") or {}).get("scale")
        if scale is None:
            continue
        path = _replica_path(str(scale.get("specReplicasPath", "")))
        if path is None:
            return f"kind {kind}: unsupported specReplicasPath {scale.get('specReplicasPath')!r}"
        return ReplicasHandler(kind, spec["group"], version["name"], spec["names"]["plural"], path=path)
    return f"kind {kind} has no /scale subresource, so nsscaler cannot tell how to scale it to zero"


def resolve(kinds: Iterable[Kind], crds: Iterable[dict[str, Any]]) -> Resolution:
    """Handlers for `kinds`: built-ins as they are, custom ones from their CRD's scale subresource.

    The CRD is the only place that states `specReplicasPath` (the `/scale` endpoint hides it), and one
    LIST of CRDs answers for every custom kind of the run at once."""
    handlers: dict[Kind, KindHandler] = dict(BUILTIN)
    unknown: dict[Kind, str] = {}
    custom = {k for k in kinds if k not in BUILTIN}
    by_name: dict[Kind, dict[str, Any]] = {}
    for crd in crds:  # keep only the CRDs asked for: the others can be large
        names = (crd.get("spec") or {}).get("names") or {}
        name = Kind(f"{names.get('kind')}.{(crd.get('spec') or {}).get('group')}")
        if name in custom:
            by_name[name] = crd
    for kind in sorted(custom):
        if kind.short in BUILTIN_NAMES and kind.group == BUILTIN[Kind(kind.short)].group:
            unknown[kind] = f"kind {kind} is built in: write it as {kind.short}"
            continue
        if kind not in by_name:
            unknown[kind] = (f"kind {kind} is not served by this cluster (no such built-in kind, and no "
                             f"CustomResourceDefinition for it)")
            continue
        found = _from_crd(kind, by_name[kind])
        if isinstance(found, str):
            unknown[kind] = found
        else:
            handlers[kind] = found
    return Resolution(handlers, unknown)
