"""One run: pre-flight, observe, plan, apply, report. Orchestration only; decisions live in `plan`.

The run never lets one policy's trouble stop another's: an invalid spec, a failed PATCH or a failed
status write is recorded in that policy's outcome and the run goes on.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from job import drain as drain_api
from job import pods
from job import policy as policy_api
from job.errors import ApiError, Conflict, StartupError
from job.kube import Access, Kube
from job.plan import Action, Plan, Verb, kinds_in_use, make_plan
from job.policy import InvalidPolicy, Policy
from job.settings import Settings
from job.status import PolicyOutcome, build_status
from job.workloads import HANDLERS, SCALED_SELECTOR, Kind, Namespace, Workload, from_api

log = logging.getLogger(__name__)

_CLUSTER_EVENTS_NAMESPACE = "default"  # where Events about cluster-scoped objects go, as kubectl expects


@dataclass
class ActionResult:
    action: Action
    outcome: str  # applied | dry-run | settled | gone | failed
    message: str = ""


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


def required_access(settings: Settings) -> list[Access]:
    """Exactly what a run calls; the ClusterRole in kustomize/base grants this and nothing more."""
    needed = [Access(policy_api.GROUP, policy_api.PLURAL, "list"), Access("", "namespaces", "list"),
              Access("", "pods", "list")]
    for handler in HANDLERS.values():
        group = handler.api_version.split("/")[0]
        needed += [Access(group, handler.plural, verb) for verb in ("list", "get", "patch")]
    # Why Pods still run: metadata-only LISTs of their owners (job/pods.py), only when some remain.
    needed += [Access(api_version.rpartition("/")[0], plural, "list")
               for api_version, plural in pods.LISTABLE.values()]
    if not settings.dry_run:
        needed.append(Access(policy_api.GROUP, f"{policy_api.PLURAL}/status", "patch"))
        if settings.events:
            needed.append(Access("", "events", "create"))
    return list(dict.fromkeys(needed))  # once each, however many reasons ask for it


def _preflight(kube: Kube, settings: Settings) -> None:
    try:
        missing = kube.missing_access(required_access(settings), namespace=settings.own_namespace or "default")
    except ApiError as exc:
        raise _startup_error(kube, exc) from None
    if missing:
        raise StartupError(f"missing RBAC permissions: {', '.join(map(str, missing))}; apply the ClusterRole "
                           f"from kustomize/base (kubectl apply -k kustomize/overlays/prod)")


def _startup_error(kube: Kube, exc: ApiError) -> StartupError:
    if exc.status == 0:
        return StartupError(f"{exc.message}; check --kubeconfig/--context and that the cluster is up")
    if exc.status == 401:
        return StartupError(f"the API server at {kube.server} rejected the credentials (401): renew the "
                            f"token or certificate in the kubeconfig")
    return StartupError(f"the API server at {kube.server} refused the first request: {exc}")


def _observe_policies(kube: Kube, settings: Settings) -> list[Policy | InvalidPolicy]:
    try:
        objs = list(kube.list_all(version=policy_api.API_VERSION, plural=policy_api.PLURAL))
    except ApiError as exc:
        if exc.status == 404:
            raise StartupError(f"the NSScaler CRD ({policy_api.CRD_NAME}) is not installed: run "
                               f"kubectl apply -k kustomize/overlays/prod") from None
        raise _startup_error(kube, exc) from None
    default_kinds = frozenset(settings.default_kinds)
    return sorted((policy_api.parse(o, default_kinds=default_kinds) for o in objs), key=lambda p: p.name)


def _observe_workloads(kube: Kube, kinds: frozenset[Kind]) -> list[Workload]:
    """Kinds a policy freezes are LISTed whole; the others only where they carry our record (a restore
    sweep, selected server-side by label). Either way, one paginated LIST per kind, cluster-wide."""
    workloads: list[Workload] = []
    for kind, handler in HANDLERS.items():
        selector = None if kind in kinds else SCALED_SELECTOR
        workloads += (from_api(kind, o) for o in kube.list_all(version=handler.api_version, plural=handler.plural,
                                                               label_selector=selector))
    return workloads


class _Applier:
    """Sends the plan's PATCHes, concurrently; on 409 re-reads that one object and decides again."""

    def __init__(self, kube: Kube, settings: Settings, *, policies: Sequence[Policy | InvalidPolicy],
                 namespaces: Sequence[Namespace], now: dt.datetime) -> None:
        self.kube, self.settings, self.policies, self.namespaces, self.now = kube, settings, policies, namespaces, now
        self._event_budget = threading.Semaphore(settings.workload_events_limit if settings.events else 0)

    def apply(self, actions: list[Action]) -> list[ActionResult]:
        if not actions:
            return []
        with ThreadPoolExecutor(max_workers=self.settings.concurrency, thread_name_prefix="patch") as pool:
            return list(pool.map(self._apply_one, actions))

    def _apply_one(self, action: Action) -> ActionResult:
        for _ in range(self.settings.conflict_retries + 1):
            handler = HANDLERS[action.workload.kind]
            w = action.workload
            try:
                self.kube.patch(version=handler.api_version, plural=handler.plural, namespace=w.namespace,
                                name=w.name, body=action.patch, dry_run=action.dry_run)
            except Conflict:
                try:
                    fresh = self.kube.get(version=handler.api_version, plural=handler.plural,
                                          namespace=w.namespace, name=w.name)
                except ApiError as exc:
                    return self._result(action, "gone" if exc.status == 404 else "failed", str(exc))
                replan = make_plan(self.policies, namespaces=self.namespaces, workloads=[from_api(w.kind, fresh)],
                                   settings=self.settings)
                if replan.problems:
                    return self._result(action, "failed", replan.problems[0].message)
                if not replan.actions:
                    return self._result(action, "settled", "changed concurrently; nothing left to do")
                action = replan.actions[0]
                continue
            except ApiError as exc:
                if exc.status == 404:
                    return self._result(action, "gone", "deleted during the run")
                return self._result(action, "failed", str(exc))
            return self._result(action, "dry-run" if action.dry_run else "applied")
        return self._result(action, "failed", f"still conflicting after {self.settings.conflict_retries} re-reads")

    def _result(self, action: Action, outcome: str, message: str = "") -> ActionResult:
        w = action.workload
        before, after = HANDLERS[w.kind].describe(w.size), HANDLERS[w.kind].describe(action.after)
        fields = {"event": action.verb.value, "outcome": outcome, "policy": action.policy, "namespace": w.namespace,
                  "kind": w.kind.value, "workload": w.name, "before": before, "after": after, "reason": action.reason}
        if outcome == "failed":
            log.error("%s %s failed: %s", action.verb.value, w.ref, message, extra=fields)
        else:
            log.info("%s %s: %s -> %s (%s)%s", action.verb.value, w.ref, before, after, action.reason,
                     f" [{outcome}]" if outcome != "applied" else "", extra=fields)
        if outcome == "applied" and action.verb is not Verb.ADOPT and self._event_budget.acquire(blocking=False):
            verb = "froze" if action.verb is Verb.FREEZE else "restored"
            involved = {"apiVersion": HANDLERS[w.kind].api_version, "kind": w.kind.value, "name": w.name,
                        "namespace": w.namespace, "uid": w.uid}
            _record_event(self.kube, now=self.now, namespace=w.namespace, involved=involved, warning=False,
                          reason="Frozen" if action.verb is Verb.FREEZE else "Restored",
                          message=f"NSScaler {action.policy} {verb} {w.kind.value} {w.name}: {before} -> {after} "
                                  f"({action.reason})")
        return ActionResult(action, outcome, message)


