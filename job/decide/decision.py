"""One pure pass from a snapshot to every write of a run (`decide`), and the same rules for one object read
again after a 409 (`again`). No I/O, no clock: `now` is the run's instant, given.

The writes come in three steps, each sent concurrently once the one before it is done:
1. the KEDA ScaledObjects of the workloads to restore are resumed, before their workloads come back (a
   resume that fails holds its restore back: a workload restored while KEDA holds it at 0 loses its count);
   and the operators of `pause` rows are paused (`job.decide.paused`);
2. the workloads' own changes: freezes, restores, adoptions (a paused operator's StatefulSets after its pause);
3. the ScaledObjects of the workloads frozen in step 2 are paused (only of those whose freeze went through);
   and the operators whose StatefulSets came back in step 2 are resumed.
An interrupted run therefore leaves either a frozen workload whose ScaledObject still scales (the next run
freezes it again and pauses it) or a resumed ScaledObject whose workload still carries its record (the
next run restores it); never a record lost.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from job.decide import drain, paused, pods, tiers
from job.decide.actions import Action, ActionResult, Problem, Verb
from job.decide.autoscalers import hpa_problems, hpa_rechecks, plan_scaled_objects, scaled_object_action
from job.decide.contain import quarantine
from job.decide.operator_pods import counted_before
from job.decide.plan import Plan, excluded_owners_of, make_plan, select_from_workloads
from job.decide.tiers import LateTier, TierWait
from job.errors import unexpected
from job.model.autoscalers import scaled_object
from job.model.kinds import MalformedRecord
from job.model.settings import Settings
from job.model.snapshot import NEED_HPAS, NEED_SCALED_OBJECTS, Autoscalers, Snapshot
from job.model.workloads import from_api, with_overhead


@dataclass(frozen=True, slots=True)
class Write:
    """One PATCH to send. `trigger`: the workload change a ScaledObject's pause or resume goes with (a 409 on
    it is decided again from that change). `after`: the write this one waits for in an earlier step; a
    pause is dropped unless its freeze was applied, a restore fails with `held_back` if its resume failed."""

    action: Action
    trigger: Action | None = None
    after: Action | None = None
    held_back: str = ""

    def blocked_by(self, done: ActionResult) -> bool:
        """Whether the result of the write this one waits for stops it."""
        if self.action.verb is Verb.PAUSE:
            return done.outcome not in ("applied", "dry-run")
        return done.outcome == "failed"


@dataclass(frozen=True)
class Decision:
    """Everything a run decided before writing: the plan, the writes in their steps, the changes refused
    without a write, every problem, and what the Pod census starts from."""

    plan: Plan
    steps: tuple[tuple[Write, ...], ...] = ()
    refused: tuple[ActionResult, ...] = ()
    problems: tuple[Problem, ...] = ()
    #: what the read stage must add to the snapshot before this decision can be carried out
    needs: frozenset[str] = frozenset()
    #: per policy: the workloads it would freeze that Argo CD or Flux manages
    gitops_managed: Counter[str] = field(default_factory=Counter)
    #: owners the census cannot LIST (ReplicationControllers, custom kinds), known from the snapshot
    census_seed: tuple[pods.Meta, ...] = ()


def decide(snapshot: Snapshot, *, settings: Settings, now: dt.datetime,
           within: frozenset[str] | None = None) -> Decision:
    """Every write of one run, from what it read. Deterministic: the same snapshot, settings and instant
    give the same decision. Where carrying it out needs the autoscalers and the snapshot has none yet,
    the decision says so (`needs`) and holds no write. `within`: only the changes in these namespaces (a
    later pass of a restore in tiers, whose snapshot is fresh there only)."""
    workloads = snapshot.workloads
    selection = select_from_workloads(snapshot.policies, namespaces=snapshot.namespaces, workloads=workloads,
                                      settings=settings, now=now, wakes=snapshot.wakes)
    plan = make_plan(snapshot.policies, namespaces=snapshot.namespaces, workloads=workloads, settings=settings,
                     now=now, selection=selection, excluded_owners=excluded_owners_of(workloads))
    if within is not None:
        plan = replace(plan, actions=[a for a in plan.actions if a.workload.namespace in within],
                       problems=[p for p in plan.problems if p.workload.namespace in within])
    plan = in_tiers(plan, snapshot=snapshot, now=now)
    kept = hpa_rechecks(snapshot.policies, plan.actions, workloads)
    freezes = [a for a in plan.actions if a.verb is Verb.FREEZE]
    changes = bool(freezes) or any(a.verb is Verb.RESTORE for a in plan.actions)
    needs = (frozenset({NEED_SCALED_OBJECTS} if changes else ())
             | frozenset({NEED_HPAS} if freezes or kept else ()))
    managed = drain.gitops_managed(snapshot.policies, plan=plan, workloads=workloads)
    seed = tuple(drain.known_owners(workloads, plan.held_by))
    if needs and snapshot.autoscalers is None:
        return Decision(plan=plan, needs=needs, gitops_managed=managed, census_seed=seed)
    found = snapshot.autoscalers or Autoscalers()
    steps, refused, keda_problems = _steps(plan, found)
    problems = (*plan.problems, *_hpa_problems(freezes, kept, found), *keda_problems)
    return Decision(plan=plan, steps=steps, refused=refused, problems=problems, gitops_managed=managed,
                    census_seed=seed)


def contained(snapshot: Snapshot, *, settings: Settings, now: dt.datetime,
              within: frozenset[str] | None = None) -> Decision:
    """`decide`, with an unexpected failure kept to the policy it belongs to (`job.decide.contain`): that policy is
    decided as invalid, saying what happened, and the others as usual."""
    _, decision = quarantine(snapshot.policies, lambda policies: decide(
        replace(snapshot, policies=tuple(policies)), settings=settings, now=now, within=within))
    return decision


def in_tiers(plan: Plan, *, snapshot: Snapshot, now: dt.datetime) -> Plan:
    """The plan with only the restores whose tier goes now (`job.decide.tiers`); what waits or went late is told
    to each policy's findings, and a malformed tier is a problem."""
    found = tiers.in_tiers(plan.actions, workloads=snapshot.workloads,
                           policies={p.name: p for p in snapshot.policies}, now=now)
    if not (found.waits or found.late or found.problems):
        return plan
    policies = {name: replace(p, restoring=[w for w in found.waits if w.policy == name],
                              late=[t for t in found.late if t.policy == name]) for name, p in plan.policies.items()}
    return replace(plan, actions=found.actions, problems=[*plan.problems, *found.problems], policies=policies,
                   waits=tuple(found.waits))


