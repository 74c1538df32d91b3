"""Kinds frozen by `spec.suspend: true`: CronJobs and Jobs. The record is the previous flag. Which objects
count as running and what one unit runs differ by kind, so each is a function its row chooses
(`job.model.kinds.builtin`: `finishes` picks `job_running` over `cronjob_running`, `pods` picks `TEMPLATES`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from job.errors import shown
from job.model.kinds.handler import Served, at, replica_template
from job.model.kinds.kind import MalformedRecord
from job.model.marks import ANNOTATION_ORIGINAL_SUSPEND

#: an object -> the Pod spec of one unit (None: it has none) and the Pods that unit runs
Template = Callable[[dict[str, Any]], tuple[Mapping[str, Any] | None, int]]


def cronjob_running(obj: dict[str, Any]) -> bool:
    return not (obj.get("spec") or {}).get("suspend")


def job_running(obj: dict[str, Any]) -> bool:
    """Not suspended and not finished: a Complete or Failed Job is never touched."""
    status = obj.get("status") or {}
    finished = status.get("completionTime") or any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in status.get("conditions") or [])
    return cronjob_running(obj) and not finished


def cronjob_template(obj: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
    """No Pod of its own: what its freeze stops are its Jobs, each frozen and counted as a Job."""
    return at(obj, ("spec", "jobTemplate", "spec", "template", "spec")) or {}, 0


def job_template(obj: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
    """A running Job runs `spec.parallelism` Pods of `spec.template` (default 1)."""
    template, _ = replica_template(obj)
    if template is None:
        return None, 0
    pods = (obj.get("spec") or {}).get("parallelism", 1)
    return template, int(pods if pods is not None else 1)


def running_of(finishes: bool) -> Callable[[dict[str, Any]], bool]:
    """What counts as running for a row whose objects finish (a Job: not once Complete or Failed) or do not."""
    return job_running if finishes else cronjob_running


#: a row's `pods` -> where one unit's Pods are
TEMPLATES: Mapping[str, Template] = {"jobTemplate": cronjob_template, "parallelism": job_template}


@dataclass(frozen=True)
class SuspendHandler(Served):
    """Frozen means `spec.suspend: true`; the record keeps the previous flag."""

    running: Callable[[dict[str, Any]], bool] = field(compare=False)
    template: Template = field(compare=False)
    record_key: str = ANNOTATION_ORIGINAL_SUSPEND

    def size_of(self, obj: dict[str, Any]) -> int:
        return 1 if self.running(obj) else 0

    def available(self, obj: dict[str, Any]) -> bool:
        return True  # nothing waits for a batch run

    def pod_template(self, obj: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
        return self.template(obj)

    def frozen_body(self) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def original_value(self, size: int, state: str | None = None) -> str:
        return "false" if size else "true"

    def restored_body(self, original: str) -> dict[str, Any]:
        if original not in ("true", "false"):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_SUSPEND}={shown(original)} is neither true nor false")
        return {"spec": {"suspend": original == "true"}}

    def restored_size(self, original: str) -> int:
        return 0 if self.restored_body(original)["spec"]["suspend"] else 1

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else ("active" if size else "suspended")