def _record_event(kube: Kube, *, now: dt.datetime, namespace: str, involved: dict[str, str], reason: str,
                  message: str, warning: bool) -> None:
    try:
        kube.create_event(namespace=namespace, involved=involved, reason=reason, message=message, warning=warning,
                          now=now)
    except ApiError as exc:  # an Event is a courtesy: never fail a freeze for it
        log.warning("could not record Event %s on %s: %s", reason, involved["name"], exc,
                    extra={"event": "event-failed"})


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
                else:
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
        _preflight(kube, settings)
        policies = _observe_policies(kube, settings)
        try:
            namespaces = [Namespace(name=o["metadata"]["name"],
                                    terminating=bool(o["metadata"].get("deletionTimestamp")))
                          for o in kube.list_all(version="v1", plural="namespaces", metadata_only=True)]
            workloads = _observe_workloads(kube, kinds_in_use(policies))
        except ApiError as exc:
            raise _startup_error(kube, exc) from None
        phase("observe")
        plan = make_plan(policies, namespaces=namespaces, workloads=workloads, settings=settings)
        drain = drain_api.Drain(pods.Census(),
                                gitops_managed=drain_api.gitops_managed(policies, plan=plan, workloads=workloads))
        del workloads  # the plan keeps what it needs; free the rest before the PATCHes
        phase("plan")
        applier = _Applier(kube, settings, policies=policies, namespaces=namespaces, now=now)
        report.results = applier.apply(plan.actions)
        _record_reverts(kube, report.results, settings=settings, now=now)
        phase("apply")
        try:
            drain.census = drain_api.census(kube, plan.held_by)
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
