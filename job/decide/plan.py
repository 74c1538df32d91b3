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
   CronJob does not stop the Job it started, so selecting CronJob freezes its Jobs too. A running workload
   whose kind's row states a precondition that does not hold (an operator that hibernates only a healthy
   cluster) is left running and reported.
5. A workload carrying a record whose namespace its kind is no longer held for is restored, unless the
   policy named in `scaled-by` is suspended, says `restore: false`, or has an invalid spec.
6. If the freezes would exceed the cap, none is planned and the plan says why.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from job.decide import selection as selection_api
from job.decide import settling, waking
from job.decide.actions import Action, Problem, Verb
from job.decide.selection import Selection, Verdict
from job.decide.tiers import LateTier, TierWait
from job.errors import shown, unexpected
from job.model.kinds import Kind
from job.model.marks import ANNOTATION_SCALED_BY
from job.model.policy import InvalidPolicy, Policy
from job.model.settings import Settings
from job.model.wake import Wake
from job.model.workloads import Namespace, Workload


@dataclass(frozen=True)
class PolicyPlan:
    """What the planner found for one policy. Its outcome (`job.decide.outcome.PolicyOutcome`) extends it with
    what carrying the plan out achieved, so no finding is copied by hand from one to the other."""

    name: str
    generation: int = 0
    held: list[str] = field(default_factory=list)
    active: list[str] = field(default_factory=list)
    kept_running_by: dict[str, list[str]] = field(default_factory=dict)
    unchanged: int = 0
    excluded: int = 0
    kept_frozen: int = 0
    #: namespaces whose next restore tier waits for the earlier ones (`job.decide.tiers`)
    restoring: list[TierWait] = field(default_factory=list)
    #: tiers restored because `restore_wait` passed before the earlier ones were available
    late: list[LateTier] = field(default_factory=list)


@dataclass(frozen=True)
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
    #: every namespace whose next restore tier waits, also those of a policy that is gone
    waits: tuple[TierWait, ...] = ()


def _restore_reason(workload: Workload, verdict: Verdict | None, owner: Policy | None,
                    chosen: Selection) -> str:
    if owner is None:
        return f"policy {workload.scaled_by} no longer exists"
    state = chosen.policies.get(owner.name)
    if state is not None and state.not_holding:
        return f"{owner.name} holds nothing: {state.not_holding}"
    if verdict and verdict.woken:
        return waking.woken_words(verdict.woken)
    if verdict and verdict.keepers:
        if state is not None and workload.namespace in state.recent:
            return state.reason(workload.namespace)
        return f"namespace is active for {', '.join(verdict.keepers)}"
    if not owner.in_scope(workload.namespace):
        return "namespace left the scope"
    return f"{workload.kind.value} is no longer selected by {owner.name}"


def select_from_workloads(policies: Sequence[Policy | InvalidPolicy], *, namespaces: Sequence[Namespace],
                          workloads: Iterable[Workload], settings: Settings, now: dt.datetime | None,
                          wakes: Sequence[Wake] = ()) -> Selection:
    """Which namespaces each serving policy holds, from any policies (the invalid ones are left out) and the
    workloads as read: activity is ranked only when a policy keeps the most recently active namespaces
    running; the Wakes keep held namespaces running. The rules are `job.decide.selection.select_namespaces`'s."""
    valid = [p for p in policies if isinstance(p, Policy)]
    needs_activity = any(p.spec.keep_recent and not p.spec.suspend for p in valid)
    observed = selection_api.activity(workloads, now=now) if needs_activity else {}
    return selection_api.select_namespaces(valid, namespaces=namespaces, found=observed, settings=settings, now=now,
                                           wakes=wakes)


def excluded_owners_of(workloads: Iterable[Workload]) -> frozenset[tuple[str, str, str]]:
    return frozenset(w.exclusion_key for w in workloads if w.excluded)


def _holder(workload: Workload, selection: Selection) -> Policy | None:
    found = selection.verdicts.get(workload.namespace)
    return found.holder_for(workload.selecting_kinds) if found else None


