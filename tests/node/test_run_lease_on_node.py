"""A CronJob Pod that dies mid-run never silences the runs after it (the run Lease on a real node).

The family's Deployments are created paused: the Deployment controller then makes no ReplicaSet and no Pod, so
a family of 100 namespaces costs the node nothing, while nsscaler freezes and restores `spec.replicas` exactly as
for any other Deployment. What runs for real here is nsscaler's own Pod: its image, its downward-API identity,
the kubelet that kills it, the Job controller that replaces it, and the run-admission policy it writes under.
"""

from __future__ import annotations

import copy
import datetime as dt
import time
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from job.decide.lease import LEASE_NAME
from job.model import marks
from tests.node.conftest import NAMESPACE, job_result, kubectl_out

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("installed")]
FAMILY, REPLICAS, ROUNDS = 100, 3, 5


def paused_family(api: AdminApi, prefix: str) -> list[str]:
    names = [f"{prefix}n{i:03}" for i in range(FAMILY)]
    for ns in names:
        api.create(builders.namespace(ns))
        deployment = builders.deployment(ns, "d-web", REPLICAS)
        deployment["spec"]["paused"] = True
        api.create(deployment)
    return names


def holder(api: AdminApi) -> str:
    if not api.exists("Lease", LEASE_NAME, NAMESPACE):
        return ""
    return api.get("Lease", LEASE_NAME, NAMESPACE)["spec"].get("holderIdentity") or ""


def job_pod(api: AdminApi, job: str) -> dict[str, Any] | None:
    pods = api.list("Pod", NAMESPACE, labelSelector=f"job-name={job}")
    return pods[0] if pods else None


def sizes(api: AdminApi, names: list[str]) -> dict[str, int]:
    """Every namespace's size in one LIST (one request: fast enough to watch a run's writes land)."""
    wanted = set(names)
    return {d["metadata"]["namespace"]: d["spec"]["replicas"] for d in api.list("Deployment")
            if d["metadata"]["namespace"] in wanted}


@pytest.fixture
def one_write_at_a_time(api: AdminApi):
    """The CronJob's runs send one PATCH at a time, so that a run's writes last long enough to be killed amid
    them; the CronJob as it was afterwards."""
    before = api.get("CronJob", "nsscaler", NAMESPACE)["spec"]["jobTemplate"]
    containers = copy.deepcopy(before["spec"]["template"]["spec"]["containers"])
    containers[0]["env"].append({"name": "NSSCALER_CONCURRENCY", "value": "1"})
    api.patch("CronJob", "nsscaler", {"spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "containers": containers}}}}}}, NAMESPACE)
    yield
    api.patch("CronJob", "nsscaler", {"spec": {"jobTemplate": before}}, NAMESPACE)


@pytest.mark.usefixtures("one_write_at_a_time")
def test_a_run_pod_force_deleted_mid_write_does_not_stop_the_next_run(
        control_plane: controlplane.ControlPlane, api: AdminApi, prefix: str, figures: list[str]) -> None:
    """The issue's case on a real node, five times: a family of 100 namespaces moves between two allow lists;
    each time, the Job's Pod is force-deleted (a drain, an OOM kill, a preemption) as soon as the Lease names it,
    that is as it starts writing; then a clean Job is created at once. The clean Job exits 0 and leaves every
    namespace where the policy wants it, each frozen one with its exact record: the dead Pod's Lease stopped
    nobody. The point of the kill is chosen by what the test sees on the server (the Lease taken), never by a
    sleep; how many of the round's changes had landed just after it is a figure, not an assertion (the dead
    Pod's process may still send a few before the kubelet stops it; here, one PATCH at a time still outruns the
    kill, which lands while the run writes its statuses and Events: the Lease names a dead Pod either way). A
    kill amid the workload PATCHes is proven on the test host (tests/integration/test_faults.py SIGKILLs)."""
    names = paused_family(api, prefix)
    evens = [f"n{i:03}" for i in range(0, FAMILY, 2)]
    odds = [f"n{i:03}" for i in range(1, FAMILY, 2)]
    api.create(builders.nsscaler(f"{prefix}p", prefix, evens))
    first = job_result(control_plane, api, _create_job(control_plane, "lease-first"))
    assert first.exit_code == 0, first.log
    took_over: list[float] = []
    landed_before_kill: list[int] = []

    for round_ in range(ROUNDS):
        active = odds if round_ % 2 == 0 else evens
        api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": active}})
        want = {prefix + s for s in active}
        before = sizes(api, names)
        killed = _create_job(control_plane, f"lease-killed-{round_}")
        pod = _holding_pod(api, killed)
        kubectl_out(control_plane, "-n", NAMESPACE, "delete", "pod", pod, "--force", "--grace-period=0")
        killed_at = time.time()
        landed_before_kill.append(sum(1 for ns, n in sizes(api, names).items() if n != before[ns]))

        clean = _create_job(control_plane, f"lease-clean-{round_}")
        result = job_result(control_plane, api, clean)
        assert result.exit_code == 0, result.log
        took_over.append(_completed_at(result.job) - killed_at)
        after = sizes(api, names)
        wrong = {ns: n for ns, n in after.items() if n != (REPLICAS if ns in want else 0)}
        assert not wrong, f"round {round_}: not where the policy wants them: {wrong}"
        for ns in names:
            if ns not in want:
                record = api.get("Deployment", "d-web", ns)["metadata"]["annotations"]
                assert record.get(marks.ANNOTATION_ORIGINAL_REPLICAS) == str(REPLICAS), (ns, record)
        generation = api.get("NSScaler", f"{prefix}p")["metadata"]["generation"]
        status = api.status(f"{prefix}p")  # this round's, written by the run that held the Lease
        assert status["observedGeneration"] == generation and not status["failures"], status
        wait_until(lambda job=killed: _finished(api, job), timeout=180, what=f"{killed} (its replacement Pod)")

    figures.append(f"run Pod force-deleted as it took the Lease, {ROUNDS} rounds of {FAMILY} namespaces: of "
                   f"{FAMILY} changes, landed just after each kill {landed_before_kill}; the clean Job complete "
                   f"{', '.join(f'{s:.0f}' for s in took_over)} s after each kill, exit 0 each time")


def _create_job(plane: controlplane.ControlPlane, name: str) -> str:
    kubectl_out(plane, "-n", NAMESPACE, "create", "job", "--from=cronjob/nsscaler", name)
    return name


def _holding_pod(api: AdminApi, job: str, *, timeout: float = 120) -> str:
    """The name of `job`'s Pod once the run Lease names it (polled fast: the run holds it only while it writes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = job_pod(api, job)
        if pod is not None and holder(api).startswith(pod["metadata"]["name"] + "/"):
            return str(pod["metadata"]["name"])
        time.sleep(0.02)
    raise AssertionError(f"{job}'s Pod never held the run Lease within {timeout}s")


def _finished(api: AdminApi, job: str) -> bool:
    conditions = api.get("Job", job, NAMESPACE).get("status", {}).get("conditions", [])
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


def _completed_at(job: dict[str, Any]) -> float:
    """When the Job controller saw the Job complete (whole seconds)."""
    return dt.datetime.fromisoformat(job["status"]["completionTime"].replace("Z", "+00:00")).timestamp()
