"""A freeze deletes no data: a StatefulSet whose retention policy deletes its claims on scale-down keeps them.

Real StatefulSet controller and garbage collector (the control plane's kube-controller-manager). A second
StatefulSet outside the family, scaled to 0 by the test itself, shows what the same controllers do to claims
without nsscaler's guard: its claims are gone before the held one's are checked, so the check is not early."""

from __future__ import annotations

from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from job.model.marks import ANNOTATION_ORIGINAL_WHEN_SCALED
from tests.invariants import one_write_each

pytestmark = pytest.mark.usefixtures("crd")
RETENTION = "persistentVolumeClaimRetentionPolicy"


def claims(api: AdminApi, ns: str) -> list[str]:
    return sorted(c["metadata"]["name"] for c in api.list("PersistentVolumeClaim", ns)
                  if not c["metadata"].get("deletionTimestamp"))


def pods_of(api: AdminApi, ns: str, name: str) -> list[dict[str, Any]]:
    return [p for p in api.pods(ns) if p["metadata"]["name"].startswith(f"{name}-")]


def family_with_claims(api: AdminApi, prefix: str) -> tuple[str, str]:
    held, control = prefix + "v1", prefix + "control"
    for ns in (held, prefix + "v2", control):
        api.create(builders.namespace(ns))
    api.create(builders.statefulset_with_claims(held, "db", 2, when_scaled="Delete"))
    api.create(builders.statefulset_with_claims(control, "db", 2, when_scaled="Delete"))
    for ns in (held, control):
        wait_until(lambda ns=ns: claims(api, ns) == ["data-db-0", "data-db-1"], timeout=120,
                   what=f"the StatefulSet controller to create the claims in {ns}")
    return held, control


@pytest.mark.versions
def test_a_statefulset_that_deletes_its_claims_on_scale_down_keeps_them_through_freeze_and_restore(
        api, run_job, prefix):
    held, control = family_with_claims(api, prefix)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix + "v", ["2"]))

    with one_write_each(api, prefix + "v", {(held, "db")}) as states:  # each state the server stored, replayed
        assert run_job().exit_code == 0
    at_zero = [s["spec"][RETENTION]["whenScaled"] for s in states if s["spec"]["replicas"] == 0]
    assert at_zero and set(at_zero) == {"Retain"}, states  # never at 0 while its claims would go with it
    frozen = api.get("StatefulSet", "db", held)
    assert frozen["spec"]["replicas"] == 0 and frozen["spec"][RETENTION]["whenScaled"] == "Retain"
    assert frozen["metadata"]["annotations"][ANNOTATION_ORIGINAL_WHEN_SCALED] == "Delete"
    wait_until(lambda: not pods_of(api, held, "db"), timeout=120, what="the controller to remove db's Pods")

    api.patch("StatefulSet", "db", {"spec": {"replicas": 0}}, namespace=control)  # without the guard
    wait_until(lambda: not claims(api, control), timeout=120,
               what="the garbage collector to delete the control StatefulSet's claims")
    assert claims(api, held) == ["data-db-0", "data-db-1"]

    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["1", "2"]}})
    with one_write_each(api, prefix + "v", {(held, "db")}):
        assert run_job().exit_code == 0
    restored = api.get("StatefulSet", "db", held)
    assert restored["spec"]["replicas"] == 2 and restored["spec"][RETENTION]["whenScaled"] == "Delete"
    assert ANNOTATION_ORIGINAL_WHEN_SCALED not in (restored["metadata"].get("annotations") or {})
    assert claims(api, held) == ["data-db-0", "data-db-1"]


def test_a_statefulset_whose_retention_change_is_refused_is_left_running_and_named(api, run_job, prefix):
    """An admission policy owns the retention field: nsscaler's one write is refused whole, so the
    StatefulSet is never scaled to 0 without Retain; the run fails (exit 1) and says why and what to do."""
    held, _ = family_with_claims(api, prefix)
    policy_name = f"{prefix}retention-owned"
    api.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": policy_name}, "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                            "operations": ["UPDATE"],
                                                            "resources": ["statefulsets"]}]},
                    "validations": [{"expression": f"object.spec.{RETENTION}.whenScaled == "
                                                   f"oldObject.spec.{RETENTION}.whenScaled",
                                     "message": "the retention policy is owned by the platform team"}]}})
    api.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": policy_name}, "spec": {
                    "policyName": policy_name, "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {
                        "kubernetes.io/metadata.name": held}}}}})
    try:
        probe = builders.statefulset(held, "probe", 0)
        api.create(probe)
        # the policy is enforced once the API server has loaded it: a change of the field is then refused
        wait_until(lambda: _refused(api, held), timeout=60, what="the admission policy to be enforced")
        name = f"{prefix}p"
        api.create(builders.nsscaler(name, prefix + "v", ["2"]))
        result = run_job()
        assert result.exit_code == 1
        running = api.get("StatefulSet", "db", held)
        assert running["spec"]["replicas"] == 2 and running["spec"][RETENTION]["whenScaled"] == "Delete"
        assert "nsscaler.wubw.fun/original-replicas" not in (running["metadata"].get("annotations") or {})
        [failure] = api.status(name)["failures"]
        assert "owned by the platform team" in failure and "whenScaled: Retain" in failure
        remaining = {r["owner"]: r["reason"] for r in api.status(name)["remaining"]}
        assert "whenScaled: Retain" in remaining["StatefulSet/db"]
        assert claims(api, held) == ["data-db-0", "data-db-1"]
    finally:
        api.delete("ValidatingAdmissionPolicyBinding", policy_name)
        api.delete("ValidatingAdmissionPolicy", policy_name)


def _refused(api: AdminApi, ns: str) -> bool:
    resp = api.http.patch(api.url("StatefulSet", ns, "probe"), params={"dryRun": "All"}, timeout=30,
                          json={"spec": {RETENTION: {"whenScaled": "Delete"}}},
                          headers={"Content-Type": "application/merge-patch+json"})
    return resp.status_code in (403, 422)
