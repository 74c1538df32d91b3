"""The status of an NSScaler, built from one run's results (pure: `now` is a parameter).

Shape: the Go operator's `done`, plus Kubernetes conventions: `observedGeneration`, `conditions` in
metav1.Condition shape (a `lastTransitionTime` only moves when the condition's status changes), and
counts and capped name lists that make `kubectl get` and `kubectl describe` answer "what did it do".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from job import __version__
from job.decide import budget, figures, syncs
from job.decide.freed import Freed, plain, top_namespaces
from job.decide.gitops import Revert
from job.decide.outcome import PolicyOutcome
from job.decide.pods import Remaining
from job.decide.settling import Settling
from job.decide.tiers import LateTier, TierWait
from job.decide.waking import WakeVerdict
from job.model.calendar import Match
from job.model.resources import format_quantity
from job.model.stamps import utc_stamp

CONDITION_READY = "Ready"
CONDITION_DRAINED = "Drained"
#: True while an object frozen the operator's way is not reported frozen by its operator within its row's `within`
CONDITION_FREEZE_INCOMPLETE = "FreezeIncomplete"

REASON_RECONCILED = "Reconciled"
REASON_DRY_RUN = "DryRun"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_PARTIAL_FAILURE = "PartialFailure"
REASON_SUSPENDED = "Suspended"
REASON_CAP_EXCEEDED = "FreezeCapExceeded"
REASON_PODS_GONE = "NoPodsLeft"
REASON_PODS_LEFT = "PodsRemaining"
REASON_NOTHING_HELD = "NothingHeld"
REASON_EXPIRED = "Expired"
REASON_FREEZE_IN_PROGRESS = "FreezeInProgress"
REASON_OPERATOR_NOT_FROZEN = "OperatorNotFrozen"
REASON_OPERATORS_IN_TIME = "NoneOverdue"

MAX_FAILURES_IN_STATUS = 5
#: the longest failure a status names (the CRD says so too): a status must stay small enough to be written
MAX_FAILURE_LENGTH = 1024
MAX_REVERTED_IN_STATUS = 5
#: namespaces named in `status.freed.topNamespaces` (fewer when `status_list_limit` is lower)
MAX_TOP_NAMESPACES = 10
#: owners of remaining Pods named in the Drained condition's message (status.remaining lists more)
OWNERS_IN_MESSAGE = 3


def _condition(kind: str, *, true: bool, reason: str, message: str, outcome: PolicyOutcome,
               now: dt.datetime) -> dict[str, Any]:
    status = "True" if true else "False"
    previous = next((c for c in outcome.previous_status.get("conditions") or [] if c.get("type") == kind), None)
    since = previous.get("lastTransitionTime") if previous and previous.get("status") == status else None
    return {"type": kind, "status": status, "reason": reason, "message": message[:1024],
            "lastTransitionTime": since or utc_stamp(now), "observedGeneration": outcome.generation}


def _ready(outcome: PolicyOutcome) -> tuple[bool, str, str]:
    if outcome.invalid is not None:
        return False, REASON_INVALID_SPEC, outcome.invalid
    if outcome.suspended:
        return False, REASON_SUSPENDED, "spec.suspend is true: this policy freezes and restores nothing"
    if outcome.cap_message:
        return False, REASON_CAP_EXCEEDED, outcome.cap_message
    if outcome.failures:
        attempted = outcome.failed + outcome.frozen + outcome.restored
        return False, REASON_PARTIAL_FAILURE, (f"{outcome.failed} of {attempted} changes failed; "
                                               f"first: {outcome.failures[0]}")
    verb = "would freeze" if outcome.dry_run else "froze"
    message = (f"{len(outcome.held)} namespaces held; {verb} {outcome.frozen}, restored {outcome.restored}, "
               f"{outcome.unchanged} already frozen, {outcome.excluded} excluded")
    if outcome.selection is not None and outcome.selection.not_holding:
        message = f"holds nothing: {outcome.selection.not_holding}; {message}"
        if outcome.selection.expired:
            return True, REASON_EXPIRED, message
    if outcome.restoring:
        wait = outcome.restoring[0]
        message += (f"; {len(outcome.restoring)} namespaces restoring in tiers (first: {wait.namespace} tier "
                    f"{wait.tier} waits for {', '.join(wait.waiting_for[:3]) or 'nothing'}; see status.restoring)")
    if outcome.late:
        first_late = outcome.late[0]
        message += (f"; {first_late.namespace} {first_late.what} restored after restore_wait, before "
                    f"{', '.join(first_late.not_ready[:3])} was available (see status.restoredLate)")
    if outcome.reverted:
        first = outcome.reverted[0]
        message += (f"; {len(outcome.reverted)} found scaled up again during the freeze (first: "
                    f"{first.kind}/{first.name} in {first.namespace} by {first.manager or 'an unknown client'}; "
                    f"see status.reverted)")
    if outcome.syncs_refused:
        first_sync = outcome.syncs_refused[0]
        message += (f"; {len(outcome.syncs_refused)} GitOps syncs refused by the hold (first: "
                    f"{first_sync.attempt.ref} into {first_sync.namespace}; see status.syncsRefused)")
    return True, REASON_DRY_RUN if outcome.dry_run else REASON_RECONCILED, message


def _drained(outcome: PolicyOutcome) -> tuple[bool, str, str]:
    if not outcome.done:
        if outcome.invalid is not None or outcome.suspended:
            return False, REASON_SUSPENDED if outcome.suspended else REASON_INVALID_SPEC, "policy not served"
        if outcome.pods_unknown is not None:
            return False, REASON_PODS_LEFT, f"could not check the Pods: {outcome.pods_unknown}"
        if outcome.pods_left == 0:  # the Pods are gone; an operator has not reported its freeze done yet
            first = outcome.settling[0]
            return False, REASON_FREEZE_IN_PROGRESS, (
                f"no Pod left, but {len(outcome.settling)} objects frozen their operator's way are not reported "
                f"frozen yet (first: {first.words})")
        owners = "; ".join(f"{r.namespace} {r.owner} ({r.pods} Pod{'s' if r.pods != 1 else ''}): {r.reason}"
                           for r in outcome.remaining[:OWNERS_IN_MESSAGE])
        more = len(outcome.remaining) - OWNERS_IN_MESSAGE
        return False, REASON_PODS_LEFT, (f"{outcome.pods_left} Pods still run in held namespaces: {owners}"
                                         + (f"; and {more} more owners in status.remaining" if more > 0 else ""))
    if not outcome.held:
        return True, REASON_NOTHING_HELD, "no namespace is held by this policy"
    meant = f" except {outcome.pods_excluded} Pods of excluded workloads" if outcome.pods_excluded else ""
    return True, REASON_PODS_GONE, f"no Pod left in the {len(outcome.held)} held namespaces{meant}"


def _incomplete(outcome: PolicyOutcome) -> tuple[bool, str, str]:
    late = outcome.incomplete
    if not late:
        return False, REASON_OPERATORS_IN_TIME, ("every object frozen its operator's way is reported frozen by its "
                                                 "operator, or its row's `within` has not passed yet")
    return True, REASON_OPERATOR_NOT_FROZEN, (f"{len(late)} objects frozen their operator's way are not reported "
                                              f"frozen within their row's `within` (first: {late[0].words}); see "
                                              f"status.freezeIncomplete")


def build_status(outcome: PolicyOutcome, *, now: dt.datetime, list_limit: int) -> dict[str, Any]:
    ready, ready_reason, ready_message = _ready(outcome)
    drained, drained_reason, drained_message = _drained(outcome)
    incomplete, incomplete_reason, incomplete_message = _incomplete(outcome)
    kept = sorted(outcome.kept_running_by.items())[:list_limit]
    recent = sorted((outcome.selection.recent if outcome.selection else {}).items())
    woken = sorted((outcome.selection.woken if outcome.selection else {}).items())
    next_change = outcome.selection.next_change if outcome.selection else None
    return {
        "done": outcome.done,
        "observedGeneration": outcome.generation,
        "lastRunTime": utc_stamp(now),
        "version": __version__,
        "dryRun": outcome.dry_run,
        "holding": outcome.holding,
        "nextChange": utc_stamp(next_change) if next_change else None,  # null removes it (merge patch)
        **exception_fields(outcome),
        "conditions": [
            _condition(CONDITION_READY, true=ready, reason=ready_reason, message=ready_message,
                       outcome=outcome, now=now),
            _condition(CONDITION_DRAINED, true=drained, reason=drained_reason, message=drained_message,
                       outcome=outcome, now=now),
            _condition(CONDITION_FREEZE_INCOMPLETE, true=incomplete, reason=incomplete_reason,
                       message=incomplete_message, outcome=outcome, now=now),
        ],
        "counts": figures.counts(outcome),
        "heldNamespaces": outcome.held[:list_limit],
        "activeNamespaces": outcome.active[:list_limit],
        "recentNamespaces": [{"namespace": ns, "lastActivity": utc_stamp(change.time), "by": change.by}
                             for ns, change in recent[:list_limit]],
        "keptRunning": [{"namespace": ns, "by": by} for ns, by in kept],
        "wokenNamespaces": woken_entries(woken[:list_limit]),
        "failures": [f[:MAX_FAILURE_LENGTH] for f in outcome.failures[:MAX_FAILURES_IN_STATUS]],
        "remaining": remaining_entries(outcome.remaining[:list_limit]),
        "reverted": reverted_entries(outcome.reverted[:MAX_REVERTED_IN_STATUS]),
        syncs.STATUS_KEY: syncs.entries(outcome.syncs_refused[:list_limit]),
        "freezeIncomplete": incomplete_entries(outcome.incomplete[:list_limit]),
        **_tier_lists(outcome, list_limit=list_limit),
        **wake_budget_fields(outcome, list_limit=list_limit),
        "freed": _cleared(freed_entry(outcome.freed, list_limit=min(list_limit, MAX_TOP_NAMESPACES)),
                          outcome.previous_status.get("freed")),
    }


def exception_entry(match: Match | None) -> dict[str, Any] | None:
    """`status.exception`, `status.nextException` and the dry run's words: the day, what it does, and the
    exceptions naming it (release wins when two disagree)."""
    if match is None:
        return None
    return {"date": match.day.isoformat(), "action": match.action, "name": "; ".join(match.names)[:512]}


def exception_fields(outcome: PolicyOutcome) -> dict[str, Any]:
    """The exception deciding today and the next one; null (removed) when there is none. Kept as they are while
    the policy is invalid: its last known calendar stays readable."""
    selection = outcome.selection
    if selection is None:
        return {}
    return {"exception": exception_entry(selection.exception),
            "nextException": exception_entry(selection.next_exception)}


def _tier_lists(outcome: PolicyOutcome, *, list_limit: int) -> dict[str, Any]:
    return {"restoring": restoring_entries(outcome.restoring[:list_limit], list_limit=list_limit),
            "restoredLate": late_entries(outcome.late[:list_limit], list_limit=list_limit)}


def wake_budget_fields(outcome: PolicyOutcome, *, list_limit: int) -> dict[str, Any]:
    """`wakeBudget` and the record `wakeHistory` (`job.decide.budget`), for a policy with `wake.budget`; null
    (removed) once it has none, kept as it is while the policy is invalid or suspended (it counts again when it
    serves). The record is sent only when this run changes it: a run that changes nothing there never overwrites
    what a run beside it recorded (the merge patch keeps a key it does not name)."""
    history = outcome.selection.wake_history if outcome.selection is not None else None
    previous = outcome.previous_status
    if history is None and (outcome.selection is None or outcome.suspended):
        return {}  # invalid or suspended for now: its record stays as it was, for when it serves again
    if history is None:
        return {key: None for key in ("wakeBudget", budget.STATUS_KEY) if previous.get(key) is not None}
    assert outcome.selection is not None
    # what is left is cut to the list limit like any list of namespaces; the record never is: it is what counts
    fields: dict[str, Any] = {"wakeBudget": outcome.selection.wake_budget[:list_limit]}
    if budget.history_changed(previous, history):
        fields[budget.STATUS_KEY] = budget.entries(history)
    return fields


def _cleared(freed: dict[str, Any], previous: Any) -> dict[str, Any]:
    """The status is written as a merge patch, which keeps map keys it does not name: a resource freed no more
    is named as null, so that it goes."""
    if not isinstance(previous, dict):
        return freed
    for key in ("requests", "limits"):
        gone = set(previous.get(key) or {}) - set(freed[key])
        freed[key] = {**dict.fromkeys(sorted(gone)), **freed[key]}
    return freed


def freed_entry(freed: Freed, *, list_limit: int) -> dict[str, Any]:
    """`status.freed` and the JSON report's `freed`: quantities in Kubernetes notation for people (`requests`,
    `limits`: CPU and memory always there), plain numbers for metrics (`resources`: CPU in cores, the rest in
    their unit, bytes for memory), and the namespaces freeing the most CPU."""
    total, none = freed.total, 0
    names = sorted({"cpu", "memory", *total.requests, *total.limits})
    return {
        "workloads": freed.workloads,
        "unknownWorkloads": freed.unknown,
        "pods": total.pods,
        "podsWithoutRequests": total.unrequested,
        "gpus": plain("gpu", freed.gpus),
        "requests": {n: format_quantity(total.requests.get(n, none)) for n in names
                     if n in total.requests or n in ("cpu", "memory")},
        "limits": {n: format_quantity(v) for n, v in sorted(total.limits.items())},
        "resources": [{"resource": n, "requests": plain(n, total.requests.get(n, none)),
                       "limits": plain(n, total.limits.get(n, none))} for n in names],
        "topNamespaces": [{"namespace": ns, "pods": f.pods, "cpu": format_quantity(f.requests.get("cpu", none)),
                           "memory": format_quantity(f.requests.get("memory", none))}
                          for ns, f in top_namespaces(freed, list_limit)],
    }


def woken_entries(woken: Iterable[tuple[str, WakeVerdict]]) -> list[dict[str, Any]]:
    """`status.wokenNamespaces`: who woke each namespace, until when (the end applied) and why."""
    return [{"namespace": ns, "wake": v.wake.name, "by": v.wake.requested_by,
             "until": utc_stamp(v.applied_end) if v.applied_end else None, "reason": v.wake.reason}
            for ns, v in woken]


def remaining_entries(remaining: Iterable[Remaining]) -> list[dict[str, Any]]:
    """`status.remaining` and the JSON report's `remaining`: one shape, defined once."""
    return [{"namespace": r.namespace, "owner": r.owner, "pods": r.pods, "reason": r.reason} for r in remaining]


