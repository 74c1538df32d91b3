"""A GitOps sync the hold refuses is counted and reported like a revert: the real Flux kustomize-controller v1.7.3
(built from its Go module, `devtools.cluster.tools`) runs as a process against the control plane, as its own
ServiceAccount `flux-system/kustomize-controller` bound to cluster-admin as Flux's install binds it, and applies a
Deployment with replicas 3 into a held namespace. The hold (`kustomize/base/hold-admission.yaml`, as shipped) refuses
it, the controller keeps the refusal in its Kustomization's Ready condition, and the next run, as nsscaler's own
ServiceAccount with the rights of the gitops-syncs component, counts it: `status.counts.syncsRefused`,
`status.syncsRefused`, one `SyncRefused` Event (not one per run), the metric through the real kube-state-metrics.
A Wake lets the sync through.

source-controller is not run: the test plays it, following its documented contract (a GitRepository whose
`status.artifact` {path, url, revision, digest, lastUpdateTime} points at a tar.gz served on loopback HTTP, and a
Ready=True condition), which is all kustomize-controller reads of it.

Argo CD cannot be built here (its gitops-engine module does not build with the Go available), so its Application is
an imitation of the wire only: the real CRD (v3.5.1), and a status written the way Argo CD writes a failed sync
(`status.operationState`, `pkg/apis/application/v1alpha1/types.go`), carrying the message the API server really
answered a refused apply sent as Argo CD's account."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import http.server
import io
import json
import os
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from devtools import builders, hold_admission
from devtools.builders import AdminApi, end, wait_until
from devtools.cluster import controlplane
from job.model.marks import LABEL_HOLD
from tests import crds
from tests.conftest import ROOT, apply_manifest, built_tool, kubectl
from tests.e2e import test_hold
from tests.faults import FaultProxy
from tests.integration import test_metrics
from tests.integration.test_metrics import KubeStateMetrics

pytestmark = pytest.mark.versions
POLICY = f"ValidatingAdmissionPolicy '{hold_admission.NAME}'"
FLUX_NAMESPACE, FLUX_ACCOUNT = "flux-system", "kustomize-controller"
# the fixtures of the hold's tests (nsscaler's own account, the hold as shipped) and of the metrics' tests (the real
# kube-state-metrics with the shipped config), shared
nsscaler_kubeconfig, as_nsscaler, hold_policy = (test_hold.nsscaler_kubeconfig, test_hold.as_nsscaler,
                                                 test_hold.hold_policy)
ksm_binary, ksm = test_metrics.ksm_binary, test_metrics.ksm
COMPONENT_RBAC = ROOT / "kustomize" / "components" / "gitops-syncs" / "rbac.yaml"
GIT_REPOSITORY = "/apis/source.toolkit.fluxcd.io/v1/namespaces/{ns}/gitrepositories"
KUSTOMIZATION = "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{ns}/kustomizations"
APPLICATION = "/apis/argoproj.io/v1alpha1/namespaces/{ns}/applications"


def stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def send(api: AdminApi, method: str, path: str, body: dict[str, Any] | None = None, **params: str) -> dict[str, Any]:
    """A request as cluster admin to a path of a kind the admin helper does not know (the GitOps kinds)."""
    headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
    resp = api.http.request(method, api.plane.server + path, json=body, params=params, headers=headers, timeout=30)
    assert resp.status_code < 300, (method, path, resp.status_code, resp.text)
    return dict(resp.json())


@pytest.fixture(scope="module")
def gitops_crds(api: AdminApi) -> None:
    crds.install(api, crds.gitops())


@dataclass
class Artifacts:
    """Where the test serves source-controller's artifacts (tar.gz of the manifests), on loopback HTTP."""

    folder: Path
    url: str

    def publish(self, name: str, files: dict[str, str]) -> dict[str, Any]:
        """A tar.gz of `files`, served; its `status.artifact` as source-controller writes it."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for path, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(path)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        blob = buffer.getvalue()
        digest = hashlib.sha256(blob).hexdigest()
        (self.folder / f"{digest}.tar.gz").write_bytes(blob)
        commit = hashlib.sha1(blob, usedforsecurity=False).hexdigest()
        return {"path": f"gitrepository/{name}/{digest}.tar.gz", "url": f"{self.url}/{digest}.tar.gz",
                "revision": f"main@sha1:{commit}", "digest": f"sha256:{digest}", "lastUpdateTime": stamp(),
                "size": len(blob)}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Artifacts]:
    folder = tmp_path_factory.mktemp("artifacts")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Artifacts(folder, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def kustomize_controller(control_plane: controlplane.ControlPlane, api: AdminApi, gitops_crds: None,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """kustomize-controller, out of cluster, watching every namespace, without leader election; its log's path."""
    binary = built_tool("kustomize-controller")
    work = tmp_path_factory.mktemp("kustomize-controller")
    if not api.exists("Namespace", FLUX_NAMESPACE):
        api.create(builders.namespace(FLUX_NAMESPACE))
    api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": FLUX_ACCOUNT, "namespace": FLUX_NAMESPACE}})
    binding = "cluster-reconciler-flux-system"  # Flux's own install binds its appliers so
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": binding},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": FLUX_ACCOUNT, "namespace": FLUX_NAMESPACE}]})
    kubeconfig = control_plane.service_account_kubeconfig(work / "kubeconfig", FLUX_NAMESPACE, FLUX_ACCOUNT)
    metrics, health = controlplane.free_ports(2)
    log = work / "kustomize-controller.log"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "RUNTIME_NAMESPACE": FLUX_NAMESPACE}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(binary), "--watch-all-namespaces=true", "--enable-leader-election=false",
             f"--metrics-addr=127.0.0.1:{metrics}", f"--health-addr=127.0.0.1:{health}", "--log-encoding=console"],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=controlplane._die_with_parent)  # noqa: PLW1509 (as the control plane's own processes)
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{health}/readyz", timeout=2).ok, timeout=60,
                   what=f"kustomize-controller to be ready (log: {log})")
        yield log
    finally:
        end(proc, grace=10)
        api.delete("ClusterRoleBinding", binding)
        api.delete("Namespace", FLUX_NAMESPACE)


