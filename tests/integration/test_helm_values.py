"""The chart's values as a platform team sets them, rendered by real helm (v4, built from its Go module): each
value lands where it belongs, names follow an override, the alert threshold follows the schedule, the chart never
makes the release's own namespace, and `helm show values` explains every value. What the API server must accept
of these renderings is applied in tests/integration/test_helm.py (its matrix holds `PLATFORM`), and the OpenShift
style install runs there for real."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from devtools import chart_values
from tests.conftest import built_tool
from tests.integration.test_helm import CHART, CRDS, NAMESPACE, PLATFORM, RELEASE, run, template, values_file


@pytest.fixture(scope="module")
def helm() -> str:
    return str(built_tool("helm"))


def test_helm_show_values_explains_every_value(helm):
    """What `helm show values` prints is values.yaml with a comment over every value the README lists."""
    shown = run(helm, "show", "values", str(CHART)).stdout
    assert shown.strip() == (CHART / "values.yaml").read_text().strip()
    documented = {path for path, _, _ in chart_values.documented(shown)}
    keys = {".".join(p) for p in key_paths(yaml.safe_load(shown))}
    assert keys - documented == set(), "values without a comment in values.yaml"


def key_paths(values: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key of the values, down to the maps a value gives whole (resources, security contexts, labels...)."""
    whole = ("resources", "podSecurityContext", "securityContext", "gatewayNamespaceLabels")
    out = []
    for name, value in values.items():
        out.append((*path, name))
        if isinstance(value, dict) and value and name not in whole:
            out += key_paths(value, (*path, name))
    return out


