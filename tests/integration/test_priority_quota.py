"""A cluster where PriorityClasses are restricted (docs/operating/troubleshooting.md): the ResourceQuota admission
plugin configured so that Pods of a priority class need a quota that covers that class. The Job made from the
CronJob then gets no Pod; the message users see is on the Job, and the documented fix (a ResourceQuota scoped to
the class in nsscaler's namespace) lets the Pod be created.

A control plane of its own: the API server restarted with an `--admission-control-config-file` (the suite's
shared one must not change).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from tests.conftest import ROOT, apply_manifest, kubectl

OVERLAY = ROOT / "kustomize" / "overlays" / "prod"
NAMESPACE = "nsscaler"
#: what a cluster admin writes to make priority classes a quota-limited resource (any class)
ADMISSION = {
    "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
    "plugins": [{"name": "ResourceQuota", "configuration": {
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
        "limitedResources": [{"resource": "pods", "matchScopes": [
            {"scopeName": "PriorityClass", "operator": "Exists"}]}]}}],
}
#: the fix docs/operating/troubleshooting.md gives, as a user applies it
QUOTA = {
    "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "nsscaler-priority", "namespace": NAMESPACE},
    "spec": {"hard": {"pods": "3"},
             "scopeSelector": {"matchExpressions": [
                 {"scopeName": "PriorityClass", "operator": "In", "values": ["nsscaler"]}]}},
}


@pytest.fixture(scope="module")
def restricted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    # The quota controller too: admission refuses Pods a quota covers until it has counted the namespace.
    plane = controlplane.start(tmp_path_factory.mktemp("restricted-plane"),
                               controllers=(*controlplane.DEFAULT_CONTROLLERS, "resourcequota"))
    try:
        config = plane.state_dir / "admission.yaml"
        config.write_text(yaml.safe_dump(ADMISSION))
        args_file = plane.state_dir / "kube-apiserver.args.json"
        args_file.write_text(json.dumps([*json.loads(args_file.read_text()),
                                         f"--admission-control-config-file={config}"]))
        plane.restart_apiserver()
        yield plane
    finally:
        plane.stop(remove_state=False)


def create_job(plane: controlplane.ControlPlane, name: str) -> None:
    subprocess.run([kubectl(), "--kubeconfig", str(plane.admin_kubeconfig), "-n", NAMESPACE, "create", "job",
                    "--from=cronjob/nsscaler", name], check=True, capture_output=True)


def failed_creates(api: AdminApi, job: str) -> list[str]:
    return [e["message"] for e in api.list("Event", NAMESPACE)
            if e["involvedObject"]["name"] == job and e.get("reason") == "FailedCreate"]


def test_without_a_quota_for_the_class_the_job_gets_no_pod_until_the_readme_fix(restricted, tmp_path: Path):
    api = AdminApi(restricted)
    apply_manifest(restricted.admin_kubeconfig, OVERLAY, kustomize=True)
    wait_until(lambda: api.exists("ServiceAccount", "nsscaler", NAMESPACE), what="the nsscaler ServiceAccount")
    create_job(restricted, "blocked")
    wait_until(lambda: failed_creates(api, "blocked"), timeout=60, what="the Job's FailedCreate Event")
    message = failed_creates(api, "blocked")[0]
    print(f"FailedCreate: {message}")  # quoted in docs/operating/troubleshooting.md; shown by `pytest -rP`
    assert "insufficient quota to match these scopes" in message and "PriorityClass" in message, message
    assert not api.list("Pod", NAMESPACE, labelSelector="job-name=blocked")

    (tmp_path / "quota.yaml").write_text(yaml.safe_dump(QUOTA))
    apply_manifest(restricted.admin_kubeconfig, tmp_path / "quota.yaml")
    wait_until(lambda: _quota_counted(api), timeout=60,
               what="the quota controller to count the namespace")
    create_job(restricted, "allowed")
    wait_until(lambda: api.list("Pod", NAMESPACE, labelSelector="job-name=allowed"), timeout=60,
               what="the Job's Pod, now that a quota covers the class")
    (pod,) = api.list("Pod", NAMESPACE, labelSelector="job-name=allowed")
    assert pod["spec"]["priorityClassName"] == "nsscaler" and pod["spec"]["priority"] == 1_000_000


def _quota_counted(api: AdminApi) -> bool:
    resp = api.http.get(f"{api.plane.server}/api/v1/namespaces/{NAMESPACE}/resourcequotas/nsscaler-priority",
                        timeout=30)
    return resp.status_code == 200 and "used" in resp.json().get("status", {})
