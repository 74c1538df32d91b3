"""Install as a user does (`kubectl apply -k`), then run as the installed ServiceAccount."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from devtools import admission, builders
from devtools.builders import AdminApi, wait_until
from job.cluster.access import required_access
from job.model.marks import (
    ANNOTATION_HOLD,
    ANNOTATION_HOLD_ACCOUNT,
    ANNOTATION_HOLD_EXCLUDED,
    ANNOTATION_HOLD_KINDS,
    HOLD_ANNOTATIONS,
    LABEL_HOLD,
)
from job.model.settings import Settings
from tests import crds
from tests.conftest import ROOT, kubectl, make_family

OVERLAY = ROOT / "kustomize" / "overlays" / "prod"
NAMESPACE = "nsscaler"


def kubectl_run(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([kubectl(), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                            check=False)
    if check and result.returncode:
        raise AssertionError(f"kubectl {' '.join(args)}:\n{result.stdout}{result.stderr}")
    return result


def rendered(overlay: Path = OVERLAY) -> list[dict[str, Any]]:
    out = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def cronjob_container() -> dict[str, Any]:
    (cron,) = [d for d in rendered() if d["kind"] == "CronJob"]
    return dict(cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0])


@pytest.fixture(scope="module")
def installed(control_plane, api: AdminApi) -> str:
    """The prod overlay applied to the cluster; returns kubectl's output of the first apply."""
    out = kubectl_run(control_plane.admin_kubeconfig, "apply", "--server-side", "-k", str(OVERLAY)).stdout
    wait_until(lambda: api.exists("ServiceAccount", "nsscaler", NAMESPACE), what="the nsscaler ServiceAccount")
    return out


@pytest.fixture(scope="module")
def sa_kubeconfig(control_plane, installed, tmp_path_factory) -> Path:
    return control_plane.service_account_kubeconfig(tmp_path_factory.mktemp("sa") / "kubeconfig", NAMESPACE,
                                                    "nsscaler")


#: what the downward API gives the CronJob's container; no Pod of that name exists, as for a run whose Pod is gone
DOWNWARD = {"metadata.namespace": NAMESPACE, "metadata.name": "nsscaler-e2e-run", "metadata.uid": "e2e-run-uid",
            "spec.serviceAccountName": "nsscaler"}


