"""The CronJob as users run it: its own image on a real node, with workload Pods that really run and stop."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images
from tests.conftest import apply_manifest
from tests.node.conftest import (
    NAMESPACE,
    OVERLAY,
    JobResult,
    finished,
    job_result,
    kubectl_out,
    pod_names,
    run_cronjob_now,
    running_family,
    running_pods,
)

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("installed")]
MEMORY_LIMIT = 128 * 1024 * 1024  # the CronJob's container limit (kustomize/base/cronjob.yaml)


def condition(api: AdminApi, name: str, kind: str) -> str | None:
    found = [c for c in api.status(name).get("conditions", []) if c["type"] == kind]
    return found[0]["status"] if found else None


def assert_clean_success(result: JobResult) -> dict[str, Any]:
    """Complete, exit 0, every log line JSON and the last one the summary; returns the summary."""
    assert result.condition("Complete") and result.condition("Complete")["status"] == "True", result.job["status"]
    assert len(result.pods) == 1 and result.exit_code == 0, result.log
    summary = result.lines[-1]
    assert summary["event"] == "summary" and summary["exit_code"] == 0, summary
    return summary


def test_job_from_the_cronjob_stops_held_pods_keeps_allowed_ones_then_reports_drained(
        control_plane, api, prefix, the_node):
    running_family(api, prefix, {"a": {"d-web": 2, "s-db": 1}, "b": {"d-api": 1}, "live": {"d-web": 1}})
    live_pods = pod_names(api, prefix + "live")
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["live"]))

    first = assert_clean_success(run_cronjob_now(control_plane, api))
    assert first["frozen"] == 3
    for suffix in ("a", "b"):  # the Pods really terminate and disappear
        wait_until(lambda ns=prefix + suffix: not api.pods(ns), timeout=90, what=f"no Pods left in {prefix}{suffix}")
    assert pod_names(api, prefix + "live") == live_pods and running_pods(api, prefix + "live") == 1

    assert_clean_success(run_cronjob_now(control_plane, api))
    status = api.status(f"{prefix}p")
    assert status["done"] is True and condition(api, f"{prefix}p", "Drained") == "True", status
    assert pod_names(api, prefix + "live") == live_pods  # the allowed namespace was never touched


def test_restore_after_a_policy_change_brings_the_pods_back_running(control_plane, api, prefix):
    running_family(api, prefix, {"a": {"d-web": 2, "s-db": 1}, "live": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["live"]))
    assert_clean_success(run_cronjob_now(control_plane, api))
    wait_until(lambda: not api.pods(prefix + "a"), timeout=90, what="the held Pods to go")

    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["live", "a"]}})
    assert assert_clean_success(run_cronjob_now(control_plane, api))["restored"] == 2
    assert api.replicas("Deployment", prefix + "a", "d-web") == 2
    assert api.replicas("StatefulSet", prefix + "a", "s-db") == 1
    wait_until(lambda: running_pods(api, prefix + "a") == 3, timeout=120, what="3 Pods Running again")


def test_the_container_runs_as_uid_10001_read_only_with_in_pod_credentials(control_plane, api, the_node):
    """Asked from inside: a Pod with exactly the CronJob's Pod spec (image, ServiceAccount, security contexts,
    environment), whose command reports what the process sees, then reaches the API with the in-pod token."""
    rendered = yaml.safe_load_all(kubectl_out(control_plane, "kustomize", str(OVERLAY)))
    (cron,) = [d for d in rendered if d and d["kind"] == "CronJob"]
    spec = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    probe = (Path(__file__).parent / "probe.py").read_text()
    spec["containers"][0].update(command=["python", "-c", probe])
    name = f"probe-{time.monotonic_ns() % 10**9}"
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": spec})
    try:
        wait_until(lambda: api.get("Pod", name, NAMESPACE)["status"].get("phase") in ("Succeeded", "Failed"),
                   timeout=120, what="the probe Pod to finish")
        seen = json.loads(kubectl_out(control_plane, "-n", NAMESPACE, "logs", name).strip().splitlines()[-1])
    finally:
        api.delete("Pod", name, NAMESPACE)
    assert (seen["uid"], seen["gid"], seen["euid"]) == (10001, 10001, 10001), seen
    assert seen["root_write"] == "EROFS" and seen["tmp_write"] == "ok", seen
    assert seen["kubeconfig"] is None and seen["token_file"] is True, seen
    assert seen["server"] == f"https://{controlplane.KUBERNETES_SERVICE_IP}:443", seen
    # The ServiceAccount's own token, through the `kubernetes` Service: the API says who we are.
    assert seen["whoami"] == f"system:serviceaccount:{NAMESPACE}:nsscaler", seen
    assert seen["image_python"].startswith("/opt/nsscaler/"), seen


def _aggregated_grants_pods(api) -> bool:
    return any(r.get("resources") == ["pods"] for r in api.get("ClusterRole", "nsscaler").get("rules") or [])


def test_exit_2_on_a_missing_permission_fails_the_job_at_once(control_plane, api, prefix):
    # The ServiceAccount's ClusterRole is aggregated: the rule goes from the labelled base role, and the
    # aggregation controller takes it out of `nsscaler` (an edit of `nsscaler` itself would be undone).
    # A held namespace: the run needs the Pod census, whose refused LIST the access review then explains.
    api.create(builders.namespace(prefix + "v1"))
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    role = api.get("ClusterRole", "nsscaler-base")
    kept = [r for r in role["rules"] if r["resources"] != ["pods"]]
    assert len(kept) == len(role["rules"]) - 1
    api.patch("ClusterRole", "nsscaler-base", {"rules": kept})
    try:
        wait_until(lambda: not _aggregated_grants_pods(api), timeout=30, what="the aggregated role to lose pods")
        result = run_cronjob_now(control_plane, api)
    finally:
        apply_manifest(control_plane.admin_kubeconfig, OVERLAY, kustomize=True)  # the roles as shipped again
        wait_until(lambda: _aggregated_grants_pods(api), timeout=30, what="the aggregated role to grant pods again")
    failed = result.condition("Failed")
    assert failed and failed["reason"] == "PodFailurePolicy", result.job["status"]
    assert result.job["status"].get("failed") == 1 and len(result.pods) == 1, result.job["status"]
    assert result.exit_code == 2
    assert "list pods" in result.log, result.log


def test_the_cronjob_fires_on_its_own(control_plane, api):
    api.patch("CronJob", "nsscaler", {"spec": {"schedule": "* * * * *", "suspend": False}}, NAMESPACE)
    try:
        def created() -> list[dict[str, Any]]:
            # Only what the schedule started: `kubectl create job --from=cronjob` (earlier tests) also sets
            # the CronJob as owner, but not the scheduled-timestamp annotation.
            return [j for j in api.list("Job", NAMESPACE)
                    if any(o["kind"] == "CronJob" for o in j["metadata"].get("ownerReferences", []))
                    and "batch.kubernetes.io/cronjob-scheduled-timestamp" in (j["metadata"].get("annotations") or {})]
        wait_until(lambda: any(finished(api, j["metadata"]["name"]) for j in created()), timeout=180,
                   what="a Job the CronJob created itself to finish")
    finally:
        api.patch("CronJob", "nsscaler", {"spec": {"suspend": True}}, NAMESPACE)
        # A Job a minute boundary may just have started must not act during the next test.
        wait_until(lambda: not api.get("CronJob", "nsscaler", NAMESPACE).get("status", {}).get("active"),
                   timeout=120, what="no Job of the CronJob running any more")
    (job, *_) = [j for j in created() if finished(api, j["metadata"]["name"])]
    assert_clean_success(job_result(control_plane, api, job["metadata"]["name"]))


class CgroupPeaks(threading.Thread):
    """Samples every Pod container's memory high-water mark (cgroup v1 `memory.max_usage_in_bytes`, v2
    `memory.peak`) until stopped: the kernel keeps the peak, the sampling only has to see it before kubelet
    removes the cgroup of the finished container."""

    PATTERNS = ("memory/kubepods*/**/memory.max_usage_in_bytes", "kubepods*/**/memory.peak")

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks: dict[str, int] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            for pattern in self.PATTERNS:
                try:
                    self._sample(Path("/sys/fs/cgroup").glob(pattern))
                except OSError:  # kubelet removed a cgroup folder while the walk was in it: walk again
                    continue
            time.sleep(0.05)

    def _sample(self, paths: Iterator[Path]) -> None:
        for path in paths:
            try:
                value = int(path.read_text())
            except (OSError, ValueError):
                continue
            self.peaks[str(path.parent)] = max(value, self.peaks.get(str(path.parent), 0))

    def of_container(self, container_id: str) -> int:
        found = [v for path, v in self.peaks.items() if path.endswith("/" + container_id)]
        assert found, f"no cgroup sample of container {container_id}"
        return max(found)


@pytest.fixture
def sampler() -> Iterator[CgroupPeaks]:
    thread = CgroupPeaks()
    thread.start()
    yield thread
    thread.halt.set()
    thread.join()


def test_peak_memory_at_200_namespaces_stays_under_the_limit(control_plane, api, prefix, sampler, figures):
    """200 namespaces with a Deployment each; their Pods stay Pending (a node selector no node has), so the node
    carries only the Job: what is measured is nsscaler's container, the cgroup the 128Mi limit applies to."""
    image, nowhere = images.busybox_image(), {"nsscaler.test/nowhere": "true"}
    for i in range(200):
        api.create(builders.namespace(f"{prefix}n{i:03d}"))
        api.create(builders.on_node(builders.deployment(f"{prefix}n{i:03d}", "d-web", 1), image,
                                    node_selector=nowhere))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["n000"]))
    result = run_cronjob_now(control_plane, api)
    summary = assert_clean_success(result)
    assert summary["frozen"] == 199
    container_id = result.pods[0]["status"]["containerStatuses"][0]["containerID"].split("://")[-1]
    peak = sampler.of_container(container_id)
    figures.append(f"peak memory of the Job's container at 200 namespaces: {peak / 2**20:.1f} MiB "
                   f"(limit {MEMORY_LIMIT / 2**20:.0f} MiB; run {summary['seconds']}s)")
    assert 0 < peak < MEMORY_LIMIT
