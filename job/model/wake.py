"""Wakes: a person's request, in a held namespace, to keep it running for a bounded time (a value, parsed).

A Wake (`operators.wubw.fun/v1alpha1`, namespaced) says when it ends: `spec.until` (RFC 3339) or
`spec.duration` ("3h", "90m", "1h30m", "2d"), counted from its creation. `spec.requestedBy` is written by
the creator (or filled in by the API server with the optional `wake-requester-stamp` MutatingAdmissionPolicy)
and cannot be forged (the ValidatingAdmissionPolicy `nsscaler-wake-requested-by`).
What the run makes of a Wake (Active, Expired, Ignored, and the end it applies) is `job.decide.waking`'s.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from job.errors import unexpected
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


#: what to do about a Wake whose end cannot be read
_FIX = "; fix: set one of spec.duration (e.g. \"3h\") or spec.until (e.g. \"2026-12-24T18:00:00Z\"), or delete the Wake"


def _requested_end(spec: dict[str, Any], created: dt.datetime) -> tuple[dt.datetime | None, str]:
    until, duration = spec.get("until"), spec.get("duration")
    if (until is None) == (duration is None):
        return None, "spec needs exactly one of until (RFC 3339) or duration (e.g. 3h)"
    field_name = "duration" if duration is not None else "until"
    try:
        if duration is not None:
            return created + policy_api.parse_duration(str(duration)), ""
        return parse_until(str(until)), ""
    except (ValueError, OverflowError) as exc:  # a creation time near the calendar's end plus a long duration
        return None, f"spec.{field_name}: {exc}{_FIX}"


def parse(obj: dict[str, Any]) -> Wake:
    """One Wake object from the API as a `Wake` (never raises: a spec it cannot read makes it `invalid`, and so
    does anything unexpected in it, so one person's Wake can never stop a run for everyone)."""
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    try:
        return _parsed(obj, meta, namespace=namespace, name=name)
    except Exception as exc:
        return Wake(namespace=namespace, name=name, created=_NEVER, requested_end=None, uid=str(meta.get("uid", "")),
                    invalid=f"could not be read: {unexpected(exc)}")


_NEVER = dt.datetime.min.replace(tzinfo=dt.UTC)


def _parsed(obj: dict[str, Any], meta: dict[str, Any], *, namespace: str, name: str) -> Wake:
    spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    created = parse_time(meta.get("creationTimestamp")) or _NEVER
    end, invalid = _requested_end(spec, created)
    return Wake(namespace=namespace, name=name, created=created, requested_end=end,
                requested_by=str(spec.get("requestedBy") or ""), reason=str(spec.get("reason") or ""),
                uid=str(meta.get("uid", "")), generation=int(meta.get("generation") or 0), invalid=invalid,
                status=dict(obj.get("status") or {}))
