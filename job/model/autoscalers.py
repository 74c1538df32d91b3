"""The autoscalers that can undo a freeze, as a run sees them: KEDA ScaledObjects and HPAs (values only).

A ScaledObject sits behind the interface of objects with a record (`job.model.kinds.RecordedKind`, not the
workload one: it is never selected, runs no Pods and is never waited for): where it lives, its record
(`nsscaler.wubw.fun/original-paused-replicas`) and how it reads in logs; its `size` is 0 when paused at
zero, else 1. What to do about either is decided in `job.decide.autoscalers`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from job.errors import shown
from job.model.kinds import Kind, MalformedRecord
from job.model.marks import ANNOTATION_KEDA_PAUSED, ANNOTATION_ORIGINAL_PAUSED
from job.model.workloads import Workload, recorded_from_api

KEDA_GROUP = "keda.sh"
KEDA_VERSION = "v1alpha1"
HPA_API_VERSION = "autoscaling/v2"
HPA_PLURAL = "horizontalpodautoscalers"
SCALED_OBJECT = Kind("ScaledObject.keda.sh")


@dataclass(frozen=True)
class ScaledObjectHandler:
    """A ScaledObject as an object with a record (`RecordedKind`: where it lives, its record, how it reads in
    logs). `size` is 0 when paused at zero, else 1. Its record is the annotation it had before, made by
    `job.decide.autoscalers`, not from a size."""

    kind: Kind = SCALED_OBJECT
    group: str = KEDA_GROUP
    version: str = KEDA_VERSION
    plural: str = "scaledobjects"
    record_key: str = ANNOTATION_ORIGINAL_PAUSED

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def size_of(self, obj: dict[str, Any]) -> int:
        return 0 if _paused(obj) == "0" else 1

    def frozen_body(self) -> dict[str, Any]:
        return {"metadata": {"annotations": {ANNOTATION_KEDA_PAUSED: "0"}}}

    def restored_body(self, original: str) -> dict[str, Any]:
        try:
            value = json.loads(original)
        except ValueError:
            value = 0  # not a string: reported below
        if value is not None and not isinstance(value, str):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_PAUSED}={shown(original)} is neither null nor a JSON string")
        return {"metadata": {"annotations": {ANNOTATION_KEDA_PAUSED: value}}}

    def restored_size(self, original: str) -> int:
        return 0 if self.restored_body(original)["metadata"]["annotations"][ANNOTATION_KEDA_PAUSED] == "0" else 1

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else ("paused at 0" if size == 0 else "scaling")


SCALED_OBJECTS = ScaledObjectHandler()


def _paused(obj: dict[str, Any]) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_KEDA_PAUSED)
    return None if value is None else str(value)


def scale_target(namespace: str, ref: object) -> tuple[str, str, str, str]:
    """(namespace, group, kind, name) of a scaleTargetRef; KEDA and the HPA default to apps/v1 Deployment. A ref
    that is not an object (KEDA's CRD may be installed without its schema) targets nothing."""
    if not isinstance(ref, dict):
        return namespace, "", "", ""
    api_version = str(ref.get("apiVersion") or "apps/v1")
    group = api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""
    return namespace, group, str(ref.get("kind") or "Deployment"), str(ref.get("name", ""))


def target_key(w: Workload) -> tuple[str, str, str, str]:
    return w.namespace, w.handling.group, w.kind.short, w.name


@dataclass(frozen=True)
class ScaledObject:
    workload: Workload  # the ScaledObject itself, seen as an object with a record
    paused: str | None
    target: tuple[str, str, str, str]


def scaled_object(obj: dict[str, Any]) -> ScaledObject:
    w = recorded_from_api(SCALED_OBJECTS, obj)
    spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    return ScaledObject(w, _paused(obj), scale_target(w.namespace, spec.get("scaleTargetRef") or {}))