def run_as_cronjob(kubeconfig: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The CronJob container's own command line and environment, with the ServiceAccount's credentials."""
    container = cronjob_container()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSSCALER_") and k != "KUBECONFIG"}
    for item in container.get("env", []):
        value = item.get("value")
        if "valueFrom" in item:  # the downward API: the Pod's own namespace, and its name and uid for the Lease
            value = DOWNWARD[item["valueFrom"]["fieldRef"]["fieldPath"]]
        env[item["name"]] = value
    env["NSSCALER_KUBECONFIG"] = str(kubeconfig)
    command = [str(Path(sys.executable).parent / "nsscaler"), *container.get("args", []), *extra]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.versions
def test_prod_overlay_applies_in_one_go_and_again_is_a_no_op(control_plane, installed):
    assert "customresourcedefinition.apiextensions.k8s.io/nsscalers.operators.wubw.fun serverside-applied" in installed

    def versions() -> dict[str, str]:
        listed = json.loads(kubectl_run(control_plane.admin_kubeconfig, "get", "-k", str(OVERLAY), "-o", "json").stdout)
        return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in listed["items"]}
    before = versions()
    assert len(before) == len(rendered())  # every object of the overlay is there
    kubectl_run(control_plane.admin_kubeconfig, "apply", "--server-side", "-k", str(OVERLAY))
    assert versions() == before  # the second apply changed nothing


@pytest.mark.versions
@pytest.mark.parametrize("overlay", ["prod", "dry-run", "prod-without-priority-class", "prod-with-requester-stamp",
                                     "prod-with-waker"])
def test_rendered_overlays_pass_the_servers_schema_check(control_plane, api, installed, overlay):
    """Every overlay is accepted by the server; the one with the requester stamp needs MutatingAdmissionPolicy
    v1 (Kubernetes 1.36 and later), and an older server refuses it by that name."""
    checked = kubectl_run(control_plane.admin_kubeconfig, "apply", "--server-side", "--dry-run=server", "-k",
                          str(ROOT / "kustomize" / "overlays" / overlay), check=False)
    if overlay == "prod-with-requester-stamp" and not api.serves("admissionregistration.k8s.io/v1",
                                                                 "mutatingadmissionpolicies"):
        assert checked.returncode != 0 and "MutatingAdmissionPolicy" in checked.stderr, checked.stderr
    else:
        assert checked.returncode == 0, checked.stderr


@pytest.mark.versions
def test_job_as_the_overlays_service_account_freezes_restores_and_writes_status(api, sa_kubeconfig, prefix):
    make_family(api, prefix, {"v1": {"d-web": 2, "s-db": 1}, "v2": {"d-web": 3}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    result = run_as_cronjob(sa_kubeconfig)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]  # JSON logs, as the CronJob sets
    assert lines[-1]["event"] == "summary" and lines[-1]["frozen"] == 2
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0
    assert api.replicas("StatefulSet", prefix + "v1", "s-db") == 0
    assert api.status(f"{prefix}p")["counts"]["frozen"] == 2
    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})
    assert run_as_cronjob(sa_kubeconfig).returncode == 0
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 2
    assert api.replicas("StatefulSet", prefix + "v1", "s-db") == 1


def test_the_service_account_reads_the_calendar_a_policy_names(api, sa_kubeconfig, prefix):
    """An ICS calendar in a ConfigMap of nsscaler's own namespace, read with the installed account's own token (the
    Role `nsscaler-calendars`) in the namespace the CronJob's downward API names: its all-day event today and
    tomorrow holds the family, though the policy's only window is hours away."""
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    today = dt.datetime.now(dt.UTC)
    ics = "\r\n".join(["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//shop//e2e//EN", "BEGIN:VEVENT",
                        "UID:e2e@shop", "SUMMARY:Inventory", f"DTSTART;VALUE=DATE:{today:%Y%m%d}",
                        f"DTEND;VALUE=DATE:{today + dt.timedelta(days=2):%Y%m%d}", "END:VEVENT", "END:VCALENDAR", ""])
    calendar = f"{prefix}calendar"
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": calendar, "namespace": NAMESPACE},
                "data": {"shop.ics": ics}})
    later = today + dt.timedelta(hours=6)
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"], hold_windows=[f"{later:%H}:00-{later:%H}:30"],
                                 exceptions=[{"action": "hold", "calendar": {"name": calendar, "key": "shop.ics"}}]))
    result = run_as_cronjob(sa_kubeconfig)
    assert result.returncode == 0, result.stderr
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0
    assert api.status(f"{prefix}p")["exception"]["name"] == f"ConfigMap {calendar} key shop.ics: Inventory"

    # told that nsscaler's namespace is another (a dry run: the run Lease is not taken there), the API server
    # refuses the read, and the run says what grants it
    elsewhere = prefix + "elsewhere"
    api.create(builders.namespace(elsewhere))
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": calendar, "namespace": elsewhere},
                "data": {"shop.ics": ics}})
    refused = run_as_cronjob(sa_kubeconfig, "--own-namespace", elsewhere, "--dry-run", "--output", "json")
    assert refused.returncode == 1, refused.stderr
    [policy] = json.loads(refused.stdout)["policies"]
    assert policy["invalid"].startswith(
        f"spec.exceptions.0.calendar: ConfigMap {calendar} key shop.ics cannot be read: nsscaler's ServiceAccount may "
        f"not get ConfigMaps in its namespace {elsewhere} (the Role nsscaler-calendars grants it): install nsscaler "
        "again"), policy["invalid"]


