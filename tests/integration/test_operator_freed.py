"""What freezing an object whose operator makes its Pods frees, against the real control plane: a kind added as a
team's row (`Paused.test.nsscaler.io`, frozen by `spec.paused`), with Pods whose owner chain leads to it in the
two shapes operators make them (a CloudNativePG instance Pod is controlled by the Cluster itself; a Zalando Pod by
a StatefulSet the custom object controls).

No operator runs for this made-up kind: the test makes its Pods as an operator would (ownerReferences to the
object; the StatefulSet's Pod is the real StatefulSet controller's), which is all nsscaler reads of that contract.
There is no node: the Pods stay Pending, and their requests are what the scheduler would have had to find room for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from job.model.marks import ANNOTATION_FREED
from tests import crds
from tests.faults import FaultProxy

pytestmark = pytest.mark.usefixtures("crd")


def owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = [builders.controller_ref(owner)]
    return obj


def pod_with(ns: str, name: str, owner: dict[str, Any] | None, **requests: str) -> dict[str, Any]:
    made = builders.pod(ns, name, owner=owner)
    made["spec"]["containers"] = [builders.container("postgres", requests=requests)]
    return made


def pod_lists(seen: list[tuple[str, str, int]]) -> int:
    return sum(1 for method, path, _ in seen if method == "GET" and path.split("?")[0].endswith("/pods"))


def test_a_frozen_operator_object_frees_what_the_pods_running_for_it_request(
        api: AdminApi, run_job, prefix, control_plane, admin_token, tmp_path: Path):
    crds.install(api, [crds.PAUSED])
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump([{"kind": "Paused.test.nsscaler.io", "versions": ["v1"],
                                     "freeze": {"method": "field", "path": "spec.paused", "value": True}}]))
    ns, policy = prefix + "v1", f"{prefix}p"
    api.create(builders.namespace(ns))
    db = api.create(builders.custom("Paused", ns, "db", {"paused": False, "size": 3}))
    api.create(builders.custom("Paused", ns, "idle", {"paused": False, "size": 1}))  # its Pods are gone already
    api.create(pod_with(ns, "db-1", db, cpu="1", memory="1Gi"))  # the primary, controlled by the object itself
    api.create(pod_with(ns, "db-2", db, cpu="500m", memory="512Mi"))
    replica = builders.with_pod_spec(builders.statefulset(ns, "db-replica", 1),
                                     containers=[builders.container("postgres", requests={"cpu": "250m"})])
    api.create(owned_by(replica, db))  # its Pod is the StatefulSet controller's own
    wait_until(lambda: api.exists("Pod", "db-replica-0", ns), what="the StatefulSet's Pod")
    api.create(pod_with(ns, "bare", None, cpu="8"))  # nobody's: not counted for any object
    api.create(builders.nsscaler(policy, prefix, [], kinds=["Paused.test.nsscaler.io"]))

    seen: list[tuple[str, str, int]] = []
    with FaultProxy(control_plane, fraction=0.0, after_forward=lambda m, p, s: seen.append((m, p, s))) as proxy:
        config = proxy.kubeconfig(tmp_path / "proxied", admin_token)
        first = run_job("--kind-rows", str(rows), kubeconfig=config)
        assert first.exit_code == 0, first.stderr
        # by hand: 1 + 0.5 + 0.25 CPU, 1Gi + 512Mi memory, 3 Pods; the bare Pod's 8 CPU are nobody's
        recorded = api.get("Paused", "db", ns)["metadata"]["annotations"]
        assert json.loads(recorded[ANNOTATION_FREED]) == {"pods": 3, "requests": {"cpu": "1750m", "memory": "1536Mi"}}
        assert ANNOTATION_FREED not in api.get("Paused", "idle", ns)["metadata"]["annotations"]
        figures = api.status(policy)["freed"]
        assert (figures["workloads"], figures["unknownWorkloads"], figures["pods"]) == (2, 1, 3), figures
        assert figures["requests"] == {"cpu": "1750m", "memory": "1536Mi"}, figures
        assert pod_lists(seen) == 2, "the whole Pods once, the census's metadata once"

        seen.clear()
        steady = run_job("--kind-rows", str(rows), kubeconfig=config)
        assert steady.exit_code == 0, steady.stderr
        assert pod_lists(seen) == 1, "a steady state reads the Pods only for its census"
        assert api.status(policy)["freed"] == figures, "from the record alone"


def test_a_scaled_operator_kind_without_a_template_frees_one_replicas_share_of_its_pods(api: AdminApi, run_job, prefix):
    """A CloudNativePG Pooler (the catalogue's row, its real CRD) runs its Pods through a Deployment it controls; the
    CloudNativePG operator does not run here, so the Deployment is made as it makes one, and its ReplicaSet and Pods
    are the real Deployment controller's."""
    crds.install(api, [c for c in crds.operators() if c["metadata"]["name"] == "poolers.postgresql.cnpg.io"])
    ns, policy = prefix + "v1", f"{prefix}p"
    api.create(builders.namespace(ns))
    pooler = api.create({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Pooler",
                         "metadata": {"name": "pool", "namespace": ns},
                         "spec": {"cluster": {"name": "db"}, "instances": 2, "pgbouncer": {"poolMode": "session"}}})
    pgbouncer = builders.with_pod_spec(builders.deployment(ns, "pool", 2), containers=[
        builders.container("pgbouncer", requests={"cpu": "100m", "memory": "64Mi"}, limits={"memory": "128Mi"})])
    api.create(owned_by(pgbouncer, pooler))
    wait_until(lambda: len(api.pods(ns)) == 2, what="the Deployment's 2 Pods")
    api.create(builders.nsscaler(policy, prefix, [], kinds=["Pooler.postgresql.cnpg.io"]))

    result = run_job()
    assert result.exit_code == 0, result.stderr
    frozen = api.get("Pooler", "pool", ns)
    assert frozen["spec"]["instances"] == 0
    # by hand: 2 Pods of 100m / 64Mi (limit 128Mi) for 2 instances: one instance's share is one Pod
    assert json.loads(frozen["metadata"]["annotations"][ANNOTATION_FREED]) == {
        "pods": 1, "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}
    figures = api.status(policy)["freed"]
    assert (figures["workloads"], figures["unknownWorkloads"], figures["pods"]) == (1, 0, 2), figures
    assert figures["requests"] == {"cpu": "200m", "memory": "128Mi"} and figures["limits"] == {"memory": "256Mi"}
