"""Carrying out a decision: one merge PATCH per write, concurrently, step by step; on 409 one re-read of that
object and a fresh decision about it (`job.decide.decision.again`, given by the caller: never a blind retry of
a stale patch). Then the statuses and the Events, from this one place. Logs one line per change.

Nothing here decides: which writes, in which steps, what a write waits for and what a 409 turns it into
all come from `job.decide`."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from job.cluster.access import explain_forbidden
from job.cluster.kube import Kube
from job.decide import trials
from job.decide.actions import Action, ActionResult
from job.decide.decision import Write
from job.decide.events import Event
from job.errors import ApiError, Conflict
from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.kinds import Kind
from job.model.settings import Settings
from job.model.wake import Wake

log = logging.getLogger(__name__)

#: what a write becomes after a 409, from its object read again: a new action, None (nothing left to do), or
#: why it cannot be done
Again = Callable[[Write, dict[str, Any]], Action | str | None]


def carry_out(kube: Kube, steps: Sequence[Sequence[Write]], *, settings: Settings, again: Again,
              stop_at: float | None = None, holding: Callable[[], bool] = lambda: True) -> list[ActionResult]:
    """Every step's writes, each step after the one before; results in the order of the writes, the ones a
    failed earlier write held back after the others of their step. Past `stop_at` (`time.monotonic()`: the
    soft deadline), or once the run no longer `holding` its run Lease, no write is sent: each one left is
    `deferred` to the next run. A PATCH records and changes in one write, so stopping between two leaves
    nothing half-recorded."""
    results: list[ActionResult] = []
    done: dict[int, ActionResult] = {}
    for step in steps:
        blocked = [w for w in step if w.after is not None and id(w.after) in done
                   and w.blocked_by(done[id(w.after)])]
        held = {id(w) for w in blocked}
        sendable = [w for w in step if id(w) not in held]
        sent = _send_all(kube, sendable, settings=settings, again=again, stop_at=stop_at, holding=holding)
        done.update((id(w.action), r) for w, r in zip(sendable, sent, strict=True))
        results += sent
        results += [_logged(w.action, "failed", f"{w.held_back} ({done[id(w.after)].message})")
                    for w in blocked if w.held_back and w.after is not None]
    return results


def try_rows(kube: Kube, tries: Sequence[Action]) -> dict[Kind, tuple[Action, str]]:
    """Each write of `tries` (`job.decide.trials`) sent with `dryRun=All`: the kinds whose freeze the API server
    refuses, with the write tried and why. Any other answer (applied, a conflict, gone, not now) says nothing
    against the row: the real write meets it."""
    refused: dict[Kind, tuple[Action, str]] = {}
    for action in tries:
        handler, w = action.workload.handling, action.workload
        try:
            kube.patch(version=handler.api_version, plural=handler.plural, namespace=w.namespace, name=w.name,
                       body=action.patch, dry_run=True)
        except ApiError as exc:
            if exc.status in trials.REFUSALS:
                refused[w.kind] = (action, trials.refusal(action, str(exc)))
    return refused


def _send_all(kube: Kube, writes: list[Write], *, settings: Settings, again: Again,
              stop_at: float | None, holding: Callable[[], bool]) -> list[ActionResult]:
    """Only a few writes per thread are in flight at once (an executor's `map` would queue one future per
    write: 40,000 of them in a large first run)."""
    if not writes:
        return []
    results: list[ActionResult] = []
    in_flight: deque[Future[ActionResult]] = deque()
    window = settings.concurrency * 4
    with ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="patch") as pool:
        for write in writes:
            if len(in_flight) >= window:
                results.append(in_flight.popleft().result())
            if stop_at is not None and time.monotonic() >= stop_at:
                in_flight.append(pool.submit(_deferred, write.action, DEADLINE))
                continue
            in_flight.append(pool.submit(_send_holding, kube, write, settings=settings, again=again,
                                         holding=holding))
        results += (f.result() for f in in_flight)
    return results


DEADLINE = "not sent: the run reached its soft deadline; the next run goes on"
LEASE_LOST = "not sent: the run lost its run Lease (not renewed in time, or taken over); the next run goes on"


def _deferred(action: Action, why: str) -> ActionResult:
    return ActionResult(action, "deferred", why)


def _send_holding(kube: Kube, write: Write, *, settings: Settings, again: Again,
                  holding: Callable[[], bool]) -> ActionResult:
    """Asked as the write is about to go, not when it was queued: a write queued before the run lost its Lease
    is not sent after."""
    if not holding():
        return _deferred(write.action, LEASE_LOST)
    return _send(kube, write, settings=settings, again=again)


def _send(kube: Kube, write: Write, *, settings: Settings, again: Again) -> ActionResult:
    action = write.action
    for _ in range(settings.conflict_retries + 1):
        handler, w = action.workload.handling, action.workload
        try:
            kube.patch(version=handler.api_version, plural=handler.plural, namespace=w.namespace, name=w.name,
                       body=action.patch, dry_run=action.dry_run)
        except Conflict:
            try:
                fresh = kube.get(version=handler.api_version, plural=handler.plural, namespace=w.namespace,
                                 name=w.name)
            except ApiError as exc:
                return _logged(action, "gone" if exc.status == 404 else "failed", str(exc))
            next_action = again(write, fresh)
            if isinstance(next_action, str):
                return _logged(action, "failed", next_action)
            if next_action is None:
                return _logged(action, "settled", "changed concurrently; nothing left to do")
            action = next_action
            continue
        except ApiError as exc:
            if exc.status == 404:
                return _logged(action, "gone", "deleted during the run")
            return _logged(action, "failed", str(exc))
        return _logged(action, "dry-run" if action.dry_run else "applied")
    return _logged(action, "failed", f"still conflicting after {settings.conflict_retries} re-reads")


def _logged(action: Action, outcome: str, message: str = "") -> ActionResult:
    w, handler = action.workload, action.workload.handling
    before, after = handler.describe(w.size), handler.describe(action.after)
    fields = {"event": action.verb.value, "outcome": outcome, "policy": action.policy, "namespace": w.namespace,
              "kind": w.kind.value, "workload": w.name, "before": before, "after": after, "reason": action.reason}
    if outcome == "failed":
        log.error("%s %s failed: %s", action.verb.value, w.ref, message, extra=fields)
    else:
        log.info("%s %s: %s -> %s (%s)%s", action.verb.value, w.ref, before, after, action.reason,
                 f" [{outcome}]" if outcome != "applied" else "", extra=fields)
    return ActionResult(action, outcome, message)


def write_statuses(kube: Kube, bodies: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """Each NSScaler's status; returns, per policy, why its status could not be written. A policy deleted
    during the run has no status to write, and that is no failure."""
    failed = {}
    for name, status in bodies:
        try:
            kube.patch_status(version=policy_api.API_VERSION, plural=policy_api.PLURAL, name=name, status=status)
        except ApiError as exc:
            explain_forbidden(kube, exc)  # a permission missing: exit 2, naming it
            if exc.status != 404:
                failed[name] = str(exc)
                log.error("could not write the status of NSScaler %s: %s", name, exc,
                          extra={"event": "status-failed", "policy": name})
    return failed


def write_wake_statuses(kube: Kube, updates: Iterable[tuple[Wake, dict[str, Any]]]) -> None:
    """Each changed Wake's status. A Wake deleted during the run (a `sleep`) has none to write; any other
    failure is logged and the next run writes it again (the Wake's status is a courtesy, the decision is made)."""
    for wake, status in updates:
        try:
            kube.patch_status(version=policy_api.API_VERSION, plural=wake_api.PLURAL, name=wake.name,
                              namespace=wake.namespace, status=status)
        except ApiError as exc:
            explain_forbidden(kube, exc)
            if exc.status != 404:
                log.warning("could not write the status of Wake %s/%s: %s", wake.namespace, wake.name, exc,
                            extra={"event": "wake-status-failed", "namespace": wake.namespace, "wake": wake.name})


def send_events(kube: Kube, events: Iterable[Event], *, now: dt.datetime) -> None:
    explained = False
    for event in events:
        try:
            kube.create_event(namespace=event.namespace, involved=dict(event.involved), reason=event.reason,
                              message=event.message, warning=event.warning, now=now)
        except ApiError as exc:  # an Event is a courtesy: never fail a run for it (unless a permission is missing)
            if not explained:  # one access review, however many Events are refused
                explain_forbidden(kube, exc)
                explained = exc.status == 403
            log.warning("could not record Event %s on %s: %s", event.reason, event.involved["name"], exc,
                        extra={"event": "event-failed"})