def by_kind(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in docs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_every_platform_value_changes_the_rendering_as_asked(helm, tmp_path):
    """Each value of `PLATFORM` where it belongs (the API server accepts them all: the matrix above)."""
    docs = template(helm, tmp_path, PLATFORM)
    assert all({"team": "platform", "cost-center": "c42"}.items() <= o["metadata"]["labels"].items() for o in docs)
    account = by_kind(docs, "ServiceAccount", "platform-nsscaler")
    assert account["metadata"]["annotations"] == {"example.com/role": "reader"}
    assert not [o for o in docs if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "nsscaler"]
    bound = [s for o in docs if o["kind"] in ("ClusterRoleBinding", "RoleBinding") for s in o["subjects"]
             if s["kind"] == "ServiceAccount" and s["namespace"] == NAMESPACE and "waker" not in s["name"]]
    assert bound and all(s["name"] == "platform-nsscaler" for s in bound), bound
    flow = by_kind(docs, "FlowSchema", "nsscaler")["spec"]["rules"][0]["subjects"][0]["serviceAccount"]
    assert flow == {"name": "platform-nsscaler", "namespace": NAMESPACE}
    limits = by_kind(docs, "ValidatingAdmissionPolicy", "nsscaler-run-writes-only-what-a-run-writes")["spec"][
        "matchConditions"][0]["expression"]
    assert "endsWith(':platform-nsscaler')" in limits and ":nsscaler'" not in limits, limits

    cron = by_kind(docs, "CronJob", "nsscaler")
    assert {k: cron["spec"][k] for k in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit",
                                         "startingDeadlineSeconds")} == {
        "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 5, "startingDeadlineSeconds": 120}
    job = cron["spec"]["jobTemplate"]["spec"]
    assert (job["backoffLimit"], job["ttlSecondsAfterFinished"]) == (0, 3600)
    hook = by_kind(docs, "Job", "nsscaler-release")["spec"]["template"]["spec"]
    for pod in (job["template"]["spec"], hook):
        assert pod["serviceAccountName"] == "platform-nsscaler"
        assert pod["securityContext"] == {"runAsNonRoot": True, "fsGroup": 2000,
                                          "seccompProfile": {"type": "RuntimeDefault"}}, pod["securityContext"]
        assert pod["containers"][0]["securityContext"]["runAsNonRoot"] is True
        assert pod["priorityClassName"] == "platform-batch"
    assert not [o for o in docs if o["kind"] == "PriorityClass"], "an existing PriorityClass: none is created"


def test_monitoring_fits_a_kube_prometheus_stack_and_the_waker_is_sized_and_placed(helm, tmp_path):
    docs = template(helm, tmp_path, PLATFORM)
    rule = by_kind(docs, "PrometheusRule", "nsscaler")
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert all(r["annotations"]["runbook_url"].startswith("https://runbooks.example.com/nsscaler/nsscaler-")
               and r["annotations"]["runbook_url"].endswith(".html") for r in alerts.values()), alerts
    assert "vector(10800)" in alerts["NSScalerNoRecentRun"]["expr"], "@hourly: three hours without a run"
    assert f'namespace="{NAMESPACE}"' in alerts["NSScalerNoRecentRun"]["expr"]
    for kind in ("ConfigMap", "ClusterRoleBinding"):
        found = by_kind(docs, kind, "nsscaler-kube-state-metrics")
        if kind == "ConfigMap":
            assert found["metadata"]["namespace"] == "monitoring"
        else:
            assert found["subjects"] == [{"kind": "ServiceAccount", "name": "kps-kube-state-metrics",
                                          "namespace": "monitoring"}]

    waker = by_kind(docs, "Deployment", "nsscaler-waker")
    pod = waker["spec"]["template"]["spec"]
    assert waker["spec"]["replicas"] == 3 and pod["nodeSelector"] == {"pool": "edge"}
    assert pod["tolerations"] == PLATFORM["waker"]["tolerations"] and pod["affinity"] == PLATFORM["waker"]["affinity"]
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "30m", "memory": "70Mi"}
    assert "runAsUser" not in pod["securityContext"]
    policy = by_kind(docs, "NetworkPolicy", "nsscaler-waker")
    assert policy["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "traefik"}
    monitor = by_kind(docs, "PodMonitor", "nsscaler-waker")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"] == waker["spec"]["selector"]["matchLabels"]


CLUSTER_WIDE = ("ClusterRole", "ClusterRoleBinding", "FlowSchema", "PriorityLevelConfiguration", "PriorityClass",
                "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
                "MutatingAdmissionPolicyBinding")
EVERY_COMPONENT = {"metrics": {"enabled": True}, "waker": {"enabled": True}, "operatorKinds": {"enabled": True},
                   "wakeRequesterStamp": {"enabled": True}, "gitopsSyncs": {"enabled": True}}


def cluster_wide_names(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in docs if o["kind"] in CLUSTER_WIDE}


@pytest.mark.parametrize(("values", "name"), [
    pytest.param({"fullnameOverride": "acme-nsscaler"}, "acme-nsscaler", id="fullname"),
    pytest.param({"nameOverride": "scaler"}, f"{RELEASE}-scaler", id="name"),
])
def test_a_name_override_renames_every_cluster_wide_object_and_what_refers_to_it(helm, tmp_path, values, name):
    """Each release's cluster-wide objects are its own (none shares a name with a default install's), every
    reference among them still finds its object, and the ServiceAccount every policy names follows."""
    default = template(helm, tmp_path, EVERY_COMPONENT)
    docs = template(helm, tmp_path, {**values, **EVERY_COMPONENT})
    renamed = cluster_wide_names(docs)
    assert renamed and all(n == name or n.startswith(f"{name}-") for _, n in renamed), renamed
    assert not renamed & cluster_wide_names(default)
    assert len(renamed) == len(cluster_wide_names(default))
    have = {(o["kind"], o["metadata"]["name"]) for o in docs}
    for o in docs:
        if o.get("roleRef", {}).get("kind") == "ClusterRole":
            assert ("ClusterRole", o["roleRef"]["name"]) in have, o["roleRef"]
        if o["kind"].endswith("AdmissionPolicyBinding"):
            assert (o["kind"].removesuffix("Binding"), o["spec"]["policyName"]) in have, o["spec"]["policyName"]
    flow = by_kind(docs, "FlowSchema", name)["spec"]
    assert ("PriorityLevelConfiguration", flow["priorityLevelConfiguration"]["name"]) in have
    assert flow["rules"][0]["subjects"][0]["serviceAccount"]["name"] == name
    assert ("ServiceAccount", name) in have
    cron = by_kind(docs, "CronJob", "nsscaler")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert (cron["serviceAccountName"], cron["priorityClassName"]) == (name, name)
    limits = by_kind(docs, "ValidatingAdmissionPolicy", f"{name}-run-writes-only-what-a-run-writes")
    assert f"endsWith(':{name}')" in limits["spec"]["matchConditions"][0]["expression"]
    assert {o["metadata"]["name"] for o in docs if o["kind"] == "CustomResourceDefinition"} == set(CRDS)


def test_an_existing_service_account_is_named_and_not_created(helm, tmp_path):
    docs = template(helm, tmp_path, {"serviceAccount": {"create": False, "name": "made-by-the-platform"}})
    assert not [o for o in docs if o["kind"] == "ServiceAccount"]
    assert by_kind(docs, "CronJob", "nsscaler")["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "serviceAccountName"] == "made-by-the-platform"
    assert by_kind(docs, "ClusterRoleBinding", "nsscaler")["subjects"][0]["name"] == "made-by-the-platform"


@pytest.mark.parametrize(("schedule", "seconds"), [
    pytest.param("*/10 * * * *", 1800, id="every-ten-minutes"), pytest.param("@hourly", 10800, id="hourly"),
    pytest.param("0 */6 * * *", 64800, id="every-six-hours"), pytest.param("30 2 * * *", 259200, id="daily"),
    pytest.param("0 7 * * 1-5", 1814400, id="weekdays"), pytest.param("* * * * *", 180, id="every-minute"),
])
def test_the_no_recent_run_alert_follows_the_schedule(helm, tmp_path, schedule, seconds):
    docs = template(helm, tmp_path, {"schedule": schedule, "metrics": {"enabled": True}})
    alerts = {r["alert"]: r for g in by_kind(docs, "PrometheusRule", "nsscaler")["spec"]["groups"] for r in g["rules"]}
    assert alerts["NSScalerNoRecentRun"]["expr"].endswith(f"or on() vector({seconds}))")
    docs = template(helm, tmp_path, {"schedule": schedule, "metrics": {"enabled": True, "noRecentRunSeconds": 999}})
    alerts = {r["alert"]: r for g in by_kind(docs, "PrometheusRule", "nsscaler")["spec"]["groups"] for r in g["rules"]}
    assert alerts["NSScalerNoRecentRun"]["expr"].endswith("or on() vector(999))")


@pytest.mark.parametrize("namespace", [pytest.param(NAMESPACE, id="the-release-namespace"),
                                       pytest.param("", id="no-name")])
def test_the_chart_never_creates_the_namespace_that_holds_the_release(helm, tmp_path, namespace):
    result = run(helm, "template", RELEASE, str(CHART), "-n", NAMESPACE, "-f", values_file(
        tmp_path, {"namespace": {"name": namespace, "create": True}}), check=False)
    assert result.returncode != 0
    assert "namespace.create" in result.stderr and "namespace.name" in result.stderr, result.stderr


@pytest.mark.parametrize("enabled", [True, False])
def test_gitops_syncs_turns_on_the_run_s_reading_and_grants_it_list_only(helm, tmp_path, enabled):
    """The value does what the kustomize component does: the run's NSSCALER_GITOPS_SYNCS and a ClusterRole aggregated
    into nsscaler's with `list` on the GitOps kinds, nothing more; off (the default), neither."""
    docs = template(helm, tmp_path, {"gitopsSyncs": {"enabled": enabled}} if enabled else {})
    pod = by_kind(docs, "CronJob", "nsscaler")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    env = pod["containers"][0]["env"]
    assert ({"name": "NSSCALER_GITOPS_SYNCS", "value": "true"} in env) is enabled
    roles = [o for o in docs if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("gitops-syncs")]
    assert bool(roles) is enabled
    if enabled:
        [role] = roles
        assert role["metadata"]["labels"]["nsscaler.wubw.fun/aggregate-to-nsscaler"] == "true"
        assert sorted((r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in role["rules"]) == [
            ("argoproj.io", "applications", ("list",)), ("helm.toolkit.fluxcd.io", "helmreleases", ("list",)),
            ("kustomize.toolkit.fluxcd.io", "kustomizations", ("list",))]
    release_hook = by_kind(docs, "Job", "nsscaler-release")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert not [e for e in release_hook if e["name"] == "NSSCALER_GITOPS_SYNCS"]  # a release counts nothing
