"""A CloudNativePG Cluster in a held namespace against the real CloudNativePG operator v1.28.0 (tests/operators.py), run
as a process against the control plane, once for this module.

What the real operator cannot show here, and how the tests stand in for it: this tier has no node and no PostgreSQL
image, so no instance of a Cluster ever runs, and the operator never calls a new Cluster healthy (it stays in
"Setting up primary" with its initdb Job Pending). Its hibernation code (pkg/reconciler/hibernation/status.go) starts
only from a healthy Cluster. So `operators.healthy_cluster` gives a Cluster the state a running one has (its
instance Pods and PVCs as the operator makes them, its status phase healthy, its instances ready) while the
operator's own `cnpg.io/reconciliationLoop: disabled` keeps it away, then hands it over (`resume`): from there
on, every hibernation step (the condition, the Pods deleted, the PVCs kept, the Pods made again on the kept PVCs
when the annotation goes) is the real operator's. Its instances never become ready again (nothing runs them), so
the app's restore after the database is ready is not shown: the app waits for the data tier, and comes back when
`restore_wait` has passed, named as late.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster.controlplane import ControlPlane
from job.model.activity import parse_time
from job.model.marks import ANNOTATION_FREED, ANNOTATION_ORIGINAL_VALUE, ANNOTATION_SCALED_BY, FIELD_MANAGER
from tests.conftest import built_tool
from tests.operators import HIBERNATION, RECONCILIATION, CloudNativePG, healthy_cluster, instances, resume

CLUSTER = "Cluster.postgresql.cnpg.io"
pytestmark = pytest.mark.usefixtures("crd")


@pytest.fixture(scope="module")
def cnpg(api: AdminApi, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[CloudNativePG]:
    operator = CloudNativePG(built_tool("cnpg"), control_plane.admin_kubeconfig, tmp_path_factory.mktemp("cnpg"))
    operator.start(api)
    try:
        yield operator
    finally:
        operator.stop()


@pytest.fixture
def operator(cnpg: CloudNativePG) -> Iterator[CloudNativePG]:
    """The module's operator; what it said is printed after each test (pytest shows it when the test fails)."""
    assert cnpg.alive(), cnpg.tail()
    yield cnpg
    print(f"--- the CloudNativePG operator's log ({cnpg.log}), last lines ---\n{cnpg.tail(60)}")


def ours(obj: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in (obj["metadata"].get("annotations") or {}).items() if k.startswith("nsscaler.wubw.fun/")}


def hibernation(api: AdminApi, ns: str) -> tuple[str, str] | None:
    """The operator's condition cnpg.io/hibernation on the Cluster db: (status, reason), None when absent."""
    found = [c for c in api.get("Cluster", "db", ns).get("status", {}).get("conditions") or []
             if c["type"] == "cnpg.io/hibernation"]
    return (found[0]["status"], found[0]["reason"]) if found else None


def claims(api: AdminApi, ns: str) -> list[str]:
    return sorted(c["metadata"]["uid"] for c in api.list("PersistentVolumeClaim", ns))


def conditions(api: AdminApi, policy: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in api.status(policy)["conditions"]}


def hibernated_by_the_operator(api: AdminApi, ns: str) -> None:
    """The operator takes the Cluster over and hibernates it its way: Pods deleted, then condition Hibernated."""
    resume(api, ns, "db")
    wait_until(lambda: hibernation(api, ns) == ("True", "Hibernated") and not instances(api, ns, "db"), timeout=60,
               what="the operator's Hibernated condition and its Pods gone")


