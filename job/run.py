"""One run, in five stages: read everything, decide in one pure pass, write, look again, report.

    read ──► decide (pure) ──► write ──► look again ──► report
    snapshot   every write      PATCHes   Pod census     outcomes, status bodies,
               (job.decide)     (409:     (second read)  Events (pure), then sent
                                re-read, re-decide)

Orchestration only: the reads and writes are `job.cluster`'s, every decision `job.decide`'s. The run never
lets one policy's trouble stop another's: an invalid spec, a failed PATCH or a failed status write is
recorded in that policy's outcome and the run goes on.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from job import findings
from job.cluster import calendars as calendar_reads
from job.cluster import census as census_api
from job.cluster import lease, operator_pods, own_cronjob, read, routes, row_kinds, syncs
from job.cluster.access import cannot_start, custom_kinds, explain_forbidden, preflight, startup_error
from job.cluster.hold import write_marks
from job.cluster.kube import Kube
from job.cluster.write import DEADLINE, carry_out, send_events, try_rows, write_statuses, write_wake_statuses
from job.decide import budget, hold, reads, tiers, trials, waking
from job.decide import events as events_api
from job.decide import outcome as outcome_api
from job.decide.actions import ActionResult, Verb
from job.decide.contain import quarantine
from job.decide.decision import Decision, again, contained, merged, with_late_routes
from job.decide.drain import frozen_now, reverts
from job.decide.operator_pods import to_count
from job.decide.outcome import PolicyOutcome
from job.decide.plan import excluded_owners_of, kinds_in_use, select_from_workloads, sizes_needed
from job.decide.pods import Census
from job.decide.status import build_status
from job.errors import EXIT_LEASE_HELD, ApiError
from job.model import calendars
from job.model import policy as policy_api
from job.model.kinds import BUILTIN
from job.model.kinds.rows import Row, read_rows
from job.model.policy import InvalidPolicy, Policy
from job.model.settings import Settings
from job.model.snapshot import Snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunReport:
    started: dt.datetime
    dry_run: bool
    policies: list[PolicyOutcome] = field(default_factory=list)
    results: list[ActionResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    #: seconds spent in each stage (read, decide, write, look_again, report): where a slow run spends its time
    phases: dict[str, float] = field(default_factory=dict)
    #: requests sent in each stage: what a feature costs (e.g. `look_again`: the Pod LIST and the owner LISTs)
    phase_requests: dict[str, int] = field(default_factory=dict)
    finished: dt.datetime | None = None
    #: responses 429 (Too Many Requests: API Priority and Fairness queued the run out), each retried
    throttled: int = 0
    #: who held the run Lease all the while this run could wait: it then wrote nothing, statuses included (exit 3)
    lease_held_by: str | None = None
    #: of `requests`, what the run Lease cost (none in a run that had nothing to write)
    lease_requests: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return bool(self.problems) or any(not p.ok for p in self.policies) or any(
            r.outcome == "failed" for r in self.results)

    @property
    def exit_code(self) -> int:
        if self.lease_held_by is not None:
            return EXIT_LEASE_HELD
        return 1 if self.failed else 0

    def count(self, outcome: str, verb: Verb | None = None) -> int:
        return sum(1 for r in self.results if r.outcome == outcome and (verb is None or r.action.verb is verb))


class _Stages:
    """Seconds and requests per stage, measured as the run goes."""

    def __init__(self, kube: Kube) -> None:
        self.kube, self.clock, self.sent = kube, time.perf_counter(), 0
        self.seconds: dict[str, float] = {}
        self.requests: dict[str, int] = {}

    def done(self, name: str) -> None:
        self.seconds[name] = round(time.perf_counter() - self.clock, 3)
        self.clock = time.perf_counter()
        total = sum(self.kube.requests.snapshot().values())
        self.requests[name], self.sent = total - self.sent, total


def run(kube: Kube, settings: Settings, *, now: dt.datetime) -> RunReport:
    """Reconcile every NSScaler once. One run writes at a time across the cluster: a run that has something to
    write takes the run Lease first (`job.decide.lease`), waiting at most `--lease-wait` (and half the soft
    deadline: the rest is for its own work) while another live run holds it; if the other run holds it all that
    while, this one writes nothing, not even the statuses, says who holds it and exits 3. While it writes, it
    renews the Lease; a renewal late or refused stops its writes (the next run goes on). A run that finds nothing
    to do never asks for the Lease. Raises StartupError when the run cannot start at all, and when, holding the
    Lease, it finds its CronJob released (`job.decide.release`, rule 5): then it has written nothing."""
    wait = settings.lease_wait if settings.soft_deadline is None else min(settings.lease_wait,
                                                                           settings.soft_deadline / 2)
    me = lease.identity(pod_name=settings.pod_name, pod_uid=settings.pod_uid)
    run_lease = lease.RunLease(kube, settings.own_namespace or "default", wait=wait, me=me,
                               stale_wait=settings.retry_budget)  # as long as a write retries
    return _run(kube, settings, now=now, run_lease=run_lease)


def _may_write(kube: Kube, run_lease: lease.RunLease) -> bool:
    try:
        return run_lease.ensure()
    except ApiError as exc:
        raise startup_error(kube, exc) from None


def _lease_lost(run_lease: lease.RunLease, results: list[ActionResult]) -> list[str]:
    """What a run that lost its Lease mid-run says (exit 1): the changes it did not send, and that the statuses
    and Events are the next run's."""
    if run_lease.lost is None:
        return []
    unsent = sum(1 for r in results if r.outcome == "deferred")
    return [f"lost the run Lease mid-run ({run_lease.lost}): {unsent} changes not sent, no status or Event "
            f"written; every change sent is recorded on its workload, and the next run goes on"]


