"""The people of a cluster in tests: real users (client certificates signed by the cluster's CA) with their own
kubeconfig, their RBAC, and `kubectl nsscaler` run as them, found on PATH by kubectl itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster import controlplane, pki
from tests.conftest import kubectl


def plugin(kubeconfig: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl nsscaler ...`: kubectl finds the installed `kubectl-nsscaler` on PATH. `kubeconfig` is what
    KUBECONFIG says: one file, or several separated by os.pathsep."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([kubectl(), "nsscaler", *args], capture_output=True, text=True, env=env, check=False)


class User:
    """A real user of the cluster: a client certificate with this common name, and a kubeconfig for it."""

    def __init__(self, plane: controlplane.ControlPlane, name: str, folder: Path) -> None:
        self.name, self.plane = name, plane
        self.cert, self.key = pki.Authority.load(plane.ca_cert.parent).issue(f"user-{name}", common_name=name)
        self.kubeconfig = plane.kubeconfig(folder / f"{name}.kubeconfig", user=name, cert=self.cert, key=self.key)

    def plugin(self, *args: str) -> subprocess.CompletedProcess[str]:
        return plugin(self.kubeconfig, *args)

    def post(self, obj: dict[str, Any]) -> requests.Response:
        s = requests.Session()
        s.trust_env, s.cert, s.verify = False, (str(self.cert), str(self.key)), str(self.plane.ca_cert)
        url = f"{self.plane.server}/apis/{builders.NSSCALER_VERSION}/namespaces/{obj['metadata']['namespace']}/wakes"
        return s.post(url, json=obj, timeout=30)

    def patch_wake(self, ns: str, name: str, body: dict[str, Any]) -> requests.Response:
        """A merge patch of a Wake as this user (`None` removes a field)."""
        s = requests.Session()
        s.trust_env, s.cert, s.verify = False, (str(self.cert), str(self.key)), str(self.plane.ca_cert)
        url = f"{self.plane.server}/apis/{builders.NSSCALER_VERSION}/namespaces/{ns}/wakes/{name}"
        return s.patch(url, json=body, timeout=30, headers={"Content-Type": "application/merge-patch+json"})


def grant_edit(api: AdminApi, ns: str, user: User) -> None:
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": f"edit-{user.name}", "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user.name}]})
