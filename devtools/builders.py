"""Builders for the Kubernetes objects tests create, and a small admin client to create them.

The admin client is test plumbing (plain HTTPS with the control plane's admin certificate), not the
product's API layer: tests set the scene and read the outcome with it, and run nsscaler itself to act.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from devtools.cluster.controlplane import ControlPlane

NSSCALER_VERSION = "operators.wubw.fun/v1alpha1"

_PATHS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "RuntimeClass": ("/apis/node.k8s.io/v1", "runtimeclasses", False),
    "Pod": ("/api/v1", "pods", True),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Secret": ("/api/v1", "secrets", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Event": ("/api/v1", "events", True),
    "ResourceQuota": ("/api/v1", "resourcequotas", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "StatefulSet": ("/apis/apps/v1", "statefulsets", True),
    "DaemonSet": ("/apis/apps/v1", "daemonsets", True),
    "ReplicaSet": ("/apis/apps/v1", "replicasets", True),
    "CronJob": ("/apis/batch/v1", "cronjobs", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "ReplicationController": ("/api/v1", "replicationcontrollers", True),
    "HorizontalPodAutoscaler": ("/apis/autoscaling/v2", "horizontalpodautoscalers", True),
    "ScaledObject": ("/apis/keda.sh/v1alpha1", "scaledobjects", True),
    "Pool": ("/apis/test.nsscaler.io/v1", "pools", True),
    "Fleet": ("/apis/test.nsscaler.io/v1", "fleets", True),
    "Plain": ("/apis/test.nsscaler.io/v1", "plains", True),
    "Paused": ("/apis/test.nsscaler.io/v1", "pauseds", True),
    "Gated": ("/apis/test.nsscaler.io/v1", "gateds", True),
    "Sleeper": ("/apis/test.nsscaler.io/v1", "sleepers", True),
    "Broker": ("/apis/test.nsscaler.io/v1", "brokers", True),
    "Keeper": ("/apis/test.nsscaler.io/v1", "keepers", True),
    # operator kinds of the shipped catalogue (job/model/kinds/catalogue.py), served from their real CRDs
    "Cluster": ("/apis/postgresql.cnpg.io/v1", "clusters", True),
    "Pooler": ("/apis/postgresql.cnpg.io/v1", "poolers", True),
    "postgresql": ("/apis/acid.zalan.do/v1", "postgresqls", True),
    "PerconaXtraDBCluster": ("/apis/pxc.percona.com/v1", "perconaxtradbclusters", True),
    "RabbitmqCluster": ("/apis/rabbitmq.com/v1beta1", "rabbitmqclusters", True),
    "KafkaConnect": ("/apis/kafka.strimzi.io/v1", "kafkaconnects", True),
    "KafkaMirrorMaker2": ("/apis/kafka.strimzi.io/v1", "kafkamirrormaker2s", True),
    "KafkaBridge": ("/apis/kafka.strimzi.io/v1", "kafkabridges", True),
    "NSScaler": (f"/apis/{NSSCALER_VERSION}", "nsscalers", False),
    "Wake": (f"/apis/{NSSCALER_VERSION}", "wakes", True),
    "NSScalerKind": (f"/apis/{NSSCALER_VERSION}", "nsscalerkinds", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "ValidatingAdmissionPolicy": ("/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("/apis/admissionregistration.k8s.io/v1",
                                         "validatingadmissionpolicybindings", False),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases", True),
    "Service": ("/api/v1", "services", True),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "EndpointSlice": ("/apis/discovery.k8s.io/v1", "endpointslices", True),
    "GatewayClass": ("/apis/gateway.networking.k8s.io/v1", "gatewayclasses", False),
    "Gateway": ("/apis/gateway.networking.k8s.io/v1", "gateways", True),
    "HTTPRoute": ("/apis/gateway.networking.k8s.io/v1", "httproutes", True),
    "ReferenceGrant": ("/apis/gateway.networking.k8s.io/v1beta1", "referencegrants", True),
}


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def _pod_template(app: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]}}


def deployment(ns: str, name: str, replicas: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": _pod_template(name)}}


def statefulset(ns: str, name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": _pod_template(name)}}


def statefulset_with_claims(ns: str, name: str, replicas: int, *, when_scaled: str) -> dict[str, Any]:
    """A StatefulSet whose Pods each get a claim (`data-<name>-<ordinal>`), all started at once (Parallel: the
    controller does not wait for a Pod to be Ready, which none is without a node)."""
    obj = statefulset(ns, name, replicas)
    obj["spec"].update(
        podManagementPolicy="Parallel",
        persistentVolumeClaimRetentionPolicy={"whenDeleted": "Retain", "whenScaled": when_scaled},
        volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}])
    return obj


def cronjob(ns: str, name: str, *, suspend: bool = False, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    template = _pod_template(name)
    template["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"schedule": "0 3 * * *", "suspend": suspend,
                     "jobTemplate": {"spec": {"template": template}}}}


def daemonset(ns: str, name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": _pod_template(name)}}


def pod(ns: str, name: str, *, owner: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Pod; bare unless `owner` (an object as the API returned it) is given as its controller."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [controller_ref(owner)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]}}


def with_pod_spec(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """`obj` (a Deployment, StatefulSet, Job...) with these Pod spec fields in its template (e.g. `containers`)."""
    obj["spec"]["template"]["spec"].update(spec)
    return obj


def container(name: str, *, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
              **extra: Any) -> dict[str, Any]:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"name": name, "image": "registry.invalid/app:1", "resources": resources, **extra}


def runtime_class(name: str, **pod_fixed: str) -> dict[str, Any]:
    """A RuntimeClass whose Pods carry this overhead (`overhead.podFixed`), as a sandboxed runtime's would."""
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": "runc",
            **({"overhead": {"podFixed": pod_fixed}} if pod_fixed else {})}


