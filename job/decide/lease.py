"""Whether a run may take the cluster-wide run Lease (pure: the Lease as read, who asks, what is known of its
holder, and `now`).

At most one run writes at a time: the scheduled CronJob's, a wake's Job (created by hand or by the waker, which
the CronJob's `concurrencyPolicy` does not cover) and a person's `nsscaler` on a laptop all take one
`coordination.k8s.io/v1` Lease first. The Lease lives with its holder: it is short (`LEASE_SECONDS`) and the
holder renews it every `RENEW_SECONDS` while it works, so a holder that dies (a Pod force-deleted, OOM-killed,
preempted, its node lost) frees it within seconds. Rules:
1. No Lease, or one nobody holds (`holderIdentity` empty): free.
2. A Lease this run holds already: free (taking it again renews it).
3. A Lease whose `renewTime` (else `acquireTime`) plus `leaseDurationSeconds` has passed by the server's
   stamps: free.
4. A Lease that this run has watched for `leaseDurationSeconds` without seeing it renewed: free. This is the
   rule that does not trust two clocks to agree: the waiting run measures on its own clock, from the moment it
   first read the Lease as it is now.
5. A Lease whose holder is known to be gone: its Pod no longer exists, is another Pod of the same name (another
   uid), or has terminated; or it was a process of this host that no longer exists. Free at once.
6. Otherwise it is held, and the answer names the holder and until when.

The holder keeps writing only while its Lease is surely its own (`renew_deadline`): a renewal that has not
succeeded within `RENEW_DEADLINE_SECONDS` of the last one stops the run's writes before another run could
take the Lease (rule 3 or 4) and write beside it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from job.model.activity import parse_time

#: where the Lease lives: the job's own namespace, under this name
LEASE_NAME = "nsscaler-run"
#: how long a Lease holds once its holder stops renewing it (it crashed, its Pod was deleted)
LEASE_SECONDS = 15
#: how often the holder renews it while the run works: often enough that a short outage of the API server (a
#: restart: a few seconds) leaves several tries before `RENEW_DEADLINE_SECONDS` (controller-runtime's leader
#: election uses the same 15/10/2)
RENEW_SECONDS = 2.0
#: how long after its last successful renewal the holder still writes: well inside `LEASE_SECONDS`, so that a
#: holder cut off from the API server stops writing before anyone else may take the Lease
RENEW_DEADLINE_SECONDS = 10.0

#: a holder's Pod phases that mean it runs no more (restartPolicy Never: it will not start again)
_ENDED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Holder:
    """Who holds the Lease, as its `holderIdentity` says: `<name>/<pid>` for a process (its host's name), and
    `<name>/<pid>/<uid>` for a run in a Pod (the Pod's name and uid, from the downward API)."""

    name: str
    pid: str
    pod_uid: str | None = None

    def __str__(self) -> str:
        return "/".join(p for p in (self.name, self.pid, self.pod_uid) if p)

    @classmethod
    def parse(cls, identity: str) -> Holder:
        name, _, rest = identity.partition("/")
        pid, _, uid = rest.partition("/")
        return cls(name, pid, uid or None)


@dataclass(frozen=True)
class Held:
    """Rule 6: someone else holds the Lease."""

    holder: str
    until: dt.datetime | None

    def __str__(self) -> str:
        when = f" until {self.until.isoformat()}" if self.until else ""
        return f"{self.holder}{when} (renewed while it runs)"


def spec_of(lease: dict[str, Any] | None) -> dict[str, Any]:
    return dict((lease or {}).get("spec") or {})


def renewal_of(lease: dict[str, Any] | None) -> tuple[str, str]:
    """What changes each time the Lease is renewed or changes hands: a run that waits compares these to tell a
    live holder (it changes every `RENEW_SECONDS`) from a dead one (it never changes again)."""
    spec = spec_of(lease)
    return str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or spec.get("acquireTime") or "")


def held_by_other(lease: dict[str, Any] | None, *, me: str, now: dt.datetime, gone: bool = False,
                  unrenewed_for: float = 0.0) -> Held | None:
    """None when `me` may take the Lease (rules 1 to 5), else who holds it (rule 6). `gone`: the holder is known
    to be gone (rule 5); `unrenewed_for`: seconds this run has watched the Lease as it is now (rule 4)."""
    spec = spec_of(lease)
    holder = spec.get("holderIdentity") or ""
    if not holder or holder == me:
        return None
    since = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    seconds = spec.get("leaseDurationSeconds")
    if since is None or not isinstance(seconds, int) or isinstance(seconds, bool):
        return None  # a holder that never said when it took it or for how long holds nothing
    until = since + dt.timedelta(seconds=seconds)
    if until <= now or unrenewed_for >= seconds or gone:
        return None
    return Held(holder, until)


def pod_is_gone(pod: dict[str, Any] | None, holder: Holder) -> bool:
    """Rule 5 for a run in a Pod: its Pod as read (None: not found) says it runs no more."""
    if pod is None:
        return True
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if holder.pod_uid and meta.get("uid") != holder.pod_uid:
        return True  # another Pod under the same name: the holder's own is gone
    if status.get("phase") in _ENDED_PHASES:
        return True
    containers = status.get("containerStatuses") or []
    return bool(containers) and all("terminated" in (c.get("state") or {}) for c in containers)


def stamp(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def taken_spec(*, me: str, now: dt.datetime, previous: dict[str, Any] | None) -> dict[str, Any]:
    """The Lease's `spec` once `me` takes it (or renews it); `leaseTransitions` counts the changes of holder."""
    spec = spec_of(previous)
    transitions = spec.get("leaseTransitions") or 0
    changed = (spec.get("holderIdentity") or "") != me
    at = stamp(now)
    return {"holderIdentity": me, "leaseDurationSeconds": LEASE_SECONDS,
            "acquireTime": at if changed else spec.get("acquireTime", at), "renewTime": at,
            "leaseTransitions": int(transitions) + (1 if changed and spec.get("holderIdentity") else 0)}
