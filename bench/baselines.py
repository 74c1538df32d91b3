"""The two references nsscaler is measured against, on the same objects.

- naive: the Go operator's algorithm, in Python: list all namespaces, then for each in-scope namespace
  list its Deployments and send a full-object update (PUT) for each one that must change, one by one.
- limit: the physical limit: exactly the PATCH requests nsscaler would send, prepared here beforehand,
  sent by bench.limit's minimal client.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pykube
from pykube.http import KubernetesHTTPAdapter

from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY, LABEL_SCALED
from job.model.workloads import Kind, freeze_patch, from_api, restore_patch


def client(kubeconfig: str, concurrency: int) -> pykube.HTTPClient:
    config = pykube.KubeConfig.from_file(kubeconfig)
    adapter = KubernetesHTTPAdapter(config, pool_maxsize=max(10, concurrency + 2))
    api = pykube.HTTPClient(config, timeout=30, http_adapter=adapter)
    api.session.trust_env = False  # as nsscaler's own client: no ~/.netrc or environment lookup per request
    return api


def _held(ns: str, prefix: str, active: set[str]) -> bool:
    return ns.startswith(prefix) and ns[len(prefix):] not in active


def naive(api: pykube.HTTPClient, *, prefix: str, active: set[str], policy: str) -> dict[str, Any]:
    """Freeze held namespaces and give back allowed ones, the way the original operator walks a cluster."""
    requests: Counter[str] = Counter()
    started = time.perf_counter()
    resp = api.get(url="namespaces")
    requests["list"] += 1
    resp.raise_for_status()
    for ns in (n["metadata"]["name"] for n in resp.json()["items"]):
        if not ns.startswith(prefix):
            continue
        listed = api.get(version="apps/v1", namespace=ns, url="deployments")
        requests["list"] += 1
        listed.raise_for_status()
        for dep in listed.json()["items"]:
            annotations = dep["metadata"].setdefault("annotations", {})
            replicas = dep["spec"].get("replicas", 1)
            if _held(ns, prefix, active) and replicas > 0:
                annotations.setdefault(ANNOTATION_ORIGINAL_REPLICAS, str(replicas))
                annotations[ANNOTATION_SCALED_BY] = policy
                dep["metadata"].setdefault("labels", {})[LABEL_SCALED] = "true"
                dep["spec"]["replicas"] = 0
            elif not _held(ns, prefix, active) and ANNOTATION_ORIGINAL_REPLICAS in annotations:
                dep["spec"]["replicas"] = int(annotations.pop(ANNOTATION_ORIGINAL_REPLICAS))
                annotations.pop(ANNOTATION_SCALED_BY, None)
                dep["metadata"].get("labels", {}).pop(LABEL_SCALED, None)
            else:
                continue
            put = api.put(version="apps/v1", namespace=ns, url=f"deployments/{dep['metadata']['name']}", json=dep)
            requests["update"] += 1
            put.raise_for_status()
    return {"seconds": time.perf_counter() - started, "requests": dict(requests)}


Patch = tuple[str, str, dict[str, Any]]


def planned_patches(api: pykube.HTTPClient, *, prefix: str, active: set[str], policy: str) -> list[Patch]:
    """The PATCHes a freeze/restore run must send, built by nsscaler's own patch builders from one LIST
    made before the clock starts."""
    resp = api.get(version="apps/v1", url="deployments")
    resp.raise_for_status()
    patches = []
    for obj in resp.json()["items"]:
        w = from_api(Kind.DEPLOYMENT, obj)
        if _held(w.namespace, prefix, active) and w.size > 0:
            patches.append((w.namespace, w.name, freeze_patch(w, policy=policy)))
        elif not _held(w.namespace, prefix, active) and w.has_record:
            patches.append((w.namespace, w.name, restore_patch(w)))
    return patches