def controller_ref(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def job(ns: str, name: str, *, parallelism: int = 1, owner: dict[str, Any] | None = None,
        **spec: Any) -> dict[str, Any]:
    """A Job; `owner` (an object as read back) makes it that object's controlled Job, as a CronJob's are."""
    template = _pod_template(name)
    template["metadata"]["labels"] = {"job": name}
    template["spec"]["restartPolicy"] = "Never"
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [controller_ref(owner)]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": parallelism, "completions": parallelism * 2, "template": template, **spec}}


def replicaset(ns: str, name: str, replicas: int, *, kind: str = "ReplicaSet",
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A standalone ReplicaSet, or (kind="ReplicationController") its older sibling."""
    meta = {"name": name, "namespace": ns, "annotations": annotations or {}}
    if kind == "ReplicationController":
        return {"apiVersion": "v1", "kind": kind, "metadata": meta,
                "spec": {"replicas": replicas, "selector": {"app": name}, "template": _pod_template(name)}}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": _pod_template(name)}}


def hpa(ns: str, name: str, target: str, *, min_replicas: int, max_replicas: int = 5) -> dict[str, Any]:
    """An HPA on CPU; with `min_replicas=0` on an External metric instead, the only kind the API accepts
    for scale-to-zero (no external metrics server runs here, so the controller never scales on it)."""
    metric: dict[str, Any] = {"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    if min_replicas == 0:
        metric = {"type": "External", "external": {"metric": {"name": "queue_length"},
                                                   "target": {"type": "AverageValue", "averageValue": "5"}}}
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                     "minReplicas": min_replicas, "maxReplicas": max_replicas, "metrics": [metric]}}


def scaled_object(ns: str, name: str, target: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"scaleTargetRef": {"name": target},
                     "triggers": [{"type": "cron", "metadata": {"timezone": "UTC", "start": "0 8 * * *",
                                                                 "end": "0 18 * * *", "desiredReplicas": "3"}}]}}


def custom(kind: str, ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An object of one of the test CRDs (tests/crds.py)."""
    return {"apiVersion": "test.nsscaler.io/v1", "kind": kind, "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def nsscaler(name: str, prefix: str, active: list[str], **extra: Any) -> dict[str, Any]:
    return {"apiVersion": NSSCALER_VERSION, "kind": "NSScaler", "metadata": {"name": name},
            "spec": {"scope_prefix": prefix, "active_namespace_suffixes": active, **extra}}


def wake(ns: str, duration: str, *, name: str | None = "w", **spec: Any) -> dict[str, Any]:
    """A Wake (`name=None`: a generated name)."""
    meta: dict[str, Any] = {"namespace": ns, **({"name": name} if name else {"generateName": "probe-"})}
    return {"apiVersion": NSSCALER_VERSION, "kind": "Wake", "metadata": meta, "spec": {"duration": duration, **spec}}


class AdminApi:
    """Create, read, patch and delete objects as cluster admin; raise on any unexpected status."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.http = plane.session()
        # The tests' admin shares the server's seats with whatever a test loads it with (API Priority and
        # Fairness): a 429 means "not now, nothing done", so trying again after the server's Retry-After is safe
        # for every verb, and a setup or teardown step never fails on it.
        not_now = Retry(total=8, connect=0, read=0, redirect=0, status_forcelist=[429], allowed_methods=None,
                        respect_retry_after_header=True, backoff_factor=0.2, raise_on_status=False)
        self.http.mount("https://", HTTPAdapter(max_retries=not_now))

    def url(self, kind: str, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base, plural, namespaced = _PATHS[kind]
        path = f"{base}/namespaces/{namespace}/{plural}" if namespaced and namespace else f"{base}/{plural}"
        if name:
            path += f"/{name}"
        if sub:
            path += f"/{sub}"
        return self.plane.server + path

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        resp = self.http.post(self.url(obj["kind"], meta.get("namespace")), json=obj, timeout=30)
        if resp.status_code >= 300:
            raise AssertionError(f"create {obj['kind']} {meta.get('name')}: {resp.status_code} {resp.text}")
        return dict(resp.json())

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        resp = self.http.get(self.url(kind, namespace, name), timeout=30)
        resp.raise_for_status()
        return dict(resp.json())

    def exists(self, kind: str, name: str, namespace: str | None = None) -> bool:
        return self.http.get(self.url(kind, namespace, name), timeout=30).status_code == 200

    def list(self, kind: str, namespace: str | None = None, **params: str) -> list[dict[str, Any]]:
        resp = self.http.get(self.url(kind, namespace), params=params, timeout=60)
        resp.raise_for_status()
        return list(resp.json()["items"])

    def patch(self, kind: str, name: str, body: dict[str, Any], namespace: str | None = None,
              sub: str = "", field_manager: str | None = None) -> dict[str, Any]:
        """A merge patch; `field_manager` names the writer in managedFields, as a controller's client does."""
        params = {"fieldManager": field_manager} if field_manager else {}
        resp = self.http.patch(self.url(kind, namespace, name, sub), json=body, timeout=30, params=params,
                               headers={"Content-Type": "application/merge-patch+json"})
        resp.raise_for_status()
        return dict(resp.json())

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        resp = self.http.delete(self.url(kind, namespace, name), timeout=30)
        if resp.status_code not in (200, 202, 404):
            raise AssertionError(f"delete {kind} {name}: {resp.status_code} {resp.text}")

    def replicas(self, kind: str, namespace: str, name: str) -> int:
        return int(self.get(kind, name, namespace)["spec"]["replicas"])

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        return self.list("Pod", namespace)

    def serves(self, group_version: str, plural: str) -> bool:
        """Whether the API server serves `plural` in `group_version` (discovery), e.g. a kind GA only lately."""
        resp = self.http.get(f"{self.plane.server}/apis/{group_version}", timeout=30)
        return resp.status_code == 200 and any(r.get("name") == plural for r in resp.json().get("resources") or [])

    def server_version(self) -> tuple[int, int]:
        """The API server's (major, minor), from /version."""
        info = self.http.get(f"{self.plane.server}/version", timeout=30).json()
        return int(info["major"]), int("".join(ch for ch in info["minor"] if ch.isdigit()))

    def crd_established(self, name: str = "nsscalers.operators.wubw.fun") -> bool:
        if not self.exists("CustomResourceDefinition", name):
            return False
        conditions = self.get("CustomResourceDefinition", name).get("status", {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get("NSScaler", name).get("status") or {})


def wait_until(check: Callable[[], bool], *, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


#: a container that runs until told to stop, and stops at once on SIGTERM (busybox as PID 1 ignores it otherwise)
_SLEEPER = ["/bin/busybox", "sh", "-c", "trap 'exit 0' TERM; while true; do /bin/busybox sleep 1; done"]


def on_node(workload: dict[str, Any], image: str, *, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """The workload's Pods really run on the local node (tests/node): a local image, never pulled, no token.
    A `node_selector` no node matches keeps them Pending instead (many workloads, few Pods)."""
    spec = workload["spec"]["template"]["spec"]
    spec.update(terminationGracePeriodSeconds=2, enableServiceLinks=False, automountServiceAccountToken=False,
                containers=[{"name": "app", "image": image, "imagePullPolicy": "Never", "command": _SLEEPER}])
    if node_selector:
        spec["nodeSelector"] = node_selector
    return workload


def web_app(ns: str, image: str, *, page: str) -> list[dict[str, Any]]:
    """Deployment `web` on the local node (one busybox httpd Pod serving `page`, Ready once it answers) and its
    Service `web:80`."""
    script = (f"/bin/busybox mkdir -p /www && echo '{page}' > /www/index.html && "
              "exec /bin/busybox httpd -f -p 8080 -h /www")
    workload = on_node(deployment(ns, "web", 1), image)
    (box,) = workload["spec"]["template"]["spec"]["containers"]
    box.update(command=["/bin/busybox", "sh", "-c", script], ports=[{"name": "http", "containerPort": 8080}],
               readinessProbe={"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1, "failureThreshold": 1})
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}
    return [workload, service]


def mixed_requests(prefix: str) -> list[dict[str, Any]]:
    """A family whose held namespaces (`v2`, `v3`; `v1` stays active) run workloads with every way of asking
    for resources, in creation order: no requests, CPU only, memory + a GPU (extended resources need no node
    to be accepted for a Deployment), init containers around a sidecar, and a RuntimeClass's Pod overhead.
    tests/integration/test_freed.py writes out by hand what their freeze frees."""
    v1, v2, v3 = (prefix + s for s in ("v1", "v2", "v3"))
    kata = f"{prefix}kata"
    return [
        namespace(v1), namespace(v2), namespace(v3),
        runtime_class(kata, cpu="250m", memory="120Mi"),
        deployment(v1, "d-cpu", 3),  # active: never counted
        deployment(v2, "d-none", 2),
        with_pod_spec(deployment(v2, "d-cpu", 3), containers=[container("app", requests={"cpu": "250m"})]),
        with_pod_spec(deployment(v2, "d-gpu", 1), containers=[container(
            "app", requests={"memory": "1Gi", "nvidia.com/gpu": "1"},
            limits={"memory": "2Gi", "nvidia.com/gpu": "1"})]),
        with_pod_spec(statefulset(v3, "s-init", 2),
                      initContainers=[container("migrate", requests={"cpu": "1", "memory": "256Mi"}),
                                      container("proxy", requests={"cpu": "100m", "memory": "64Mi"},
                                                restartPolicy="Always"),
                                      container("warm", requests={"cpu": "500m", "memory": "512Mi"})],
                      containers=[container("app", requests={"cpu": "200m", "memory": "128Mi"})]),
        with_pod_spec(deployment(v3, "d-kata", 2), runtimeClassName=kata,
                      containers=[container("app", requests={"cpu": "500m", "memory": "256Mi"})]),
    ]


def end(proc: subprocess.Popen[Any], *, grace: float = 20.0) -> None:
    """Stop a helper process the tests started: SIGTERM, then SIGKILL if it has not exited within `grace`."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
