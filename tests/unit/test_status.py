"""The Drained condition and the lists that say what still runs and who fought a freeze (pure)."""

from __future__ import annotations

import datetime as dt

import pytest

from job.decide import gitops
from job.decide.outcome import PolicyOutcome
from job.decide.pods import Remaining
from job.decide.status import OWNERS_IN_MESSAGE, build_status
from job.model import managed

NOW = dt.datetime(2026, 12, 3, 8, 0, tzinfo=dt.UTC)
HELD = ["shop-v1", "shop-v2"]


def drained(outcome: PolicyOutcome, list_limit: int = 20) -> tuple[dict, dict]:
    status = build_status(outcome, now=NOW, list_limit=list_limit)
    return status, next(c for c in status["conditions"] if c["type"] == "Drained")


def remaining(n: int) -> list[Remaining]:
    return [Remaining("shop-v1", f"DaemonSet/agent-{i}", 2, "nsscaler does not freeze DaemonSets: …")
            for i in range(n)]


@pytest.mark.parametrize(("outcome", "status", "reason", "says"), [
    pytest.param(PolicyOutcome("p", 1, held=HELD), "True", "NoPodsLeft", "no Pod left in the 2 held namespaces",
                 id="nothing-left"),
    pytest.param(PolicyOutcome("p", 1, held=HELD, pods_excluded=3), "True", "NoPodsLeft",
                 "except 3 Pods of excluded workloads", id="only-excluded-left"),
    pytest.param(PolicyOutcome("p", 1, held=HELD, pods_left=2, remaining=remaining(1)), "False", "PodsRemaining",
                 "2 Pods still run in held namespaces: shop-v1 DaemonSet/agent-0 (2 Pods): nsscaler does not freeze",
                 id="one-owner"),
    pytest.param(PolicyOutcome("p", 1, held=HELD, pods_left=10, remaining=remaining(5)), "False", "PodsRemaining",
                 f"and {5 - OWNERS_IN_MESSAGE} more owners in status.remaining", id="many-owners"),
    pytest.param(PolicyOutcome("p", 1, held=HELD, pods_unknown="503 unavailable"), "False", "PodsRemaining",
                 "could not check the Pods: 503 unavailable", id="pods-unknown"),
])
def test_drained_condition(outcome, status, reason, says):
    body, condition = drained(outcome)
    assert (condition["status"], condition["reason"]) == (status, reason)
    assert says in condition["message"]
    assert body["done"] is (status == "True")


def test_remaining_is_capped_by_the_list_limit_and_counts_are_complete():
    body, _ = drained(PolicyOutcome("p", 1, held=HELD, pods_left=14, remaining=remaining(7), pods_excluded=4),
                      list_limit=3)
    assert len(body["remaining"]) == 3
    assert body["remaining"][0] == {"namespace": "shop-v1", "owner": "DaemonSet/agent-0", "pods": 2,
                                    "reason": "nsscaler does not freeze DaemonSets: …"}
    assert (body["counts"]["podsLeft"], body["counts"]["podsExcluded"]) == (14, 4)


def test_reverted_names_the_manager_and_the_fix():
    revert = gitops.revert(policy="p", namespace="shop-v1", kind="Deployment", api_version="apps/v1", name="web",
                           size_path=("spec", "replicas"), manager="argocd-controller", managed_by=managed.ARGO_CD)
    body, _ = drained(PolicyOutcome("p", 1, held=HELD, reverted=[revert], gitops_managed=2))
    assert body["counts"]["reverted"] == 1 and body["counts"]["gitOpsManaged"] == 2
    assert body["reverted"] == [{"namespace": "shop-v1", "workload": "Deployment/web", "manager": "argocd-controller",
                                 "gitOps": "Argo CD", "fix": revert.fix}]
    ready = next(c for c in body["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and "scaled up again during the freeze" in ready["message"]
