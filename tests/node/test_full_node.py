"""A full node: nsscaler is needed most when the cluster is full, so its Pod must still run then.

The node is filled with Pods of the default priority (0) from a Deployment outside the family: in one case up to
kubelet's Pod limit (lowered for the test so that a handful of Pods fills it), in the other up to its allocatable
CPU by requests. A Job made from the CronJob (`kubectl create job --from=cronjob/nsscaler`) carries the shipped
PriorityClass: the real kube-scheduler preempts one filler Pod to place it, the Job completes with exit 0 and
freezes the family, and the filler's ReplicaSet gets its Pod back on the node once there is room.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images, node
from tests.node.conftest import (
    NAMESPACE,
    JobResult,
    kubectl_out,
    pod_names,
    run_cronjob_now,
    running_family,
    running_pods,
)
from tests.node.test_cronjob_on_node import assert_clean_success

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("installed")]
PRIORITY = 1_000_000  # kustomize/base/priorityclass.yaml
FILLERS = 4


def node_pods(api: AdminApi) -> list[dict[str, Any]]:
    """Pods bound to the node that still hold their place there (not Succeeded or Failed)."""
    return [p for p in api.list("Pod", fieldSelector=f"spec.nodeName={node.NODE_NAME}")
            if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]


def settled(api: AdminApi) -> bool:
    """No Pod on the node is on its way out: what earlier tests stopped must not make room during this one."""
    return not [p for p in node_pods(api) if p["metadata"].get("deletionTimestamp")]


def millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def cpu_requested(api: AdminApi) -> int:
    return sum(millicores(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
               for p in node_pods(api) for c in p["spec"]["containers"])


@pytest.fixture
def max_pods(control_plane: controlplane.ControlPlane, the_node: node.Node) -> Iterator[Callable[[int], None]]:
    """Lowers kubelet's Pod limit for one test; the usual limit comes back afterwards, also on failure."""
    try:
        yield lambda limit: the_node.set_max_pods(control_plane, limit)
    finally:
        the_node.set_max_pods(control_plane, node.MAX_PODS)


def filler(api: AdminApi, namespace: str, replicas: int, cpu: str | None = None) -> set[str]:
    """A Deployment of default priority outside the family; returns its Pods' names once all run."""
    api.create(builders.namespace(namespace))
    deployment = builders.on_node(builders.deployment(namespace, "d-fill", replicas), images.busybox_image())
    if cpu:
        deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    api.create(deployment)
    wait_until(lambda: running_pods(api, namespace) == replicas, timeout=120, what=f"{replicas} filler Pods Running")
    return pod_names(api, namespace)


def preempted(api: AdminApi, namespace: str) -> list[str]:
    """The Pods the scheduler preempted in `namespace`, from its `Preempted` Events."""
    return [e["involvedObject"]["name"] for e in api.list("Event", namespace) if e.get("reason") == "Preempted"]


def assert_preempted_one_and_froze(api: AdminApi, result: JobResult, *, family: str, fill: str,
                                   fillers: set[str]) -> str:
    """The Job ran on the node with the class's priority after preempting exactly one filler Pod, and froze
    the family; returns the victim's name."""
    summary = assert_clean_success(result)
    (pod,) = result.pods
    assert pod["spec"]["priority"] == PRIORITY and pod["spec"]["nodeName"] == node.NODE_NAME, pod["spec"]
    victims = preempted(api, fill)
    assert len(victims) == 1 and victims[0] in fillers, (victims, fillers)
    assert not preempted(api, family + "a") and not preempted(api, family + "live")
    assert summary["frozen"] == 1, summary
    wait_until(lambda: not api.pods(family + "a"), timeout=90, what="the held namespace's Pods to go")
    assert running_pods(api, family + "live") == 1
    return victims[0]


def assert_filler_back(api: AdminApi, fill: str, replicas: int, fillers: set[str], victim: str) -> None:
    """The preempted workload's ReplicaSet made a new Pod, and it runs on the node now that there is room."""
    wait_until(lambda: running_pods(api, fill) == replicas, timeout=120, what="the filler back at full strength")
    now = pod_names(api, fill)
    assert victim not in now and len(now - fillers) == 1, (now, fillers)


