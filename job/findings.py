"""What a run found that people should read in its log, each run: the decision's problems, the restore tiers
that wait, and the GitOps syncs the hold refused (the status and the Events say the same, Events once)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from job.decide.decision import Decision
from job.decide.outcome import PolicyOutcome

log = logging.getLogger("job.run")  # the run's own lines, as they were before they moved here


def _waits(decision: Decision) -> None:
    for w in decision.plan.waits:
        log.info("%s: restore tier %d (%d workloads) waits for %s, at most until %s", w.namespace, w.tier, w.pending,
                 ", ".join(w.waiting_for) or "the earlier tiers", w.until.isoformat(),
                 extra={"event": "tier-waiting", "policy": w.policy, "namespace": w.namespace, "tier": w.tier})


def log_findings(decision: Decision, outcomes: Sequence[PolicyOutcome]) -> None:
    """The decision's problems, the tiers that wait, and the GitOps syncs the hold refused (each run, as long as
    they are refused: the Event is said once, the log line every run, like a status)."""
    _problems(decision)
    _waits(decision)
    for r in (r for o in outcomes for r in o.syncs_refused):
        a = r.attempt
        log.warning(r.message, extra={"event": "sync-refused", "policy": r.policy, "namespace": r.namespace,
                                      "gitops": a.kind.tool, "object": a.ref, "revision": a.revision})


def _problems(decision: Decision) -> None:
    for problem in decision.problems:
        log.error(problem.message, extra={"event": "problem", "policy": problem.policy})
    if decision.plan.cap_message:
        log.error(decision.plan.cap_message, extra={"event": "cap-exceeded"})