def _run(kube: Kube, settings: Settings, *, now: dt.datetime, run_lease: lease.RunLease) -> RunReport:
    stages = _Stages(kube)
    stop_at = None if settings.soft_deadline is None else time.monotonic() + settings.soft_deadline
    report = RunReport(started=now, dry_run=settings.dry_run, phases=stages.seconds,
                       phase_requests=stages.requests)
    try:
        snapshot = read_snapshot(kube, settings, now=now)
        stages.done("read")
        snapshot, decision, first, marks = _prepared(kube, snapshot, settings=settings, now=now)
        if any(decision.steps) or decision.needs or marks:  # what a writing run lacks is named before it writes
            preflight(kube, settings, custom=custom_kinds(snapshot.workloads))
        if not settings.dry_run and (any(decision.steps) or _records(snapshot, decision) or marks):
            if not _may_write(kube, run_lease):
                return _lease_held(kube, report, snapshot, run_lease, settings=settings, now=now)
            # under the Lease: a release marks the CronJob, then waits for the Lease, so no run writes past it
            own_cronjob.refuse_if_released(kube, settings.own_namespace)
            if run_lease.waited:  # the other run wrote while this one waited: what this one read may be stale
                snapshot, decision, first, marks = _prepared(kube, read_snapshot(kube, settings, now=now),
                                                             settings=settings, now=now)
        if not settings.dry_run:  # a row about to be used for a write is tried first (dryRun=All)
            decision = trials.without(decision, try_rows(kube, trials.trials(decision)))
        stages.done("decide")
        # a dry run sends its writes with dryRun=All: nothing to guard, and it never takes the Lease
        holding = (lambda: True) if settings.dry_run else run_lease.holding
        hold_problems = write_marks(kube, marks, dry_run=False, holding=holding)  # lifts first: a Wake opens at once
        if not settings.dry_run:  # the wake budgets' record, before the namespaces it covers come back
            write_statuses(kube, _records(snapshot, decision))
        results = _write(kube, snapshot, decision, settings=settings, now=now, stop_at=stop_at, holding=holding)
        decision, results = _restore_tiers(kube, snapshot, decision, results, settings=settings, now=now,
                                           stop_at=stop_at, may_write=lambda: _may_write(kube, run_lease))
        followed = routes.follow_holds(kube, snapshot, decision, settings=settings, now=now,  # the last tier
                                       may_write=lambda: _may_write(kube, run_lease), first=first)
        stages.done("write")
        census = _look_again(kube, decision, results, namespaces=len(snapshot.namespaces))
        outcomes = outcome_api.outcomes(snapshot.policies, decision=with_late_routes(decision, followed.late),
                                        results=results, census=census, settings=settings, workloads=snapshot.workloads,
                                        attempts=snapshot.syncs, now=now)
        report = replace(report, results=results,
                         problems=[*_orphan_problems(snapshot, decision, results, census), *_wake_problems(snapshot),
                                   *followed.problems, *hold_problems, *_lease_lost(run_lease, results)])
        stages.done("look_again")
        report = replace(report, policies=_report(kube, outcomes, results, decision=decision, settings=settings,
                                                  now=now, writes=run_lease.lost is None))
        findings.log_findings(decision, outcomes)
        stages.done("report")
    finally:
        run_lease.give_back()  # before the counts: what the Lease cost is part of the run's requests
        report = replace(report, requests=kube.requests.snapshot(), throttled=kube.requests.throttled,
                         lease_requests=dict(sorted(run_lease.requests.items())))
    return report