def with_late_routes(decision: Decision, late: Iterable[LateTier]) -> Decision:
    """The decision with the HTTPRoutes that came back after `restore_wait` told to their policies' findings
    (`job.decide.routes`, rule 5), after the tiers that went late; a policy already gone has no findings."""
    found = [t for t in late if t.policy in decision.plan.policies]
    if not found:
        return decision
    policies = {name: replace(p, late=[*p.late, *(t for t in found if t.policy == name)])
                for name, p in decision.plan.policies.items()}
    return replace(decision, plan=replace(decision.plan, policies=policies))


def merged(first: Decision, later: Decision, *, within: frozenset[str]) -> Decision:
    """A run's decision after a later pass of its restore in tiers over the namespaces `within`: the first pass's
    findings, with what waits there now, every tier that went late, and the problems the later pass found besides."""
    said = {p.message for p in first.problems}

    def waits(found: Iterable[TierWait], fresh: Iterable[TierWait]) -> list[TierWait]:
        return [*(w for w in found if w.namespace not in within), *fresh]
    policies = {}
    for name, p in first.plan.policies.items():
        again_p = later.plan.policies.get(name)
        late = {(t.namespace, t.tier): t for t in [*p.late, *(again_p.late if again_p else ())]}
        policies[name] = replace(p, restoring=waits(p.restoring, again_p.restoring if again_p else ()),
                                 late=list(late.values()))
    plan = replace(first.plan, policies=policies, waits=tuple(waits(first.plan.waits, later.plan.waits)))
    return replace(first, plan=plan, problems=(*first.problems, *(p for p in later.problems if p.message not in said)))


def _steps(plan: Plan, found: Autoscalers) -> tuple[tuple[tuple[Write, ...], ...], tuple[ActionResult, ...],
                                                        list[Problem]]:
    restores = [a for a in plan.actions if a.verb is Verb.RESTORE]
    if found.scaled_objects_error is not None:
        # restoring while a ScaledObject might hold the workload at 0 could lose its count
        why = f"not restored: the KEDA ScaledObjects could not be read ({found.scaled_objects_error})"
        refused = tuple(ActionResult(a, "failed", why) for a in restores)
        first, then, _ = paused.ordered([a for a in plan.actions if a.verb is not Verb.RESTORE])
        return (_writes(first), _writes(then), ()), refused, []
    keda = plan_scaled_objects(plan.actions, found.scaled_objects)
    resumed = {id(trigger): resume for resume, trigger in keda.resumes}
    first, then, last = paused.ordered(plan.actions)
    workload_writes = tuple(
        Write(o.action, after=resumed[id(o.action)], held_back=f"not restored: its ScaledObject "
                                                               f"{resumed[id(o.action)].workload.name} could not be "
                                                               f"resumed")
        if id(o.action) in resumed else Write(o.action, after=o.after, held_back=o.held_back)
        for o in then)
    return ((*(Write(resume, trigger=trigger) for resume, trigger in keda.resumes), *_writes(first)),
            workload_writes,
            (*(Write(pause, trigger=trigger, after=trigger) for pause, trigger in keda.pauses), *_writes(last))), \
        (), keda.problems


def _writes(found: list[paused.Ordered]) -> tuple[Write, ...]:
    return tuple(Write(o.action, after=o.after, held_back=o.held_back) for o in found)


def _hpa_problems(freezes: list[Action], kept: list[tuple[str, Any]], found: Autoscalers) -> list[Problem]:
    if not freezes and not kept:
        return []
    if found.hpas_error is not None:
        first = [(a.policy, a.workload) for a in freezes[:1]] or kept[:1]
        return [Problem(policy, w, f"could not read HPAs: {found.hpas_error}") for policy, w in first]
    return hpa_problems(freezes, found.hpas, kept=kept)


def again(write: Write, fresh: dict[str, Any], *, decision: Decision, snapshot: Snapshot, settings: Settings,
          now: dt.datetime) -> Action | str | None:
    """After a 409: what `write` becomes, decided from its object as it is now by the same rules and the
    run's own selection (a new action; None: nothing left to do; a string: why it cannot be done)."""
    try:
        if write.trigger is not None:
            return scaled_object_action(scaled_object(fresh), write.trigger)
        workload = counted_before(with_overhead(from_api(write.action.workload.kind_handler, fresh),
                                                snapshot.overheads), write.action.workload)
        plan = decision.plan
        replanned = make_plan(snapshot.policies, namespaces=snapshot.namespaces, workloads=[workload],
                              settings=settings, now=now, selection=plan.selection,
                              excluded_owners=plan.excluded_owners)
    except MalformedRecord as exc:
        return str(exc)
    except Exception as exc:
        return unexpected(exc)
    if replanned.problems:
        return replanned.problems[0].message
    return replanned.actions[0] if replanned.actions else None
