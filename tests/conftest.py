"""Fixtures: one real control plane per test session, a unique namespace prefix per test, and the job.

The control plane is `make cluster-up`'s when one runs (fast iteration), else one started for this
session and stopped at its end. A failing test that used it gets the components' log tails appended.
Under CI=true no test may skip: a skip is reported as a failure, with its reason.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, tools, versions
from devtools.cluster.__main__ import running
from job.cli import main
from tests import leaks, schema_fuzz

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "kustomize" / "base"
REQUESTER_STAMP = ROOT / "kustomize" / "components" / "wake-requester-stamp" / "wake-requester-stamp.yaml"
CRD = BASE / "crd.yaml"
WAKE_CRD = BASE / "wake-crd.yaml"


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    shared = running(ROOT / ".cluster")
    if shared:
        yield shared
        return
    plane = controlplane.start(tmp_path_factory.mktemp("control-plane"))
    try:
        yield plane
    finally:
        plane.stop(remove_state=False)  # pytest's tmp folders keep the logs of the last runs


@contextlib.contextmanager
def plane_of_its_own(factory: pytest.TempPathFactory, name: str) -> Iterator[controlplane.ControlPlane]:
    """A control plane for tests whose actions are cluster-wide (a release, a chart's whole life), stopped after."""
    started = controlplane.start(factory.mktemp(name))
    try:
        yield started
    finally:
        started.stop(remove_state=False)


@pytest.fixture(scope="session")
def api(control_plane: controlplane.ControlPlane) -> AdminApi:
    return AdminApi(control_plane)


def apply_manifest(kubeconfig: Path, path: Path, *, kustomize: bool = False) -> str:
    """`kubectl apply` (`-k` for a kustomization), as a user would; returns kubectl's output."""
    flag = "-k" if kustomize else "-f"
    result = subprocess.run([kubectl(), "--kubeconfig", str(kubeconfig), "apply", "--server-side",
                             "--force-conflicts", flag, str(path)], capture_output=True, text=True, check=False)
    if result.returncode:
        raise AssertionError(f"kubectl apply {flag} {path} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def kubectl() -> str:
    """The kubectl of the control plane's own Kubernetes version (built with it): always within kubectl's
    supported skew of one minor, whichever version the suite runs against."""
    return str(versions.bin_dir() / "kubectl")


@pytest.fixture(scope="session")
def crd(api: AdminApi, control_plane: controlplane.ControlPlane) -> None:
    apply_manifest(control_plane.admin_kubeconfig, CRD)
    apply_manifest(control_plane.admin_kubeconfig, WAKE_CRD)
    wait_until(api.crd_established, timeout=30, what="the NSScaler CRD to be established")
    wait_until(lambda: api.crd_established("wakes.operators.wubw.fun"), timeout=30,
               what="the Wake CRD to be established")


@pytest.fixture(scope="session")
def wake_admission(api: AdminApi, control_plane: controlplane.ControlPlane, crd: None) -> bool:
    """The shipped admission policies and Wake ClusterRoles, and the aggregation into `edit` done. Where the
    server serves MutatingAdmissionPolicy v1 (Kubernetes 1.36 and later), also the component that stamps the
    requester into a Wake written by hand; returns whether it is installed."""
    apply_manifest(control_plane.admin_kubeconfig, BASE / "wake-rbac.yaml")
    apply_manifest(control_plane.admin_kubeconfig, BASE / "wake-admission.yaml")
    stamps = api.serves("admissionregistration.k8s.io/v1", "mutatingadmissionpolicies")
    if stamps:
        apply_manifest(control_plane.admin_kubeconfig, REQUESTER_STAMP)

    def edit_has_wakes() -> bool:
        rules = api.get("ClusterRole", "edit").get("rules") or []
        return any("wakes" in (r.get("resources") or []) for r in rules)
    wait_until(edit_has_wakes, timeout=60, what="the Wake ClusterRole aggregated into edit")

    def in_force() -> bool:  # the policies take effect a moment after they are created, each in its own time
        try:
            made = api.create(builders.wake("default", "3h", name=None, **({} if stamps else {"requestedBy": "x"})))
        except AssertionError:  # refused: the validating policy is in force (and the stamp, if any, not yet)
            return not stamps
        api.delete("Wake", made["metadata"]["name"], "default")
        return stamps and bool(made["spec"].get("requestedBy"))
    wait_until(in_force, timeout=60, what="the Wake admission policies to take effect")
    return stamps


@pytest.fixture
def prefix(api: AdminApi) -> Iterator[str]:
    """A namespace-family prefix no other test uses; its namespaces and NSScalers go away afterwards. A removal
    that fails fails the test (an error in its teardown), and so does anything else the test left behind
    (`tests.leaks`: a cluster-scoped object named with the prefix, a new NSScaler or Namespace nobody deletes):
    a leak is never hidden, nor left for the next test."""
    value = f"t{uuid.uuid4().hex[:6]}-"
    before = leaks.before_the_test(api)
    yield value
    if api.crd_established():
        for obj in api.list("NSScaler"):
            if obj["spec"].get("scope_prefix", "").startswith(value) or obj["metadata"]["name"].startswith(value):
                api.delete("NSScaler", obj["metadata"]["name"])
    for ns in api.list("Namespace"):
        if ns["metadata"]["name"].startswith(value):
            api.delete("Namespace", ns["metadata"]["name"])
    leaked = leaks.left_behind(api, prefix=value, before=before)
    leaks.remove(api, leaked)
    assert not leaked, f"the test left behind what it made, removed now: {', '.join(map(str, leaked))}"


@pytest.fixture
def settled_cluster(api: AdminApi) -> None:
    """No namespace an earlier test deleted is still going. What a run reads depends on what the cluster
    holds (a kind with at most one object is read in one request), so a test that compares request counts
    between runs starts only once the previous test's namespaces, and the workloads in them, are gone."""
    def terminating() -> list[str]:
        return [ns["metadata"]["name"] for ns in api.list("Namespace")
                if ns.get("status", {}).get("phase") == "Terminating"]
    wait_until(lambda: not terminating(), timeout=300, what="earlier tests' namespaces to be gone")


@dataclass
class JobRun:
    exit_code: int
    report: dict[str, Any]
    stderr: str

    @property
    def requests(self) -> dict[str, int]:
        return dict(self.report.get("summary", {}).get("requests", {}))

    @property
    def requests_besides_the_lease(self) -> dict[str, int]:
        """The run's requests but the run Lease's (which a run that writes takes and gives back)."""
        lease = self.report.get("summary", {}).get("lease_requests") or {}
        return {verb: n - lease.get(verb, 0) for verb, n in self.requests.items() if n > lease.get(verb, 0)}


@pytest.fixture
def run_job(control_plane: controlplane.ControlPlane, crd: None) -> Any:
    """Run nsscaler once in this process as cluster admin (or with `kubeconfig=`); return its report."""
    def _run(*args: str, kubeconfig: Path | None = None) -> JobRun:
        out, err = io.StringIO(), io.StringIO()
        argv = ["--kubeconfig", str(kubeconfig or control_plane.admin_kubeconfig), "--output", "json", *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        logging.getLogger().handlers.clear()
        text = out.getvalue()
        return JobRun(code, json.loads(text) if text.strip().startswith("{") else {}, err.getvalue())

    return _run


def make_family(api: AdminApi, prefix: str, replicas: dict[str, dict[str, int]]) -> None:
    """Namespaces `prefix+suffix`, each with Deployments (`d-*`) and StatefulSets (`s-*`) of given sizes."""
    for suffix, workloads in replicas.items():
        ns = prefix + suffix
        api.create(builders.namespace(ns))
        for name, count in workloads.items():
            build = builders.statefulset if name.startswith("s-") else builders.deployment
            api.create(build(ns, name, count))


def built_tool(name: str) -> Path:
    """A tool of `devtools.cluster.tools`, built on first use. One whose source cannot be had here skips the tests
    that need it, saying why; under CI=true that skip is a failure (below)."""
    try:
        return tools.ensure_tool(name)
    except tools.SourceUnavailable as exc:
        pytest.skip(f"{name} cannot be built here: {exc}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if tools.strict() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, and CI=true allows no skip: {reason}"
    if report.failed and call.when == "call" and "control_plane" in getattr(item, "fixturenames", ()):
        plane = item.funcargs.get("control_plane") if hasattr(item, "funcargs") else None
        if plane is not None:
            report.sections.append(("control plane logs", plane.log_tails(20)))
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if schema_fuzz.TALLIES:
        terminalreporter.write_line(schema_fuzz.summary())


def pytest_configure(config: pytest.Config) -> None:
    # Tests run nsscaler against the local control plane only: never a user's real cluster.
    for var in [k for k in os.environ if k.startswith("NSSCALER_")] + ["KUBECONFIG"]:
        os.environ.pop(var, None)


@pytest.fixture
def admin_token(api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str) -> Iterator[str]:
    """A ServiceAccount bound to cluster-admin, as a bearer token: the fault proxy passes tokens through
    (not client certificates)."""
    ns = prefix + "sa"
    api.create(builders.namespace(ns))
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": ns}})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{prefix}runner"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": ns}]})
    yield control_plane.service_account_token(ns, "runner")
    api.delete("ClusterRoleBinding", f"{prefix}runner")
