"""When a restored workload counts as available (what a later restore tier waits for, `job.decide.tiers`), and how
each kind's size reads in a log line: per kind, from the status its controller writes."""

from __future__ import annotations

from typing import Any

import pytest

from job.model.kinds import BUILTIN, Kind, ReplicasHandler

DEPLOYMENTS, CRONJOBS, DAEMONSETS = BUILTIN[Kind.DEPLOYMENT], BUILTIN[Kind.CRONJOB], BUILTIN[Kind.DAEMONSET]
POOLS = ReplicasHandler(Kind("Pool.test.nsscaler.io"), "test.nsscaler.io", "v1", "pools")


def _obj(spec: dict[str, Any], status: dict[str, Any], generation: int | None = None) -> dict[str, Any]:
    meta = {} if generation is None else {"generation": generation}
    return {"metadata": meta, "spec": spec, "status": status}


@pytest.mark.parametrize(("handler", "spec", "status", "generation", "available"), [
    pytest.param(DEPLOYMENTS, {"replicas": 3}, {"availableReplicas": 3}, None, True, id="all-available"),
    pytest.param(DEPLOYMENTS, {"replicas": 3}, {"availableReplicas": 2}, None, False, id="one-short"),
    pytest.param(DEPLOYMENTS, {"replicas": 3}, {"availableReplicas": 4}, None, True, id="more-during-a-rollout"),
    pytest.param(DEPLOYMENTS, {"replicas": 3}, {"readyReplicas": 3}, None, False,
                 id="a-built-in-kind-is-judged-by-available-not-ready"),
    pytest.param(DEPLOYMENTS, {"replicas": 0}, {}, None, True, id="zero-asked-zero-reported"),
    pytest.param(DEPLOYMENTS, {}, {"availableReplicas": 1}, None, True, id="unset-count-is-one"),
    pytest.param(DEPLOYMENTS, {}, {}, None, False, id="unset-count-none-available"),
    pytest.param(DEPLOYMENTS, {"replicas": 1}, {"availableReplicas": True}, None, False, id="a-flag-is-no-count"),
    pytest.param(DEPLOYMENTS, {"replicas": 3}, {"availableReplicas": 3, "observedGeneration": 1}, 2, False,
                 id="status-of-an-older-spec"),
    pytest.param(DEPLOYMENTS, {"replicas": 3}, {"availableReplicas": 3, "observedGeneration": 2}, 2, True,
                 id="status-of-the-current-spec"),
    pytest.param(POOLS, {"replicas": 3}, {"readyReplicas": 3}, None, True,
                 id="a-custom-kind-reporting-only-ready"),
    pytest.param(POOLS, {"replicas": 3}, {"readyReplicas": 3, "availableReplicas": 2}, None, False,
                 id="a-custom-kind-reporting-available-is-judged-by-it"),
    pytest.param(POOLS, {"replicas": 3}, {"availableReplicas": 3}, None, True, id="a-custom-kind-all-available"),
    pytest.param(DAEMONSETS, {}, {"desiredNumberScheduled": 3, "numberAvailable": 3, "updatedNumberScheduled": 3},
                 None, True, id="daemonset-on-every-node"),
    pytest.param(DAEMONSETS, {}, {"desiredNumberScheduled": 3, "numberAvailable": 2, "updatedNumberScheduled": 3},
                 None, False, id="daemonset-one-node-not-available"),
    pytest.param(DAEMONSETS, {}, {"desiredNumberScheduled": 3, "numberAvailable": 3, "updatedNumberScheduled": 2},
                 None, False, id="daemonset-one-node-not-updated"),
    pytest.param(DAEMONSETS, {}, {"desiredNumberScheduled": 3, "numberAvailable": 4, "updatedNumberScheduled": 4},
                 None, True, id="daemonset-more-than-desired"),
    pytest.param(DAEMONSETS, {}, {}, None, True, id="daemonset-on-no-node"),
    pytest.param(DAEMONSETS, {}, {"desiredNumberScheduled": 1, "numberAvailable": 1, "updatedNumberScheduled": 1,
                                  "observedGeneration": 3}, 4, False, id="daemonset-status-of-an-older-spec"),
    pytest.param(CRONJOBS, {"suspend": False}, {}, None, True, id="a-batch-run-is-never-waited-for"),
])
def test_available_as_its_controller_reports_it(handler, spec, status, generation, available):
    assert handler.available(_obj(spec, status, generation)) is available


@pytest.mark.parametrize(("handler", "size", "words"), [
    pytest.param(DEPLOYMENTS, None, "unknown", id="replicas-unknown"),
    pytest.param(DEPLOYMENTS, 3, "3", id="replicas"),
    pytest.param(CRONJOBS, None, "unknown", id="suspend-unknown"),
    pytest.param(CRONJOBS, 1, "active", id="active"),
    pytest.param(CRONJOBS, 0, "suspended", id="suspended"),
    pytest.param(DAEMONSETS, None, "unknown", id="selector-unknown"),
    pytest.param(DAEMONSETS, 1, "on its nodes", id="on-its-nodes"),
    pytest.param(DAEMONSETS, 0, "off every node", id="off-every-node"),
])
def test_a_size_reads_in_a_log_line_as_its_kind_says(handler, size, words):
    assert handler.describe(size) == words