@pytest.mark.versions
def test_service_account_has_exactly_what_the_job_needs(control_plane, api: AdminApi, sa_kubeconfig, prefix):
    token = yaml.safe_load(sa_kubeconfig.read_text())["users"][0]["user"]["token"]
    http = requests.Session()
    http.trust_env = False
    http.verify = str(control_plane.ca_cert)
    http.headers["Authorization"] = f"Bearer {token}"

    def allowed(group: str, resource: str, verb: str, namespace: str = "default") -> bool:
        res, _, sub = resource.partition("/")
        attrs = {"group": group, "resource": res, "verb": verb, "namespace": namespace}
        if sub:
            attrs["subresource"] = sub
        review = http.post(f"{control_plane.server}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                           json={"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                                 "spec": {"resourceAttributes": attrs}}, timeout=10)
        review.raise_for_status()
        return bool(review.json()["status"].get("allowed"))

    for access in required_access(Settings(_cli_parse_args=[])):
        assert allowed(access.group, access.resource, access.verb), f"the job needs {access}"
    # ConfigMaps: get in its own namespace only (the calendars policies name), nothing anywhere else
    assert allowed("", "configmaps", "get", NAMESPACE), "the job reads calendars in its own namespace"
    for namespace in ("default", "kube-system", prefix + "other", ""):  # "": across every namespace
        for verb in ("get", "list", "watch"):
            assert not allowed("", "configmaps", verb, namespace), f"the job must not {verb} ConfigMaps in {namespace}"
    for verb in ("list", "watch", "create", "update", "patch", "delete"):
        assert not allowed("", "configmaps", verb, NAMESPACE), f"the job must not {verb} ConfigMaps, even its own"
    denied = [("apps", "deployments", "delete"), ("", "secrets", "get"), ("", "secrets", "list"),
              ("", "namespaces", "update"), ("", "namespaces", "delete"), ("", "namespaces", "create"),
              ("rbac.authorization.k8s.io", "rolebindings", "create"),
              ("rbac.authorization.k8s.io", "clusterrolebindings", "create"),
              ("rbac.authorization.k8s.io", "clusterroles", "escalate"), ("", "users", "impersonate"),
              ("", "serviceaccounts", "impersonate"), ("operators.wubw.fun", "nsscalers", "delete"),
              ("operators.wubw.fun", "wakes", "delete"), ("operators.wubw.fun", "wakes", "create"),
              ("", "pods", "delete"), ("", "pods", "create")]
    for group, resource, verb in denied:
        assert not allowed(group, resource, verb), f"the job must not {verb} {resource}"
    # and for real, not only in review: the API server refuses these requests
    server = control_plane.server
    assert http.delete(f"{server}/apis/apps/v1/namespaces/default/deployments/anything", timeout=10).status_code == 403
    assert http.get(f"{server}/api/v1/namespaces/{NAMESPACE}/secrets", timeout=10).status_code == 403
    # a ConfigMap that exists in another namespace is refused; in its own namespace a missing one is only missing
    assert http.get(f"{server}/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
                    timeout=10).status_code == 403
    assert http.get(f"{server}/api/v1/configmaps", timeout=10).status_code == 403
    assert http.get(f"{server}/api/v1/namespaces/{NAMESPACE}/configmaps/{prefix}none", timeout=10).status_code == 404
    assert_namespace_writes_are_only_the_hold_mark(control_plane, api, http, prefix)
    crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
           "subjects": [{"kind": "ServiceAccount", "name": "nsscaler", "namespace": NAMESPACE}]}
    assert http.post(f"{server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=crb,
                     timeout=10).status_code == 403


MERGE = {"Content-Type": "application/merge-patch+json"}


def assert_namespace_writes_are_only_the_hold_mark(control_plane, api: AdminApi, http: requests.Session,
                                                   prefix: str) -> None:
    """nsscaler may patch Namespaces (RBAC cannot say which keys): the run's admission policy lets its account
    change only the hold mark there. Each refusal below changes the Namespace if admitted (none is a no-op: the
    label is absent before), and comes from the policy, not from RBAC."""
    ns = prefix + "marked"
    api.create(builders.namespace(ns))
    url = f"{control_plane.server}/api/v1/namespaces/{ns}"

    def patch(body: dict[str, Any], **params: str) -> requests.Response:
        return http.patch(url, json={"metadata": body}, headers=MERGE, params=params, timeout=10)

    # the policy takes effect a moment after `kubectl apply`: wait for it on a dry run, never on a write
    wait_until(lambda: patch({"labels": {"x": "y"}}, dryRun="All").status_code == 403,
               what=f"{admission.NAME} to take effect")
    for foreign in ({"labels": {"x": "y"}}, {"annotations": {"x": "y"}},
                    {"labels": {"nsscaler.wubw.fun/gateway": "true"}},  # the waker's NetworkPolicy selects by it
                    {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}},
                    {"labels": {LABEL_HOLD: "anything"}},  # the hold's bindings select only deny and warn
                    {"labels": {LABEL_HOLD: "deny", "x": "y"}},
                    # each key of the mark only as what it is: no annotation key as a label, nor the reverse
                    {"labels": {ANNOTATION_HOLD_KINDS: "x"}}, {"annotations": {LABEL_HOLD: "deny"}},
                    {"labels": {ANNOTATION_HOLD_EXCLUDED: "x"}},
                    # the one account the hold lets by is nsscaler's own: it may name no other
                    {"annotations": {ANNOTATION_HOLD_ACCOUNT: f"system:serviceaccount:{prefix}x:nsscaler"}}):
        refused = patch(foreign)
        assert refused.status_code == 403, (foreign, refused.status_code, refused.text[:500])
        assert f"ValidatingAdmissionPolicy '{admission.NAME}'" in refused.json()["message"], refused.text[:500]
    labels = api.get("Namespace", ns)["metadata"].get("labels") or {}
    assert "x" not in labels and LABEL_HOLD not in labels and ANNOTATION_HOLD_KINDS not in labels, labels
    assert LABEL_HOLD not in (api.get("Namespace", ns)["metadata"].get("annotations") or {})
    # what a run writes there passes, and so does lifting it
    mark = {"labels": {LABEL_HOLD: "deny"}, "annotations": {
        ANNOTATION_HOLD: "held", ANNOTATION_HOLD_KINDS: " x ",
        ANNOTATION_HOLD_ACCOUNT: f"system:serviceaccount:{NAMESPACE}:nsscaler",
        ANNOTATION_HOLD_EXCLUDED: " deployments.apps/x "}}
    assert patch(mark).status_code == 200
    assert api.get("Namespace", ns)["metadata"]["labels"][LABEL_HOLD] == "deny"
    lifted = {"labels": {LABEL_HOLD: None}, "annotations": dict.fromkeys(HOLD_ANNOTATIONS)}
    assert patch(lifted).status_code == 200
    assert LABEL_HOLD not in (api.get("Namespace", ns)["metadata"].get("labels") or {})
    # nor in kube-system, nor its own namespace
    for other in ("kube-system", NAMESPACE):
        refused = http.patch(f"{control_plane.server}/api/v1/namespaces/{other}", json={"metadata": mark},
                             headers=MERGE, timeout=10)
        assert refused.status_code == 403, (other, refused.text[:500])


