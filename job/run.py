"""One run: pre-flight, observe, plan, apply, report. Orchestration only; decisions live in `plan`.

The run never lets one policy's trouble stop another's: an invalid spec, a failed PATCH or a failed
status write is recorded in that policy's outcome and the run goes on.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from job.cluster import read as observe
from job.cluster.kube import Kube
from job.cluster.read import required_access
from job.cluster.write import ActionResult, Applier, Replan
from job.cluster.write import record_event as _record_event
from job.decide import drain as drain_api
from job.decide import pods
from job.decide.autoscalers import hpa_problems, hpa_rechecks, plan_scaled_objects, scaled_object, scaled_object_action
from job.errors import ApiError
from job.model import policy as policy_api

__all__ = ["ActionResult", "RunReport", "required_access", "run"]
from job.decide.plan import (
    Action,
    Plan,
    Problem,
    Verb,
    excluded_owners_of,
    kinds_in_use,
    make_plan,
    select,
    sizes_needed,
)
from job.decide.status import PolicyOutcome, build_status
from job.model.kinds import BUILTIN
from job.model.policy import InvalidPolicy, Policy
from job.model.settings import Settings
from job.model.workloads import Workload

log = logging.getLogger(__name__)

_CLUSTER_EVENTS_NAMESPACE = "default"  # where Events about cluster-scoped objects go, as kubectl expects


@dataclass
class RunReport:
    started: dt.datetime
    dry_run: bool
    policies: list[PolicyOutcome] = field(default_factory=list)
    results: list[ActionResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    #: seconds spent in each phase (observe, plan, apply, pods, status): where a slow run spends its time
    phases: dict[str, float] = field(default_factory=dict)
    #: requests sent in each phase: what a feature costs (e.g. `pods`: the Pod LIST and the owner LISTs)
    phase_requests: dict[str, int] = field(default_factory=dict)
    finished: dt.datetime | None = None

    @property
    def failed(self) -> bool:
        return bool(self.problems) or any(not p.ok for p in self.policies) or any(
            r.outcome == "failed" for r in self.results)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def count(self, outcome: str, verb: Verb | None = None) -> int:
        return sum(1 for r in self.results if r.outcome == outcome and (verb is None or r.action.verb is verb))


def _outcomes(policies: Sequence[Policy | InvalidPolicy], *, plan: Plan, results: list[ActionResult],
              drain: drain_api.Drain, settings: Settings) -> list[PolicyOutcome]:
    outcomes = []
    failed = drain_api.failed_refs(plan, results)
    reverts = drain_api.reverts(results)
    for p in policies:
        if isinstance(p, InvalidPolicy):
            outcomes.append(PolicyOutcome(name=p.name, generation=p.generation, uid=p.uid,
                                          previous_status=p.status, invalid=p.message))
            continue
        found = plan.policies[p.name]
        outcome = PolicyOutcome(
            name=p.name, generation=p.generation, uid=p.uid, previous_status=p.status, suspended=p.spec.suspend,
            dry_run=settings.dry_run or p.spec.dry_run, held=found.held, active=found.active,
            kept_running_by=found.kept_running_by, unchanged=found.unchanged, excluded=found.excluded,
            kept_frozen=found.kept_frozen, pods_unknown=drain.unknown if found.held else None,
            gitops_managed=drain.gitops_managed[p.name], reverted=[r for r in reverts if r.policy == p.name],
            cap_message=plan.cap_message if not p.spec.suspend else None)
        if plan.selection is not None:
            outcome.selection = plan.selection.policies.get(p.name)
        view = pods.PolicyView(kinds=frozenset(str(k) for k in p.kinds), dry_run=outcome.dry_run,
                               capped=outcome.cap_message is not None, failures=failed)
        outcome.remaining, outcome.pods_excluded = pods.tally(drain.census, found.held, view=view)
        outcome.pods_left = sum(r.pods for r in outcome.remaining)
        for r in results:
            if r.action.policy != p.name:
                continue
            if r.outcome in ("applied", "dry-run"):
                if r.action.verb is Verb.FREEZE:
                    outcome.frozen += 1
                elif r.action.verb is Verb.RESTORE:
                    outcome.restored += 1
                elif r.action.verb is Verb.ADOPT:
                    outcome.adopted += 1
            elif r.outcome == "failed":
                outcome.failures.append(f"{r.action.verb.value} {r.action.workload.ref}: {r.message}")
            else:
                outcome.unchanged += 1
        outcome.failures += [pr.message for pr in plan.problems if pr.policy == p.name]
        outcomes.append(outcome)
    return outcomes


def _write_statuses(kube: Kube, outcomes: list[PolicyOutcome], *, settings: Settings, now: dt.datetime) -> None:
    for outcome in outcomes:
        try:
            kube.patch_status(version=policy_api.API_VERSION, plural=policy_api.PLURAL, name=outcome.name,
                              status=build_status(outcome, now=now, list_limit=settings.status_list_limit))
        except ApiError as exc:
            if exc.status != 404:  # a policy deleted during the run has no status to write
                outcome.failures.append(f"writing status: {exc}")
                log.error("could not write the status of NSScaler %s: %s", outcome.name, exc,
                          extra={"event": "status-failed", "policy": outcome.name})
        if not settings.events:
            continue
        involved = {"apiVersion": policy_api.API_VERSION, "kind": "NSScaler", "name": outcome.name,
                    "uid": outcome.uid}
        if not outcome.ok:
            reason = "InvalidSpec" if outcome.invalid else "ReconcileFailed"
            detail = outcome.invalid or outcome.cap_message or "; ".join(outcome.failures[:3])
            _record_event(kube, now=now, namespace=_CLUSTER_EVENTS_NAMESPACE, warning=True, reason=reason,
                          message=detail, involved=involved)
        if outcome.frozen or outcome.restored:
            _record_event(kube, now=now, namespace=_CLUSTER_EVENTS_NAMESPACE, warning=False, reason="Reconciled",
                          message=f"froze {outcome.frozen} and restored {outcome.restored} workloads; "
                                  f"{len(outcome.held)} namespaces held", involved=involved)


def _apply(kube: Kube, applier: Applier, plan: Plan) -> list[ActionResult]:
    """The plan's actions, with the KEDA ScaledObjects of the workloads they change: resumed before their
    workload is restored (a failed resume holds that restore back), paused after it is frozen. Runs that
    change nothing read no ScaledObject, so a steady state costs no request for them."""
    if not any(a.verb in (Verb.FREEZE, Verb.RESTORE) for a in plan.actions):
        return applier.apply(plan.actions)
    held_back: dict[int, str] = {}
    try:
        keda = plan_scaled_objects(plan.actions, observe.scaled_objects(kube))
    except ApiError as exc:  # restoring while a ScaledObject might hold the workload at 0 could lose its count
        keda = plan_scaled_objects([], [])
        held_back = {id(a): f"not restored: the KEDA ScaledObjects could not be read ({exc})"
                     for a in plan.actions if a.verb is Verb.RESTORE}
    plan.problems += keda.problems
    resumed = _apply_autoscaler_actions(applier, keda.resumes)
    held_back |= {id(t): f"not restored: its ScaledObject {r.action.workload.name} could not be resumed ({r.message})"
                  for r, (_, t) in zip(resumed, keda.resumes, strict=True) if r.outcome == "failed"}
    actions = [a for a in plan.actions if id(a) not in held_back]
    applied = applier.apply(actions)
    done = {id(a) for a, r in zip(actions, applied, strict=True) if r.outcome in ("applied", "dry-run")}
    held = [ActionResult(a, "failed", held_back[id(a)]) for a in plan.actions if id(a) in held_back]
    paused = _apply_autoscaler_actions(applier, [(a, t) for a, t in keda.pauses if id(t) in done])
    return resumed + applied + held + paused


def _report_hpas(kube: Kube, plan: Plan, kept: list[tuple[str, Workload]]) -> None:
    """HPAs with minReplicas 0 on the workloads being frozen, or `kept` frozen by a policy whose status
    named one: read only then, so a steady state without such a report costs no request for them."""
    freezes = [a for a in plan.actions if a.verb is Verb.FREEZE]
    if not freezes and not kept:
        return
    try:
        plan.problems += hpa_problems(freezes, observe.hpas(kube), kept=kept)
    except ApiError as exc:
        first = [(a.policy, a.workload) for a in freezes[:1]] or kept[:1]
        plan.problems += [Problem(policy, w, f"could not read HPAs: {exc}") for policy, w in first]


def _apply_autoscaler_actions(applier: Applier, pairs: list[tuple[Action, Action]]) -> list[ActionResult]:
    def replan_for(trigger: Action) -> Replan:
        return lambda fresh: scaled_object_action(scaled_object(fresh), trigger)
    return applier.apply([a for a, _ in pairs], [replan_for(t) for _, t in pairs])


def _record_reverts(kube: Kube, results: list[ActionResult], *, settings: Settings, now: dt.datetime) -> None:
    """Log each frozen workload found scaled up again; a Warning Event on those frozen again (capped)."""
    limit = settings.workload_events_limit if settings.events else 0
    for involved, message in drain_api.report_reverts(results)[:limit]:
        _record_event(kube, now=now, namespace=involved["namespace"], involved=involved, warning=True,
                      reason=drain_api.REASON_REVERTED, message=message)


def run(kube: Kube, settings: Settings, *, now: dt.datetime) -> RunReport:
    """Reconcile every NSScaler once. Raises StartupError when the run cannot start at all."""
    report = RunReport(started=now, dry_run=settings.dry_run)
    clock, sent = time.perf_counter(), 0

    def phase(name: str) -> None:
        nonlocal clock, sent
        report.phases[name] = round(time.perf_counter() - clock, 3)
        clock = time.perf_counter()
        total = sum(kube.requests.snapshot().values())
        report.phase_requests[name], sent = total - sent, total

    try:
        policies = observe.policies(kube, settings)
        kinds = observe.discover(kube, settings, policies)
        policies = policy_api.without_unknown_kinds(policies, kinds.unknown)
        observe.preflight(kube, settings, custom=[h for k, h in kinds.handlers.items() if k not in BUILTIN])
        try:
            namespaces = observe.namespaces(kube)
            handlers = list(kinds.handlers.values())
            guess = select(policies, namespaces=namespaces, workloads=[], settings=settings, now=now)
            workloads = observe.workloads(kube, observe.Kinds(
                handlers, kinds_in_use(policies), family=observe.families(policies, handlers, namespaces),
                all_namespaces=len(namespaces), guess=guess))
            selection = select(policies, namespaces=namespaces, workloads=workloads, settings=settings, now=now)
            excluded_owners = excluded_owners_of(workloads)
            workloads = observe.complete(kube, workloads, sizes_needed(workloads, selection=selection,
                                                                       excluded_owners=excluded_owners))
        except ApiError as exc:
            raise observe.startup_error(kube, exc) from None
        phase("observe")
        plan = make_plan(policies, namespaces=namespaces, workloads=workloads, settings=settings, now=now,
                         selection=selection, excluded_owners=excluded_owners)
        drain = drain_api.Drain(pods.Census(),
                                gitops_managed=drain_api.gitops_managed(policies, plan=plan, workloads=workloads))
        kept = hpa_rechecks(policies, plan.actions, workloads)
        drain.census.seed(drain_api.known_owners(workloads, plan.held_by))
        del workloads  # the plan keeps what it needs; free the rest before the PATCHes
        phase("plan")
        applier = Applier(kube, settings, policies=policies, namespaces=namespaces, now=now,
                          selection=plan.selection, excluded_owners=plan.excluded_owners)
        _report_hpas(kube, plan, kept)
        report.results = _apply(kube, applier, plan)
        _record_reverts(kube, report.results, settings=settings, now=now)
        phase("apply")
        try:
            drain_api.frozen_now(drain.census, report.results)
            drain.census = drain_api.census(kube, plan.held_by, drain.census, all_namespaces=len(namespaces))
        except ApiError as exc:
            report.problems.append(f"could not count Pods for `done`: {exc}")
            drain.unknown = str(exc)  # unknown is not done
        report.policies = _outcomes(policies, plan=plan, results=report.results, drain=drain, settings=settings)
        phase("pods")
        # Failures of workloads whose policy is gone have no status to go to: the run report keeps them.
        known = {p.name for p in policies}
        report.problems += [f"{r.action.verb.value} {r.action.workload.ref}: {r.message}" for r in report.results
                            if r.outcome == "failed" and r.action.policy not in known]
        report.problems += [pr.message for pr in plan.problems if pr.policy not in known]
        for problem in plan.problems:
            log.error(problem.message, extra={"event": "problem", "policy": problem.policy})
        if plan.cap_message:
            log.error(plan.cap_message, extra={"event": "cap-exceeded"})
        if not settings.dry_run:
            _write_statuses(kube, report.policies, settings=settings, now=now)
        phase("status")
    finally:
        report.requests = kube.requests.snapshot()
    return report
