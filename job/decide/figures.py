"""The figures of a policy's status, declared once (pure): each count's key, what it means, how it is computed
from the run's outcome, and where else it shows (the JSON report, a `kubectl get` column, a metric).

`status.counts` and the JSON report's figures are built from this table; the CRD's status schema and printer
columns, the kube-state-metrics config and docs/reference/metrics.md are checked against it
(`tests/unit/test_figures.py`, which names the file to change). Adding a figure is one entry here and its
computation on `PolicyOutcome`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from job.decide.outcome import PolicyOutcome


@dataclass(frozen=True)
class Figure:
    #: `status.counts.<key>`, and the JSON report's key where `in_report`
    key: str
    #: what it counts, in words (the metric's help says the same)
    meaning: str
    value: Callable[[PolicyOutcome], int]
    #: the kube-state-metrics metric, `nsscaler_policy_<metric>`
    metric: str
    #: a column of `kubectl get nsscalers`, if any
    column: str | None = None
    #: in each policy's entry of the JSON report (`--output json`)
    in_report: bool = False


def _recent(o: PolicyOutcome) -> int:
    return len(o.selection.recent) if o.selection else 0


def _woken(o: PolicyOutcome) -> int:
    return len(o.selection.woken) if o.selection else 0


COUNTS: tuple[Figure, ...] = (
    Figure("heldNamespaces", "namespaces the policy holds at zero", lambda o: len(o.held), "held_namespaces",
           column="Held"),
    Figure("activeNamespaces", "in-scope namespaces kept running as active", lambda o: len(o.active),
           "active_namespaces"),
    Figure("recentNamespaces", "in-scope namespaces kept running as among the keep_recent most recently active",
           _recent, "recent_namespaces"),
    Figure("wokenNamespaces", "namespaces the policy would hold, kept running by a Wake", _woken,
           "woken_namespaces"),
    Figure("frozen", "workloads the last run froze", lambda o: o.frozen, "frozen_workloads", in_report=True),
    Figure("restored", "workloads the last run restored", lambda o: o.restored, "restored_workloads",
           in_report=True),
    Figure("unchanged", "workloads found already frozen and left as they were", lambda o: o.unchanged,
           "unchanged_workloads", in_report=True),
    Figure("excluded", "workloads skipped for the exclude annotation", lambda o: o.excluded, "excluded_workloads",
           in_report=True),
    Figure("keptFrozen", "workloads left frozen: restore is false or the policy is suspended",
           lambda o: o.kept_frozen, "kept_frozen_workloads", in_report=True),
    Figure("failed", "changes that failed in the last run", lambda o: o.failed, "failed_changes"),
    Figure("podsLeft", "Pods still running in held namespaces", lambda o: o.pods_left, "pods_left",
           in_report=True),
    Figure("podsExcluded", "Pods left running on purpose: their owner is annotated exclude",
           lambda o: o.pods_excluded, "pods_excluded", in_report=True),
    Figure("reverted", "frozen workloads found scaled up again by someone else and frozen again",
           lambda o: len(o.reverted), "reverted_workloads"),
    Figure("syncsRefused", "GitOps syncs into held namespaces that the hold refused, as their controllers keep them",
           lambda o: len(o.syncs_refused), "refused_syncs"),
    Figure("gitOpsManaged", "workloads in held namespaces that Argo CD or Flux manages",
           lambda o: o.gitops_managed, "gitops_managed_workloads", in_report=True),
    Figure("restoring", "namespaces whose next restore tier waits for the earlier ones", lambda o: len(o.restoring),
           "restoring_namespaces", column="Restoring"),
)


def counts(outcome: PolicyOutcome) -> dict[str, int]:
    """`status.counts`."""
    return {f.key: f.value(outcome) for f in COUNTS}


def report_figures(outcome: PolicyOutcome) -> dict[str, int]:
    """The figures of a policy's entry in the JSON report."""
    return {f.key: f.value(outcome) for f in COUNTS if f.in_report}
