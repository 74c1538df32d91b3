"""Whether a run may take the cluster-wide run Lease (pure: the Lease as read, who asks, and `now`).

At most one run writes at a time: the scheduled CronJob's, a wake's Job (created by hand or by the waker, which
the CronJob's `concurrencyPolicy` does not cover) and a person's `nsscaler` on a laptop all take one
`coordination.k8s.io/v1` Lease first. Rules:
1. No Lease, or one nobody holds (`holderIdentity` empty): free.
2. A Lease this run holds already: free (taking it again renews it).
3. A Lease whose `renewTime` (else `acquireTime`) plus `leaseDurationSeconds` has passed: free. A run that
   crashed holds the Lease at most that long.
4. A Lease whose holder the caller knows to be gone (a process of this host that no longer exists, killed
   before it could give the Lease back): free.
5. Otherwise it is held, and the answer names the holder and until when.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from job.model.activity import parse_time

#: where the Lease lives: the job's own namespace, under this name
LEASE_NAME = "nsscaler-run"
#: how long a Lease taken by a run holds if the run never gives it back (it crashed): longer than the
#: CronJob's activeDeadlineSeconds (600), so a run never loses it while it writes
LEASE_SECONDS = 660


@dataclass(frozen=True)
class Held:
    """Rule 5: someone else holds the Lease."""

    holder: str
    until: dt.datetime | None

    def __str__(self) -> str:
        when = f" until {self.until.isoformat()}" if self.until else ""
        return f"{self.holder}{when}"


def held_by_other(lease: dict[str, Any] | None, *, me: str, now: dt.datetime,
                  gone: Callable[[str], bool] = lambda holder: False) -> Held | None:
    """None when `me` may take the Lease (rules 1 to 4), else who holds it (rule 5)."""
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if not holder or holder == me:
        return None
    since = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    seconds = spec.get("leaseDurationSeconds")
    if since is None or not isinstance(seconds, int) or isinstance(seconds, bool):
        return None  # a holder that never said when it took it or for how long holds nothing
    until = since + dt.timedelta(seconds=seconds)
    return Held(holder, until) if until > now and not gone(holder) else None


def taken_spec(*, me: str, now: dt.datetime, previous: dict[str, Any] | None) -> dict[str, Any]:
    """The Lease's `spec` once `me` takes it; `leaseTransitions` counts the changes of holder."""
    spec = (previous or {}).get("spec") or {}
    transitions = spec.get("leaseTransitions") or 0
    changed = (spec.get("holderIdentity") or "") != me
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"holderIdentity": me, "leaseDurationSeconds": LEASE_SECONDS,
            "acquireTime": stamp if changed else spec.get("acquireTime", stamp), "renewTime": stamp,
            "leaseTransitions": int(transitions) + (1 if changed and spec.get("holderIdentity") else 0)}