@pytest.fixture(scope="module")
def gitops_syncs_rights(control_plane: controlplane.ControlPlane, nsscaler_kubeconfig: Path) -> Iterator[None]:
    """The component's ClusterRole, which aggregates into nsscaler's: its only way to read the GitOps kinds."""
    apply_manifest(control_plane.admin_kubeconfig, COMPONENT_RBAC)
    yield
    subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "delete", "-f",
                    str(COMPONENT_RBAC)], check=True, capture_output=True)


def held_family(api: AdminApi, prefix: str, as_nsscaler: Any) -> tuple[str, str]:
    """`shop-live` (kept running) and `shop-held`, each with a Deployment web of 2, held by policy `p` as nsscaler's
    own account; the GitOps objects' namespace `gitops` (out of the policy's scope). Returns (held, policy)."""
    for suffix in ("shop-live", "shop-held", "gitops"):
        api.create(builders.namespace(prefix + suffix))
    for suffix in ("shop-live", "shop-held"):
        api.create(builders.deployment(prefix + suffix, "web", 2))
    name, held = f"{prefix}p", prefix + "shop-held"
    api.create(builders.nsscaler(name, prefix + "shop-", ["live"]))
    frozen = as_nsscaler("--gitops-syncs")
    assert frozen.exit_code == 0, frozen.stderr
    assert api.get("Namespace", held)["metadata"]["labels"][LABEL_HOLD] == "deny"
    assert api.replicas("Deployment", held, "web") == 0
    return held, name


