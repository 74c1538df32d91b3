"""The local control plane behaves like a real cluster in the ways nsscaler depends on."""

from __future__ import annotations

import subprocess

import pytest
import requests

from devtools import builders
from devtools.builders import AdminApi, wait_until
from tests.conftest import kubectl


def test_deployment_gets_pods_and_scaling_to_zero_removes_them(api: AdminApi, prefix: str):
    ns = prefix + "pods"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 3))
    wait_until(lambda: len(api.pods(ns)) == 3, what="3 Pods from the Deployment")
    api.patch("Deployment", "web", {"spec": {"replicas": 0}}, namespace=ns)
    wait_until(lambda: api.pods(ns) == [], what="the Pods to be gone")


def test_rbac_is_enforced_for_service_accounts(api: AdminApi, prefix: str, control_plane, tmp_path):
    ns = prefix + "rbac"
    api.create(builders.namespace(ns))
    wait_until(lambda: api.exists("ServiceAccount", "default", ns), what="the default ServiceAccount")
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": ns}})
    token = control_plane.service_account_token(ns, "reader")
    http = requests.Session()
    http.trust_env = False
    http.verify = str(control_plane.ca_cert)
    http.headers["Authorization"] = f"Bearer {token}"
    url = f"{control_plane.server}/apis/apps/v1/deployments"
    assert http.get(url, timeout=10).status_code == 403
    role = f"{prefix}list-deployments"
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
                "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}]})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]})
    try:
        wait_until(lambda: http.get(url, timeout=10).status_code == 200, timeout=20, what="RBAC to allow the list")
    finally:
        api.delete("ClusterRoleBinding", role)
        api.delete("ClusterRole", role)


def test_restricted_pod_security_rejects_a_privileged_pod(api: AdminApi, prefix: str):
    ns = prefix + "psa"
    api.create(builders.namespace(ns, {"pod-security.kubernetes.io/enforce": "restricted"}))
    wait_until(lambda: api.exists("ServiceAccount", "default", ns), what="the default ServiceAccount")
    # No securityContext at all: may run as root, keeps capabilities, no seccomp profile.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root", "namespace": ns},
           "spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1"}]}}
    with pytest.raises(AssertionError, match=r"violates PodSecurity \W*restricted"):
        api.create(pod)
    pod["metadata"]["name"] = "hardened"
    pod["spec"]["securityContext"] = {"runAsNonRoot": True, "runAsUser": 10001,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    pod["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False,
                                                       "capabilities": {"drop": ["ALL"]}}
    assert api.create(pod)["metadata"]["name"] == "hardened"


def test_job_created_from_a_cronjob_gets_its_pod(api: AdminApi, prefix: str, control_plane):
    ns = prefix + "cron"
    api.create(builders.namespace(ns))
    api.create(builders.cronjob(ns, "nightly"))
    wait_until(lambda: api.exists("ServiceAccount", "default", ns), what="the default ServiceAccount")
    subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "-n", ns, "create", "job",
                    "--from=cronjob/nightly", "manual-1"], check=True, capture_output=True)
    wait_until(lambda: any(p["metadata"].get("labels", {}).get("job-name") == "manual-1" for p in api.pods(ns)),
               what="the job controller to create the Job's Pod")


def test_version_is_stamped(control_plane):
    version = control_plane.session().get(f"{control_plane.server}/version", timeout=10).json()
    assert version["gitVersion"] == "v1.36.3"