def sizes_needed(workloads: Iterable[Workload], *, selection: Selection,
                 excluded_owners: frozenset[tuple[str, str, str]]) -> list[Workload]:
    """The workloads read from metadata alone whose size a decision of `make_plan` needs: those a policy
    holds (frozen unless at 0 already) and those carrying a record whose size field someone else wrote
    since (scaled up again: frozen again, or restored); and the frozen objects whose operator must report the
    freeze done (`job.decide.settling`: its condition is in their status). Excluded ones, untouchable namespaces
    and objects frozen through their owner never need it."""
    needed = []
    for w in workloads:
        if w.has_record and w.available is None and settling.reports_frozen(w):
            needed.append(w)
            continue
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
    if selection is None:
        selection = select_from_workloads(policies, namespaces=namespaces, workloads=workloads, settings=settings,
                                          now=now)
    judge = _Judge(by_name={p.name: p for p in policies}, selection=selection, excluded_owners=excluded_owners,
                   settings=settings)
    actions: list[Action] = []
    problems: list[Problem] = []
    tally: Counter[tuple[str, str]] = Counter()
    for workload in workloads:
        try:
            judged = judge(workload)
        except Exception as exc:
            judged = _unexpected_problem(workload, selection, exc)
        if isinstance(judged, Action):
            actions.append(judged)
        elif isinstance(judged, Problem):
            problems.append(judged)
        elif judged is not None:
            tally[judged] += 1
    actions, cap_message = _within_cap(actions, settings)
    return Plan(actions=actions, problems=problems, policies=_policy_plans(policies, selection, tally),
                held_by=dict(selection.held_by), cap_message=cap_message, selection=selection,
                excluded_owners=excluded_owners)


#: what the planner counts for a policy about a workload it leaves alone
_UNCHANGED, _EXCLUDED, _KEPT_FROZEN = "unchanged", "excluded", "kept_frozen"


@dataclass(frozen=True)
class _Judge:
    """The rules of this module's docstring, applied to one workload at a time: an Action, a Problem, a
    (policy, count) to add to that policy's findings, or None (not nsscaler's business)."""

    by_name: Mapping[str, Policy | InvalidPolicy]
    selection: Selection
    excluded_owners: frozenset[tuple[str, str, str]]
    settings: Settings
    #: one string per held namespace, shared by the freezes of its workloads (a first run plans 40,000)
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)

    def __call__(self, workload: Workload) -> Action | Problem | tuple[str, str] | None:
        found = self.selection.verdicts.get(workload.namespace)
        if (found and found.untouchable) or workload.frozen_with_its_owner:
            return None  # a record on one frozen with its owner is the owner's, copied by its controller
        holder = found.holder_for(workload.selecting_kinds) if found else None
        owner_name = holder.name if holder else workload.scaled_by
        if owner_name is None:
            return None
        if workload.excluded or workload.owner_key in self.excluded_owners:
            return owner_name, _EXCLUDED
        if holder is None and not workload.has_record:  # a stray mark: nothing recorded, so nothing to give back
            return Problem(owner_name, workload, (
                f"{workload.ref} carries {ANNOTATION_SCALED_BY}={owner_name} but no record "
                f"({workload.handling.record_key}): nsscaler does not know what to give back and leaves it as it "
                f"is; remove the {ANNOTATION_SCALED_BY} annotation, or set the record to what to restore"))
        problem = _record_problem(workload, owner_name)
        if problem is not None:
            return problem
        if holder is not None:
            return self._hold(workload, holder)
        return self._release(workload, owner_name, found)

    def _reason(self, policy: str, namespace: str) -> str:
        if (policy, namespace) not in self.reasons:
            self.reasons[policy, namespace] = self.selection.policies[policy].reason(namespace)
        return self.reasons[policy, namespace]

    def _hold(self, workload: Workload, holder: Policy) -> Action | Problem | tuple[str, str]:
        dry_run = self.settings.dry_run or holder.spec.dry_run
        if workload.size and workload.blocked:
            return Problem(holder.name, workload, f"{workload.ref}: {workload.blocked}")
        if workload.size:
            why = ("scaled up again during the freeze" if workload.has_record
                   else self._reason(holder.name, workload.namespace))
            return Action(Verb.FREEZE, workload, holder.name, None, 0, why, dry_run)
        if workload.has_record and workload.scaled_by != holder.name:
            return Action(Verb.ADOPT, workload, holder.name, None, 0,
                          f"record passes from {workload.scaled_by} to {holder.name}", dry_run)
        return holder.name, _UNCHANGED

    def _release(self, workload: Workload, owner_name: str,
                 found: Verdict | None) -> Action | tuple[str, str] | None:
        """Not held (for this kind): a workload we froze comes back, unless its policy says otherwise."""
        owner = self.by_name.get(owner_name)
        if isinstance(owner, InvalidPolicy):
            return None  # never act on a policy we cannot read; its status says why
        if owner is not None and owner.keeps_frozen:
            return owner_name, _KEPT_FROZEN
        dry_run = self.settings.dry_run or (owner.spec.dry_run if owner else False)
        restored = workload.handling.restored_size(workload.original or "")
        return Action(Verb.RESTORE, workload, owner_name, None, restored,
                      _restore_reason(workload, found, owner, self.selection), dry_run)


