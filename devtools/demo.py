"""`make demo`: the whole product in one command, on a throwaway local control plane.

A namespace family shop-v1..v4, an NSScaler that allows v3, one run, the before/after table; then the
allowed version switches to v4, another run, and v4 comes back to its exact counts. Nothing is left
running afterwards.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
FAMILY = {
    "shop-v1": {"web": 2, "api": 3, "db": 1},
    "shop-v2": {"web": 1, "api": 2, "db": 1},
    "shop-v3": {"web": 3, "api": 4, "db": 2},
    "shop-v4": {"web": 2, "api": 1, "db": 3},
}


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def table(api: AdminApi) -> None:
    print(f"{'NAMESPACE':<10} {'KIND':<12} {'NAME':<5} {'REPLICAS':>8}  RECORDED ORIGINAL")
    for ns, workloads in FAMILY.items():
        for name in workloads:
            kind = "StatefulSet" if name == "db" else "Deployment"
            obj = api.get(kind, name, ns)
            original = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_ORIGINAL_REPLICAS, "")
            print(f"{ns:<10} {kind:<12} {name:<5} {obj['spec']['replicas']:>8}  {original}")


def run(command: list[str]) -> None:
    print("$ " + " ".join(Path(command[0]).name if i == 0 else c for i, c in enumerate(command)), flush=True)
    subprocess.run(command, check=False)


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nsscaler-demo-") as tmp:
        say("starting a local control plane (etcd, kube-apiserver, kube-controller-manager)")
        plane = controlplane.start(Path(tmp) / "plane")
        try:
            api = AdminApi(plane)
            kube = [str(BIN / "kubectl"), "--kubeconfig", str(plane.admin_kubeconfig)]
            nsscaler = [str(BIN / "nsscaler"), "--kubeconfig", str(plane.admin_kubeconfig)]
            say("a product family: shop-v1..v4, each with Deployments web and api and a StatefulSet db")
            for ns, workloads in FAMILY.items():
                api.create(builders.namespace(ns))
                for name, replicas in workloads.items():
                    build = builders.statefulset if name == "db" else builders.deployment
                    api.create(build(ns, name, replicas))
            table(api)
            say("install the NSScaler CRD and a policy: only shop-v3 may run")
            run([*kube, "apply", "-f", str(ROOT / "kustomize/base/crd.yaml")])
            wait_until(api.crd_established, what="the CRD")
            run([*kube, "apply", "-f", str(ROOT / "kustomize/samples/shop-release.yaml")])
            say("dry run first: what would change")
            run([*nsscaler, "--dry-run"])
            say("run nsscaler")
            run(nsscaler)
            table(api)
            say("kubectl get nsscalers (Pods are still terminating, so DONE is false)")
            run([*kube, "get", "nsscalers"])
            wait_until(lambda: all(not api.pods(ns) for ns in FAMILY if ns != "shop-v3"), what="Pods to go")
            say("the next scheduled run finds the Pods gone: DONE turns true")
            run([*nsscaler, "--log-level", "warning"])
            run([*kube, "get", "nsscalers"])
            say("release plans change: shop-v4 instead of shop-v3")
            run([*kube, "patch", "nsscaler", "shop-release", "--type=merge", "-p",
                 '{"spec":{"active_namespace_suffixes":["v4"]}}'])
            run(nsscaler)
            table(api)
            run([*kube, "describe", "deployment", "-n", "shop-v4", "api"])
        finally:
            say("stopping the control plane")
            plane.stop()
    print(f"\ndemo finished in {time.monotonic() - started:.0f}s; nothing left running")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
