"""Restore in tiers against the real control plane: the StatefulSet, Deployment and ReplicaSet controllers count
what is available; the API server stamps nsscaler's restore time in managedFields.

This control plane has no kubelet, so no Pod ever gets Ready by itself: where a test needs the StatefulSet's Pod
Ready, it writes the Pod's status as a kubelet would (`ready`), and the real StatefulSet controller turns that into
the StatefulSet's available replicas. `tests/node/test_restore_tiers_on_node.py` does it with a real kubelet and a
real readiness probe."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_RESTORE_TIER
from tests.integration.test_wake import plugin

pytestmark = pytest.mark.usefixtures("crd")
NO_WAIT = ("--restore-wait-in-run", "0")


def ready(api: AdminApi, ns: str, pod: str) -> None:
    """What a kubelet reports once a Pod's containers run and its readiness probe passes."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    api.patch("Pod", pod, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": now},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}]}}, namespace=ns, sub="status")


def available(api: AdminApi, ns: str, name: str) -> int:
    return int(api.get("StatefulSet", name, ns).get("status", {}).get("availableReplicas") or 0)


def make_db_ready(api: AdminApi, ns: str) -> None:
    wait_until(lambda: api.exists("Pod", "db-0", ns), timeout=120, what="the StatefulSet controller to create db-0")
    ready(api, ns, "db-0")
    wait_until(lambda: available(api, ns, "db") == 1, timeout=120, what="the controller to count db-0 available")


def records(api: AdminApi, ns: str) -> dict[str, str | None]:
    found = {}
    for kind in ("StatefulSet", "Deployment"):
        for o in api.list(kind, ns):
            found[o["metadata"]["name"]] = (o["metadata"].get("annotations") or {}).get(ANNOTATION_ORIGINAL_REPLICAS)
    return found


def sizes(api: AdminApi, ns: str) -> dict[str, int]:
    return {o["metadata"]["name"]: o["spec"]["replicas"] for kind in ("StatefulSet", "Deployment")
            for o in api.list(kind, ns)}


def two_tiers(api: AdminApi, run_job: Any, prefix: str, *, wait: str = "1h",
              app_annotations: dict[str, str] | None = None) -> tuple[str, str]:
    """`<prefix>v1` with a StatefulSet db (1) and a Deployment app (2), frozen by a policy that restores
    StatefulSets first; returns (namespace, policy)."""
    ns, name = prefix + "v1", f"{prefix}p"
    for n in (ns, prefix + "v2"):
        api.create(builders.namespace(n))
    api.create(builders.statefulset(ns, "db", 1))
    api.create(builders.deployment(ns, "app", 2, annotations=app_annotations))
    api.create(builders.nsscaler(name, prefix, ["v2"], restore_order=["StatefulSet"], restore_wait=wait))
    assert run_job(*NO_WAIT).exit_code == 0
    assert sizes(api, ns) == {"db": 0, "app": 0}  # a freeze is never tiered
    return ns, name


def release(api: AdminApi, name: str) -> None:
    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})


def tier_events(api: AdminApi, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in api.list("Event", "default")
            if e["involvedObject"].get("name") == name and e["reason"] == reason]


@pytest.mark.versions
def test_the_deployment_comes_back_only_once_the_statefulset_is_available(api, run_job, prefix, control_plane):
    ns, name = two_tiers(api, run_job, prefix)
    release(api, name)

    first = run_job(*NO_WAIT)
    assert first.exit_code == 0, first.stderr
    assert sizes(api, ns) == {"db": 1, "app": 0} and records(api, ns) == {"db": None, "app": "2"}
    status = api.status(name)
    (waiting,) = status["restoring"]
    assert (waiting["namespace"], waiting["tier"], waiting["pending"], waiting["waitingFor"]) == (
        ns, 1, 1, ["statefulset/db"])
    assert status["counts"]["restoring"] == 1 and status["counts"]["restored"] == 1
    assert "restoring in tiers" in next(c for c in status["conditions"] if c["type"] == "Ready")["message"]
    (event,) = tier_events(api, name, "RestoreTierWaiting")
    assert ns in event["message"] and "statefulset/db" in event["message"]
    # the developers of the namespace ask why their app is still at zero
    told = plugin(control_plane.admin_kubeconfig, "status", "-n", ns)
    assert told.returncode == 0, told.stderr
    assert "coming back in tiers: tier 1 (1 workloads still at zero) waits for statefulset/db" in told.stdout

    again = run_job(*NO_WAIT)  # nothing is available yet: the Deployment keeps waiting, with its record
    assert again.exit_code == 0 and again.report["summary"]["restored"] == 0
    assert records(api, ns) == {"db": None, "app": "2"} and api.status(name)["restoring"][0]["tier"] == 1

    make_db_ready(api, ns)
    last = run_job(*NO_WAIT)
    assert last.exit_code == 0 and last.report["summary"]["restored"] == 1
    assert sizes(api, ns) == {"db": 1, "app": 2} and records(api, ns) == {"db": None, "app": None}
    status = api.status(name)
    assert status["restoring"] == [] and status["restoredLate"] == [] and status["counts"]["restoring"] == 0


