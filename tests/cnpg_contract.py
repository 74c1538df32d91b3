"""A test controller that follows CloudNativePG's documented hibernation contract, for one namespace: the real
CNPG operator is not built or run here (it is a large Go program that needs running PostgreSQL Pods to call a
cluster healthy), so this thread imitates only what CNPG documents and the wire shows, never its logic:

- its page "Declarative hibernation" (declarative_hibernation.md in its docs, CNPG 1.28.0): the annotation
  `cnpg.io/hibernation=on` deletes the cluster's Pods, the primary first and then the replicas, keeps every
  PVC (replicas' too), and reports in the condition `cnpg.io/hibernation`; `off`, or no annotation, recreates
  the Pods;
- pkg/reconciler/hibernation/status.go: the condition's reasons `DeletingPods` (status False) while Pods go, then
  `Hibernated` (status True); a cluster that is not healthy does not start hibernating;
- the Cluster's `status.phase` ("Cluster in healthy state"), `status.instances` and `status.readyInstances`, and
  one Pod and one PVC per instance named `<cluster>-<n>`, each with the Cluster as controller owner.

Its Pods have no node (nothing runs them), so they stay Pending and go at once when deleted, as unscheduled Pods
do. It polls the API every 50 ms: the test waits on the objects, never on this thread's timing.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import requests

from devtools import builders
from devtools.builders import AdminApi

ANNOTATION = "cnpg.io/hibernation"
CONDITION = "cnpg.io/hibernation"
HEALTHY = "Cluster in healthy state"
POLL = 0.05


def _condition(status: str, reason: str, message: str) -> dict[str, str]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": CONDITION, "status": status, "reason": reason, "message": message, "lastTransitionTime": now}


class HibernationContract(threading.Thread):
    """The contract above for every Cluster of `namespace`, until `stop()`. What went wrong is kept in
    `errors` (the test asserts it is empty), so a failure here is never silent."""

    def __init__(self, api: AdminApi, namespace: str) -> None:
        super().__init__(daemon=True, name=f"cnpg-contract-{namespace}")
        self.api, self.namespace = api, namespace
        self.halt = threading.Event()
        self.errors: list[str] = []

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=10)

    def run(self) -> None:
        while not self.halt.wait(POLL):
            try:
                for cluster in self.api.list("Cluster", self.namespace):
                    self.reconcile(cluster)
            except (requests.RequestException, AssertionError) as exc:
                self.errors.append(repr(exc))

    def _status(self, cluster: dict[str, Any], **status: Any) -> None:
        name = cluster["metadata"]["name"]
        self.api.patch("Cluster", name, {"status": status}, self.namespace, sub="status", field_manager="cnpg-contract")

    def _pods(self, name: str) -> list[dict[str, Any]]:
        return sorted((p for p in self.api.pods(self.namespace)
                       if (p["metadata"].get("labels") or {}).get("cnpg.io/cluster") == name),
                      key=lambda p: p["metadata"]["name"])

    def reconcile(self, cluster: dict[str, Any]) -> None:
        meta, status = cluster["metadata"], cluster.get("status") or {}
        name, instances = meta["name"], int(cluster["spec"]["instances"])
        switch = (meta.get("annotations") or {}).get(ANNOTATION)
        pods = self._pods(name)
        conditions = [c for c in status.get("conditions") or [] if c.get("type") == CONDITION]
        if not status.get("phase"):  # a new cluster: its instances and their volumes, then healthy
            self._instances(cluster, instances)
            self._status(cluster, phase=HEALTHY, instances=instances, readyInstances=instances)
        elif switch == "on" and (status.get("phase") == HEALTHY or conditions):
            self._hibernate(cluster, pods, conditions)
        elif switch in (None, "off") and conditions:  # rehydration: the Pods again, on the kept volumes
            self._instances(cluster, instances)
            self._status(cluster, conditions=[c for c in status.get("conditions") or []
                                              if c.get("type") != CONDITION], readyInstances=instances)

    def _hibernate(self, cluster: dict[str, Any], pods: list[dict[str, Any]], conditions: list[dict[str, Any]]) -> None:
        if pods:
            if not conditions or conditions[0].get("reason") != "DeletingPods":
                self._status(cluster, conditions=[_condition("False", "DeletingPods", "Deleting primary and replicas")])
            for pod in pods:  # the primary (instance 1) first, then the replicas, never a switchover
                self.api.delete("Pod", pod["metadata"]["name"], self.namespace)
        elif not conditions or conditions[0].get("reason") != "Hibernated":
            self._status(cluster, conditions=[_condition("True", "Hibernated", "Cluster has been hibernated")],
                         readyInstances=0)

    def _instances(self, cluster: dict[str, Any], instances: int) -> None:
        name = cluster["metadata"]["name"]
        for n in range(1, instances + 1):
            instance = f"{name}-{n}"
            if not self.api.exists("PersistentVolumeClaim", instance, self.namespace):
                self.api.create(claim(self.namespace, instance, owner=cluster))
            if not self.api.exists("Pod", instance, self.namespace):
                role = "primary" if n == 1 else "replica"
                self.api.create(builders.pod(self.namespace, instance, owner=cluster,
                                             labels={"cnpg.io/cluster": name, "cnpg.io/instanceRole": role}))


def claim(namespace: str, name: str, *, owner: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [builders.controller_ref(owner)]},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