@pytest.mark.parametrize("before", [None, "off"], ids=["no-annotation", "annotation-off"])
def test_the_real_operator_hibernates_a_held_cluster_and_done_waits_for_its_pods_and_condition(
        api, run_job, prefix, operator, before):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    created = healthy_cluster(api, ns, "db", 3, {"team": "data", **({HIBERNATION: before} if before else {})},
                              requests={"cpu": "500m", "memory": "512Mi"})
    kept = claims(api, ns)
    assert len(kept) == 3 and instances(api, ns, "db") == ["db-1", "db-2", "db-3"]
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[CLUSTER]))

    result = run_job()
    assert result.exit_code == 0, result.stderr
    cluster = api.get("Cluster", "db", ns)
    assert cluster["metadata"]["annotations"][HIBERNATION] == "on"
    assert ours(cluster) == {ANNOTATION_ORIGINAL_VALUE: f'"{before}"' if before else "null",
                             ANNOTATION_SCALED_BY: f"{prefix}p",  # and what its 3 instance Pods requested
                             ANNOTATION_FREED: '{"pods":3,"requests":{"cpu":"1500m","memory":"1536Mi"}}'}
    assert cluster["spec"] == created["spec"], "hibernated by its annotation, never through /scale"
    frozen = api.status(f"{prefix}p")
    assert (frozen["freed"]["unknownWorkloads"], frozen["freed"]["pods"]) == (0, 3), frozen["freed"]
    assert frozen["freed"]["requests"] == {"cpu": "1500m", "memory": "1536Mi"}
    assert frozen["done"] is False and conditions(api, f"{prefix}p")["Drained"]["reason"] == "PodsRemaining", frozen

    hibernated_by_the_operator(api, ns)
    assert claims(api, ns) == kept, "the operator kept every PVC"
    assert run_job().exit_code == 0
    status, found = api.status(f"{prefix}p"), conditions(api, f"{prefix}p")
    assert status["done"] is True, status
    assert found["Drained"]["reason"] == "NoPodsLeft"
    assert (found["FreezeIncomplete"]["status"], found["FreezeIncomplete"]["reason"]) == ("False", "NoneOverdue")
    assert status["freezeIncomplete"] == []

    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
    assert run_job().exit_code == 0
    back = api.get("Cluster", "db", ns)
    assert back["metadata"]["annotations"] == {k: v for k, v in created["metadata"]["annotations"].items()
                                               if k != RECONCILIATION}, "given back exactly"
    wait_until(lambda: hibernation(api, ns) is None and "db-1" in instances(api, ns, "db"), timeout=60,
               what="the operator's rehydration on the kept PVCs")
    assert claims(api, ns) == kept


def test_a_cluster_the_operator_does_not_call_healthy_is_left_running_and_named(api, run_job, prefix, operator):
    """The real operator's own status of a new Cluster here ("Setting up primary": its initdb Job cannot run)."""
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster", "metadata": {"name": "db", "namespace": ns},
                "spec": {"instances": 1, "storage": {"size": "1Gi"}}})
    wait_until(lambda: api.get("Cluster", "db", ns).get("status", {}).get("phase") == "Setting up primary",
               timeout=60, what="the operator's first phase")
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[CLUSTER]))
    result = run_job()
    assert result.exit_code == 1
    assert "to be 'Cluster in healthy state' first, and it is 'Setting up primary'" in result.stderr, result.stderr
    assert HIBERNATION not in (api.get("Cluster", "db", ns)["metadata"].get("annotations") or {})