def restoring_entries(waits: Iterable[TierWait], *, list_limit: int | None = None) -> list[dict[str, Any]]:
    """`status.restoring` and the JSON report's `restoring`: per namespace, the tier that waits, for which
    earlier workloads, since when, and when it comes back anyway."""
    return [{"namespace": w.namespace, "tier": w.tier, "pending": w.pending,
             "waitingFor": list(w.waiting_for[:list_limit]), "since": utc_stamp(w.since),
             "until": utc_stamp(w.until)} for w in waits]


def late_entries(late: Iterable[LateTier], *, list_limit: int | None = None) -> list[dict[str, Any]]:
    """`status.restoredLate` and the JSON report's: tiers restored because `restore_wait` passed, and the
    earlier workloads that were not available in time; HTTPRoutes given back so are the last tier, named."""
    return [{"namespace": t.namespace, "tier": t.tier, "notReady": list(t.not_ready[:list_limit]),
             "since": utc_stamp(t.since), **({"routes": list(t.routes[:list_limit])} if t.routes else {})}
            for t in late]


def incomplete_entries(late: Iterable[Settling]) -> list[dict[str, Any]]:
    """`status.freezeIncomplete` and the JSON report's: each object whose operator has not reported its freeze done
    within its row's `within`, with what the operator reports and since when it was frozen (none: not recorded)."""
    return [{"namespace": s.namespace, "workload": s.workload, "reports": s.reports[:MAX_FAILURE_LENGTH],
             **({"since": utc_stamp(s.since)} if s.since is not None else {})} for s in late]


def reverted_entries(reverted: Iterable[Revert]) -> list[dict[str, Any]]:
    """`status.reverted` and the JSON report's `reverted`: one shape, defined once."""
    return [{"namespace": r.namespace, "workload": f"{r.kind}/{r.name}", "manager": r.manager or "",
             **({"gitOps": r.tool} if r.tool else {}), "fix": r.fix} for r in reverted]
