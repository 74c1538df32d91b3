"""Wakes: a person's request, in a held namespace, to keep it running for a bounded time (a value, parsed).

A Wake (`operators.wubw.fun/v1alpha1`, namespaced) says when it ends: `spec.until` (RFC 3339) or
`spec.duration` ("3h", "90m", "1h30m", "2d"), counted from its creation. `spec.requestedBy` is stamped by
the API server's admission (a MutatingAdmissionPolicy) and cannot be forged (a ValidatingAdmissionPolicy).
What the run makes of a Wake (Active, Expired, Ignored, and the end it applies) is `job.decide.selection`'s.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from job.model import policy as policy_api
from job.model.activity import parse_time
from job.model.windows import parse_until

KIND = "Wake"
PLURAL = "wakes"
CRD_NAME = f"{PLURAL}.{policy_api.GROUP}"

STATE_PENDING = "Pending"
STATE_ACTIVE = "Active"
STATE_EXPIRED = "Expired"
STATE_IGNORED = "Ignored"

@dataclass(frozen=True)
class Wake:
    """One Wake as the run read it. `requested_end` is None when its spec cannot be read (`invalid` says why)."""

    namespace: str
    name: str
    created: dt.datetime
    requested_end: dt.datetime | None
    requested_by: str = ""
    reason: str = ""
    uid: str = ""
    generation: int = 0
    invalid: str = ""
    status: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


def _requested_end(spec: dict[str, Any], created: dt.datetime) -> tuple[dt.datetime | None, str]:
    until, duration = spec.get("until"), spec.get("duration")
    if (until is None) == (duration is None):
        return None, "spec needs exactly one of until (RFC 3339) or duration (e.g. 3h)"
    try:
        if duration is not None:
            return created + policy_api.parse_duration(str(duration)), ""
        return parse_until(str(until)), ""
    except ValueError as exc:
        return None, f"spec: {exc}"


def parse(obj: dict[str, Any]) -> Wake:
    """One Wake object from the API as a `Wake` (never raises: a spec it cannot read makes it `invalid`)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    created = parse_time(meta.get("creationTimestamp")) or dt.datetime.min.replace(tzinfo=dt.UTC)
    end, invalid = _requested_end(spec or {}, created)
    return Wake(namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")), created=created,
                requested_end=end, requested_by=str((spec or {}).get("requestedBy") or ""),
                reason=str((spec or {}).get("reason") or ""), uid=str(meta.get("uid", "")),
                generation=int(meta.get("generation") or 0), invalid=invalid,
                status=dict(obj.get("status") or {}))
