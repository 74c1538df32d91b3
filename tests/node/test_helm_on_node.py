"""The Helm chart on the real node: real helm installs it as docs/operating/helm.md says, with the image the node
tier builds from the shipped Dockerfile (never pulled), and every Pod the chart makes runs on the node's kubelet:

- a run, a Job made from the chart's CronJob, freezes a family whose busybox Pods really ran;
- the waker (`waker.enabled=true`): its two Pods answer a held namespace's request from the host over the node's
  bridge, with the waiting answer, a Wake in their own name and the run they start, which wakes the namespace;
- `helm uninstall` runs the release hook Job, whose Pod gives every workload back: the Pods run again.

The chart and the local overlay install the same cluster-wide objects (ClusterRoles, the PriorityClass, the CRDs,
the namespace `nsscaler`), and the uninstall leaves Kubernetes 1.36's API server unable to read the params of a
waker installed after it (see `APART` in tests/node/conftest.py): this module runs in a node session of its own,
which `make test-node` starts after the other node tests. A reused `make node-up` cluster where nsscaler is
installed already fails it at once, saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images
from devtools.cluster.node import NODE_NAME
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_RELEASED, ANNOTATION_WAKE_REQUEST, HEADER_NAMESPACE
from job.waker.page import WAKER_HEADER
from tests.conftest import built_tool
from tests.gateway import gateway_crds
from tests.integration.test_helm import CHART, RELEASE
from tests.integration.test_helm import run as helm_run
from tests.node.conftest import NAMESPACE, job_result, run_cronjob_now, running_family, running_pods

__all__ = ["gateway_crds"]
pytestmark = [pytest.mark.node, pytest.mark.usefixtures("gateway_crds")]
WAKER = "nsscaler-waker"
RELEASE_JOB = "nsscaler-release"


#: where helm records the release (`-n`): the install below is the one place that says how the chart is installed
#: the release lives in the namespace of its objects, made by `--create-namespace` (docs/operating/helm.md)
RELEASE_NAMESPACE = NAMESPACE


def install_chart(helm: str, plane: controlplane.ControlPlane, **values: str) -> None:
    """The install as docs/operating/helm.md gives it: `-n nsscaler --create-namespace`, the release and the chart's
    objects in that namespace. The image is the one the node holds, never pulled; the CronJob is
    suspended so that only the runs this test starts run."""
    repository, tag = images.project_image().rsplit(":", 1)
    settings = {"image.repository": repository, "image.tag": tag, "image.pullPolicy": "Never", "suspend": "true",
                **values}
    helm_run(helm, "install", RELEASE, str(CHART), "-n", RELEASE_NAMESPACE, "--create-namespace",
             *[arg for item in settings.items() for arg in ("--set", "=".join(item))],
             kubeconfig=plane.admin_kubeconfig)


def uninstall_chart(helm: str, plane: controlplane.ControlPlane, *more: str, check: bool = True) -> None:
    """`helm uninstall` as the chart's NOTES say it (a release takes at most 540 s)."""
    helm_run(helm, "uninstall", RELEASE, "-n", RELEASE_NAMESPACE, "--timeout", "10m", *more,
             kubeconfig=plane.admin_kubeconfig, check=check)


def nsscaler_installed(api: AdminApi) -> bool:
    """The chart's own cluster-wide grant (the aggregated ClusterRole `nsscaler` is kept on uninstall, empty)."""
    return api.exists("ClusterRole", "nsscaler-base")


@pytest.fixture(scope="module")
def helm() -> str:
    return str(built_tool("helm"))


@pytest.fixture(scope="module")
def no_other_install(control_plane: controlplane.ControlPlane, api: AdminApi, helm: str) -> Iterator[None]:
    """A node without nsscaler, and afterwards none again. A test that failed before its uninstall, or whose
    uninstall failed, leaves the release: it is uninstalled here without its hook (the failure is the test's)."""
    if nsscaler_installed(api):
        pytest.fail("nsscaler is installed on this node already (a reused `make node-up` cluster?): the chart needs "
                    "a node of its own, `make node-down` first", pytrace=False)
    yield
    if helm_run(helm, "status", RELEASE, "-n", RELEASE_NAMESPACE, kubeconfig=control_plane.admin_kubeconfig,
                check=False).returncode == 0:
        uninstall_chart(helm, control_plane, "--no-hooks", check=False)
    api.delete("Namespace", NAMESPACE)  # made by --create-namespace: Helm leaves it, as it does for every chart
    wait_until(lambda: not api.exists("Namespace", NAMESPACE), timeout=180, what=f"namespace {NAMESPACE} gone")


class PodsSeen:
    """Every Pod of a label in the namespace, as last seen while `helm uninstall` runs (the hook's Job and its Pod
    are deleted as soon as it succeeds): read in a thread with a client of its own."""

    def __init__(self, plane: controlplane.ControlPlane, label: str) -> None:
        self.api, self.label = AdminApi(plane), label
        self.pods: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for pod in self.api.list("Pod", NAMESPACE, labelSelector=self.label):
                self.pods[pod["metadata"]["uid"]] = pod
            self._stop.wait(0.3)

    def __enter__(self) -> PodsSeen:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def started_on_the_node(pod: dict[str, Any]) -> bool:
    """Bound to the node and its container started there: running, or ended with exit code 0."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    state = statuses[0].get("state", {}) if statuses else {}
    return pod["spec"].get("nodeName") == NODE_NAME and (
        "running" in state or state.get("terminated", {}).get("exitCode") == 0)


def ask_the_waker(api: AdminApi, namespace: str) -> list[requests.Response]:
    """A request as a held route sends it (the gateway sets the namespace header), to each waker Pod's address."""
    pods = api.list("Pod", NAMESPACE, labelSelector=f"app.kubernetes.io/name={WAKER}")
    return [requests.get(f"http://{pod['status']['podIP']}:8080/", timeout=30,
                         headers={"Host": f"{namespace}.shop.test", HEADER_NAMESPACE: namespace,
                                  "Accept": "application/json"}) for pod in pods]