def refused_as(api: AdminApi, user: str, obj: dict[str, Any]) -> str:
    """The message the API server answers a server-side apply of `obj` sent as `user` (impersonated), as a dry run;
    asserted to be the hold's refusal. Sent until the hold reaches admission (it loads a moment after the mark)."""
    meta = obj["metadata"]
    path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}"
    said: list[str] = []

    def refused() -> bool:
        resp = api.http.patch(api.plane.server + path, data=json.dumps(obj), timeout=30,
                              params={"fieldManager": "probe", "force": "true", "dryRun": "All"},
                              headers={"Content-Type": "application/apply-patch+yaml", "Impersonate-User": user})
        said[:] = [str(resp.json().get("message"))] if resp.status_code == 403 else []
        return bool(said) and POLICY in said[0]
    wait_until(refused, what="the hold to reach admission")
    return said[0]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def sync_refused_events(api: AdminApi, ns: str, name: str) -> list[dict[str, Any]]:
    return [e for e in api.list("Event", ns) if e["reason"] == "SyncRefused" and e["involvedObject"]["name"] == name]


def metric(ksm: KubeStateMetrics, policy: str) -> float | None:
    return next((v for (name, _), v in ksm.of(policy).items() if name == "nsscaler_policy_refused_syncs"), None)


@pytest.mark.usefixtures("hold_policy", "gitops_crds")
def test_the_opt_in_without_its_rights_says_which_and_the_policies_are_served(
        api: AdminApi, control_plane: controlplane.ControlPlane, as_nsscaler: Any, prefix: str) -> None:
    """`--gitops-syncs` where the component's ClusterRole is not installed (taken away here if an earlier test of
    the module installed it, and put back): one warning per kind naming the permission, exit 0, counted as none."""
    def may_list() -> bool:
        nsscaler = f"system:serviceaccount:{test_hold.NAMESPACE}:nsscaler"
        return subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "auth", "can-i", "list",
                               "applications.argoproj.io", f"--as={nsscaler}"],
                              capture_output=True, text=True, check=False).returncode == 0
    installed = api.exists("ClusterRole", "nsscaler-gitops-syncs")
    api.delete("ClusterRole", "nsscaler-gitops-syncs")
    try:
        wait_until(lambda: not may_list(), what="the aggregated role to lose the component's rules")
        held, name = held_family(api, prefix, as_nsscaler)
        run = as_nsscaler("--gitops-syncs")
        assert run.exit_code == 0, run.stderr
        for resource in ("kustomizations.kustomize.toolkit.fluxcd.io", "applications.argoproj.io"):
            assert f"grant nsscaler list on {resource}" in run.stderr, run.stderr
        status = api.get("NSScaler", name)["status"]
        assert status["counts"]["syncsRefused"] == 0 and status["counts"]["heldNamespaces"] == 1
        assert condition({"status": status}, "Ready")["status"] == "True"
        assert api.replicas("Deployment", held, "web") == 0
    finally:
        if installed:
            apply_manifest(control_plane.admin_kubeconfig, COMPONENT_RBAC)