def full_by_pods(api: AdminApi, prefix: str, max_pods: Callable[[int], None]) -> tuple[str, str, set[str], int]:
    """A family (2 Pods held, 1 allowed), then kubelet's limit set FILLERS Pods above what the node holds, then a
    filler Deployment of FILLERS Pods: the node is full. Returns the family prefix, the filler's namespace, its
    Pods and the limit."""
    wait_until(lambda: settled(api), timeout=120, what="earlier tests' Pods to be gone from the node")
    family, fill = prefix + "shop-", prefix + "other"
    running_family(api, family, {"a": {"d-web": 2}, "live": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", family, ["live"]))
    limit = len(node_pods(api)) + FILLERS
    max_pods(limit)
    fillers = filler(api, fill, FILLERS)
    assert len(node_pods(api)) == limit  # full: kubelet's limit, and the scheduler's view of it
    return family, fill, fillers, limit


def scheduling_figures(result: JobResult) -> str:
    """Seconds from the Pod's creation to its binding (preemption included), and the Job's start to completion."""
    (pod,) = result.pods
    created = dt.datetime.fromisoformat(pod["metadata"]["creationTimestamp"])
    scheduled = next(dt.datetime.fromisoformat(c["lastTransitionTime"]) for c in pod["status"]["conditions"]
                     if c["type"] == "PodScheduled" and c["status"] == "True")
    status = result.job["status"]
    ran = dt.datetime.fromisoformat(status["completionTime"]) - dt.datetime.fromisoformat(status["startTime"])
    return (f"Pod bound {(scheduled - created).total_seconds():.0f}s after its creation, Job done "
            f"{ran.total_seconds():.0f}s after its start, nsscaler's run {result.lines[-1]['seconds']}s")


def test_at_the_pod_limit_the_job_preempts_one_default_priority_pod_and_frees_the_family(
        control_plane, api, prefix, max_pods, figures):
    family, fill, fillers, limit = full_by_pods(api, prefix, max_pods)

    result = run_cronjob_now(control_plane, api)
    victim = assert_preempted_one_and_froze(api, result, family=family, fill=fill, fillers=fillers)
    assert_filler_back(api, fill, FILLERS, fillers, victim)
    assert len(node_pods(api)) <= limit
    figures.append(f"Pod limit {limit}: the Job preempted {victim}; {scheduling_figures(result)}; "
                   f"the filler back at {FILLERS} Running")


def test_without_the_class_the_job_waits_pending_on_a_full_node(control_plane, api, prefix, max_pods, figures):
    """A full node without the class: the same full node, the CronJob without its priorityClassName (as the
    no-priority-class component renders it): the Pod is unschedulable and nothing is preempted."""
    family, fill, fillers, _ = full_by_pods(api, prefix, max_pods)
    name = f"no-class-{time.monotonic_ns() % 10**9}"
    template = {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"priorityClassName": None}}}}}}
    api.patch("CronJob", "nsscaler", template, NAMESPACE)
    try:
        kubectl_out(control_plane, "-n", NAMESPACE, "create", "job", "--from=cronjob/nsscaler", name)
    finally:
        template["spec"]["jobTemplate"]["spec"]["template"]["spec"]["priorityClassName"] = "nsscaler"
        api.patch("CronJob", "nsscaler", template, NAMESPACE)
    try:
        wait_until(lambda: unschedulable(api, name), timeout=60, what="the Job's Pod to be found unschedulable")
        message = unschedulable(api, name)
        figures.append(f"without the class: {message}")
        assert "Too many pods" in message and "No preemption victims found" in message, message
        (pod,) = api.list("Pod", NAMESPACE, labelSelector=f"job-name={name}")
        assert pod["spec"]["priority"] == 0 and not pod["spec"].get("nodeName"), pod["spec"]
        assert pod_names(api, fill) == fillers and not preempted(api, fill)
        assert running_pods(api, family + "a") == 2  # nothing was frozen
    finally:
        api.http.delete(api.url("Job", NAMESPACE, name), params={"propagationPolicy": "Foreground"}, timeout=30)
        wait_until(lambda: not api.list("Pod", NAMESPACE, labelSelector=f"job-name={name}"), timeout=60,
                   what="the unschedulable Job's Pod to go")


def unschedulable(api: AdminApi, job: str) -> str:
    """The scheduler's message on the Job's Pod when it found no room, else ''."""
    for pod in api.list("Pod", NAMESPACE, labelSelector=f"job-name={job}"):
        for c in pod.get("status", {}).get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
                return str(c.get("message", ""))
    return ""


def test_with_cpu_requested_to_the_brim_the_job_preempts_one_default_priority_pod(
        control_plane, api, prefix, figures):
    wait_until(lambda: settled(api), timeout=120, what="earlier tests' Pods to be gone from the node")
    family, fill = prefix + "shop-", prefix + "other"
    running_family(api, family, {"a": {"d-web": 2}, "live": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", family, ["live"]))
    allocatable = millicores(_node(api)["status"]["allocatable"]["cpu"])
    each = (allocatable - cpu_requested(api)) // 2
    fillers = filler(api, fill, 2, cpu=f"{each}m")
    free = allocatable - cpu_requested(api)
    assert 0 <= free < 50, free  # less than the Job's request (kustomize/base/cronjob.yaml: 50m)

    result = run_cronjob_now(control_plane, api)
    victim = assert_preempted_one_and_froze(api, result, family=family, fill=fill, fillers=fillers)
    assert_filler_back(api, fill, 2, fillers, victim)
    figures.append(f"CPU: allocatable {allocatable}m, fillers 2 x {each}m, {free}m free: the Job preempted {victim}; "
                   f"{scheduling_figures(result)}; the filler back at 2 Running")


def _node(api: AdminApi) -> dict[str, Any]:
    resp = api.http.get(f"{api.plane.server}/api/v1/nodes/{node.NODE_NAME}", timeout=30)
    resp.raise_for_status()
    return dict(resp.json())

