"""Real operators run as host processes against the suite's control plane (it has no node: their Pods stay Pending).

`CloudNativePG` is the CloudNativePG operator v1.28.0, built from its Go module (`devtools.cluster.tools`, `make
operator-tools`), run out of cluster the way its own code allows:
- the kubeconfig of the control plane's admin (`KUBECONFIG`: controller-runtime reads it);
- `OPERATOR_NAMESPACE` names a namespace made for it;
- `WEBHOOK_CERT_DIR` names a folder with a serving certificate (`apiserver.crt`/`.key`, as OLM would give it): the
  operator then skips its own PKI, which would patch webhook configurations and a Deployment that do not exist
  here. No webhook configuration is installed, so the API server never calls its webhooks (no defaulting: the
  operator defaults a Cluster itself when it reconciles it);
- its working folder holds `operator/manager_amd64` (a link to the binary): the operator hashes the binaries it
  finds there for the instance manager, and refuses a Cluster on an architecture it has none for;
- leader election off (one process), metrics off, its webhook server on a free loopback port.
Its CRDs are the ones of its module (config/crd/bases): it watches all of them.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import yaml

from devtools import builders
from devtools.builders import AdminApi, end
from devtools.cluster import pki
from tests import crds

CNPG_MODULE = "github.com/cloudnative-pg/cloudnative-pg@v1.28.0"
OPERATOR_NAMESPACE = "cnpg-system"
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cnpg_crds() -> list[dict[str, Any]]:
    """The CRDs of CloudNativePG's module at the version built (Go's module cache; downloaded if needed)."""
    found = subprocess.run(["go", "mod", "download", "-json", CNPG_MODULE], capture_output=True, text=True,
                           check=True, env={**os.environ, "GOTOOLCHAIN": "local", "GOWORK": "off"})
    bases = Path(json.loads(found.stdout)["Dir"]) / "config" / "crd" / "bases"
    return [doc for path in sorted(bases.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


class CloudNativePG:
    """The real operator, one process for a test module: `start()`, `stop()`; `log` keeps what it said."""

    def __init__(self, binary: Path, kubeconfig: Path, folder: Path) -> None:
        self.binary, self.kubeconfig, self.folder = binary, kubeconfig, folder
        self.log = folder / "cnpg.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, api: AdminApi) -> None:
        crds.install(api, cnpg_crds())
        if not api.exists("Namespace", OPERATOR_NAMESPACE):
            api.create(builders.namespace(OPERATOR_NAMESPACE))
        certs = self.folder / "webhook"
        pki.Authority(certs).issue("apiserver", common_name="cnpg-webhook", server=True)
        managers = self.folder / "operator"
        managers.mkdir(parents=True, exist_ok=True)
        link = managers / f"manager_{_ARCH.get(platform.machine(), platform.machine())}"
        if not link.exists():
            link.symlink_to(self.binary)
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "OPERATOR_NAMESPACE": OPERATOR_NAMESPACE,
               "WEBHOOK_CERT_DIR": str(certs)}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(self.binary), "controller", "--leader-elect=false", "--metrics-bind-address=0",
                 f"--webhook-port={_free_port()}"],
                cwd=self.folder, env=env, stdout=out, stderr=subprocess.STDOUT)
        builders.wait_until(lambda: b'"Starting workers","controller":"cluster"' in self.log.read_bytes()
                            or self.proc is None or self.proc.poll() is not None,
                            timeout=60, what="the CloudNativePG operator's Cluster controller")
        if self.proc.poll() is not None:
            raise RuntimeError(f"the CloudNativePG operator exited ({self.proc.returncode}):\n{self.tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc is not None:
            end(self.proc)
            self.proc = None


#: CloudNativePG's own switch (pkg/utils/labels_annotations.go, `cnpg.io/reconciliationLoop: disabled`): while it is
#: set the operator leaves the Cluster alone
RECONCILIATION = "cnpg.io/reconciliationLoop"
HIBERNATION = "cnpg.io/hibernation"
HEALTHY = "Cluster in healthy state"


def healthy_cluster(api: AdminApi, ns: str, name: str, instances: int,
                    annotations: dict[str, str] | None = None, *,
                    requests: dict[str, str] | None = None) -> dict[str, Any]:
    """A Cluster as the operator leaves a healthy one, which only running PostgreSQL can make it (and this tier
    runs none): created with the operator's own `reconciliationLoop: disabled`, then its instances (one Pod and
    one PVC per instance, named, labelled and owned as the operator makes them, the primary labelled so) and
    its status (`phase` healthy, its instances ready). `requests`: the Cluster's `spec.resources.requests`, which
    the operator copies to each instance Pod's `postgres` container. `resume()` hands it to the real operator."""
    resources = {"resources": {"requests": requests}} if requests else {}
    cluster = api.create({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
                          "metadata": {"name": name, "namespace": ns,
                                       "annotations": {**(annotations or {}), RECONCILIATION: "disabled"}},
                          "spec": {"instances": instances, "storage": {"size": "1Gi"}, **resources}})
    names = [f"{name}-{n}" for n in range(1, instances + 1)]
    for n, instance in enumerate(names, start=1):
        labels = {"cnpg.io/cluster": name, "cnpg.io/instanceName": instance}
        api.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": instance, "namespace": ns, "ownerReferences": [builders.controller_ref(
                        cluster)], "labels": {**labels, "cnpg.io/pvcRole": "PG_DATA"},
                                 "annotations": {"cnpg.io/nodeSerial": str(n), "cnpg.io/pvcStatus": "ready"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        role = "primary" if n == 1 else "replica"
        pod = builders.pod(ns, instance, owner=cluster, labels={
            **labels, "cnpg.io/podRole": "instance", "cnpg.io/instanceRole": role, "role": role},
            annotations={"cnpg.io/nodeSerial": str(n)})
        pod["spec"]["containers"] = [builders.container("postgres", requests=requests)]
        api.create(pod)
    api.patch("Cluster", name, {"status": {
        "phase": HEALTHY, "instances": instances, "readyInstances": instances, "instanceNames": names,
        "latestGeneratedNode": instances, "currentPrimary": names[0], "targetPrimary": names[0]}}, ns, sub="status")
    return api.get("Cluster", name, ns)


def resume(api: AdminApi, ns: str, name: str) -> None:
    """The real operator takes the Cluster over from here (its `reconciliationLoop` annotation removed)."""
    api.patch("Cluster", name, {"metadata": {"annotations": {RECONCILIATION: None}}}, ns)


def instances(api: AdminApi, ns: str, name: str) -> list[str]:
    """The names of the Cluster's instance Pods (controller-owned by it), as the operator counts them."""
    return sorted(p["metadata"]["name"] for p in api.pods(ns)
                  if any(r.get("controller") and r.get("kind") == "Cluster" and r.get("name") == name
                         for r in p["metadata"].get("ownerReferences") or []))