def test_a_run_waits_in_place_for_the_earlier_tier_and_brings_the_next_one_back(api, run_job, prefix):
    """The kubelet's report comes while the run waits (`--restore-wait-in-run`): the same run restores both tiers,
    the StatefulSet's PATCH first."""
    ns, name = two_tiers(api, run_job, prefix)
    release(api, name)
    kubelet = threading.Thread(target=make_db_ready, args=(api, ns), daemon=True)
    kubelet.start()
    result = run_job("--restore-wait-in-run", "240")
    kubelet.join(timeout=240)
    assert result.exit_code == 0, result.stderr
    assert sizes(api, ns) == {"db": 1, "app": 2} and records(api, ns) == {"db": None, "app": None}
    restores = [a["name"] for a in result.report["actions"] if a["verb"] == "restore" and a["outcome"] == "applied"]
    assert restores == ["db", "app"]
    assert api.status(name)["restoring"] == []


def test_a_tier_not_available_in_time_comes_back_after_restore_wait_and_says_so(api, run_job, prefix):
    ns, name = two_tiers(api, run_job, prefix)
    release(api, name)
    assert run_job(*NO_WAIT).exit_code == 0
    assert records(api, ns) == {"db": None, "app": "2"}
    # db never gets available here; the wait is shortened to 1 s and has passed (the restore's stamp is whole
    # seconds, so 2 s of real time is more than 1 s after it whatever the machine's speed)
    api.patch("NSScaler", name, {"spec": {"restore_wait": "1s"}})
    time.sleep(2)
    late = run_job(*NO_WAIT)
    assert late.exit_code == 0
    assert sizes(api, ns) == {"db": 1, "app": 2} and records(api, ns) == {"db": None, "app": None}
    status = api.status(name)
    assert status["restoredLate"] == [{"namespace": ns, "tier": 1, "notReady": ["statefulset/db"],
                                       "since": status["restoredLate"][0]["since"]}]
    assert "statefulset/db" in next(c for c in status["conditions"] if c["type"] == "Ready")["message"]
    (event,) = tier_events(api, name, "RestoreTierLate")
    assert event["type"] == "Warning" and "statefulset/db" in event["message"]


def test_the_annotation_wins_and_a_malformed_one_keeps_its_workload_frozen(api, run_job, prefix):
    ns, name = two_tiers(api, run_job, prefix, app_annotations={ANNOTATION_RESTORE_TIER: "0"})
    api.create(builders.deployment(ns, "odd", 3, annotations={ANNOTATION_RESTORE_TIER: "first"}))
    assert run_job(*NO_WAIT).exit_code == 0  # odd was created after the freeze
    release(api, name)

    result = run_job(*NO_WAIT)
    assert result.exit_code == 1
    assert sizes(api, ns) == {"db": 1, "app": 2, "odd": 0} and records(api, ns)["odd"] == "3"
    failures = api.status(name)["failures"]
    assert any("deployment/odd" in f and "'first'" in f and ANNOTATION_RESTORE_TIER in f for f in failures)

    # fixed to tier 1: it waits for tier 0, which is db (available now) and app (by its annotation; never
    # available without a kubelet)
    api.patch("Deployment", "odd", {"metadata": {"annotations": {ANNOTATION_RESTORE_TIER: "1"}}}, namespace=ns)
    make_db_ready(api, ns)
    fixed = run_job(*NO_WAIT)
    assert fixed.exit_code == 0 and sizes(api, ns) == {"db": 1, "app": 2, "odd": 0}
    assert [w["waitingFor"] for w in api.status(name)["restoring"]] == [["deployment/app"]]
    api.patch("Deployment", "odd", {"metadata": {"annotations": {ANNOTATION_RESTORE_TIER: "0"}}}, namespace=ns)
    assert run_job(*NO_WAIT).exit_code == 0 and sizes(api, ns) == {"db": 1, "app": 2, "odd": 3}