def wake_runs(api: AdminApi) -> list[dict[str, Any]]:
    return [j for j in api.list("Job", NAMESPACE) if j["metadata"]["name"].startswith("nsscaler-wake-")]


def freeze_on_the_node(plane: controlplane.ControlPlane, api: AdminApi, held: str, woken: str, live: str) -> None:
    """A run, made from the chart's CronJob, on the node: the held namespaces' Pods go, their records stay."""
    frozen = run_cronjob_now(plane, api)
    (pod,) = frozen.pods
    assert pod["spec"]["nodeName"] == NODE_NAME
    assert frozen.exit_code == 0 and frozen.lines[-1]["frozen"] == 3, frozen.log
    wait_until(lambda: not api.pods(held) and not api.pods(woken), timeout=90,
               what=f"no Pods left in {held} and {woken}")
    assert api.get("Deployment", "d-web", held)["metadata"]["annotations"][ANNOTATION_ORIGINAL_REPLICAS] == "2"
    assert api.get("StatefulSet", "s-db", held)["metadata"]["annotations"][ANNOTATION_ORIGINAL_REPLICAS] == "1"
    assert running_pods(api, live) == 1


def wake_through_the_waker(plane: controlplane.ControlPlane, api: AdminApi, held: str, woken: str) -> None:
    """The waker's Pods answer a held namespace's request and start the run that wakes it, on the node."""
    answers = ask_the_waker(api, woken)
    assert len(answers) == 2
    for resp in answers:
        assert resp.status_code == 503 and WAKER_HEADER in resp.headers, (resp.status_code, resp.text)
        assert resp.json()["namespace"] == woken, resp.text
    (wake,) = api.list("Wake", woken)  # both requests made one Wake
    assert wake["spec"]["requestedBy"] == f"system:serviceaccount:{NAMESPACE}:{WAKER}"
    assert wake["metadata"]["annotations"][ANNOTATION_WAKE_REQUEST] == f"GET {woken}.shop.test/"
    wait_until(lambda: len(wake_runs(api)) == 1, timeout=30, what="the run the waker starts")
    (started,) = wake_runs(api)
    waking = job_result(plane, api, started["metadata"]["name"])
    (pod,) = waking.pods
    assert pod["spec"]["nodeName"] == NODE_NAME and waking.exit_code == 0, waking.log
    wait_until(lambda: running_pods(api, woken) == 1, timeout=120, what=f"the Pod of {woken} Running again")
    assert api.replicas("Deployment", held, "d-web") == 0  # the wake was the woken namespace's only


def test_the_chart_s_run_waker_and_release_hook_run_as_pods_on_the_node(
        control_plane: controlplane.ControlPlane, api: AdminApi, helm: str, no_other_install: None, prefix: str,
        figures: list[str]) -> None:
    install_chart(helm, control_plane, **{"waker.enabled": "true"})
    wait_until(api.crd_established, timeout=30, what="the NSScaler CRD to be established")
    wait_until(lambda: (api.get("Deployment", WAKER, NAMESPACE).get("status") or {}).get("readyReplicas") == 2,
               timeout=240, what="both waker Pods Ready")
    held, woken, live = prefix + "a", prefix + "w", prefix + "live"
    running_family(api, prefix, {"a": {"d-web": 2, "s-db": 1}, "w": {"d-web": 1}, "live": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["live"], wake={"on_request": True, "max_duration": "1h"}))
    freeze_on_the_node(control_plane, api, held, woken, live)
    wake_through_the_waker(control_plane, api, held, woken)

    # helm uninstall: the release hook's Pod on the node gives everything back before the chart goes
    cronjob = api.get("CronJob", "nsscaler", NAMESPACE)
    assert ANNOTATION_RELEASED not in (cronjob["metadata"].get("annotations") or {})
    asked = time.monotonic()
    with PodsSeen(control_plane, f"job-name={RELEASE_JOB}") as seen:
        uninstall_chart(helm, control_plane)
    figures.append(f"helm uninstall with its release hook on the node: {time.monotonic() - asked:.1f}s")
    (hook_pod,) = seen.pods.values()  # one Pod: the release succeeded at its first attempt
    assert started_on_the_node(hook_pod), hook_pod.get("status")
    assert hook_pod["spec"]["containers"][0]["args"][0] == "release"
    assert api.replicas("Deployment", held, "d-web") == 2 and api.replicas("StatefulSet", held, "s-db") == 1
    back = {held: 3, woken: 1, live: 1}
    wait_until(lambda: {ns: running_pods(api, ns) for ns in back} == back, timeout=120,
               what=f"Pods Running again: {back}")
    wait_until(lambda: not nsscaler_installed(api) and not api.exists("CronJob", "nsscaler", NAMESPACE), timeout=180,
               what=f"the chart's ClusterRole nsscaler-base and CronJob in {NAMESPACE} gone")