@pytest.mark.usefixtures("hold_policy", "gitops_syncs_rights")
def test_a_flux_sync_the_hold_refuses_is_counted_once_reported_and_let_through_by_a_wake(
        api: AdminApi, as_nsscaler: Any, prefix: str, artifacts: Artifacts, kustomize_controller: Path,
        ksm: KubeStateMetrics) -> None:
    held, name = held_family(api, prefix, as_nsscaler)
    gitops = prefix + "gitops"
    refused_as(api, f"system:serviceaccount:{FLUX_NAMESPACE}:{FLUX_ACCOUNT}", builders.deployment(held, "web", 3))

    # source-controller's part: the manifests of Git as an artifact, and a Ready GitRepository pointing at it
    artifact = artifacts.publish(f"{gitops}/shop", {"deploy.yaml": yaml.safe_dump(builders.deployment(held, "web", 3))})
    repo = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "shop", "namespace": gitops},
            "spec": {"url": "https://git.invalid/shop", "interval": "1h", "ref": {"branch": "main"}}}
    send(api, "POST", GIT_REPOSITORY.format(ns=gitops), repo)
    send(api, "PATCH", GIT_REPOSITORY.format(ns=gitops) + "/shop/status", {"status": {
        "observedGeneration": 1, "artifact": artifact,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "observedGeneration": 1,
                        "message": f"stored artifact for revision '{artifact['revision']}'",
                        "lastTransitionTime": stamp()}]}})
    send(api, "POST", KUSTOMIZATION.format(ns=gitops), {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "shop", "namespace": gitops},
        "spec": {"interval": "10m", "retryInterval": "2s", "path": "./", "prune": False, "timeout": "30s",
                 "sourceRef": {"kind": "GitRepository", "name": "shop"}}})

    def ready() -> dict[str, Any]:
        return condition(send(api, "GET", KUSTOMIZATION.format(ns=gitops) + "/shop"), "Ready")
    wait_until(lambda: ready().get("status") == "False" and POLICY in ready().get("message", ""), timeout=120,
               what=f"kustomize-controller's apply to be refused (log: {kustomize_controller})")
    print(f"kustomize-controller's Ready condition: {ready()}")
    assert f"namespace {held} is held by NSScaler {name}" in ready()["message"]
    assert api.replicas("Deployment", held, "web") == 0

    counted = as_nsscaler("--gitops-syncs")
    assert counted.exit_code == 0, counted.stderr
    status = api.get("NSScaler", name)["status"]
    assert status["counts"]["syncsRefused"] == 1 and status["counts"]["reverted"] == 0
    [entry] = status["syncsRefused"]
    assert entry == {"object": f"Kustomization {gitops}/shop", "gitOps": "Flux", "namespace": held,
                     "revision": artifact["revision"], "since": entry["since"]} and entry["since"]
    [policy_json] = [p for p in counted.report["policies"] if p["name"] == name]
    assert policy_json["syncsRefused"] == status["syncsRefused"]
    assert f"Flux Kustomization {gitops}/shop could not sync at revision {artifact['revision']}" in counted.stderr
    wait_until(lambda: len(sync_refused_events(api, gitops, "shop")) == 1, what="the SyncRefused Event")
    wait_until(lambda: metric(ksm, name) == 1.0, what="nsscaler_policy_refused_syncs to say 1")

    again = as_nsscaler("--gitops-syncs")  # the same refusal, the same revision: counted, not said again
    assert again.exit_code == 0, again.stderr
    assert api.get("NSScaler", name)["status"]["syncsRefused"] == [entry]
    [event] = sync_refused_events(api, gitops, "shop")
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Kustomization"
    assert event.get("count", 1) == 1 and f"NSScaler {name} holds it" in event["message"]

    # a Wake: the hold is lifted by the run it starts, the refusal counts no more, and Flux's next try goes through
    api.create(builders.wake(held, "1h", requestedBy=controlplane.ADMIN_USER, reason="a release to test"))
    woken = as_nsscaler("--gitops-syncs")
    assert woken.exit_code == 0, woken.stderr
    status = api.get("NSScaler", name)["status"]
    assert status["counts"]["syncsRefused"] == 0 and status["syncsRefused"] == []
    wait_until(lambda: ready().get("status") == "True", timeout=120,
               what=f"kustomize-controller's sync to pass once woken (log: {kustomize_controller})")
    assert api.replicas("Deployment", held, "web") == 3
    assert api.replicas("Deployment", prefix + "shop-live", "web") == 2  # the kept namespace: untouched
    wait_until(lambda: metric(ksm, name) == 0.0, what="nsscaler_policy_refused_syncs to say 0")
    assert len(sync_refused_events(api, gitops, "shop")) == 1