@pytest.mark.versions
def test_a_custom_kind_is_refused_until_its_aggregated_cluster_role_is_applied(control_plane, api, sa_kubeconfig,
                                                                              prefix):
    explain = kubectl_run(control_plane.admin_kubeconfig, "explain", "nsscaler.spec.kinds").stdout
    assert "<Kind>.<group>" in explain and "Rollout.argoproj.io" in explain and "ReplicationController" in explain
    crds.install(api, crds.TEST_KINDS)
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.custom("Fleet", ns, "fleet", {"replicas": 2}))
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["Fleet.test.nsscaler.io"]))
    refused = run_as_cronjob(sa_kubeconfig)
    assert refused.returncode == 1, refused.stderr  # the policy naming it says why; the others are served
    (message,) = [m for m in (json.loads(line).get("message", "") for line in refused.stderr.splitlines()
                              if line.startswith("{")) if m.startswith("kind Fleet.test.nsscaler.io")]
    assert "nsscaler.wubw.fun/aggregate-to-nsscaler=true" in message
    for verb in ("list", "get", "patch"):
        assert f"{verb} fleets.test.nsscaler.io" in message
    assert api.get("Fleet", "fleet", ns)["spec"]["replicas"] == 2

    # what docs/operating/custom-kinds.md says to do: one small labelled ClusterRole, shaped like the shipped
    # Argo Rollouts sample
    role = yaml.safe_load((ROOT / "kustomize/samples/rbac-argo-rollouts.yaml").read_text())
    assert role["metadata"]["labels"]["nsscaler.wubw.fun/aggregate-to-nsscaler"] == "true"
    role["metadata"]["name"] = f"{prefix}fleets"
    role["rules"] = [{"apiGroups": ["test.nsscaler.io"], "resources": ["fleets"], "verbs": ["list", "get", "patch"]}]
    api.create(role)
    try:
        wait_until(lambda: any("fleets" in r.get("resources", []) for r in api.get("ClusterRole", "nsscaler")["rules"]),
                   what="the aggregation controller to fold the rule into the nsscaler ClusterRole")
        result = run_as_cronjob(sa_kubeconfig)
        assert result.returncode == 0, result.stderr
        assert api.get("Fleet", "fleet", ns)["spec"]["replicas"] == 0
        api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
        assert run_as_cronjob(sa_kubeconfig).returncode == 0
        assert api.get("Fleet", "fleet", ns)["spec"]["replicas"] == 2
    finally:
        api.delete("NSScaler", f"{prefix}p")
        api.delete("ClusterRole", f"{prefix}fleets")


