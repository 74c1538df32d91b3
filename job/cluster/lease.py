"""The run Lease on the API: taken by a run's first write (waiting while another live run holds it), renewed while
the run works, given back at the end. A run with nothing to write never asks for it: the steady state pays no
request for it. Whether it may be taken is `job.decide.lease`'s; this module only reads and writes it.

Taking it carries the resourceVersion it read (a create: none exists yet), so two runs that find it free at the
same moment cannot both take it: one gets 409 and reads again. Renewing it is one JSON patch that first tests
that this run still holds it: the API server applies the test and the change to the Lease as stored, so a
renewal can never take back a Lease another run has taken. The wait polls once a second, bounded by the
caller: it is a wait for another run to finish, not a retry of a failed request (those are the client's,
`job.cluster.kube`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from collections import Counter
from typing import Any

from job.cluster.kube import Kube
from job.decide.lease import (
    LEASE_NAME,
    RENEW_DEADLINE_SECONDS,
    RENEW_SECONDS,
    Held,
    Holder,
    held_by_other,
    pod_is_gone,
    renewal_of,
    stamp,
    taken_spec,
)
from job.errors import ApiError, Conflict

log = logging.getLogger(__name__)

VERSION = "coordination.k8s.io/v1"
PLURAL = "leases"
POLL_SECONDS = 1.0
#: how soon a renewal that failed is tried again (within `RENEW_DEADLINE_SECONDS` of the last one that worked)
RETRY_RENEW_SECONDS = 1.0
#: how long one renewal may take: a request that hangs (a server going away mid-answer) must not use up the
#: renew deadline by itself, so it is given up soon and tried again
RENEW_TIMEOUT_SECONDS = 2.0
#: a renewal's answers that mean the Lease is no longer this run's: its test failed (422: another holder), the
#: Lease was deleted (404), or changed under it (409)
_TAKEN_OVER = frozenset({404, 409, 422})


def identity(*, pod_name: str | None = None, pod_uid: str | None = None) -> str:
    """Who this run is: its Pod's name and uid when it runs in one (the downward API), else its host's name; and
    its process id."""
    return str(Holder(pod_name or socket.gethostname(), str(os.getpid()), pod_uid))


def _process_gone(holder: Holder) -> bool:
    """Whether `holder` was a process of this host that no longer exists (killed before it gave the Lease back)."""
    if holder.name != socket.gethostname() or not holder.pid.isdigit():
        return False
    try:
        os.kill(int(holder.pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def holder_gone(kube: Kube, namespace: str, identity_: str) -> bool:
    """Rule 5 of `job.decide.lease`: a run in a Pod is read back from the Pod (same namespace as the Lease: every
    run in a Pod runs in nsscaler's own namespace); a process from this host's process table. What cannot be
    read is not gone: the Lease's expiry still frees it."""
    holder = Holder.parse(identity_)
    if not holder.pod_uid:
        return _process_gone(holder)
    try:
        pod: dict[str, Any] | None = kube.get(version="v1", plural="pods", namespace=namespace, name=holder.name)
    except ApiError as exc:
        if exc.status != 404:
            log.debug("cannot read the Lease holder's Pod %s: %s", holder.name, exc)
            return False
        pod = None
    return pod_is_gone(pod, holder)


def _read(kube: Kube, namespace: str) -> dict[str, Any] | None:
    try:
        return kube.get(version=VERSION, plural=PLURAL, namespace=namespace, name=LEASE_NAME)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


class _Watch:
    """What a waiting run has seen of the Lease: since when (its own clock) it has looked the same."""

    def __init__(self) -> None:
        self.seen: tuple[str, str] | None = None
        self.since = time.monotonic()

    def unrenewed_for(self, lease: dict[str, Any] | None) -> float:
        now, key = time.monotonic(), renewal_of(lease)
        if key != self.seen:
            self.seen, self.since = key, now
        return now - self.since


def _try_take(kube: Kube, namespace: str, *, me: str, watch: _Watch) -> Held | None:
    """One attempt: None when this run now holds the Lease, else who does."""
    lease = _read(kube, namespace)
    now = dt.datetime.now(dt.UTC)
    held = held_by_other(lease, me=me, now=now, unrenewed_for=watch.unrenewed_for(lease))
    if held is not None and not holder_gone(kube, namespace, held.holder):
        return held
    if held is not None:
        log.warning("the run Lease names %s, whose Pod or process is gone: this run takes it over", held.holder,
                    extra={"event": "lease-taken-over", "holder": held.holder})
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
        again = _read(kube, namespace)
        return held_by_other(again, me=me, now=dt.datetime.now(dt.UTC)) or Held("another run", None)
    return None


def take(kube: Kube, namespace: str, *, me: str, wait: float) -> Held | None:
    """Take the Lease, waiting at most `wait` seconds while another live run holds it: None once taken, else who
    holds it still. It follows the holder's renewals: a holder that stops renewing, or whose Pod goes, frees it
    within seconds."""
    give_up, watch, said = time.monotonic() + wait, _Watch(), ""
    while (held := _try_take(kube, namespace, me=me, watch=watch)) is not None:
        if time.monotonic() + POLL_SECONDS > give_up:
            return held
        if held.holder != said:  # once per holder, not once a second
            said = held.holder
            log.info("another run holds the run Lease (%s); waiting at most %.0fs", held, wait,
                     extra={"event": "lease-waiting", "holder": held.holder})
        time.sleep(POLL_SECONDS)
    return None


def renew(kube: Kube, namespace: str, *, me: str) -> None:
    """One renewal: it fails (ApiError) unless this run still holds the Lease."""
    kube.json_patch(version=VERSION, plural=PLURAL, namespace=namespace, name=LEASE_NAME, operations=[
        {"op": "test", "path": "/spec/holderIdentity", "value": me},
        {"op": "replace", "path": "/spec/renewTime", "value": stamp(dt.datetime.now(dt.UTC))}],
        timeout=RENEW_TIMEOUT_SECONDS)


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
    """The Lease of one run: taken at most once, when the run first has something to write (`ensure`), renewed by
    a thread of its own while the run works, given back at the end if it was taken. A run that finds nothing to
    do never reads it.

    The run writes only while `holding()`: taken, and renewed within `RENEW_DEADLINE_SECONDS`. A renewal that is
    late (the API server restarting, a network blip) holds the run's writes back until a renewal works again, for
    at most `stale_wait`: a renewal is a JSON patch whose `test` is that the Lease still names this run, and only
    this run ever writes its own name there, so one that works proves no other run took the Lease in between. A
    renewal refused (another run holds it, or it was deleted) or a wait that runs out loses the Lease for good."""

    def __init__(self, kube: Kube, namespace: str, *, wait: float, me: str | None = None,
                 stale_wait: float = 60.0) -> None:
        self.kube, self.namespace, self.wait, self.stale_wait = kube, namespace, wait, stale_wait
        self.me = me or identity()
        #: this run took it (and has not given it back)
        self.taken = False
        #: this run waited for another run before it took it: what it read before may be stale
        self.waited = False
        #: another run held it all the while this run could wait
        self.held_by: Held | None = None
        #: why this run no longer holds the Lease it took (a renewal refused, or late for all of `stale_wait`)
        self.lost: str | None = None
        #: the requests the Lease cost this run, by verb (in the run's own counts too)
        self.requests: Counter[str] = Counter()
        self._renewed = 0.0  # time.monotonic() of the last renewal that worked (its request's start)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._lock = threading.Lock()
        self._renewal = threading.Condition(self._lock)  # told of every renewal that worked, and of a loss

    def ensure(self) -> bool:
        """Whether this run holds the Lease now, taking it if it has not tried yet."""
        if self.taken or self.held_by is not None:
            return self.holding()
        started, before = time.monotonic(), self.kube.requests.snapshot()
        try:
            self.held_by = take(self.kube, self.namespace, me=self.me, wait=self.wait)
        finally:
            self._count(before)
        self.taken = self.held_by is None
        self.waited = time.monotonic() - started >= POLL_SECONDS
        if self.taken:
            self._renewed = started if not self.waited else time.monotonic()
            self._renewer = threading.Thread(target=self._renew_while_running, name="lease", daemon=True)
            self._renewer.start()
        return self.taken

    def holding(self) -> bool:
        """Whether this run may write now: it took the Lease and renewed it in time. While a renewal is late,
        this waits for one that works (at most `stale_wait`)."""
        with self._lock:
            give_up = time.monotonic() + self.stale_wait
            while self.taken and self.lost is None and time.monotonic() - self._renewed > RENEW_DEADLINE_SECONDS:
                if time.monotonic() >= give_up:
                    self.lost = f"not renewed for {RENEW_DEADLINE_SECONDS + self.stale_wait:.0f}s"
                    self._renewal.notify_all()
                    break
                self._renewal.wait(timeout=min(RETRY_RENEW_SECONDS, max(0.0, give_up - time.monotonic())))
            return self.taken and self.lost is None

    def _renew_while_running(self) -> None:
        pause = RENEW_SECONDS
        while not self._stop.wait(pause) and self.lost is None:
            sent = time.monotonic()
            with self._lock:
                self.requests["patch"] += 1
            try:
                renew(self.kube, self.namespace, me=self.me)
            except ApiError as exc:
                if exc.status in _TAKEN_OVER:
                    with self._lock:
                        self.lost = f"another run took it over, or it was deleted: {exc}"
                        self._renewal.notify_all()
                    break
                log.warning("could not renew the run Lease (trying again): %s", exc, extra={"event": "lease"})
                pause = RETRY_RENEW_SECONDS
                continue
            with self._lock:
                if self.lost is None:
                    self._renewed = max(self._renewed, sent)
                    self._renewal.notify_all()
            pause = RENEW_SECONDS
        if self.lost:
            log.error("this run lost the run Lease (%s): it sends no more changes; the next run goes on", self.lost,
                      extra={"event": "lease-lost", "why": self.lost})

    def give_back(self) -> None:
        if self._renewer is not None:
            self._stop.set()
            self._renewer.join(timeout=RENEW_DEADLINE_SECONDS)
        if self.taken:
            before = self.kube.requests.snapshot()
            if self.lost is None:
                give_back(self.kube, self.namespace, me=self.me)
            self._count(before)
            self.taken = False

    def _count(self, before: dict[str, int]) -> None:
        after = self.kube.requests.snapshot()
        with self._lock:
            self.requests.update({verb: n - before.get(verb, 0) for verb, n in after.items()
                                  if n > before.get(verb, 0)})