def _records(snapshot: Snapshot, decision: Decision) -> list[tuple[str, dict[str, Any]]]:
    selection = decision.plan.selection
    histories = {n: p.wake_history for n, p in selection.policies.items()} if selection is not None else {}
    return budget.records_first([p for p in snapshot.policies if isinstance(p, Policy)], histories)


def _lease_held(kube: Kube, report: RunReport, snapshot: Snapshot, run_lease: lease.RunLease, *,
                settings: Settings, now: dt.datetime) -> RunReport:
    """Another run held the Lease all the while: this one writes nothing but says so on the Wakes (exit 3)."""
    holder = str(run_lease.held_by)
    send_events(kube, events_api.of_lease_held(snapshot.wakes, holder=holder, settings=settings), now=now)
    return replace(report, lease_held_by=holder)  # the counts: in `_run`'s finally


def _prepared(kube: Kube, snapshot: Snapshot, *, settings: Settings,
              now: dt.datetime) -> tuple[Snapshot, Decision, routes.FirstRead, list[hold.Mark]]:
    """The decision, the routes' first read (the hosts the hold's words name) and the hold marks to write."""
    snapshot, decision = _decided(kube, snapshot, settings=settings, now=now)
    first = routes.first_read(kube, snapshot, decision, settings=settings)
    return snapshot, decision, first, _hold_marks(snapshot, decision, settings=settings, now=now, hosts=first.hosts)


def _hold_marks(snapshot: Snapshot, decision: Decision, *, settings: Settings, now: dt.datetime,
                hosts: Mapping[str, Sequence[str]]) -> list[hold.Mark]:
    """The hold marks to write (`job.decide.hold`); none in a dry run, which writes nothing. They are written
    before anything else of the run: a Wake's namespace opens to its people first."""
    return [] if settings.dry_run else hold.marks(snapshot.namespaces, decision.plan.selection, now=now, hosts=hosts,
                                                  account=hold.account_of(settings.own_namespace,
                                                                          settings.own_service_account),
                                                  opted_out=hold.excluded(snapshot.workloads),
                                                  not_held=hold.unheld(snapshot.workloads, _file_rows(settings)))


def _file_rows(settings: Settings) -> list[Row]:
    """The rows of `--kind-rows` (read again: a file, no request; its problems were said at discovery)."""
    return read_rows(settings.kind_rows)[0] if settings.kind_rows is not None else []


def _decided(kube: Kube, snapshot: Snapshot, *, settings: Settings, now: dt.datetime,
             within: frozenset[str] | None = None) -> tuple[Snapshot, Decision]:
    decision = contained(snapshot, settings=settings, now=now, within=within)
    if decision.needs and snapshot.autoscalers is None:  # the run changes something: they matter now, and only now
        wanted = decision.needs
        del decision  # a first run's plan is large: never two at once
        snapshot = replace(snapshot, autoscalers=read.autoscalers(kube, wanted))
        decision = contained(snapshot, settings=settings, now=now, within=within)
    return snapshot, decision


#: how often a run looks again at the namespaces whose next restore tier waits (`--restore-wait-in-run`)
TIER_POLL_SECONDS = 2.0


