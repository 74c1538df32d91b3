"""The Kubernetes Events of a run, as a list (pure): what to say, about which object, within the budget.

They are built once the run knows what happened (the write results and every policy's outcome) and sent
from one place (`job.cluster.write.send_events`). An Event is a courtesy: the logs and the statuses carry
the same facts, so the budget (`--workload-events-limit`) only bounds how much a large run writes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from job.decide import drain, syncs
from job.decide.actions import ActionResult, Verb
from job.decide.outcome import PolicyOutcome
from job.decide.waking import WakeVerdict
from job.model import policy as policy_api
from job.model.settings import Settings
from job.model.wake import STATE_ACTIVE, STATE_EXPIRED, STATE_IGNORED, Wake

#: where Events about cluster-scoped objects (the NSScalers) go, as kubectl expects
CLUSTER_EVENTS_NAMESPACE = "default"
#: the Warning Event on a frozen workload found scaled up again
REASON_REVERTED = "ScaledUpWhileFrozen"
_CHANGE = {Verb.FREEZE: ("Frozen", "froze"), Verb.RESTORE: ("Restored", "restored"),
           Verb.PAUSE: ("Paused", "paused the ScaledObject"), Verb.RESUME: ("Resumed", "resumed the ScaledObject")}


@dataclass(frozen=True, slots=True)
class Event:
    namespace: str
    involved: Mapping[str, str]
    reason: str
    message: str
    warning: bool = False


def of_run(results: Sequence[ActionResult], outcomes: Iterable[PolicyOutcome], *, settings: Settings,
           wakes: Iterable[WakeVerdict] = ()) -> list[Event]:
    """Every Event of a run: one per applied change and one per revert (each within the workload budget),
    one or two per policy, then one per Wake whose state this run changed."""
    if not settings.events:
        return []
    limit = settings.workload_events_limit
    outcomes = list(outcomes)
    return [*changes(results)[:limit], *reverts(list(results))[:limit],
            *refused_syncs(outcomes, listed=settings.status_list_limit)[:limit],
            *of_policies(outcomes, listed=settings.status_list_limit), *of_wakes(wakes)]


#: the Warning Event on a GitOps object whose sync the hold refused
REASON_SYNC_REFUSED = "SyncRefused"


def refused_syncs(outcomes: Iterable[PolicyOutcome], *, listed: int | None = None) -> list[Event]:
    """A Warning Event on each GitOps object whose sync the hold refused, once per object and revision: the ones
    the policy's last status did not list so (`job.decide.syncs`, rule 4). Only those the status lists (`listed`,
    its list limit): one beyond it, which the next status would not list either, is said once it is listed."""
    events = []
    for outcome in outcomes:
        for r in syncs.new_refusals(outcome.syncs_refused[:listed], outcome.previous_status):
            a = r.attempt
            involved = {"apiVersion": a.kind.api_version, "kind": a.kind.kind, "name": a.name, "namespace": a.namespace,
                        "uid": a.uid}
            events.append(Event(a.namespace, involved, REASON_SYNC_REFUSED, r.message, warning=True))
    return events


_WAKE_REASONS = {STATE_ACTIVE: "Woken", STATE_EXPIRED: "WakeEnded", STATE_IGNORED: "WakeIgnored"}


def of_wakes(judged: Iterable[WakeVerdict]) -> list[Event]:
    """On the namespace, when a Wake's state changes: who woke it and until when, that the wake ended, or why
    it is ignored (a Warning)."""
    events = []
    for v in judged:
        if v.wake.status.get("state") == v.state or v.state not in _WAKE_REASONS:
            continue
        ns = v.wake.namespace
        involved = {"apiVersion": "v1", "kind": "Namespace", "name": ns, "namespace": ns}
        events.append(Event(ns, involved, _WAKE_REASONS[v.state], f"Wake {v.wake.name}: {v.message}",
                            warning=v.state == STATE_IGNORED))
    return events


#: the Warning Event on a waiting Wake's namespace when a run could not take the run Lease
REASON_LEASE_HELD = "RunLeaseHeld"


def of_lease_held(wakes: Iterable[Wake], *, holder: str, settings: Settings) -> list[Event]:
    """A run that gave up waiting for the run Lease writes no status; the people waiting for a Wake hear why on
    their namespace (the Wakes not yet Active: the holder's run, or the next one, makes them so)."""
    if not settings.events:
        return []
    waiting = {w.namespace: w for w in wakes if not w.invalid
               and w.status.get("state") not in (STATE_ACTIVE, STATE_EXPIRED, STATE_IGNORED)}
    return [Event(ns, {"apiVersion": "v1", "kind": "Namespace", "name": ns, "namespace": ns}, REASON_LEASE_HELD,
                  f"Wake {w.name}: a run found another run holding the run Lease ({holder}) and wrote nothing "
                  f"(exit 3); that run or the next one restores this namespace", warning=True)
            for ns, w in sorted(waiting.items())]


def changes(results: Iterable[ActionResult]) -> list[Event]:
    """A Normal Event on each workload or ScaledObject that a change was applied to."""
    events = []
    for r in results:
        said = _CHANGE.get(r.action.verb)
        if r.outcome != "applied" or said is None:
            continue
        w, handler = r.action.workload, r.action.workload.handling
        before, after = handler.describe(w.size), handler.describe(r.action.after)
        events.append(Event(w.namespace, _involved(w.kind.short, handler.api_version, w.name, w.namespace, w.uid),
                            said[0], f"NSScaler {r.action.policy} {said[1]} {w.kind.short} {w.name}: {before} -> "
                                     f"{after} ({r.action.reason})"))
    return events


def reverts(results: list[ActionResult]) -> list[Event]:
    """A Warning Event on each frozen workload found scaled up again and frozen again."""
    return [Event(involved["namespace"], involved, REASON_REVERTED, message, warning=True)
            for involved, message in drain.report_reverts(results)]


def of_policies(outcomes: Iterable[PolicyOutcome], *, listed: int | None = None) -> list[Event]:
    """On each NSScaler: a Warning when it failed or is invalid, a Normal one when it changed something.
    `listed`: the status's list limit (a `FreezeIncomplete` is said only of the objects the status lists)."""
    events = []
    for outcome in outcomes:
        involved = {"apiVersion": policy_api.API_VERSION, "kind": "NSScaler", "name": outcome.name,
                    "uid": outcome.uid}
        if not outcome.ok:
            reason = "InvalidSpec" if outcome.invalid else "ReconcileFailed"
            detail = outcome.invalid or outcome.cap_message or "; ".join(outcome.failures[:3])
            events.append(Event(CLUSTER_EVENTS_NAMESPACE, involved, reason, detail, warning=True))
        if outcome.frozen or outcome.restored:
            events.append(Event(CLUSTER_EVENTS_NAMESPACE, involved, "Reconciled",
                                f"froze {outcome.frozen} and restored {outcome.restored} workloads; "
                                f"{len(outcome.held)} namespaces held"))
        events += [Event(CLUSTER_EVENTS_NAMESPACE, involved, reason, message, warning=warning)
                   for reason, message, warning in _tiers(outcome)]
        events += [Event(CLUSTER_EVENTS_NAMESPACE, involved, REASON_EXCEPTION, message)
                   for message in _exception_started(outcome)]
        events += [Event(CLUSTER_EVENTS_NAMESPACE, involved, REASON_FREEZE_INCOMPLETE, message, warning=True)
                   for message in _newly_incomplete(outcome, listed)]
    return events


#: the Warning Event on an NSScaler when an operator has not reported a freeze done within its row's `within`
REASON_FREEZE_INCOMPLETE = "FreezeIncomplete"


def _newly_incomplete(outcome: PolicyOutcome, listed: int | None = None) -> list[str]:
    """Said once per object: when the last run's status did not name it in `freezeIncomplete` already. Only of
    those the status lists (`listed`, its list limit): one beyond it, which the next status would not name
    either, would be said again every run; it is said once it is listed."""
    before = {(e.get("namespace"), e.get("workload")) for e in outcome.previous_status.get("freezeIncomplete") or []
              if isinstance(e, dict)}
    return [f"{s.namespace} {s.workload}: its operator does not report it frozen {s.within:g} s after the freeze: "
            f"{s.reports}" for s in outcome.incomplete[:listed] if (s.namespace, s.workload) not in before]


#: the Event on an NSScaler when an exception starts deciding its day
REASON_EXCEPTION = "ExceptionStarted"


def _exception_started(outcome: PolicyOutcome) -> list[str]:
    """Said once per exception day: when today's exception is not the one the last run recorded."""
    today = outcome.selection.exception if outcome.selection is not None else None
    if today is None:
        return []
    before = outcome.previous_status.get("exception")
    if isinstance(before, dict) and (before.get("date"), before.get("action")) == (today.day.isoformat(),
                                                                                     today.action):
        return []
    return [f"{today.words()}: the family is {'held' if today.action == 'hold' else 'not held'} until the next "
            f"change{_at(outcome)}"]


def _at(outcome: PolicyOutcome) -> str:
    change = outcome.selection.next_change if outcome.selection is not None else None
    return f" at {change:%Y-%m-%dT%H:%MZ}" if change is not None else ""


#: the Events of a restore in tiers, on the NSScaler
REASON_TIER_WAITING, REASON_TIER_LATE = "RestoreTierWaiting", "RestoreTierLate"


def _tiers(outcome: PolicyOutcome) -> list[tuple[str, str, bool]]:
    """A Normal Event where a namespace's tier begins to wait (it did not wait at the run before), a Warning where
    one came back late."""
    before = {(e.get("namespace"), e.get("tier")) for e in outcome.previous_status.get("restoring") or []
              if isinstance(e, dict)}
    said = [(REASON_TIER_WAITING, f"{w.namespace}: restore tier {w.tier} ({w.pending} workloads) waits until "
                                  f"{', '.join(w.waiting_for[:5]) or 'the earlier tiers'} are available, at most "
                                  f"until {w.until:%Y-%m-%dT%H:%M:%SZ} (restore_wait)", False)
            for w in outcome.restoring if (w.namespace, w.tier) not in before and not w.dry_run]
    return said + [(REASON_TIER_LATE, f"{t.namespace}: restore {t.what} came back after restore_wait, before "
                                      f"{', '.join(t.not_ready[:5])} was available", True) for t in outcome.late]


def _involved(kind: str, api_version: str, name: str, namespace: str, uid: str) -> dict[str, str]:
    # the object's own `kind:` (Rollout, not Rollout.argoproj.io), or `kubectl describe` misses the Event
    return {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace, "uid": uid}
