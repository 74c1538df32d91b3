"""What a run achieved, policy by policy (pure): the decision, the write results and the Pod census composed
into each NSScaler's outcome, from which its status (`job.decide.status`) and the report are built."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from job.decide import drain, freed, pods, settling, syncs
from job.decide.actions import ActionResult, Verb, failure_message
from job.decide.decision import Decision
from job.decide.freed import Freed
from job.decide.gitops import Revert
from job.decide.plan import PolicyPlan
from job.decide.pods import Remaining
from job.decide.selection import PolicySelection
from job.decide.settling import Settling
from job.model.policy import InvalidPolicy, Policy
from job.model.settings import Settings
from job.model.syncs import SyncAttempt
from job.model.workloads import Workload

_COUNTED = {Verb.FREEZE: "frozen", Verb.RESTORE: "restored", Verb.ADOPT: "adopted"}


@dataclass(frozen=True)
class PolicyOutcome(PolicyPlan):
    """Everything one run learned and did for one NSScaler: the planner's findings (`PolicyPlan`, extended
    rather than copied), then what carrying them out achieved and what the Pod census found."""

    uid: str = ""
    previous_status: dict[str, Any] = field(default_factory=dict)
    invalid: str | None = None
    suspended: bool = False
    dry_run: bool = False
    frozen: int = 0
    restored: int = 0
    adopted: int = 0
    failures: list[str] = field(default_factory=list)
    #: Pods in held namespaces that block `done` (their owners, and why, in `remaining`)
    pods_left: int = 0
    #: Pods in held namespaces whose owner chain ends in an excluded object: meant to run
    pods_excluded: int = 0
    remaining: list[Remaining] = field(default_factory=list)
    #: set when the Pods could not be read: `done` is then unknown, so false
    pods_unknown: str | None = None
    reverted: list[Revert] = field(default_factory=list)
    #: GitOps syncs into namespaces it holds that the hold refused (`job.decide.syncs`)
    syncs_refused: list[syncs.RefusedSync] = field(default_factory=list)
    gitops_managed: int = 0
    cap_message: str | None = None
    #: which namespaces the selection kept or held and why, and whether the policy holds at all now
    selection: PolicySelection | None = None
    #: what the workloads it holds frozen gave back (`job.decide.freed`)
    freed: Freed = field(default_factory=Freed)
    #: objects it froze the operator's way whose operator does not report them frozen yet (`job.decide.settling`)
    settling: list[Settling] = field(default_factory=list)

    @property
    def holding(self) -> bool:
        return self.selection.holding if self.selection is not None else (
            self.invalid is None and not self.suspended)

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def done(self) -> bool:
        """True only when this policy serves, no Pod is left in any namespace it holds, and every operator it froze
        an object through reports that object frozen."""
        return (self.invalid is None and not self.suspended and self.pods_left == 0
                and self.pods_unknown is None and not self.settling)

    @property
    def incomplete(self) -> list[Settling]:
        """The freezes whose operator has not reported them done within their row's `within`."""
        return [s for s in self.settling if s.overdue]

    @property
    def ok(self) -> bool:
        return self.invalid is None and not self.failures and self.cap_message is None


@dataclass(frozen=True)
class SecondRead:
    """What the run's second read found: the Pod census (`job.decide.pods.Census`) of held namespaces, or why
    it could not be read."""

    pods: pods.Census
    unknown: str | None = None


def outcomes(policies: Sequence[Policy | InvalidPolicy], *, decision: Decision, results: Sequence[ActionResult],
             census: SecondRead, settings: Settings, workloads: Iterable[Workload] = (),
             attempts: Iterable[SyncAttempt] = (), now: dt.datetime | None = None) -> list[PolicyOutcome]:
    """One outcome per policy, in the order of `policies`. `workloads`: the snapshot's, for what the freezes
    free (`job.decide.freed`) and the freezes that wait for their operator (`job.decide.settling`, from `now`);
    `attempts`: the GitOps objects read (`job.decide.syncs`, at `now`)."""
    workloads = list(workloads)
    refused = syncs.refused(attempts, decision.plan.selection, now=now,
                            previous={p.name: p.status for p in policies}) if attempts else {}
    failed = drain.failed_refs(results, decision.problems)
    reverts = drain.reverts(list(results))
    gave_back = freed.by_policy(workloads, results)
    out = []
    for p in policies:
        if isinstance(p, InvalidPolicy):
            # what it froze stays frozen (an invalid policy restores nothing): still freed
            out.append(PolicyOutcome(name=p.name, generation=p.generation, uid=p.uid, previous_status=p.status,
                                     invalid=p.message, freed=gave_back.get(p.name, freed.Freed())))
            continue
        found = _outcome(p, decision=decision, results=results, census=census, settings=settings, failed=failed,
                         reverted=[r for r in reverts if r.policy == p.name])
        waiting = settling.waiting(workloads, policy=p.name, held=found.held, results=results,
                                   now=now) if now is not None and not found.dry_run else []
        out.append(replace(found, freed=gave_back.get(p.name, freed.Freed()), settling=waiting,
                           syncs_refused=refused.get(p.name, [])))
    return out


def _outcome(policy: Policy, *, decision: Decision, results: Sequence[ActionResult], census: SecondRead,
             settings: Settings, failed: dict[pods.Ref, str], reverted: list[Revert]) -> PolicyOutcome:
    plan = decision.plan
    found = plan.policies[policy.name]
    dry_run = settings.dry_run or policy.spec.dry_run
    cap_message = plan.cap_message if not policy.spec.suspend else None
    view = pods.PolicyView(kinds=frozenset(str(k) for k in policy.kinds), dry_run=dry_run,
                           capped=cap_message is not None, failures=failed)
    remaining, pods_excluded = pods.tally(census.pods, found.held, view=view)
    counts, failures = _counted(policy.name, results)
    failures += [pr.message for pr in decision.problems if pr.policy == policy.name]
    findings = {f.name: getattr(found, f.name) for f in fields(PolicyPlan)}
    findings["unchanged"] += counts["unchanged"]
    return PolicyOutcome(
        **findings, frozen=counts["frozen"], restored=counts["restored"], adopted=counts["adopted"],
        uid=policy.uid, previous_status=policy.status, suspended=policy.spec.suspend, dry_run=dry_run,
        failures=failures, pods_left=sum(r.pods for r in remaining), pods_excluded=pods_excluded,
        remaining=remaining, pods_unknown=census.unknown if found.held else None, reverted=reverted,
        gitops_managed=decision.gitops_managed[policy.name], cap_message=cap_message,
        selection=plan.selection.policies.get(policy.name) if plan.selection is not None else None)


def _counted(policy: str, results: Sequence[ActionResult]) -> tuple[Counter[str], list[str]]:
    """Per outcome field, how many of the policy's changes went through; and the failed ones, in words."""
    counts: Counter[str] = Counter()
    failures = []
    for r in results:
        if r.action.policy != policy:
            continue
        if r.outcome in ("applied", "dry-run"):
            if r.action.verb in _COUNTED:
                counts[_COUNTED[r.action.verb]] += 1
        elif r.outcome in ("failed", "deferred"):
            failures.append(f"{r.action.verb.value} {r.action.workload.ref}: {failure_message(r)}")
        else:
            counts["unchanged"] += 1
    return counts, failures


def with_status_failure(outcome: PolicyOutcome, error: str) -> PolicyOutcome:
    """The outcome of a policy whose status could not be written: that is a failure of the run too."""
    return replace(outcome, failures=[*outcome.failures, f"writing status: {error}"])