def _restore_tiers(kube: Kube, snapshot: Snapshot, decision: Decision, results: list[ActionResult], *,
                   settings: Settings, now: dt.datetime, stop_at: float | None,
                   may_write: Callable[[], bool]) -> tuple[Decision, list[ActionResult]]:
    """While a namespace's next restore tier waits and the run may still wait (`--restore-wait-in-run`, within
    the soft deadline): look again at those namespaces, decide again there, and write. Waiting longer is the
    next run's: the wait is in the workloads' own marks and the policy's status, not in this process. A
    namespace where a write of this run failed is left to the next run: trying it again every 2 s would only
    pile up failures."""
    started = time.monotonic()
    give_up = started + settings.restore_wait_in_run
    give_up = give_up if stop_at is None else min(give_up, stop_at)
    later = decision
    while (waiting := _still_waiting(later, results)) and time.monotonic() + TIER_POLL_SECONDS <= give_up:
        time.sleep(TIER_POLL_SECONDS)
        try:  # what the first pass read there, again, the cheapest way (a GET each when they are few)
            found = list(snapshot.workloads)
            snapshot = replace(snapshot, workloads=tuple(read.complete(
                kube, found, [w for w in found if w.namespace in waiting])))
        except ApiError as exc:
            log.warning("could not look again at the namespaces restoring in tiers; the next run goes on: %s", exc,
                        extra={"event": "tiers"})
            break
        if time.monotonic() >= give_up:  # the read took the rest of the wait: write nothing late
            break
        at = now + dt.timedelta(seconds=time.monotonic() - started)
        snapshot, later = _decided(kube, snapshot, settings=settings, now=at, within=waiting)
        if not settings.dry_run and any(later.steps) and not may_write():
            break  # another run holds the Lease: it goes on with these namespaces
        results = [*results, *_write(kube, snapshot, later, settings=settings, now=at, stop_at=stop_at,
                                     holding=may_write)]
        decision = merged(decision, later, within=waiting)
    return decision, results


def _still_waiting(decision: Decision, results: list[ActionResult]) -> frozenset[str]:
    went = ("applied", "dry-run", "settled", "gone")
    failed = {r.action.workload.namespace for r in results if r.outcome not in went}
    return frozenset(w.namespace for w in decision.plan.waits if not w.dry_run and w.namespace not in failed)


def read_snapshot(kube: Kube, settings: Settings, *, now: dt.datetime, every_row: bool = False) -> Snapshot:
    """The first read: policies, kinds, access, namespaces and workloads, each read the cheapest way the pure
    `job.decide.reads` and `job.decide.listing` say; whole objects only for the workloads a decision needs.
    `every_row` (a release): the records of every active row kind too, named by a policy or not."""
    read.server_version(kube)
    every = read.policies(kube, settings)
    leaving = tuple(p for p in every if p.life.deleting)  # held back by a finalizer: they hold nothing
    policies: Sequence[Policy | InvalidPolicy] = [p for p in every if not p.life.deleting]
    kinds = row_kinds.every_row(kube, settings, policies) if every_row else read.discover(kube, settings, policies)
    policies = policy_api.without_unknown_kinds(policies, kinds.unknown)
    policies = calendars.with_calendars(policies, calendar_reads.calendars(kube, policies,
                                                                       namespace=settings.own_namespace))
    custom = [h for k, h in kinds.handlers.items() if k not in BUILTIN]
    try:
        namespaces = read.namespaces(kube)
        wakes = read.wakes(kube)
        handlers = list(kinds.handlers.values())
        # the first judgement of each policy: one that raises is made invalid here, saying why, and stays so
        policies, guess = quarantine(policies, lambda ps: select_from_workloads(
            ps, namespaces=namespaces, workloads=[], settings=settings, now=now, wakes=wakes))
        workloads = read.workloads(kube, reads.Kinds(
            handlers, kinds_in_use(policies), family=reads.families(policies, handlers, namespaces),
            all_namespaces=len(namespaces), guess=guess))
        policies, selection = quarantine(policies, lambda ps: select_from_workloads(
            ps, namespaces=namespaces, workloads=workloads, settings=settings, now=now, wakes=wakes))
        needed = sizes_needed(workloads, selection=selection, excluded_owners=excluded_owners_of(workloads))
        workloads = read.complete(kube, workloads, needed)
        tiered = tiers.namespaces_to_read(workloads, selection=selection, policies={p.name: p for p in policies})
        workloads, overheads = read.with_overheads(kube, read.whole_namespaces(kube, workloads, handlers, tiered))
        workloads = operator_pods.with_operator_pods(kube, workloads, to_count(workloads, selection))  # its Pods
    except ApiError as exc:
        raise cannot_start(kube, exc, custom=custom) from None
    return Snapshot(policies=tuple(policies), namespaces=tuple(namespaces), workloads=tuple(workloads),
                    wakes=tuple(wakes), overheads=overheads, leaving=leaving,
                    forbidden=tuple(kinds.unknown[k] for k in kinds.forbidden), syncs=syncs.attempts(kube, settings))


