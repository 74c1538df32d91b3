"""Generate the metrics component's derived files from its two sources, so each fact is written once.

Sources (edit these): `customresourcestate.yaml` (what kube-state-metrics exports) and
`prometheus-rules.yaml` (the alerts, a plain rule file promtool tests). Derived (never edit by hand):
`prometheusrule.yaml` (the same rule groups for the Prometheus Operator) and `helm-values.yaml` (the same
config and RBAC for the kube-state-metrics Helm chart). The sources are embedded as text, so their comments
and layout carry over. `python -m devtools.metrics_component` rewrites them (`make metrics-manifests`);
`--check` fails when they are stale or an alert's `runbook_url` is not its page on the docs site, and a test
does the same.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

COMPONENT = Path(__file__).resolve().parent.parent / "kustomize" / "components" / "metrics"
CONFIG = COMPONENT / "customresourcestate.yaml"
RULES = COMPONENT / "prometheus-rules.yaml"
RBAC = COMPONENT / "rbac.yaml"
PROMETHEUS_RULE = COMPONENT / "prometheusrule.yaml"
HELM_VALUES = COMPONENT / "helm-values.yaml"
DASHBOARD = COMPONENT / "dashboard.json"
CONFIG_MAP = "nsscaler-kube-state-metrics"
DASHBOARD_CONFIG_MAP = "nsscaler-dashboard"

#: The labels kube-state-metrics puts on every NSScaler metric besides `policy` (the integration test checks
#: this against a real scrape; the promtool tests build their series with it).
KSM_LABELS = {"customresource_group": "operators.wubw.fun", "customresource_kind": "NSScaler",
              "customresource_version": "v1alpha1"}
#: Labels only the condition metric has, one series per condition.
CONDITION_LABELS = ("type", "status", "reason")
#: The label only the per-resource freed metrics have (status.freed.resources), one series per resource.
FREED_LABELS = ("resource",)

#: Where the docs site is published; each alert's `runbook_url` is its page there (docs/runbooks/<page>.md)
DOCS_SITE = "https://nsscaler.wubw.fun/"
DOCS = COMPONENT.parents[2] / "docs"

_GENERATED = "# Generated from {sources} by `make metrics-manifests`: edit the source, not this file.\n"


def _from_line(text: str, first: str, indent: int) -> str:
    """The text from the line starting with `first` on, every non-blank line indented by `indent`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    pad = " " * indent
    return "\n".join(pad + line if line.strip() else "" for line in lines[start:]) + "\n"


def prometheus_rule(rules_text: str) -> str:
    return (_GENERATED.format(sources="prometheus-rules.yaml")
            + "# Picked up by a Prometheus Operator whose ruleSelector matches its labels: add yours in the overlay.\n"
            + "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: nsscaler\n"
            + "  namespace: nsscaler\n  labels:\n    app.kubernetes.io/name: nsscaler\nspec:\n"
            + _from_line(rules_text, "groups:", 2))


def helm_values(config_text: str, rbac_text: str) -> str:
    (role,) = [d for d in yaml.safe_load_all(rbac_text) if d and d["kind"] == "ClusterRole"]
    rules = yaml.safe_dump(role["rules"], default_flow_style=None, sort_keys=False)
    return (_GENERATED.format(sources="customresourcestate.yaml and rbac.yaml")
            + "# Values for the kube-state-metrics Helm chart (under `kube-state-metrics:` in kube-prometheus-stack):\n"
            + "#   helm upgrade --install kube-state-metrics <repo>/kube-state-metrics -f helm-values.yaml\n"
            + "customResourceState:\n  enabled: true\n  config:\n"
            + _from_line(config_text, "kind: CustomResourceStateMetrics", 4)
            + "rbac:\n  extraRules:\n" + "".join(f"    {line}\n" for line in rules.splitlines()))


def expected() -> dict[Path, str]:
    return {PROMETHEUS_RULE: prometheus_rule(RULES.read_text()),
            HELM_VALUES: helm_values(CONFIG.read_text(), RBAC.read_text())}


def exported() -> dict[str, tuple[str, ...]]:
    """Each metric the shipped config exports, by full name, with the status path its value comes from."""
    (resource,) = yaml.safe_load(CONFIG.read_text())["spec"]["resources"]
    prefix = resource["metricNamePrefix"]
    out = {}
    for metric in resource["metrics"]:
        gauge = metric["each"]["gauge"]
        out[f"{prefix}_{metric['name']}"] = (*gauge["path"], *gauge.get("valueFrom", []))
    return out


def count_metrics() -> dict[str, str]:
    """`status.counts` key -> the metric exporting it."""
    return {path[2]: name for name, path in exported().items() if path[:2] == ("status", "counts")}


def freed_metrics() -> dict[str, str]:
    """`status.freed` key -> the metric exporting it; a key of `status.freed.resources` entries as `resources.<key>`."""
    out = {}
    for name, path in exported().items():
        if path[:3] == ("status", "freed", "resources"):
            out[f"resources.{path[3]}"] = name
        elif path[:2] == ("status", "freed"):
            out[path[2]] = name
    return out


def runbook_page(alert: str) -> str:
    """The page of an alert under docs/runbooks: `NSScalerNoRecentRun` -> `runbooks/nsscaler-no-recent-run`."""
    words = alert.replace("NSScaler", "Nsscaler").replace("GitOps", "Gitops")
    return "runbooks/" + "-".join(w.lower() for w in re.findall(r"[A-Z][a-z]+", words))


def runbook_problems() -> list[str]:
    """Each alert's `runbook_url` is the site's page for it, and that page exists."""
    found = []
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            page = runbook_page(rule["alert"])
            want = f"{DOCS_SITE}{page}.html"
            got = rule.get("annotations", {}).get("runbook_url")
            if got != want:
                found.append(f"{RULES}: {rule['alert']} needs runbook_url: {want} (has {got})")
            if not (DOCS / f"{page}.md").is_file():
                found.append(f"{rule['alert']}: write its runbook, docs/{page}.md")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a derived file is stale; write nothing")
    args = parser.parse_args(argv)
    stale = [path for path, text in expected().items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path} is stale: run make metrics-manifests", file=sys.stderr)
        runbooks = runbook_problems()
        for problem in runbooks:
            print(problem, file=sys.stderr)
        return 1 if stale or runbooks else 0
    for path in stale:
        path.write_text(expected()[path])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
