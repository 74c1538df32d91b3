"""What freezing an object whose operator makes its Pods frees (job.decide.operator_pods): counted from the Pods
whose owner chain leads to it, worked out by hand, recorded in the freeze's own patch, unknown when no Pod runs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from job.decide import freed
from job.decide.actions import Action, ActionResult, Verb
from job.decide.operator_pods import OperatorPods, to_count
from job.decide.plan import select_from_workloads
from job.model.custom import resolve
from job.model.kinds import Kind, ReplicasHandler
from job.model.kinds.catalogue import CATALOGUE
from job.model.kinds.field import FieldHandler
from job.model.kinds.rows import merged
from job.model.marks import ANNOTATION_FREED
from job.model.workloads import Workload, freeze_patch
from tests.unit.factories import namespaces, policy, settings, workload
from tests.unit.test_rows import real_crd

GI, MI = 2**30, 2**20
CNPG = "Cluster.postgresql.cnpg.io"
ZALANDO = FieldHandler(Kind("postgresql.acid.zalan.do"), "acid.zalan.do", "v1", "postgresqls",
                       where=("spec", "numberOfInstances"), value=0)


def cnpg_handler() -> FieldHandler:
    handler = resolve([Kind(CNPG)], [real_crd(CNPG)], merged([], CATALOGUE)).handlers[Kind(CNPG)]
    assert isinstance(handler, FieldHandler)
    return handler


def owner(kind: str, api_version: str, name: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}


def pod(name: str, *, ns: str = "a-1", by: dict[str, Any] | None = None, cpu: str | None = None,
        memory: str | None = None, limit: str | None = None, overhead: dict[str, str] | None = None
        ) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    resources: dict[str, Any] = {"requests": requests, **({"limits": {"memory": limit}} if limit else {})}
    spec: dict[str, Any] = {"containers": [{"name": "postgres", "resources": resources}]}
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": name, "namespace": ns, "ownerReferences": [by] if by else []}, "spec": spec}


def running(handler: FieldHandler, name: str = "db", ns: str = "a-1") -> Workload:
    return workload(ns, name, 1, handler=handler)


def test_a_cnpg_cluster_counts_the_instance_pods_it_controls_whatever_their_sizes():
    db = running(cnpg_handler())
    found = OperatorPods()
    cluster = owner("Cluster", "postgresql.cnpg.io/v1", "db")
    for p in (pod("db-1", by=cluster, cpu="1", memory="1Gi", limit="2Gi"),
              pod("db-2", by=cluster, cpu="500m", memory="512Mi", overhead={"cpu": "250m"}),
              pod("db-3", by=cluster),  # requests nothing: counted apart, never as "nothing at all"
              pod("other-1", by=owner("Cluster", "postgresql.cnpg.io/v1", "other"), cpu="8"),
              pod("db-lookalike", by=owner("Cluster", "example.com/v1", "db"), cpu="8"),  # another group's Cluster
              pod("bare", cpu="8")):
        found.add_pod(p)
    assert not found.census.lookups(), "the chains end at the Cluster: no LIST needed"
    records = found.footprints([db])
    # by hand: 1 + 0.5 + overhead 0.25 CPU; 1Gi + 512Mi memory; the one memory limit 2Gi; 3 Pods, 1 without requests
    assert json.loads(records[db.key]) == {"pods": 3, "requests": {"cpu": "1750m", "memory": "1536Mi"},
                                           "limits": {"memory": "2Gi"}, "unrequested": 1}
    counted = dataclasses.replace(db, footprint=records[db.key])
    patch = freeze_patch(counted, policy="p")
    assert patch["metadata"]["annotations"][ANNOTATION_FREED] == records[db.key], "in the freeze's own write"
    assert patch["metadata"]["annotations"]["cnpg.io/hibernation"] == "on"
    frees = freed.frees(counted, freezing=True)
    assert frees is not None and frees.pods == 3 and frees.requests["cpu"] == 1_750_000_000, "one unit: the sum"


def test_a_zalando_postgresql_counts_the_pods_of_the_statefulset_it_controls_after_one_owner_list():
    db = running(ZALANDO)
    found = OperatorPods()
    sts = owner("StatefulSet", "apps/v1", "db")
    for p in (pod("db-0", by=sts, cpu="2", memory="4Gi"), pod("db-1", by=sts, cpu="2", memory="4Gi"),
              pod("web-0", by=owner("StatefulSet", "apps/v1", "web"), cpu="8")):
        found.add_pod(p)
    assert found.census.lookups() == [("StatefulSet", "a-1")]
    assert found.footprints([db]) == {}, "before the chain is known, nothing is guessed"
    found.census.add_owners("StatefulSet", "a-1", [
        {"metadata": {"name": "db", "namespace": "a-1",
                      "ownerReferences": [owner("postgresql", "acid.zalan.do/v1", "db")]}},
        {"metadata": {"name": "web", "namespace": "a-1"}}])
    assert not found.census.lookups()
    assert json.loads(found.footprints([db])[db.key]) == {"pods": 2, "requests": {"cpu": "4", "memory": "8Gi"}}


POOLER = ReplicasHandler(Kind("Pooler.postgresql.cnpg.io"), "postgresql.cnpg.io", "v1", "poolers",
                         path=("spec", "instances"))


@pytest.mark.parametrize(("pods", "record"), [
    pytest.param(2, {"pods": 1, "requests": {"cpu": "100m", "memory": "64Mi"}}, id="even-one-replicas-share"),
    pytest.param(3, None, id="a-scale-under-way-is-unknown"),
])
def test_a_scaled_kind_without_a_template_counts_one_replica_as_its_share_of_its_pods(pods, record):
    """A CloudNativePG Pooler (`/scale`, `spec.instances`) runs its Pods through a Deployment and its ReplicaSet."""
    pooler = workload("a-1", "pool", 2, handler=POOLER)
    assert pooler.footprint is None
    found = OperatorPods()
    rs = owner("ReplicaSet", "apps/v1", "pool-7c9")
    for n in range(pods):
        found.add_pod(pod(f"pool-7c9-{n}", by=rs, cpu="100m", memory="64Mi"))
    assert found.census.lookups() == [("ReplicaSet", "a-1")]
    found.census.add_owners("ReplicaSet", "a-1", [{"metadata": {
        "name": "pool-7c9", "namespace": "a-1", "ownerReferences": [owner("Deployment", "apps/v1", "pool")]}}])
    assert found.census.lookups() == [("Deployment", "a-1")]
    found.census.add_owners("Deployment", "a-1", [{"metadata": {
        "name": "pool", "namespace": "a-1", "ownerReferences": [owner("Pooler", "postgresql.cnpg.io/v1", "pool")]}}])
    counted = found.footprints([pooler])
    assert (json.loads(counted[pooler.key]) if counted else None) == record
    if record:
        frees = freed.frees(dataclasses.replace(pooler, footprint=counted[pooler.key]), freezing=True)
        assert frees is not None and frees.pods == 2  # its 2 replicas again
        assert frees.requests == {"cpu": 2 * 10**8, "memory": 128 * MI * 10**9}


def test_built_in_kinds_and_custom_kinds_with_a_template_are_counted_from_it_never_from_pods():
    rollout = ReplicasHandler(Kind("Rollout.argoproj.io"), "argoproj.io", "v1alpha1", "rollouts")
    with_template = dataclasses.replace(workload("a-1", "r", 2, handler=rollout), footprint='{"pods":1}')
    policies = [policy("p", "a-", [], kinds=["Rollout.argoproj.io", "Deployment", "StatefulSet"])]
    candidates = [with_template, workload("a-1", "web", 2), workload("a-1", "db", 2, kind=Kind.STATEFULSET)]
    selection = select_from_workloads(policies, namespaces=namespaces("a-1"), workloads=candidates,
                                      settings=settings(), now=None)
    assert to_count(candidates, selection) == []
    assert [w.name for w in to_count([dataclasses.replace(with_template, footprint=None)], selection)] == ["r"]


def test_an_owner_list_that_failed_makes_every_footprint_unknown_never_a_part():
    db = running(ZALANDO)
    found = OperatorPods()
    found.add_pod(pod("db-0", by=owner("StatefulSet", "apps/v1", "db"), cpu="2"))
    found.add_pod(pod("db-x", by=owner("postgresql", "acid.zalan.do/v1", "db"), cpu="1"))
    found.census.failed("StatefulSet", "a-1", "403 Forbidden")  # db-0's chain stops at its StatefulSet
    assert found.footprints([db]) == {}, "not db-x's 1 CPU alone"


def test_no_pod_running_for_it_is_unknown_never_zero_and_a_pod_that_cannot_be_read_too():
    db, other = running(ZALANDO), running(ZALANDO, "other")
    found = OperatorPods()
    found.add_pod(pod("x", by=owner("postgresql", "acid.zalan.do/v1", "other"), cpu="1"))
    found.add_pod(pod("y", by=owner("postgresql", "acid.zalan.do/v1", "other"), cpu="lots"))
    assert found.footprints([db, other]) == {}
    results = [ActionResult(Action(Verb.FREEZE, w, "p", None, 0, "", False), "applied") for w in (db, other)]
    totals = freed.by_policy([db, other], results)["p"]
    assert (totals.workloads, totals.unknown, totals.total.pods) == (2, 2, 0)


def test_only_objects_this_run_may_freeze_are_counted_so_a_steady_state_reads_no_pod():
    cnpg = cnpg_handler()
    rabbit = resolve([Kind("RabbitmqCluster.rabbitmq.com")], [real_crd("RabbitmqCluster.rabbitmq.com")],
                     merged([], CATALOGUE)).handlers[Kind("RabbitmqCluster.rabbitmq.com")]
    assert isinstance(rabbit, FieldHandler) and rabbit.pauses_operator
    candidates = [
        running(cnpg, "db"),
        dataclasses.replace(running(cnpg, "frozen"), size=0, original="null"),
        dataclasses.replace(running(cnpg, "woken-by-hand"), original="null"),  # frozen again: counted again
        dataclasses.replace(running(cnpg, "excluded"), excluded=True),
        running(cnpg, "active", ns="a-active"),
        dataclasses.replace(running(cnpg, "unread"), size=None),
        workload("a-1", "mq", 1, handler=rabbit),  # its StatefulSets are frozen and counted themselves
        workload("a-1", "web", 2),  # a Deployment: counted from its template
    ]
    policies = [policy("p", "a-", ["active"], kinds=[CNPG, "RabbitmqCluster.rabbitmq.com", "Deployment"])]
    selection = select_from_workloads(policies, namespaces=namespaces("a-1", "a-active"), workloads=candidates,
                                      settings=settings(), now=None)
    assert [w.name for w in to_count(candidates, selection)] == ["db", "woken-by-hand"]