def _write(kube: Kube, snapshot: Snapshot, decision: Decision, *, settings: Settings, now: dt.datetime,
           stop_at: float | None, holding: Callable[[], bool] = lambda: True) -> list[ActionResult]:
    redecide = functools.partial(again, decision=decision, snapshot=snapshot, settings=settings, now=now)
    # As sent: the resumes, the workloads' changes and the ones held back, the restores refused without a
    # write (the ScaledObjects could not be read: then there is no resume or pause), then the pauses.
    results = [*carry_out(kube, decision.steps, settings=settings, again=redecide, stop_at=stop_at,
                          holding=holding),
               *decision.refused]
    for revert in reverts(results):
        log.warning(revert.message, extra={"event": "reverted", "policy": revert.policy, "namespace": revert.namespace,
                                           "kind": revert.kind, "workload": revert.name, "manager": revert.manager,
                                           "gitops": revert.tool, "fix": revert.fix})
    return results


def _look_again(kube: Kube, decision: Decision, results: list[ActionResult], *,
                namespaces: int) -> outcome_api.SecondRead:
    """The second read: the Pods left in held namespaces, from owners seeded as this run left them."""
    seeded = Census()
    seeded.seed(decision.census_seed)
    try:
        frozen_now(seeded, results)
        found = census_api.census(kube, decision.plan.held_by, seeded, all_namespaces=namespaces)
    except ApiError as exc:
        explain_forbidden(kube, exc)  # a permission missing: exit 2, naming it
        return outcome_api.SecondRead(seeded, unknown=str(exc))  # unknown is not done
    return outcome_api.SecondRead(found)


def _orphan_problems(snapshot: Snapshot, decision: Decision, results: Sequence[ActionResult],
                     census: outcome_api.SecondRead) -> list[str]:
    """What no status can carry: failures of workloads whose policy is gone, and a census that failed."""
    known = {p.name for p in snapshot.policies}
    problems = [f"could not count Pods for `done`: {census.unknown}"] if census.unknown else []
    deferred = sum(1 for r in results if r.outcome == "deferred" and r.message == DEADLINE)
    if deferred:
        problems.append(f"stopped at the soft deadline (--soft-deadline): {deferred} of {len(results)} changes "
                        f"deferred to the next run, every other one done and in the statuses")
    problems += [f"{r.action.verb.value} {r.action.workload.ref}: {r.message}" for r in results
                 if r.outcome == "failed" and r.action.policy not in known]
    return problems + [pr.message for pr in decision.problems if pr.policy not in known]


def _wake_problems(snapshot: Snapshot) -> list[str]:
    """Wakes that cannot be read: each says why in its own status (Ignored) and makes the run exit 1, as an invalid
    NSScaler does, so that a person's bad input is never only a quiet line in a status."""
    return [f"Wake {w.namespace}/{w.name} ignored: {w.invalid}" for w in snapshot.wakes if w.invalid]


def _report(kube: Kube, outcomes: list[PolicyOutcome], results: list[ActionResult], *, decision: Decision,
            settings: Settings, now: dt.datetime, writes: bool = True) -> list[PolicyOutcome]:
    """The statuses (the NSScalers', then the Wakes' that changed), then the Events (which say whether a
    status could not be written). None in a dry run, nor in a run that lost its Lease (`writes`): another run
    may be writing them."""
    if not settings.dry_run and writes:
        bodies = [(o.name, build_status(o, now=now, list_limit=settings.status_list_limit)) for o in outcomes]
        failed = write_statuses(kube, bodies)
        outcomes = [outcome_api.with_status_failure(o, failed[o.name]) if o.name in failed else o
                    for o in outcomes]
        judged = decision.plan.selection.wakes.values() if decision.plan.selection is not None else ()
        changed = waking.status_updates(judged)
        write_wake_statuses(kube, [(verdict.wake, body) for verdict, body in changed])
        send_events(kube, events_api.of_run(results, outcomes, settings=settings,
                                            wakes=[verdict for verdict, _ in changed]), now=now)
    return outcomes
