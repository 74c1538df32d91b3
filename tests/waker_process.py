"""The waker as the wake-on-request tests run it: the component's own RBAC (kustomize/components/waker), applied
with the test's namespace for `nsscaler` and a unique prefix on cluster-scoped names, its own ServiceAccount's
token, and the real `nsscaler-waker` entry point as a host process (the test control plane has no node)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml

from devtools.builders import AdminApi, end, wait_until
from devtools.cluster import controlplane
from tests.conftest import ROOT

COMPONENT = ROOT / "kustomize" / "components" / "waker"
BASE = ROOT / "kustomize" / "base"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def moved(obj: dict[str, Any], *, namespace: str, prefix: str) -> dict[str, Any]:
    """A shipped object moved into the test's namespace (cluster-scoped ones renamed with the test's prefix)."""
    meta = obj["metadata"]
    if "namespace" in meta:
        meta["namespace"] = namespace
    elif obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
        meta["name"] = prefix + meta["name"]
    if obj["kind"] == "ClusterRoleBinding":
        obj["roleRef"]["name"] = prefix + obj["roleRef"]["name"]
    for subject in obj.get("subjects") or []:
        subject["namespace"] = namespace
    return obj


def install(api: AdminApi, files: list[Path], *, namespace: str, prefix: str, kinds: tuple[str, ...]) -> None:
    for path in files:
        for obj in yaml.safe_load_all(path.read_text()):
            if obj and obj["kind"] in kinds:
                api.create(moved(obj, namespace=namespace, prefix=prefix))


@dataclass
class WakerProcess:
    url: str
    proc: subprocess.Popen[str]
    log: Path
    identity: str

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def waker(api: AdminApi, plane: controlplane.ControlPlane, *, namespace: str, prefix: str,
          workdir: Path, install_rbac: bool = True) -> Iterator[WakerProcess]:
    """The waker's RBAC and the job's CronJob in `namespace`, and the waker running as its ServiceAccount
    (`install_rbac=False`: a second replica, beside one that installed them); once it watches Wakes."""
    if install_rbac:
        install(api, [COMPONENT / "waker.yaml", COMPONENT / "waker-rbac.yaml"], namespace=namespace, prefix=prefix,
                kinds=("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"))
        install(api, [BASE / "cronjob.yaml"], namespace=namespace, prefix=prefix, kinds=("CronJob",))
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig = plane.service_account_kubeconfig(workdir / "waker-kubeconfig", namespace, "nsscaler-waker")
    port = free_port()
    log = workdir / "waker.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSSCALER_") and k != "KUBECONFIG"}
    env |= {"NSSCALER_KUBECONFIG": str(kubeconfig), "NSSCALER_OWN_NAMESPACE": namespace, "PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "nsscaler-waker"), "--host", "127.0.0.1",
                                 "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(f"{url}/healthz", timeout=2).ok, timeout=60, what="the waker to answer")
        wait_until(lambda: "watching Wakes" in log.read_text(errors="replace"), timeout=60,
                   what="the waker to watch Wakes")
        yield WakerProcess(url, proc, log, f"system:serviceaccount:{namespace}:nsscaler-waker")
    finally:
        end(proc, grace=20)
        for kind in ("ClusterRoleBinding", "ClusterRole") if install_rbac else ():
            api.delete(kind, f"{prefix}nsscaler-waker")