def test_the_cluster_comes_back_in_the_data_tier_before_the_app_that_uses_it(api, run_job, prefix, operator):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    healthy_cluster(api, ns, "db", 2)
    kept = claims(api, ns)
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[CLUSTER, "Deployment"], restore_wait="1h"))
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", ns, "web") == 0
    hibernated_by_the_operator(api, ns)

    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
    first = run_job("--restore-wait-in-run", "0")
    assert first.exit_code == 0, first.stderr
    back = api.get("Cluster", "db", ns)
    assert HIBERNATION not in (back["metadata"].get("annotations") or {}) and not ours(back), "data first, as it was"
    assert api.replicas("Deployment", ns, "web") == 0, "the app waits for its database"
    (waiting,) = api.status(f"{prefix}p")["restoring"]
    assert (waiting["namespace"], waiting["tier"], waiting["waitingFor"]) == (ns, 1, ["cluster/db"]), waiting
    # the real operator brings the Cluster back: condition gone, its primary made again on its kept PVC (the
    # replicas follow once the primary runs, which it never does here)
    wait_until(lambda: hibernation(api, ns) is None and "db-1" in instances(api, ns, "db"), timeout=60,
               what="the operator's rehydration")
    assert claims(api, ns) == kept
    assert not api.get("Cluster", "db", ns)["status"].get("readyInstances"), "nothing runs its instances here"

    again = run_job("--restore-wait-in-run", "0")
    assert again.exit_code == 0, again.stderr
    assert api.replicas("Deployment", ns, "web") == 0, "a later run still waits: the Cluster carries no record now"
    assert [(w["tier"], w["since"]) for w in api.status(f"{prefix}p")["restoring"]] == [(1, waiting["since"])]

    api.patch("NSScaler", f"{prefix}p", {"spec": {"restore_wait": "1s"}})
    since = parse_time(waiting["since"])
    assert since is not None
    wait_until(lambda: dt.datetime.now(dt.UTC) > since + dt.timedelta(seconds=1), timeout=30, what="1s to pass")
    late = run_job("--restore-wait-in-run", "0")
    assert late.exit_code == 0
    assert api.replicas("Deployment", ns, "web") == 2
    status = api.status(f"{prefix}p")
    assert [t["notReady"] for t in status["restoredLate"]] == [["cluster/db"]], (status, late.stderr)


def test_a_condition_the_operator_never_sets_is_freeze_incomplete_once(api, run_job, prefix, operator,
                                                                       tmp_path: Path):
    """Broken on purpose: a platform team's row for Cluster (it replaces the catalogue's) waits for a reason the
    real operator never gives, within 1 second."""
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump([{
        "kind": CLUSTER, "plural": "clusters", "versions": ["v1"],
        "freeze": {"method": "annotation", "key": HIBERNATION, "value": "on"},
        "frozen": {"condition": {"type": "cnpg.io/hibernation", "status": "True", "reason": "Asleep"}, "within": 1},
        "tier": "data"}]))
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    healthy_cluster(api, ns, "db", 2)
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[CLUSTER]))
    assert run_job("--kind-rows", str(rows)).exit_code == 0
    hibernated_by_the_operator(api, ns)
    froze = parse_time(next(m["time"] for m in api.get("Cluster", "db", ns)["metadata"]["managedFields"]
                            if m["manager"] == FIELD_MANAGER))
    assert froze is not None
    wait_until(lambda: dt.datetime.now(dt.UTC) > froze + dt.timedelta(seconds=2), timeout=30, what="within to pass")

    for _ in range(2):
        ran = run_job("--kind-rows", str(rows))
        assert ran.exit_code == 0, ran.stderr
        status, found = api.status(f"{prefix}p"), conditions(api, f"{prefix}p")
        (reported,) = [p for p in ran.report["policies"] if p["name"] == f"{prefix}p"]
        assert reported["freezeIncomplete"] == status["freezeIncomplete"] and reported["done"] is False
        assert status["done"] is False, "its Pods are gone, but its operator never reported the condition"
        assert (found["FreezeIncomplete"]["status"], found["FreezeIncomplete"]["reason"]) == ("True",
                                                                                             "OperatorNotFrozen")
        (entry,) = status["freezeIncomplete"]
        assert (entry["namespace"], entry["workload"]) == (ns, "cluster/db")
        assert entry["reports"] == ("condition cnpg.io/hibernation is True (Hibernated: Cluster has been "
                                    "hibernated)"), entry
    said = [e for e in api.list("Event", "default") if e["reason"] == "FreezeIncomplete"
            and e["involvedObject"]["name"] == f"{prefix}p"]
    assert len(said) == 1 and said[0]["type"] == "Warning", said
    assert f"{ns} cluster/db: its operator does not report it frozen 1 s after the freeze" in said[0]["message"]