def argo_application(ns: str, held: str, *, refusal: str, revision: str) -> dict[str, Any]:
    """An Application whose last sync failed, its status as Argo CD writes it: the operation failed, the resource
    SyncFailed with kubectl's words around the API server's message."""
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "shop", "namespace": ns},
            "spec": {"project": "default",
                     "source": {"repoURL": "https://git.invalid/shop", "path": "deploy", "targetRevision": "main"},
                     "destination": {"server": "https://kubernetes.default.svc", "namespace": held}},
            "status": {"sync": {"status": "OutOfSync", "revision": revision},
                       "operationState": {
                           "operation": {"sync": {"revision": revision}}, "phase": "Failed",
                           "message": "one or more objects failed to apply, reason: " + refusal,
                           "startedAt": stamp(), "finishedAt": stamp(),
                           "syncResult": {"revision": revision, "resources": [
                               {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": held,
                                "name": "web", "status": "SyncFailed", "syncPhase": "Sync",
                                "message": f"Error from server (Forbidden): error when applying patch: {refusal}"}]}}}}


@pytest.mark.usefixtures("hold_policy", "gitops_syncs_rights", "gitops_crds", "settled_cluster")
def test_an_argo_cd_application_s_refused_sync_is_counted_and_nothing_is_read_without_the_opt_in(
        api: AdminApi, as_nsscaler: Any, prefix: str) -> None:
    held, name = held_family(api, prefix, as_nsscaler)
    gitops = prefix + "gitops"
    argo = f"system:serviceaccount:{gitops}:argocd-application-controller"
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "argocd", "namespace": held},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"kind": "ServiceAccount", "name": "argocd-application-controller",
                              "namespace": gitops}]})
    refusal = refused_as(api, argo, builders.deployment(held, "web", 3))
    revision = "4f1e2d3c4b5a69788796a5b4c3d2e1f001122334"
    send(api, "POST", APPLICATION.format(ns=gitops), argo_application(gitops, held, refusal=refusal,
                                                                       revision=revision))

    without = as_nsscaler()
    assert without.exit_code == 0, without.stderr
    assert api.get("NSScaler", name)["status"]["counts"]["syncsRefused"] == 0
    counted = as_nsscaler("--gitops-syncs")
    assert counted.exit_code == 0, counted.stderr
    status = api.get("NSScaler", name)["status"]
    assert status["counts"]["syncsRefused"] == 1
    assert [(e["object"], e["gitOps"], e["namespace"], e["revision"]) for e in status["syncsRefused"]] == [
        (f"Application {gitops}/shop", "Argo CD", held, revision)]
    wait_until(lambda: len(sync_refused_events(api, gitops, "shop")) == 1, what="the SyncRefused Event")
    # the opt-in costs one LIST per kind (Kustomization, HelmRelease: not served here, Application), and
    # without it nothing is asked
    steady = as_nsscaler()
    assert steady.requests.get("list", 0) == counted.requests.get("list", 0) - 3, (steady.requests,
                                                                                    counted.requests)


@pytest.mark.usefixtures("gitops_crds")
def test_a_gitops_kind_that_cannot_be_read_is_a_warning_and_the_run_goes_on(
        api: AdminApi, control_plane: controlplane.ControlPlane, run_job: Any, prefix: str, admin_token: str,
        tmp_path: Path) -> None:
    """Every LIST of Applications answered 503 (at the proxy, whatever the retries): the run says the Applications
    were not read, counts none, and freezes and reports as it would."""
    for suffix in ("shop-live", "shop-held"):
        api.create(builders.namespace(prefix + suffix))
        api.create(builders.deployment(prefix + suffix, "web", 2))
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix + "shop-", ["live"]))

    def applications_down(method: str, path: str) -> str | None:
        return "503" if method == "GET" and "/applications" in path else None
    with FaultProxy(control_plane, fraction=0.0, before_forward=applications_down) as proxy:
        run = run_job("--gitops-syncs", "--retry-attempts", "2", "--retry-budget", "5",
                      kubeconfig=proxy.kubeconfig(tmp_path / "proxied", admin_token))
    assert run.exit_code == 0, run.stderr
    assert "the Applications were not read" in run.stderr, run.stderr
    assert api.replicas("Deployment", prefix + "shop-held", "web") == 0
    assert api.get("NSScaler", name)["status"]["counts"]["syncsRefused"] == 0