def _record_problem(workload: Workload, owner_name: str) -> Problem | None:
    if workload.has_record and not workload.record_is_valid():
        return Problem(owner_name, workload, (
            f"malformed record on {workload.ref}: {workload.handling.record_key}={shown(workload.original)}; set it "
            f"to the count to restore (or remove the record and the {workload.handling.record_key} annotation) "
            f"by hand"))
    if workload.size is None:  # `sizes_needed` names every such workload: reading it whole failed
        return Problem(owner_name, workload, f"{workload.ref}: could not read its size")
    return None


def _unexpected_problem(workload: Workload, selection: Selection, exc: Exception) -> Problem:
    """An error nobody expected while judging one workload: a problem on it, told to the policy that holds its
    namespace (or that froze it), and that workload left as it is."""
    found = selection.verdicts.get(workload.namespace)
    holders = [p.name for p in found.holders] if found else []
    policy = holders[0] if holders else workload.scaled_by or ""
    return Problem(policy, workload, f"{workload.ref}: left as it is: {unexpected(exc)}")


def _within_cap(actions: list[Action], settings: Settings) -> tuple[list[Action], str | None]:
    """Rule 6: over the cap, no freeze at all (dry runs are not counted: they change nothing)."""
    freezes = sum(1 for a in actions if a.verb is Verb.FREEZE and not a.dry_run)
    if settings.max_freeze is None or freezes <= settings.max_freeze:
        return actions, None
    message = (f"this run would freeze {freezes} workloads, over the cap of {settings.max_freeze} "
               f"(--max-freeze / NSSCALER_MAX_FREEZE); nothing was frozen: check the policies, or raise the cap")
    return [a for a in actions if not (a.verb is Verb.FREEZE and not a.dry_run)], message


def _policy_plans(policies: Sequence[Policy | InvalidPolicy], selection: Selection,
                  tally: Counter[tuple[str, str]]) -> dict[str, PolicyPlan]:
    plans = {}
    for p in policies:
        if not isinstance(p, Policy):
            continue
        state = selection.policies.get(p.name)
        plans[p.name] = PolicyPlan(
            name=p.name, generation=p.generation,
            held=list(state.held) if state else [], active=list(state.listed) if state else [],
            kept_running_by=dict(state.kept_running_by) if state else {},
            unchanged=tally[p.name, _UNCHANGED], excluded=tally[p.name, _EXCLUDED],
            kept_frozen=tally[p.name, _KEPT_FROZEN])
    return plans


def kinds_in_use(policies: Sequence[Policy | InvalidPolicy]) -> frozenset[Kind]:
    """Kinds some serving policy freezes: those are LISTed whole; the others only for our records."""
    return frozenset(k for p in policies if isinstance(p, Policy) and not p.spec.suspend for k in p.kinds)