def test_holding_again_mid_restore_and_a_users_edit_lose_no_record(api, run_job, prefix):
    ns, name = two_tiers(api, run_job, prefix)
    release(api, name)
    assert run_job(*NO_WAIT).exit_code == 0
    assert records(api, ns) == {"db": None, "app": "2"}
    # someone scales the waiting Deployment by hand: its record stays the truth
    api.patch("Deployment", "app", {"spec": {"replicas": 5}}, namespace=ns)
    # the policy holds the namespace again before the next tier came back
    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v2"]}})
    assert run_job(*NO_WAIT).exit_code == 0
    assert sizes(api, ns) == {"db": 0, "app": 0} and records(api, ns) == {"db": "1", "app": "2"}

    release(api, name)
    assert run_job(*NO_WAIT).exit_code == 0
    make_db_ready(api, ns)
    assert run_job(*NO_WAIT).exit_code == 0
    assert sizes(api, ns) == {"db": 1, "app": 2} and records(api, ns) == {"db": None, "app": None}


def test_a_wait_that_outlasts_the_run_is_announced_once(api, run_job, prefix):
    """The run waits in place a little, the StatefulSet is not available by then: the wait goes on in the next
    runs, and a RestoreTierWaiting Event says so once, when it begins."""
    ns, name = two_tiers(api, run_job, prefix)
    release(api, name)
    for _ in range(2):
        assert run_job("--restore-wait-in-run", "3").exit_code == 0
        assert records(api, ns) == {"db": None, "app": "2"}
    (event,) = tier_events(api, name, "RestoreTierWaiting")
    assert event["count"] == 1 and "statefulset/db" in event["message"]


def refused_now(api: AdminApi, ns: str) -> bool:
    """Whether the API server refuses db's restore now (a dry run of it)."""
    return api.http.patch(api.url("StatefulSet", ns, "db"), params={"dryRun": "All"}, timeout=30,
                          json={"spec": {"replicas": 1}},
                          headers={"Content-Type": "application/merge-patch+json"}).status_code in (403, 422)


def test_a_tier_whose_restore_is_refused_is_not_tried_again_within_the_run(api, run_job, prefix):
    """An admission policy refuses the StatefulSet's restore: the run reports that one failure (not one per look
    again while it waits in place), the Deployment stays frozen with its record, and the next run tries again."""
    ns, name = two_tiers(api, run_job, prefix)
    refusal = f"{prefix}no-db"
    api.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": refusal}, "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                            "operations": ["UPDATE"], "resources": ["statefulsets"]}]},
                    "validations": [{"expression": "object.spec.replicas == 0",
                                     "message": "the platform team holds this StatefulSet"}]}})
    api.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": refusal}, "spec": {
                    "policyName": refusal, "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}})
    try:
        wait_until(lambda: refused_now(api, ns), timeout=60, what="the admission policy to be enforced")
        release(api, name)
        refused = run_job("--restore-wait-in-run", "10")
        assert refused.exit_code == 1
        failed = [a for a in refused.report["actions"] if a["outcome"] == "failed"]
        assert [(a["verb"], a["name"]) for a in failed] == [("restore", "db")]
        assert records(api, ns) == {"db": "1", "app": "2"}
        assert any("the platform team holds this StatefulSet" in f for f in api.status(name)["failures"])
    finally:
        api.delete("ValidatingAdmissionPolicyBinding", refusal)
        api.delete("ValidatingAdmissionPolicy", refusal)
    wait_until(lambda: not refused_now(api, ns), timeout=60, what="the admission policy to be gone")
    assert run_job(*NO_WAIT).exit_code == 0
    assert records(api, ns) == {"db": None, "app": "2"}