@pytest.mark.versions
def test_run_now_creates_a_job_whose_pod_restricted_pod_security_admits(control_plane, api, installed):
    name = f"manual-{os.getpid()}"
    kubectl_run(control_plane.admin_kubeconfig, "-n", NAMESPACE, "create", "job", "--from=cronjob/nsscaler", name)
    try:
        wait_until(lambda: any(p["metadata"].get("labels", {}).get("job-name") == name for p in api.pods(NAMESPACE)),
                   what="the Job's Pod (admitted by PodSecurity restricted)")
        ns = api.get("Namespace", NAMESPACE)
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    finally:
        kubectl_run(control_plane.admin_kubeconfig, "-n", NAMESPACE, "delete", "job", name, "--wait=false",
                    check=False)


@pytest.mark.versions
def test_kubectl_get_shows_the_printer_columns(control_plane, api, sa_kubeconfig, prefix):
    make_family(api, prefix, {"a": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["b"]))
    assert run_as_cronjob(sa_kubeconfig).returncode == 0
    out = kubectl_run(control_plane.admin_kubeconfig, "get", "nsscalers", f"{prefix}p").stdout.split("\n")
    assert out[0].split() == ["NAME", "PREFIX", "ACTIVE", "HELD", "DONE", "RESTORING", "READY", "FREED", "CPU",
                              "FREED", "MEMORY", "LAST", "RUN", "AGE"]
    row = out[1].split()
    assert row[:4] == [f"{prefix}p", prefix, '["b"]', "1"] and row[4] in ("true", "false")
    assert row[5:7] == ["0", "True"]  # no namespace restoring in tiers
    assert row[7:9] == ["0", "0"]  # its one Deployment requests nothing (status.freed.podsWithoutRequests)
    wide = kubectl_run(control_plane.admin_kubeconfig, "get", "nsscalers", f"{prefix}p", "-o", "wide").stdout
    assert "FREED GPUS" in wide.split("\n")[0]
    explain = kubectl_run(control_plane.admin_kubeconfig, "explain", "nsscaler.spec.active_namespace_suffixes").stdout
    assert "stay running" in explain
    explain = kubectl_run(control_plane.admin_kubeconfig, "explain", "nsscaler.spec.restore_order").stdout
    assert "restore-tier" in explain and "[StatefulSet]" in explain
    explain = kubectl_run(control_plane.admin_kubeconfig, "explain", "nsscaler.status.restoring").stdout
    assert "waitingFor" in explain


def test_image_install_path_builds_a_wheel_that_runs(api, control_plane, tmp_path, crd, prefix):
    """What the Dockerfile does, without Docker: build the wheel with the locked build backend (.venv's, from the
    same pins), install requirements.lock (hashes checked, nothing resolved) and then the wheel alone into a fresh
    venv, run it: a dry run plans the freeze of this test's own family and changes nothing. Every test removes
    what it made (the `prefix` fixture fails a test whose objects cannot be removed, or that left any behind:
    `tests.leaks`), so the run serves every policy: exit 0, and anything else names the policies it found."""
    api.create(builders.namespace(prefix + "a"))
    api.create(builders.deployment(prefix + "a", "web", 2))
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
                    "--wheel-dir", str(tmp_path / "wheels"), str(ROOT)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheels").glob("nsscaler-*.whl")
    venv.create(tmp_path / "venv", with_pip=True)
    pip = tmp_path / "venv" / "bin" / "pip"
    subprocess.run([str(pip), "install", "--quiet", "--require-hashes", "--no-deps", "-r",
                    str(ROOT / "requirements.lock")], check=True, capture_output=True)
    subprocess.run([str(pip), "install", "--quiet", "--no-deps", str(wheel)], check=True, capture_output=True)
    broken = subprocess.run([str(pip), "check"], capture_output=True, text=True, check=False)
    assert broken.returncode == 0, f"requirements.lock misses a dependency of the wheel: {broken.stdout}"
    nsscaler = tmp_path / "venv" / "bin" / "nsscaler"
    help_text = subprocess.run([str(nsscaler), "run", "--help"], check=True, capture_output=True, text=True).stdout
    assert "--dry-run" in help_text and "--protected-namespaces" in help_text
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    dry = subprocess.run([str(nsscaler), "--dry-run", "--kubeconfig", str(control_plane.admin_kubeconfig)],
                         capture_output=True, text=True, env=env, check=False)
    policies = [p["metadata"]["name"] for p in api.list("NSScaler")]
    assert dry.returncode == 0, f"{dry.stderr}\npolicies in the cluster: {policies}"
    assert "run finished" in dry.stderr and f"{prefix}a" in dry.stdout + dry.stderr, dry.stdout + dry.stderr
    assert api.replicas("Deployment", prefix + "a", "web") == 2  # a dry run changes nothing
