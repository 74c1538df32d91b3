"""Activity: when someone last changed a workload, read from what every LIST already returns (pure).

The signal is `metadata.managedFields`: the API server keeps, per field manager, the `time` of that
manager's last change to the fields it owns. A user's deployment (`kubectl apply/set image/scale/edit`,
Helm, Argo CD, any client) updates its manager's time; nsscaler's own freezes and restores are written
as manager `nsscaler`, and scaling or status updates by Kubernetes' controllers (the Deployment and
StatefulSet controllers, the HPA) as `kube-controller-manager` or on the `status` subresource. Those are
ignored, so freezing a namespace never makes it look active.
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
from dataclasses import dataclass
from typing import Any

from job.model.marks import FIELD_MANAGER

#: Managers whose changes are not a person's or a deployment tool's: nsscaler itself, and Kubernetes'
#: own controllers (replica counts written by the HPA and the workload controllers).
NOT_ACTIVITY_MANAGERS = frozenset({FIELD_MANAGER, "kube-controller-manager", "cloud-controller-manager"})
#: Subresources written by controllers reporting state, never by someone deploying.
NOT_ACTIVITY_SUBRESOURCES = frozenset({"status"})
CREATED = "creation"  # the "manager" of a namespace's own creation


@dataclass(frozen=True, slots=True, order=True)
class Change:
    """The newest change that counts as activity: when, and by which field manager."""

    time: dt.datetime
    by: str


@functools.lru_cache(maxsize=4096)  # one object per second many workloads share (a first run holds 50,000)
def _parse_timestamp(value: str) -> dt.datetime | None:
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def parse_time(value: object) -> dt.datetime | None:
    """A Kubernetes timestamp (`2026-12-02T10:14:00Z`), or None if absent or unreadable."""
    return _parse_timestamp(value) if isinstance(value, str) else None


def last_user_change(meta: dict[str, Any]) -> Change | None:
    """The newest managedFields entry written by a user or deployment tool, from an object's metadata."""
    newest: Change | None = None
    for entry in meta.get("managedFields") or ():
        manager = str(entry.get("manager") or "")
        if manager in NOT_ACTIVITY_MANAGERS or entry.get("subresource") in NOT_ACTIVITY_SUBRESOURCES:
            continue
        when = parse_time(entry.get("time"))
        if when is not None and (newest is None or when > newest.time):
            newest = Change(when, sys.intern(manager or "unknown"))  # a few managers, however many workloads
    return newest
