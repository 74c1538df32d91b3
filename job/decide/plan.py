"""The planner: what must change, decided from observed state alone.

Everything here is pure: no I/O, no clock, no randomness. Given the same policies, namespaces and
workloads it returns the same plan, so it is tested by tables and properties, and a plan applied and
observed again plans nothing more (idempotence).

Which namespaces are held, and why, is decided first by `job.decide.selection` (scope, active list,
keep_recent, hold windows, expiry, active wins); this module turns that into per-workload changes.

Rules, in order of precedence:
1. Untouchable namespaces (protected, the job's own, Terminating) are never touched.
2. A workload annotated `nsscaler.wubw.fun/exclude: "true"` is never touched (counted as excluded), nor is
   one whose controller owner is an excluded workload of the run: an excluded CronJob keeps its Jobs
   running, as `job.decide.pods` counts their Pods as meant to run.
3. A namespace is held as the selection says; of several holders the first by name is recorded in `scaled-by`.
4. In a held namespace a running workload of a kind its holder selects is frozen; an existing record is
   kept, so a workload scaled up by hand during a freeze is frozen again with its pre-freeze count.
   A workload with a controller owner is never frozen or restored on its own (its owner is; a Deployment
   even copies its annotations, our record included, onto its ReplicaSets), except a Job: a suspended
   CronJob does not stop the Job it started, so selecting CronJob freezes its Jobs too.
5. A workload carrying a record whose namespace its kind is no longer held for is restored, unless the
   policy named in `scaled-by` is suspended, says `restore: false`, or has an invalid spec.
6. If the freezes would exceed the cap, none is planned and the plan says why.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from job.decide import selection as selection_api
from job.decide.selection import Selection, Verdict
from job.model.kinds import Kind
from job.model.policy import InvalidPolicy, Policy
from job.model.settings import Settings
from job.model.workloads import (
    Namespace,
    Workload,
    adopt_patch,
    freeze_patch,
    restore_patch,
)


class Verb(enum.StrEnum):
    FREEZE = "freeze"
    RESTORE = "restore"
    ADOPT = "adopt"  # a frozen workload's record passes to the policy that holds its namespace now
    PAUSE = "pause"  # the KEDA ScaledObject of a frozen workload stops scaling it
    RESUME = "resume"  # ... and gets its own pause setting back before the workload is restored


@dataclass(frozen=True, slots=True)
class Action:
    """One change to send. A freeze, restore or adoption builds its merge patch when it is sent (`patch`),
    so a run that changes 40,000 workloads never holds 40,000 patches; other changes carry their `body`."""

    verb: Verb
    workload: Workload
    policy: str
    body: dict[str, Any] | None
    after: int
    reason: str
    dry_run: bool

    @property
    def patch(self) -> dict[str, Any]:
        if self.body is not None:
            return self.body
        if self.verb is Verb.FREEZE:
            return freeze_patch(self.workload, policy=self.policy)
        if self.verb is Verb.RESTORE:
            return restore_patch(self.workload)
        if self.verb is Verb.ADOPT:
            return adopt_patch(self.workload, policy=self.policy)
        raise ValueError(f"a {self.verb.value} action carries its body")


@dataclass(frozen=True)
class Problem:
    """Something the plan will not do and a user must look at (e.g. a malformed record)."""

    policy: str
    workload: Workload
    message: str


@dataclass
class PolicyPlan:
    """What the planner found for one policy; the reconciler adds what applying it achieved."""

    name: str
    held: list[str] = field(default_factory=list)
    active: list[str] = field(default_factory=list)
    kept_running_by: dict[str, list[str]] = field(default_factory=dict)
    unchanged: int = 0
    excluded: int = 0
    kept_frozen: int = 0


@dataclass
class Plan:
    actions: list[Action]
    problems: list[Problem]
    policies: dict[str, PolicyPlan]
    #: namespace -> the policies holding it (for counting the Pods left in held namespaces)
    held_by: dict[str, list[str]]
    cap_message: str | None = None
    #: which namespaces each policy holds or keeps, and why (a 409 re-plan reuses it)
    selection: Selection | None = None
    #: the run's excluded workloads, as `Workload.exclusion_key` (a 409 re-plan reuses it too)
    excluded_owners: frozenset[tuple[str, str, str]] = frozenset()


def _restore_reason(workload: Workload, verdict: Verdict | None, owner: Policy | None,
                    chosen: Selection) -> str:
    if owner is None:
        return f"policy {workload.scaled_by} no longer exists"
    state = chosen.policies.get(owner.name)
    if state is not None and state.not_holding:
        return f"{owner.name} holds nothing: {state.not_holding}"
    if verdict and verdict.keepers:
        if state is not None and workload.namespace in state.recent:
            return state.reason(workload.namespace)
        return f"namespace is active for {', '.join(verdict.keepers)}"
    if not owner.in_scope(workload.namespace):
        return "namespace left the scope"
    return f"{workload.kind.value} is no longer selected by {owner.name}"


def select(policies: Sequence[Policy | InvalidPolicy], *, namespaces: Sequence[Namespace],
           workloads: Iterable[Workload], settings: Settings, now: dt.datetime | None) -> Selection:
    """Which namespaces each serving policy holds: activity is ranked only when a policy keeps the most
    recently active namespaces running."""
    valid = [p for p in policies if isinstance(p, Policy)]
    needs_activity = any(p.spec.keep_recent and not p.spec.suspend for p in valid)
    observed = selection_api.activity(workloads) if needs_activity else {}
    return selection_api.select(valid, namespaces=namespaces, found=observed, settings=settings, now=now)


def excluded_owners_of(workloads: Iterable[Workload]) -> frozenset[tuple[str, str, str]]:
    return frozenset(w.exclusion_key for w in workloads if w.excluded)


def _holder(workload: Workload, selection: Selection) -> Policy | None:
    found = selection.verdicts.get(workload.namespace)
    return found.holder_for(workload.selecting_kinds) if found else None


def sizes_needed(workloads: Iterable[Workload], *, selection: Selection,
                 excluded_owners: frozenset[tuple[str, str, str]]) -> list[Workload]:
    """The workloads read from metadata alone whose size a decision of `make_plan` needs: those a policy
    holds (frozen unless at 0 already) and those carrying a record whose size field someone else wrote
    since (scaled up again: frozen again, or restored). Excluded ones, untouchable namespaces and
    objects frozen through their owner never need it."""
    needed = []
    for w in workloads:
        if w.size is not None or w.frozen_with_its_owner or w.excluded or w.owner_key in excluded_owners:
            continue
        found = selection.verdicts.get(w.namespace)
        if found and found.untouchable:
            continue
        if w.has_record or _holder(w, selection) is not None:
            needed.append(w)
    return needed


def make_plan(policies: Sequence[Policy | InvalidPolicy], *, namespaces: Sequence[Namespace],
              workloads: Iterable[Workload], settings: Settings, now: dt.datetime | None = None,
              selection: Selection | None = None,
              excluded_owners: frozenset[tuple[str, str, str]] | None = None) -> Plan:
    """Decide every freeze, restore and adoption for one run.

    `now` is the run's instant (needed by policies with hold_windows or until). A given `selection` and
    `excluded_owners` are used as they are: a re-plan of a few re-read workloads must not rank activity
    from those alone, nor miss that their owner is excluded."""
    if excluded_owners is None or selection is None:
        workloads = list(workloads)  # the slim views only: the owners must be known before their Jobs
    if excluded_owners is None:
        excluded_owners = excluded_owners_of(workloads)
    valid = [p for p in policies if isinstance(p, Policy)]
    by_name: dict[str, Policy | InvalidPolicy] = {p.name: p for p in policies}
    if selection is None:
        selection = select(policies, namespaces=namespaces, workloads=workloads, settings=settings, now=now)
    verdicts = selection.verdicts
    reports = {p.name: PolicyPlan(name=p.name) for p in valid}
    for name, state in selection.policies.items():
        if name in reports:
            reports[name].held, reports[name].active = list(state.held), list(state.listed)
            reports[name].kept_running_by = dict(state.kept_running_by)

    actions: list[Action] = []
    problems: list[Problem] = []
    reasons: dict[tuple[str, str], str] = {}

    def reason(policy: str, namespace: str) -> str:
        """One string per held namespace, shared by the freezes of its workloads (a first run plans 40,000)."""
        if (policy, namespace) not in reasons:
            reasons[policy, namespace] = selection.policies[policy].reason(namespace)
        return reasons[policy, namespace]

    for workload in workloads:
        found = verdicts.get(workload.namespace)
        if found and found.untouchable:
            continue
        if workload.frozen_with_its_owner:
            continue  # its owner is frozen instead; a record on it is the owner's, copied by its controller
        holder = found.holder_for(workload.selecting_kinds) if found else None
        owner_name = holder.name if holder else workload.scaled_by
        if owner_name is None:
            continue  # neither held nor ours: not nsscaler's business
        owner = by_name.get(owner_name)
        report = reports.get(owner_name)
        if workload.excluded or workload.owner_key in excluded_owners:
            if report:
                report.excluded += 1
            continue
        if workload.has_record and not workload.record_is_valid():
            problems.append(Problem(owner_name, workload, (
                f"malformed record on {workload.ref}: {workload.handling.record_key}="
                f"{workload.original!r}; set it to the count to restore (or remove the record and "
                f"the {workload.handling.record_key} annotation) by hand")))
            continue
        if workload.size is None:  # `sizes_needed` names every such workload: reading it whole failed
            problems.append(Problem(owner_name, workload, f"{workload.ref}: could not read its size"))
            continue
        if holder is not None:
            dry_run = settings.dry_run or holder.spec.dry_run
            if workload.size > 0:
                why = ("scaled up again during the freeze" if workload.has_record
                       else reason(holder.name, workload.namespace))
                actions.append(Action(Verb.FREEZE, workload, holder.name, None, 0, why, dry_run))
            elif workload.has_record and workload.scaled_by != holder.name:
                actions.append(Action(Verb.ADOPT, workload, holder.name, None,
                                      0, f"record passes from {workload.scaled_by} to {holder.name}", dry_run))
            elif report:
                report.unchanged += 1
            continue
        # Not held (for this kind): a workload we froze comes back, unless its policy says otherwise.
        if isinstance(owner, InvalidPolicy):
            continue  # never act on a policy we cannot read; its status says why
        if owner is not None and (owner.spec.suspend or not owner.spec.restore):
            if report:
                report.kept_frozen += 1
            continue
        dry_run = settings.dry_run or (owner.spec.dry_run if owner else False)
        restored = workload.handling.restored_size(workload.original or "")
        actions.append(Action(Verb.RESTORE, workload, owner_name, None, restored,
                              _restore_reason(workload, found, owner if isinstance(owner, Policy) else None,
                                              selection), dry_run))

    cap_message = None
    freezes = [a for a in actions if a.verb is Verb.FREEZE and not a.dry_run]
    if settings.max_freeze is not None and len(freezes) > settings.max_freeze:
        cap_message = (f"this run would freeze {len(freezes)} workloads, over the cap of {settings.max_freeze} "
                       f"(--max-freeze / NSSCALER_MAX_FREEZE); nothing was frozen: check the policies, or raise "
                       f"the cap")
        actions = [a for a in actions if not (a.verb is Verb.FREEZE and not a.dry_run)]
    return Plan(actions=actions, problems=problems, policies=reports, held_by=dict(selection.held_by),
                cap_message=cap_message, selection=selection, excluded_owners=excluded_owners)


def kinds_in_use(policies: Sequence[Policy | InvalidPolicy]) -> frozenset[Kind]:
    """Kinds some serving policy freezes: those are LISTed whole; the others only for our records."""
    return frozenset(k for p in policies if isinstance(p, Policy) and not p.spec.suspend for k in p.kinds)

