"""`nsscaler release`: give back every workload nsscaler holds, across all policies, before nsscaler is removed.

First the runs stop, for good (`job.decide.release`, rule 5): nsscaler's own CronJob is suspended and marked
released, and a run that was writing at that moment is waited for (the release takes the run Lease once, and
gives it back: every run that writes afterwards reads the mark under the Lease, and freezes nothing). Then
passes of the run's own stages, with the policies released (`job.decide.release`): read, decide, write; again
while a namespace's next restore tier waits for the earlier ones (every `TIER_POLL_SECONDS`, each tier at most
`--restore-wait-in-run` seconds), until nothing is left to send. Then one more read: whatever still carries a
record is named with why, and the release fails. No status and no Event is written: the policies are about to
go, and the workloads' restores are in the log, one line each.

Exit codes: 0 every workload given back (no record left), 1 something left (each named), or a run kept the Lease
all the while; 2 could not start (the CronJob could not be suspended, asked for a dry run).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field, replace

from job.cluster import lease, own_cronjob, read, routes
from job.cluster.access import custom_kinds, preflight
from job.cluster.hold import write_marks
from job.cluster.kube import Kube
from job.decide import hold
from job.decide import release as release_api
from job.decide.actions import ActionResult, Verb
from job.decide.decision import Decision
from job.decide.release import Left
from job.decide.tiers import MAX_TIER
from job.errors import StartupError
from job.model.marks import OWN_CRONJOB
from job.model.settings import Settings
from job.model.snapshot import Snapshot
from job.run import TIER_POLL_SECONDS, _decided, _write, read_snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReleaseReport:
    started: dt.datetime
    results: list[ActionResult] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)
    passes: int = 0
    #: routes still pointed at the waker, each with why
    routes_left: list[str] = field(default_factory=list)
    #: hold marks that could not be lifted, each with why
    holds_left: list[str] = field(default_factory=list)

    @property
    def restored(self) -> int:
        return sum(1 for r in self.results if r.action.verb is Verb.RESTORE and r.outcome == "applied")

    @property
    def exit_code(self) -> int:
        return 1 if self.left or self.routes_left or self.holds_left else 0


def _released(kube: Kube, settings: Settings, *, now: dt.datetime) -> Snapshot:
    """What the run reads (the policies as they are decide what is read: their custom kinds, their families),
    with the policies then released."""
    snapshot = read_snapshot(kube, settings, now=now, every_row=True)
    if snapshot.forbidden:  # what it cannot read it cannot give back: said, as any missing permission (exit 2)
        raise StartupError("; ".join(snapshot.forbidden))
    wait = dt.timedelta(seconds=settings.restore_wait_in_run)
    # every policy, as it is, is also leaving: its routes finalizer says whether routes may still be pointed
    return replace(snapshot, policies=release_api.released(snapshot.policies, now=now, wait=wait),
                   leaving=(*snapshot.policies, *snapshot.leaving))


def _sends(decision: Decision) -> bool:
    return any(step for step in decision.steps) or bool(decision.refused)


def stop_the_runs(kube: Kube, settings: Settings, *, now: dt.datetime) -> None:
    """Rule 5 of `job.decide.release`: the CronJob suspended and marked, then a run writing at that moment waited
    for (at most `--lease-wait`). Without `--own-namespace` no CronJob is known: said, and nothing stopped."""
    namespace = settings.own_namespace
    if namespace is None:
        log.warning("no --own-namespace: the release suspends no CronJob, so a run may freeze again what it gives "
                    "back; suspend nsscaler's CronJob first", extra={"event": "release-suspended"})
        return
    if not own_cronjob.suspend_for_release(kube, namespace, now=now):
        log.info("no CronJob %s in %s: no scheduled run to stop", OWN_CRONJOB, namespace,
                 extra={"event": "release-suspended"})
    me = lease.identity(pod_name=settings.pod_name, pod_uid=settings.pod_uid)
    held = lease.take(kube, namespace, me=me, wait=settings.lease_wait)
    if held is not None:
        raise StartupError(f"a run still holds the run Lease ({held}) after {settings.lease_wait:.0f}s; the CronJob "
                           f"is suspended and marked, so no new run writes: run the release again", retryable=True)
    lease.give_back(kube, namespace, me=me)


def release(kube: Kube, settings: Settings, *, now: dt.datetime) -> ReleaseReport:
    """Give back everything; raises StartupError when the release cannot start at all."""
    if settings.dry_run:
        raise StartupError(release_api.NEVER_A_DRY_RUN)
    stop_the_runs(kube, settings, now=now)
    # every hold lifted before anything comes back (`job.decide.hold`, rule 4): no run writes one again now
    holds_left = write_marks(kube, hold.lifted(read.namespaces(kube)), dry_run=False)
    started = time.monotonic()
    # every tier may wait its bounded time, and the tiers come one after another
    give_up = started + settings.restore_wait_in_run * (MAX_TIER + 1) + TIER_POLL_SECONDS
    results: list[ActionResult] = []
    passes = 0
    while True:
        at = now + dt.timedelta(seconds=time.monotonic() - started)
        snapshot, decision = _decided(kube, _released(kube, settings, now=at), settings=settings, now=at)
        decision = release_api.relabelled(decision)
        passes += 1
        if not _sends(decision) and not decision.plan.waits:
            break  # nothing left to give back, or only what a release never touches
        if passes == 1:  # what the release lacks is named before its first write (exit 2)
            preflight(kube, settings, custom=custom_kinds(snapshot.workloads))
        sent = _write(kube, snapshot, decision, settings=settings, now=at, stop_at=None)
        results += sent
        if time.monotonic() + TIER_POLL_SECONDS > give_up:
            break
        if not decision.plan.waits and all(r.outcome == "failed" for r in sent):
            break  # every write failed and nothing waits: trying again at once would only fail again
        if decision.plan.waits and not sent:
            time.sleep(TIER_POLL_SECONDS)  # a tier waits for the earlier ones to be available
    if passes > 1 or results:
        snapshot, decision = _decided(kube, _released(kube, settings, now=at), settings=settings, now=at)
    found = release_api.left(snapshot.workloads, namespaces=snapshot.namespaces, results=results,
                             problems=decision.problems, waits=decision.plan.waits)
    # the routes pointed at the waker come back once their namespaces are awake, and the finalizers go
    followed = routes.follow_holds(kube, snapshot, decision, settings=settings, now=at)
    pointed = [f"the HTTPRoutes of {ns} still point at the waker: its workloads are not available yet"
               for ns in followed.waiting]
    return ReleaseReport(started=now, results=results, left=found, passes=passes,
                         routes_left=[*followed.problems, *pointed], holds_left=holds_left)


def log_report(report: ReleaseReport) -> None:
    """One line per workload left frozen, and a summary line."""
    for item in report.left:
        log.error("left frozen: %s: %s", item.ref, item.why,
                  extra={"event": "release-left", "namespace": item.workload.namespace,
                         "kind": item.workload.kind.value, "workload": item.workload.name, "why": item.why})
    for why in report.holds_left:
        log.error("left held: %s", why, extra={"event": "release-left-hold"})
    for why in report.routes_left:
        log.error("left pointed at the waker: %s", why, extra={"event": "release-left-route"})
    failed = sum(1 for r in report.results if r.outcome == "failed")
    text = (f"release gave back {report.restored} workloads in {report.passes} passes; "
            f"{len(report.left)} still frozen" + (f", {failed} writes failed" if failed else ""))
    fields = {"event": "release", "restored": report.restored, "left": len(report.left), "failed": failed,
              "passes": report.passes, "exit_code": report.exit_code}
    if report.left or report.routes_left or report.holds_left:
        log.error("%s: nsscaler is NOT released; fix what is named above and run the release again", text,
                  extra=fields)
    else:
        log.info("%s: every workload nsscaler held is back, no record left", text, extra=fields)
