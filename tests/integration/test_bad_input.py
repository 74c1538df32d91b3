"""Bad input gets a clear one-line error, the right exit code, and the other policies are still served."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster.controlplane import free_ports
from job.cluster.access import REINSTALL, RENEW_CREDENTIALS
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY, LABEL_SCALED
from tests.conftest import CRD, ROOT, apply_manifest, make_family

CRD_NAME = "nsscalers.operators.wubw.fun"


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " ERROR " in line or line.startswith("nsscaler:")]


def test_unreachable_api_exits_2_after_bounded_retries(run_job, control_plane, tmp_path):
    (port,) = free_ports(1)
    saved = control_plane.server
    control_plane.server = f"https://127.0.0.1:{port}"
    try:
        kubeconfig = control_plane.kubeconfig(tmp_path / "k", user="x", token="not-used")  # noqa: S106 (nothing listens there)
    finally:
        control_plane.server = saved
    result = run_job("--retry-attempts", "3", "--retry-budget", "5", kubeconfig=kubeconfig)
    assert result.exit_code == 2
    (line,) = error_lines(result.stderr)
    assert "cannot reach the API server" in line and "check --kubeconfig/--context" in line
    assert result.stderr.count("retrying") == 2  # three attempts, each retry logged


@pytest.fixture
def service_account(api: AdminApi, control_plane, prefix, tmp_path):
    """A fresh ServiceAccount (no permissions yet) and its kubeconfig."""
    ns = prefix + "sa"
    api.create(builders.namespace(ns))
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "job", "namespace": ns}})
    return ns, control_plane.service_account_kubeconfig(tmp_path / "sa", ns, "job")


def test_missing_rbac_names_every_missing_permission_and_changes_nothing(api, run_job, prefix, service_account):
    ns, kubeconfig = service_account
    make_family(api, prefix, {"v1": {"d-web": 2}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    result = run_job(kubeconfig=kubeconfig)
    assert result.exit_code == 2
    (line,) = error_lines(result.stderr)
    for missing in ("list nsscalers.operators.wubw.fun", "patch nsscalers/status.operators.wubw.fun",
                    "list namespaces", "patch deployments.apps", "patch statefulsets.apps", "get cronjobs.batch",
                    "list pods", "create events"):
        assert missing in line
    assert line.endswith(f"; nsscaler's ClusterRole grants them: {REINSTALL}, and check that its ClusterRoleBinding "
                         f"names this identity")
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 2

    # The shipped ClusterRole without one rule: exactly that permission is named.
    role = next(d for d in yaml.safe_load_all((ROOT / "kustomize/base/rbac.yaml").read_text())
                if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "nsscaler-base")
    role = copy.deepcopy(role)
    role["metadata"] = {"name": f"{prefix}partial"}
    for rule in role["rules"]:
        if "statefulsets" in rule["resources"]:
            rule["resources"].remove("statefulsets")
    role["rules"].append({"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["list", "get"]})
    api.create(role)
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{prefix}partial"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{prefix}partial"},
                "subjects": [{"kind": "ServiceAccount", "name": "job", "namespace": ns}]})
    try:
        last = []

        def only_statefulset_patch_missing() -> bool:
            result = run_job(kubeconfig=kubeconfig)
            last[:] = [result.stderr]
            return result.exit_code == 2 and error_lines(result.stderr)[0].endswith(
                f"missing RBAC permissions: patch statefulsets.apps; nsscaler's ClusterRole grants them: "
                f"{REINSTALL}, and check that its ClusterRoleBinding names this identity")
        try:
            wait_until(only_statefulset_patch_missing, timeout=20, what="RBAC to name only patch statefulsets")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last run said: {last}") from None
        assert api.replicas("Deployment", prefix + "v1", "d-web") == 2
    finally:
        api.delete("ClusterRoleBinding", f"{prefix}partial")
        api.delete("ClusterRole", f"{prefix}partial")


def _shipped_role_without(name: str, *, group: str, resource: str) -> dict[str, Any]:
    """The shipped base ClusterRole, named `name`, without the rules on `resource` in `group`."""
    role = next(d for d in yaml.safe_load_all((ROOT / "kustomize/base/rbac.yaml").read_text())
                if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "nsscaler-base")
    role = copy.deepcopy(role)
    role["metadata"] = {"name": name}
    role["rules"] = [r for r in role["rules"] if not (group in r["apiGroups"] and resource in r["resources"])]
    return role


@pytest.mark.parametrize(("group", "resource", "named"), [
    pytest.param("", "pods", "list pods", id="the Pod census"),
    pytest.param("operators.wubw.fun", "nsscalers/status", "patch nsscalers/status.operators.wubw.fun",
                 id="the status"),
])
@pytest.mark.usefixtures("settled_cluster")
def test_a_run_with_nothing_to_write_names_a_missing_permission_when_refused(api, run_job, prefix, service_account,
                                                                             group, resource, named):
    """A run that writes nothing sends no access review up front: the request a missing permission refuses
    (403) is explained by one, and the run says it as a run that cannot start always did (exit 2, one line)."""
    ns, kubeconfig = service_account
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job().exit_code == 0  # as admin: v1 frozen; the next run has nothing to write
    assert run_job().requests.get("create") is None
    api.create(_shipped_role_without(f"{prefix}partial", group=group, resource=resource))
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{prefix}partial"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{prefix}partial"},
                "subjects": [{"kind": "ServiceAccount", "name": "job", "namespace": ns}]})
    try:
        last: list[str] = []

        def named_alone() -> bool:
            result = run_job(kubeconfig=kubeconfig)
            last[:] = [result.stderr]
            lines = error_lines(result.stderr)
            return result.exit_code == 2 and len(lines) == 1 and lines[0].endswith(
                f"missing RBAC permissions: {named}; nsscaler's ClusterRole grants them: {REINSTALL}, and check "
                f"that its ClusterRoleBinding names this identity")
        try:
            wait_until(named_alone, timeout=20, what=f"the run to name only {named}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last run said: {last}") from None
        assert api.replicas("Deployment", prefix + "v1", "d-web") == 0
        assert api.replicas("Deployment", prefix + "v2", "d-web") == 1
    finally:
        api.delete("ClusterRoleBinding", f"{prefix}partial")
        api.delete("ClusterRole", f"{prefix}partial")


@pytest.fixture
def swapped_crd(api: AdminApi, control_plane):
    """Lets a test remove or loosen the CRD; the strict one is back afterwards for every other test."""
    yield
    apply_manifest(control_plane.admin_kubeconfig, CRD)
    wait_until(api.crd_established, what="the strict CRD")


def _remove_crd(api: AdminApi) -> None:
    api.delete("CustomResourceDefinition", CRD_NAME)
    wait_until(lambda: not api.exists("CustomResourceDefinition", CRD_NAME), timeout=60, what="the CRD to go")


def test_missing_crd_exits_2_saying_how_to_install_it(api, run_job, swapped_crd):
    _remove_crd(api)
    result = run_job()
    assert result.exit_code == 2
    (line,) = error_lines(result.stderr)
    assert line.endswith(f"the NSScaler CRD ({CRD_NAME}) is not installed: {REINSTALL}")
    assert "kubectl apply -k" in REINSTALL and "helm upgrade" in REINSTALL  # either install


def test_invalid_stored_crs_are_reported_and_valid_policies_still_act(api, run_job, prefix, swapped_crd):
    """CRs stored before the schema existed can hold anything: store them through a permissive CRD, then
    install the strict one, as an upgrade from an old operator would. (Unknown fields are not among them:
    the API server prunes those on read once a structural schema exists, before nsscaler sees the object.)"""
    _remove_crd(api)
    permissive = yaml.safe_load(CRD.read_text())
    version = permissive["spec"]["versions"][0]
    version["schema"] = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    version.pop("additionalPrinterColumns")
    api.create(permissive)
    wait_until(api.crd_established, what="the permissive CRD")
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    bad = {
        f"{prefix}kind": ({"scope_prefix": prefix, "kinds": ["Pod"]}, "spec.kinds.0: 'Pod' is not a kind"),
        f"{prefix}upper": ({"scope_prefix": "Shop_", "active_namespace_suffixes": ["v1"]}, "spec.scope_prefix"),
        f"{prefix}string": ({"scope_prefix": prefix, "active_namespace_suffixes": "v1"},
                            "spec.active_namespace_suffixes"),
        f"{prefix}nospec": (None, "spec is missing"),
    }
    for name, (spec, _) in bad.items():
        obj = {"apiVersion": builders.NSSCALER_VERSION, "kind": "NSScaler", "metadata": {"name": name}}
        if spec is not None:
            obj["spec"] = spec
        api.create(obj)
    api.create(builders.nsscaler(f"{prefix}good", prefix, ["v2"]))
    apply_manifest(api.plane.admin_kubeconfig, CRD)

    result = run_job()
    assert result.exit_code == 1
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0  # the valid policy acted
    assert api.replicas("Deployment", prefix + "v2", "d-web") == 1
    for name, (_, message) in bad.items():
        ready = {c["type"]: c for c in api.status(name)["conditions"]}["Ready"]
        assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec"), name
        assert message in ready["message"], (name, ready["message"])
    warnings = api.list("Event", "default", fieldSelector="reason=InvalidSpec")
    assert {e["involvedObject"]["name"] for e in warnings} >= set(bad)
    for name in bad:
        api.delete("NSScaler", name)


def test_malformed_record_is_not_restored_and_is_reported(api: AdminApi, run_job, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    broken = builders.deployment(ns, "web", 0, annotations={ANNOTATION_ORIGINAL_REPLICAS: "three",
                                                            ANNOTATION_SCALED_BY: "gone"})
    broken["metadata"]["labels"] = {LABEL_SCALED: "true"}
    api.create(broken)
    result = run_job()
    assert result.exit_code == 1
    assert any("malformed record on deployment/web in " + ns in p for p in result.report["problems"])
    web = api.get("Deployment", "web", ns)
    assert web["spec"]["replicas"] == 0 and web["metadata"]["annotations"][ANNOTATION_ORIGINAL_REPLICAS] == "three"
    api.delete("Deployment", "web", ns)


def test_no_token_in_any_log_line_or_report(api, run_job, prefix, service_account, control_plane, tmp_path):
    """Debug-level runs with one token: refused by RBAC, rejected by the server (the token altered), then allowed
    everything, doing their work (a freeze, then its restore): the token is in none of their lines."""
    ns, kubeconfig = service_account
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    for args in (("--log-level", "debug"), ("--log-level", "debug", "--log-format", "json")):
        result = run_job(*args, kubeconfig=kubeconfig)  # refused by RBAC: the error path logs too
        assert result.stderr and token not in result.stderr and token not in str(result.report)
    rejected = control_plane.kubeconfig(tmp_path / "bad", user="x", token=token[:-4] + "AAAA")
    result = run_job("--log-level", "debug", kubeconfig=rejected)
    assert result.exit_code == 2 and f"rejected the credentials (401): {RENEW_CREDENTIALS}" in result.stderr
    assert "kubeconfig" in RENEW_CREDENTIALS and "ServiceAccount" in RENEW_CREDENTIALS  # either kind of credentials
    assert token[:-4] not in result.stderr

    make_family(api, prefix, {"v1": {"d-web": 2}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    binding = f"{prefix}job-admin"
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": binding},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "job", "namespace": ns}]})
    try:
        wait_until(lambda: allowed(api, f"system:serviceaccount:{ns}:job", "patch", "deployments"),
                   what="the binding to take effect")
        for args, size in ((("--log-level", "debug"), 0), (("--log-level", "debug", "--log-format", "json"), 2)):
            worked = run_job(*args, kubeconfig=kubeconfig)
            assert worked.exit_code == 0 and api.replicas("Deployment", prefix + "v1", "d-web") == size, \
                worked.stderr[-3000:]
            assert "DEBUG" in worked.stderr.upper(), worked.stderr[-3000:]  # a debug-level run, as asked
            in_log, in_report = token in worked.stderr, token in str(worked.report)  # never print it: compare here
            assert not in_log and not in_report, f"the token is in the {'log' if in_log else 'report'} ({args})"
            api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})  # next: restore
    finally:
        api.delete("ClusterRoleBinding", binding)


def allowed(api: AdminApi, user: str, verb: str, resource: str) -> bool:
    """Whether the API server's authorizer lets `user` do `verb` on `resource` (apps) in any namespace."""
    review = api.http.post(f"{api.plane.server}/apis/authorization.k8s.io/v1/subjectaccessreviews", timeout=30,
                           json={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                 "spec": {"user": user, "resourceAttributes": {
                                     "group": "apps", "resource": resource, "verb": verb}}})
    review.raise_for_status()
    return bool(review.json()["status"].get("allowed"))
