"""What the wake-on-request tests share: the real Gateway API CRDs (from the module Traefik pins, built once by
devtools.cluster.traefik) installed on the session's control plane, and builders of routes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, tools, traefik
from tests.conftest import kubectl


@pytest.fixture(scope="session")
def gateway_crds(api: AdminApi, control_plane: controlplane.ControlPlane) -> None:
    try:
        traefik.install_gateway_crds(api, control_plane.admin_kubeconfig, Path(kubectl()))
    except tools.SourceUnavailable as exc:
        pytest.skip(f"no Gateway API CRDs: {exc}")


def httproute(ns: str, name: str, *, hostname: str, rules: list[dict[str, Any]],
              gateway: tuple[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"hostnames": [hostname], "rules": rules}
    if gateway:
        spec["parentRefs"] = [{"name": gateway[1], "namespace": gateway[0]}]
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def backend(service: str, port: int) -> dict[str, Any]:
    return {"name": service, "port": port}


def ready_pods(api: AdminApi, ns: str, label: str) -> None:
    """What a kubelet reports once a Pod's containers run and their readiness probe passes (this control plane has
    no kubelet), for each Pod of `label`: the real ReplicaSet and Deployment controllers count it available."""
    wait_until(lambda: bool(api.list("Pod", ns, labelSelector=label)), timeout=120, what=f"Pods {label} in {ns}")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for pod in api.list("Pod", ns, labelSelector=label):
        api.patch("Pod", pod["metadata"]["name"], {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}]}}, namespace=ns, sub="status")
