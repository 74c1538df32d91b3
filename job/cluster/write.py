"""Sending the plan: one merge PATCH per action, concurrently; on 409 one re-read of that object and a
fresh decision about it (never a blind retry of a stale patch). Logs one line and, within a budget, one
Event per change."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from job.cluster.kube import Kube
from job.decide.plan import Action, Verb, make_plan
from job.decide.selection import Selection
from job.errors import ApiError, Conflict
from job.model.kinds import MalformedRecord
from job.model.policy import InvalidPolicy, Policy
from job.model.settings import Settings
from job.model.workloads import Namespace, from_api

log = logging.getLogger(__name__)

#: what to do after a 409, from the object read again: a new action, None (nothing left), or why not
Replan = Callable[[dict[str, Any]], Action | str | None]
_EVENT = {Verb.FREEZE: ("Frozen", "froze"), Verb.RESTORE: ("Restored", "restored"),
          Verb.PAUSE: ("Paused", "paused the ScaledObject"), Verb.RESUME: ("Resumed", "resumed the ScaledObject")}


@dataclass(slots=True)
class ActionResult:
    action: Action
    outcome: str  # applied | dry-run | settled | gone | failed
    message: str = ""


def record_event(kube: Kube, *, now: dt.datetime, namespace: str, involved: dict[str, str], reason: str,
                 message: str, warning: bool) -> None:
    try:
        kube.create_event(namespace=namespace, involved=involved, reason=reason, message=message, warning=warning,
                          now=now)
    except ApiError as exc:  # an Event is a courtesy: never fail a freeze for it
        log.warning("could not record Event %s on %s: %s", reason, involved["name"], exc,
                    extra={"event": "event-failed"})


class Applier:
    """Sends actions, concurrently; on 409 re-reads that one object and decides again."""

    def __init__(self, kube: Kube, settings: Settings, *, policies: Sequence[Policy | InvalidPolicy],
                 namespaces: Sequence[Namespace], now: dt.datetime, selection: Selection | None = None,
                 excluded_owners: frozenset[tuple[str, str, str]] = frozenset()) -> None:
        self.kube, self.settings, self.policies, self.namespaces, self.now = kube, settings, policies, namespaces, now
        self.selection = selection  # the run's selection: a re-read workload is judged as the others were
        self.excluded_owners = excluded_owners  # ... and so is its owner's exclude annotation
        self._event_budget = threading.Semaphore(settings.workload_events_limit if settings.events else 0)

    def replan_workload(self, action: Action) -> Replan:
        """The planner's own decision about the object as it is now."""
        def replan(fresh: dict[str, Any]) -> Action | str | None:
            again = make_plan(self.policies, namespaces=self.namespaces,
                              workloads=[from_api(action.workload.handling, fresh)], settings=self.settings,
                              now=self.now, selection=self.selection, excluded_owners=self.excluded_owners)
            if again.problems:
                return again.problems[0].message
            return again.actions[0] if again.actions else None
        return replan

    def apply(self, actions: list[Action], replans: list[Replan] | None = None) -> list[ActionResult]:
        """`replans[i]` decides again for `actions[i]` after a 409 (default: the planner). Results come in
        the order of `actions`; only a few actions per thread are in flight at once (an executor's `map`
        would queue one future per action: 40,000 of them in a large first run)."""
        if not actions:
            return []
        results: list[ActionResult] = []
        in_flight: deque[Future[ActionResult]] = deque()
        window = self.settings.concurrency * 4
        with ThreadPoolExecutor(max_workers=self.settings.concurrency, thread_name_prefix="patch") as pool:
            for i, action in enumerate(actions):
                if len(in_flight) >= window:
                    results.append(in_flight.popleft().result())
                in_flight.append(pool.submit(self._apply_one, action, replans[i] if replans else None))
            results += (f.result() for f in in_flight)
        return results

    def _apply_one(self, action: Action, replan: Replan | None) -> ActionResult:
        replan = replan or self.replan_workload(action)
        for _ in range(self.settings.conflict_retries + 1):
            handler, w = action.workload.handling, action.workload
            try:
                self.kube.patch(version=handler.api_version, plural=handler.plural, namespace=w.namespace,
                                name=w.name, body=action.patch, dry_run=action.dry_run)
            except Conflict:
                try:
                    fresh = self.kube.get(version=handler.api_version, plural=handler.plural,
                                          namespace=w.namespace, name=w.name)
                    again = replan(fresh)
                except ApiError as exc:
                    return self._result(action, "gone" if exc.status == 404 else "failed", str(exc))
                except MalformedRecord as exc:
                    again = str(exc)
                if isinstance(again, str):
                    return self._result(action, "failed", again)
                if again is None:
                    return self._result(action, "settled", "changed concurrently; nothing left to do")
                action = again
                continue
            except ApiError as exc:
                if exc.status == 404:
                    return self._result(action, "gone", "deleted during the run")
                return self._result(action, "failed", str(exc))
            return self._result(action, "dry-run" if action.dry_run else "applied")
        return self._result(action, "failed", f"still conflicting after {self.settings.conflict_retries} re-reads")

    def _result(self, action: Action, outcome: str, message: str = "") -> ActionResult:
        w, handler = action.workload, action.workload.handling
        before, after = handler.describe(w.size), handler.describe(action.after)
        fields = {"event": action.verb.value, "outcome": outcome, "policy": action.policy, "namespace": w.namespace,
                  "kind": w.kind.value, "workload": w.name, "before": before, "after": after, "reason": action.reason}
        if outcome == "failed":
            log.error("%s %s failed: %s", action.verb.value, w.ref, message, extra=fields)
        else:
            log.info("%s %s: %s -> %s (%s)%s", action.verb.value, w.ref, before, after, action.reason,
                     f" [{outcome}]" if outcome != "applied" else "", extra=fields)
        event = _EVENT.get(action.verb)
        if outcome == "applied" and event and self._event_budget.acquire(blocking=False):
            involved = {"apiVersion": handler.api_version, "kind": w.kind.short, "name": w.name,
                        "namespace": w.namespace, "uid": w.uid}
            record_event(self.kube, now=self.now, namespace=w.namespace, involved=involved, warning=False,
                         reason=event[0], message=f"NSScaler {action.policy} {event[1]} {w.kind.short} {w.name}: "
                                              f"{before} -> {after} ({action.reason})")
        return ActionResult(action, outcome, message)
