"""The run Lease on the API: taken by a run's first write (waiting a bounded time while another run holds it),
given back at the end. A run with nothing to write never asks for it: the steady state pays no request for it.
Whether it may be taken is `job.decide.lease`'s; this module only reads and writes it.

Every write carries the resourceVersion it read (a create: none exists yet), so two runs that find it free at
the same moment cannot both take it: one gets 409 and reads again. The wait polls once a second, bounded by
the caller: it is a wait for another run to finish, not a retry of a failed request (those are the
client's, `job.cluster.kube`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time
from collections import Counter
from typing import Any

from job.cluster.kube import Kube
from job.decide.lease import LEASE_NAME, Held, held_by_other, taken_spec
from job.errors import ApiError, Conflict

log = logging.getLogger(__name__)

VERSION = "coordination.k8s.io/v1"
PLURAL = "leases"
POLL_SECONDS = 1.0


def identity() -> str:
    """Who this run is: its Pod's name (the hostname in a Pod) and its process id."""
    return f"{socket.gethostname()}/{os.getpid()}"


def gone(holder: str) -> bool:
    """Whether `holder` was a process of this host that no longer exists (killed before it gave the Lease back)."""
    host, _, pid = holder.rpartition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _read(kube: Kube, namespace: str) -> dict[str, Any] | None:
    try:
        return kube.get(version=VERSION, plural=PLURAL, namespace=namespace, name=LEASE_NAME)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def _try_take(kube: Kube, namespace: str, *, me: str) -> Held | None:
    """One attempt: None when this run now holds the Lease, else who does."""
    lease = _read(kube, namespace)
    now = dt.datetime.now(dt.UTC)
    held = held_by_other(lease, me=me, now=now, gone=gone)
    if held is not None:
        return held
    spec = taken_spec(me=me, now=now, previous=lease)
    try:
        if lease is None:
            kube.create(version=VERSION, plural=PLURAL, namespace=namespace, body={
                "apiVersion": VERSION, "kind": "Lease", "metadata": {"name": LEASE_NAME, "namespace": namespace},
                "spec": spec})
        else:
            kube.patch(version=VERSION, plural=PLURAL, namespace=namespace, name=LEASE_NAME, dry_run=False, body={
                "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": spec})
    except Conflict:  # another run took it between the read and the write (a create: 409 AlreadyExists)
        now = dt.datetime.now(dt.UTC)
        return held_by_other(_read(kube, namespace), me=me, now=now, gone=gone) or Held("another run", None)
    return None


def take(kube: Kube, namespace: str, *, me: str, wait: float) -> Held | None:
    """Take the Lease, waiting at most `wait` seconds while another run holds it: None once taken, else who
    holds it still."""
    give_up = time.monotonic() + wait
    while (held := _try_take(kube, namespace, me=me)) is not None:
        if time.monotonic() + POLL_SECONDS > give_up:
            return held
        log.info("another run holds the run Lease (%s); waiting", held, extra={"event": "lease-waiting"})
        time.sleep(POLL_SECONDS)
    return None


def give_back(kube: Kube, namespace: str, *, me: str) -> None:
    """Release the Lease if this run still holds it (a failure is only logged: it expires by itself)."""
    try:
        lease = _read(kube, namespace)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != me:
            return
        kube.patch(version=VERSION, plural=PLURAL, namespace=namespace, name=LEASE_NAME, dry_run=False, body={
            "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
            "spec": {"holderIdentity": None, "renewTime": None}})
    except ApiError as exc:
        log.warning("could not give back the run Lease (it expires by itself): %s", exc, extra={"event": "lease"})


class RunLease:
    """The Lease of one run: taken at most once, when the run first has something to write (`ensure`), given back
    at the end if it was taken. A run that finds nothing to do never reads it."""

    def __init__(self, kube: Kube, namespace: str, *, wait: float) -> None:
        self.kube, self.namespace, self.wait = kube, namespace, wait
        self.me = identity()
        #: this run holds it
        self.taken = False
        #: this run waited for another run before it took it: what it read before may be stale
        self.waited = False
        #: another run held it all the while this run could wait
        self.held_by: Held | None = None
        #: the requests the Lease cost this run, by verb (in the run's own counts too)
        self.requests: Counter[str] = Counter()

    def ensure(self) -> bool:
        """Whether this run holds the Lease now, taking it if it has not tried yet."""
        if self.taken or self.held_by is not None:
            return self.taken
        started, before = time.monotonic(), self.kube.requests.snapshot()
        try:
            self.held_by = take(self.kube, self.namespace, me=self.me, wait=self.wait)
        finally:
            self._count(before)
        self.taken = self.held_by is None
        self.waited = time.monotonic() - started >= POLL_SECONDS
        return self.taken

    def give_back(self) -> None:
        if self.taken:
            before = self.kube.requests.snapshot()
            give_back(self.kube, self.namespace, me=self.me)
            self._count(before)
            self.taken = False

    def _count(self, before: dict[str, int]) -> None:
        after = self.kube.requests.snapshot()
        self.requests.update({verb: n - before.get(verb, 0) for verb, n in after.items() if n > before.get(verb, 0)})
