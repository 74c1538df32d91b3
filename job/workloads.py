"""What nsscaler knows about a workload, and the record it leaves on the ones it freezes.

Each kind sits behind one small interface (is it running, the patch that freezes it, the patch that
restores it), so the planner never branches on kind. The annotation and label keys are owned here.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Protocol

from job import gitops

ANNOTATION_ORIGINAL_REPLICAS = "nsscaler.wubw.fun/original-replicas"
ANNOTATION_ORIGINAL_SUSPEND = "nsscaler.wubw.fun/original-suspend"
ANNOTATION_SCALED_BY = "nsscaler.wubw.fun/scaled-by"
ANNOTATION_EXCLUDE = "nsscaler.wubw.fun/exclude"
LABEL_SCALED = "nsscaler.wubw.fun/scaled"
SCALED_SELECTOR = f"{LABEL_SCALED}=true"

_WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")


class Kind(enum.StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"
    CRONJOB = "CronJob"


class MalformedRecord(ValueError):
    """A workload carries our record but its value cannot be restored (someone edited it)."""


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    terminating: bool = False


@dataclass(frozen=True, slots=True)
class Workload:
    """A slim, immutable view of a Deployment, StatefulSet or CronJob: only what the decisions need.

    `size` is replicas for scalable kinds, and 1 (running) or 0 (suspended) for a CronJob.
    `original` is the raw recorded value (None when nsscaler holds no record), kept raw so that a
    malformed record is reported instead of being silently reinterpreted.
    """

    kind: Kind
    namespace: str
    name: str
    resource_version: str
    size: int
    original: str | None = None
    scaled_by: str | None = None
    excluded: bool = False
    uid: str = ""
    #: the field manager that last wrote the size field (not nsscaler): who scaled it up during a freeze
    replicas_manager: str | None = None
    #: "Argo CD" or "Flux" when one of them manages the workload (tracking marks or field managers)
    gitops: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind.value, self.namespace, self.name)

    @property
    def has_record(self) -> bool:
        return self.original is not None

    def record_is_valid(self) -> bool:
        if self.original is None:
            return False
        try:
            HANDLERS[self.kind].restored_spec(self.original)
        except MalformedRecord:
            return False
        return True

    @property
    def ref(self) -> str:
        return f"{self.kind.value.lower()}/{self.name} in {self.namespace}"


class KindHandler(Protocol):
    kind: Kind
    api_version: str
    plural: str
    record_key: str

    def size_of(self, spec: dict[str, Any]) -> int: ...
    def frozen_spec(self) -> dict[str, Any]: ...
    def original_value(self, size: int) -> str: ...
    def restored_spec(self, original: str) -> dict[str, Any]: ...
    def restored_size(self, original: str) -> int: ...
    def describe(self, size: int) -> str: ...


class _Scalable:
    """Deployments and StatefulSets: frozen means `spec.replicas: 0`."""

    record_key = ANNOTATION_ORIGINAL_REPLICAS

    def __init__(self, kind: Kind, plural: str) -> None:
        self.kind, self.plural, self.api_version = kind, plural, "apps/v1"

    def size_of(self, spec: dict[str, Any]) -> int:
        replicas = spec.get("replicas")
        return 1 if replicas is None else int(replicas)  # the API server defaults an unset count to 1

    def frozen_spec(self) -> dict[str, Any]:
        return {"replicas": 0}

    def original_value(self, size: int) -> str:
        return str(size)

    def restored_spec(self, original: str) -> dict[str, Any]:
        if not _WHOLE_NUMBER.fullmatch(original):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_REPLICAS}={original!r} is not a whole number")
        return {"replicas": int(original)}

    def restored_size(self, original: str) -> int:
        return int(self.restored_spec(original)["replicas"])

    def describe(self, size: int) -> str:
        return str(size)


class _CronJob:
    """CronJobs: frozen means `spec.suspend: true`; the record keeps the previous suspend flag."""

    kind = Kind.CRONJOB
    api_version = "batch/v1"
    plural = "cronjobs"
    record_key = ANNOTATION_ORIGINAL_SUSPEND

    def size_of(self, spec: dict[str, Any]) -> int:
        return 0 if spec.get("suspend") else 1

    def frozen_spec(self) -> dict[str, Any]:
        return {"suspend": True}

    def original_value(self, size: int) -> str:
        return "false" if size else "true"

    def restored_spec(self, original: str) -> dict[str, Any]:
        if original not in ("true", "false"):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_SUSPEND}={original!r} is neither true nor false")
        return {"suspend": original == "true"}

    def restored_size(self, original: str) -> int:
        return 0 if self.restored_spec(original)["suspend"] else 1

    def describe(self, size: int) -> str:
        return "active" if size else "suspended"


HANDLERS: dict[Kind, KindHandler] = {
    Kind.DEPLOYMENT: _Scalable(Kind.DEPLOYMENT, "deployments"),
    Kind.STATEFULSET: _Scalable(Kind.STATEFULSET, "statefulsets"),
    Kind.CRONJOB: _CronJob(),
}


def from_api(kind: Kind, obj: dict[str, Any]) -> Workload:
    """Reduce one API object to a Workload right away, so a large LIST never stays in memory whole."""
    handler = HANDLERS[kind]
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    managed = meta.get("managedFields") or []
    return Workload(
        kind=kind,
        namespace=meta["namespace"],
        name=meta["name"],
        resource_version=meta.get("resourceVersion", ""),
        size=handler.size_of(obj.get("spec") or {}),
        original=annotations.get(handler.record_key),
        scaled_by=annotations.get(ANNOTATION_SCALED_BY),
        excluded=annotations.get(ANNOTATION_EXCLUDE, "").lower() == "true",
        uid=meta.get("uid", ""),
        replicas_manager=gitops.size_manager(managed, gitops.size_path(handler.frozen_spec()),
                                             ignore=gitops.FIELD_MANAGER),
        gitops=gitops.tool(annotations=annotations, labels=meta.get("labels") or {},
                           managers=(str(m.get("manager")) for m in managed)),
    )


def freeze_patch(workload: Workload, *, policy: str) -> dict[str, Any]:
    """Size to zero and the record, in one merge patch. An existing record is never overwritten:
    a workload scaled up by hand during a freeze keeps its pre-freeze count."""
    handler = HANDLERS[workload.kind]
    original = workload.original if workload.has_record else handler.original_value(workload.size)
    return {
        "metadata": {
            "resourceVersion": workload.resource_version,
            "annotations": {handler.record_key: original, ANNOTATION_SCALED_BY: policy},
            "labels": {LABEL_SCALED: "true"},
        },
        "spec": handler.frozen_spec(),
    }


def adopt_patch(workload: Workload, *, policy: str) -> dict[str, Any]:
    """Hand a frozen workload's record over to the policy that holds its namespace now."""
    return {"metadata": {"resourceVersion": workload.resource_version,
                         "annotations": {ANNOTATION_SCALED_BY: policy}}}


def restore_patch(workload: Workload) -> dict[str, Any]:
    """The recorded size back and the record removed, in one merge patch. Raises MalformedRecord."""
    handler = HANDLERS[workload.kind]
    assert workload.original is not None
    return {
        "metadata": {
            "resourceVersion": workload.resource_version,
            "annotations": {handler.record_key: None, ANNOTATION_SCALED_BY: None},
            "labels": {LABEL_SCALED: None},
        },
        "spec": handler.restored_spec(workload.original),
    }
