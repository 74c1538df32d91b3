"""An overlay that adds the metrics component renders, adds only its own objects, and the API server accepts
all of them but the PrometheusRule (the test cluster has no Prometheus Operator, so no such kind)."""

from __future__ import annotations

import re

import yaml

from tests.conftest import ROOT
from tests.e2e.test_install import OVERLAY, kubectl_run, rendered

WITH_METRICS = ROOT / "kustomize" / "overlays" / "prod-with-metrics"


def _key(doc: dict) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def test_component_adds_its_objects_and_changes_nothing_else():
    prod = {_key(d): d for d in rendered()}
    with_metrics = {_key(d): d for d in rendered(WITH_METRICS)}
    assert {k: with_metrics[k] for k in prod} == prod
    assert set(with_metrics) - set(prod) == {
        ("ConfigMap", "kube-system", "nsscaler-kube-state-metrics"),
        ("ConfigMap", "nsscaler", "nsscaler-dashboard"),
        ("ClusterRole", "", "nsscaler-kube-state-metrics"),
        ("ClusterRoleBinding", "", "nsscaler-kube-state-metrics"),
        ("PrometheusRule", "nsscaler", "nsscaler"),
    }


def test_server_accepts_everything_but_the_prometheus_rule(control_plane, tmp_path):
    kubectl_run(control_plane.admin_kubeconfig, "apply", "-k", str(OVERLAY))  # the namespace, for real
    docs = rendered(WITH_METRICS)
    accepted = tmp_path / "accepted.yaml"
    accepted.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] != "PrometheusRule"]))
    out = kubectl_run(control_plane.admin_kubeconfig, "apply", "--dry-run=server", "-f", str(accepted)).stdout
    for kind in ("configmap", "clusterrole.rbac.authorization.k8s.io", "clusterrolebinding.rbac.authorization.k8s.io"):
        assert re.search(rf"^{re.escape(kind)}/nsscaler-kube-state-metrics \w+ \(server dry run\)$", out, re.M), out
    assert re.search(r"^configmap/nsscaler-dashboard \w+ \(server dry run\)$", out, re.M), out

    rule = tmp_path / "rule.yaml"
    rule.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] == "PrometheusRule"]))
    refused = kubectl_run(control_plane.admin_kubeconfig, "apply", "--dry-run=server", "-f", str(rule), check=False)
    assert refused.returncode != 0
    assert 'no matches for kind "PrometheusRule" in version "monitoring.coreos.com/v1"' in refused.stderr
