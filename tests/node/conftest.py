"""Fixtures of the node tier: a control plane plus a real node (root), the local overlay installed, Jobs run
from the CronJob and read back (status, Pods, logs).

The cluster is `make node-up`'s when one runs, else one started for this session and stopped at its end (which
undoes every host change, see devtools/cluster/hostnet.py). Figures worth keeping (peak memory) are printed at the
end of the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images, node
from devtools.cluster.__main__ import running, running_node
from tests.conftest import ROOT, apply_manifest, kubectl

OVERLAY = ROOT / "kustomize" / "overlays" / "local"
NAMESPACE = "nsscaler"
_FIGURES = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[controlplane.ControlPlane, node.Node]]:
    if os.geteuid() != 0:
        pytest.fail("the node tier needs root (containerd, kubelet, iptables, cgroups): run `make test-node` as root")
    shared = ROOT / ".cluster"
    plane, found = running(shared), running_node(shared)
    if plane and found:
        yield plane, found
        return
    plane, started = node.start_with_plane(tmp_path_factory.mktemp("node-cluster"))
    try:
        yield plane, started
    finally:
        node.stop_with_plane(plane, started, remove_state=False)  # the component logs stay in pytest's tmp
    left = started.leftovers()
    assert not left, f"the node's stop left these behind: {left}"


@pytest.fixture(scope="session")
def control_plane(node_cluster: tuple[controlplane.ControlPlane, node.Node]) -> controlplane.ControlPlane:
    """Replaces the suite's loopback control plane: this one serves the node."""
    return node_cluster[0]


@pytest.fixture(scope="session")
def the_node(node_cluster: tuple[controlplane.ControlPlane, node.Node]) -> node.Node:
    return node_cluster[1]


@pytest.fixture(scope="session")
def installed(control_plane: controlplane.ControlPlane, api: AdminApi) -> None:
    """The local overlay applied as a user would; the CronJob suspended so that only the test that wants it to
    fire on its own lets it."""
    apply_manifest(control_plane.admin_kubeconfig, OVERLAY, kustomize=True)
    wait_until(lambda: api.exists("ServiceAccount", "nsscaler", NAMESPACE), what="the nsscaler ServiceAccount")
    wait_until(api.crd_established, timeout=30, what="the NSScaler CRD to be established")
    api.patch("CronJob", "nsscaler", {"spec": {"suspend": True}}, NAMESPACE)


#: runs in a node session of its own (`make test-node` starts a second one for it). Its `helm uninstall` removes the
#: waker's admission binding, the only one whose params are CronJobs; Kubernetes 1.36's API server then keeps its
#: CronJob param informer stopped for good, and a waker installed again in the same API server process is refused
#: every Job in nsscaler's namespace ("no params found for policy binding"), as the waker test would be.
APART = "tests/node/test_helm_on_node.py"
_APART = pytest.StashKey[int]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    apart = [item for item in items if item.nodeid.startswith(APART)]
    if apart and any(item.get_closest_marker("node") and item not in apart for item in items):
        config.hook.pytest_deselected(items=apart)
        items[:] = [item for item in items if not item.nodeid.startswith(APART)]
        config.stash[_APART] = len(apart)


@pytest.fixture(scope="session")
def figures(request: pytest.FixtureRequest) -> list[str]:
    return request.config.stash.setdefault(_FIGURES, [])


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for line in config.stash.get(_FIGURES, []):
        terminalreporter.write_line(f"node tier figure: {line}")
    if config.stash.get(_APART, 0):
        terminalreporter.write_line(f"deselected {APART}: it needs a node session of its own, run it alone "
                                    "(`make test-node` does)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    found = getattr(item, "funcargs", {}).get("the_node")
    if report.failed and call.when == "call" and found is not None:
        report.sections.append(("node logs", found.log_tails(20)))
    return report


# -- helpers ---------------------------------------------------------------------------------------------
def running_family(api: AdminApi, prefix: str, replicas: dict[str, dict[str, int]]) -> None:
    """Namespaces `prefix+suffix` with busybox Deployments (`d-*`) and StatefulSets (`s-*`), all Pods Running."""
    image = images.busybox_image()
    for suffix, workloads in replicas.items():
        api.create(builders.namespace(prefix + suffix))
        for name, count in workloads.items():
            build = builders.statefulset if name.startswith("s-") else builders.deployment
            api.create(builders.on_node(build(prefix + suffix, name, count), image))
    for suffix, workloads in replicas.items():
        want = sum(workloads.values())
        wait_until(lambda ns=prefix + suffix, want=want: running_pods(api, ns) == want, timeout=120,
                   what=f"{want} Running Pods in {prefix + suffix}")


def running_pods(api: AdminApi, namespace: str) -> int:
    pods = api.pods(namespace)
    return len(pods) if all(p.get("status", {}).get("phase") == "Running" for p in pods) else -1


def pod_names(api: AdminApi, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in api.pods(namespace)}


@dataclass
class JobResult:
    job: dict[str, Any]
    pods: list[dict[str, Any]]
    log: str

    @property
    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.splitlines() if line.strip()]

    def condition(self, kind: str) -> dict[str, Any] | None:
        return next((c for c in self.job.get("status", {}).get("conditions", []) if c["type"] == kind), None)

    @property
    def exit_code(self) -> int:
        (pod,) = self.pods
        return int(pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"])


def kubectl_out(plane: controlplane.ControlPlane, *args: str) -> str:
    result = subprocess.run([kubectl(), "--kubeconfig", str(plane.admin_kubeconfig), *args], capture_output=True,
                            text=True, check=False)
    if result.returncode:
        raise AssertionError(f"kubectl {' '.join(args)}:\n{result.stdout}{result.stderr}")
    return result.stdout


def finished(api: AdminApi, name: str) -> dict[str, Any] | None:
    job = api.get("Job", name, NAMESPACE)
    done = [c for c in job.get("status", {}).get("conditions", [])
            if c["type"] in ("Complete", "Failed") and c["status"] == "True"]
    return job if done else None


def job_result(plane: controlplane.ControlPlane, api: AdminApi, name: str, *, timeout: float = 180) -> JobResult:
    wait_until(lambda: finished(api, name) is not None, timeout=timeout, what=f"Job {name} to finish")
    job = api.get("Job", name, NAMESPACE)
    pods = api.list("Pod", NAMESPACE, labelSelector=f"job-name={name}")
    log = kubectl_out(plane, "-n", NAMESPACE, "logs", f"job/{name}") if pods else ""
    return JobResult(job, pods, log)


def run_cronjob_now(plane: controlplane.ControlPlane, api: AdminApi, name: str | None = None) -> JobResult:
    """`kubectl create job --from=cronjob/nsscaler`, as `make run-now` does; wait for it to finish."""
    name = name or f"manual-{time.monotonic_ns() % 10**9}"
    kubectl_out(plane, "-n", NAMESPACE, "create", "job", "--from=cronjob/nsscaler", name)
    return job_result(plane, api, name)
