"""The metrics component's files agree with each other, with the status nsscaler writes and with the schedule.

Pure file checks (plus `kubectl kustomize`, which reads files only). kube-state-metrics and promtool
themselves run in tests/integration/test_metrics.py and test_alerts.py.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import subprocess

import pytest
import yaml

from devtools import metrics_component as mc
from job.decide.freed import Freed
from job.decide.outcome import PolicyOutcome
from job.decide.status import build_status
from job.model.resources import NANO, Footprint
from job.waker.metrics import WakerMetrics
from tests.conftest import ROOT, kubectl

#: counts other parts of nsscaler add to status.counts; their metrics must exist before the counts do
ANNOUNCED_COUNTS = ("podsExcluded", "reverted", "gitOpsManaged")


def schedule_period_seconds(schedule: str) -> int:
    """The period of the cron schedules nsscaler's overlays use: every N minutes, hourly or daily."""
    minute, hour, *rest = schedule.split()
    if any(field != "*" for field in rest):
        raise ValueError(f"not a fixed-period schedule: {schedule!r}")
    if hour == "*" and (match := re.fullmatch(r"\*/(\d+)", minute)) and 60 % int(match[1]) == 0:
        return int(match[1]) * 60
    if hour == "*" and minute.isdigit():
        return 3600
    if minute.isdigit() and hour.isdigit():
        return 86400
    raise ValueError(f"not a fixed-period schedule: {schedule!r}")


@pytest.mark.parametrize(("schedule", "seconds"), [
    pytest.param("*/10 * * * *", 600, id="every-10-min"),
    pytest.param("*/5 * * * *", 300, id="every-5-min"),
    pytest.param("7 * * * *", 3600, id="hourly"),
    pytest.param("30 2 * * *", 86400, id="daily"),
])
def test_schedule_period(schedule, seconds):
    assert schedule_period_seconds(schedule) == seconds


@pytest.mark.parametrize("schedule", [
    pytest.param("*/7 * * * *", id="uneven-minutes"),
    pytest.param("0 9 * * 1-5", id="weekdays"),
    pytest.param("0 */2 * * *", id="every-2-hours"),
])
def test_schedule_period_refuses_irregular_schedules(schedule):
    with pytest.raises(ValueError, match="fixed-period"):
        schedule_period_seconds(schedule)


@functools.cache
def rendered(overlay: str) -> list[dict]:
    out = subprocess.run([kubectl(), "kustomize", str(ROOT / "kustomize" / "overlays" / overlay)],
                         capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def rules() -> dict[str, dict]:
    return {r["alert"]: r for g in yaml.safe_load(mc.RULES.read_text())["groups"] for r in g["rules"]}


def test_derived_files_are_up_to_date():
    for path, text in mc.expected().items():
        assert path.read_text() == text, f"{path.name} is stale: run make metrics-manifests"


def test_prometheus_rule_holds_exactly_the_rule_groups_promtool_tests():
    (rule,) = [d for d in rendered("prod-with-metrics") if d["kind"] == "PrometheusRule"]
    assert rule["spec"]["groups"] == yaml.safe_load(mc.RULES.read_text())["groups"]


def test_helm_values_and_configmap_hold_the_same_config_and_rbac():
    docs = rendered("prod-with-metrics")
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == mc.CONFIG_MAP]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("kube-state-metrics")]
    values = yaml.safe_load(mc.HELM_VALUES.read_text())
    assert values["customResourceState"]["config"] == yaml.safe_load(configmap["data"]["config.yaml"])
    assert values["customResourceState"]["config"] == yaml.safe_load(mc.CONFIG.read_text())
    assert values["rbac"]["extraRules"] == role["rules"]


def test_no_recent_run_alert_waits_three_periods_of_the_cronjobs_schedule_or_of_prods_without_them():
    """The period comes from kube-state-metrics' CronJob metrics of nsscaler's own CronJob (so a changed
    schedule needs no change here); without them, the fallback is three periods of the prod overlay's schedule
    (promtool shows both in tests/integration/test_alerts.py)."""
    (cron,) = [d for d in rendered("prod-with-metrics") if d["kind"] == "CronJob"]
    expr = " ".join(rules()["NSScalerNoRecentRun"]["expr"].split())
    period = (f'max(kube_cronjob_next_schedule_time{{cronjob="{cron["metadata"]["name"]}"}}) - '
              f'max(kube_cronjob_status_last_schedule_time{{cronjob="{cron["metadata"]["name"]}"}})')
    fallback = 3 * schedule_period_seconds(cron["spec"]["schedule"])
    assert expr == (f"time() - nsscaler_policy_last_run_timestamp_seconds > on() group_left() "
                    f"(3 * ({period}) or on() vector({fallback}))"), expr


def test_every_count_nsscaler_writes_has_a_metric():
    status = build_status(PolicyOutcome(name="p", generation=1), now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                          list_limit=5)
    missing = (set(status["counts"]) | set(ANNOUNCED_COUNTS)) - set(mc.count_metrics())
    assert not missing, f"status.counts without a metric in {mc.CONFIG.name}: {sorted(missing)}"


#: status.freed keys that are no metric, and why: the same figures as `resources`, in Kubernetes notation for
#: people (requests, limits), and a namespace list, which as a label would be unbounded (topNamespaces)
FREED_FOR_PEOPLE = ("requests", "limits", "topNamespaces")


def _a_policy_freeing_everything() -> PolicyOutcome:
    """An outcome whose freed block has every figure there is: CPU, memory, a GPU, limits, Pods without requests."""
    fp = Footprint(pods=3, requests={"cpu": 3 * NANO // 2, "memory": 2**30 * NANO, "nvidia.com/gpu": NANO},
                   limits={"memory": 2**31 * NANO}, unrequested=1)
    return PolicyOutcome(name="p", generation=1, freed=Freed(total=fp, workloads=2, unknown=1, namespaces={"a": fp}))


def test_every_freed_figure_nsscaler_writes_has_a_metric():
    status = build_status(_a_policy_freeing_everything(), now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), list_limit=5)
    freed = status["freed"]
    figures = {k for k in freed if k not in FREED_FOR_PEOPLE and k != "resources"}
    figures |= {f"resources.{k}" for entry in freed["resources"] for k in entry if k != "resource"}
    assert figures, freed
    missing = figures - set(mc.freed_metrics())
    assert not missing, f"status.freed figures without a metric in {mc.CONFIG.name}: {sorted(missing)}"
    assert {e["resource"] for e in freed["resources"]} == {"cpu", "memory", "nvidia.com/gpu"}


def waker_metrics() -> set[str]:
    """The series the waker serves on /metrics (a histogram's as Prometheus names them)."""
    typed = dict(re.findall(r"^# TYPE (\S+) (\S+)$", WakerMetrics().text(), re.M))
    return {f"{name}{suffix}" for name, kind in typed.items()
            for suffix in (("_bucket", "_sum", "_count") if kind == "histogram" else ("",))}


def test_metric_names_follow_prometheus_conventions():
    names = mc.exported()
    assert len(names) == len(set(names))
    for name, path in names.items():
        assert re.fullmatch(r"nsscaler_policy_[a-z_]+", name), name
        assert not name.endswith("_total"), f"{name}: every metric here is a gauge of the last run"
        if path[-1].endswith("Time"):
            assert name.endswith("_timestamp_seconds"), name
    for name in ("condition", "done", "last_run_timestamp_seconds", "observed_generation", "generation"):
        assert f"nsscaler_policy_{name}" in names


def test_labels_are_bounded():
    (resource,) = yaml.safe_load(mc.CONFIG.read_text())["spec"]["resources"]
    assert resource["labelsFromPath"] == {"policy": ["metadata", "name"]}
    for metric in resource["metrics"]:
        labels = set(metric["each"]["gauge"].get("labelsFromPath", {}))
        freed = metric["each"]["gauge"]["path"][:3] == ["status", "freed", "resources"]
        assert labels <= set(mc.FREED_LABELS if freed else mc.CONDITION_LABELS), (metric["name"], labels)
        assert "commonLabels" not in metric and "labelFromKey" not in metric["each"]["gauge"], metric["name"]


#: kube-state-metrics' own metrics the alerts read (its default collectors): nsscaler's CronJob, the waker's Deployment
KSM_OWN = {"kube_cronjob_next_schedule_time", "kube_cronjob_status_last_schedule_time",
           "kube_deployment_status_replicas_available", "kube_deployment_spec_replicas"}


def test_alerts_use_only_exported_metrics_and_say_what_to_do():
    """Each metric an alert reads is exported: by the shipped custom resource state config, by the waker's
    /metrics, or by kube-state-metrics' own collectors. A policy's alert names the policy."""
    served = set(re.findall(r"^# TYPE (\w+)", WakerMetrics().text(), re.M))
    for name, rule in rules().items():
        used = set(re.findall(r"\b(?:nsscaler|kube)_\w+", rule["expr"]))
        assert used and used <= {*mc.exported(), *served, *KSM_OWN}, (name, used - {*mc.exported(), *served})
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        if used & set(mc.exported()) and "absent(" not in rule["expr"]:
            assert "{{ $labels.policy }}" in rule["annotations"]["summary"], name
        assert "kubectl" in rule["annotations"]["description"], name


def test_the_docs_list_every_metric_and_alert_and_each_alert_has_its_runbook():
    metrics = (ROOT / "docs/reference/metrics.md").read_text()
    runbooks = (ROOT / "docs/runbooks/index.md").read_text()
    for name in mc.exported():
        assert f"| `{name}" in metrics, name
    for alert in rules():
        page = mc.runbook_page(alert)
        assert f"| [`{alert}`]({page.removeprefix('runbooks/')}.md) |" in runbooks, alert
        assert (ROOT / "docs" / f"{page}.md").read_text().startswith(f"# {alert}\n"), alert
        assert rules()[alert]["annotations"]["runbook_url"] == f"{mc.DOCS_SITE}{page}.html", alert
    assert mc.runbook_problems() == []


def test_a_missing_runbook_url_is_caught(monkeypatch, tmp_path):
    changed = tmp_path / "prometheus-rules.yaml"
    changed.write_text(mc.RULES.read_text().replace("runbook_url:", "runbook:", 1))
    monkeypatch.setattr(mc, "RULES", changed)
    (problem,) = mc.runbook_problems()
    assert "needs runbook_url: https://" in problem


def _panels() -> list[dict]:
    return [p for p in json.loads(mc.DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def _uids(node: object) -> list[str]:
    if isinstance(node, dict):
        return [str(v) for k, v in node.items() if k == "uid"] + [u for v in node.values() for u in _uids(v)]
    return [u for v in node for u in _uids(v)] if isinstance(node, list) else []


def test_dashboard_panels_have_a_title_a_unit_and_queries_on_the_datasource_variable():
    dashboard = json.loads(mc.DASHBOARD.read_text())
    (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    ref = {"type": "prometheus", "uid": f"${{{variable['name']}}}"}
    assert set(_uids(dashboard)) == {ref["uid"]}, "a hard-coded UID"
    panels = _panels()
    assert len(panels) >= 10
    for panel in panels:
        assert panel["title"] and panel["description"], panel
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["datasource"] == ref, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == ref and target["expr"].strip(), panel["title"]
            used = set(re.findall(r"nsscaler_policy_\w+", target["expr"]))
            served = set(re.findall(r"nsscaler_waker_\w+", target["expr"]))  # the waker's own /metrics
            assert used or served, panel["title"]
            assert used <= set(mc.exported()), (panel["title"], used - set(mc.exported()))
            assert served <= waker_metrics(), (panel["title"], served - waker_metrics())


def test_dashboard_shows_freed_capacity_runs_what_still_runs_and_reverts():
    used = {m for p in _panels() for t in p["targets"] for m in re.findall(r"nsscaler_policy_\w+", t["expr"])}
    for metric in ("held_namespaces", "freed_requests", "freed_pods", "last_run_timestamp_seconds", "condition",
                   "pods_left", "reverted_workloads"):
        assert f"nsscaler_policy_{metric}" in used, metric


def test_dashboard_configmap_is_the_json_file_labelled_for_the_grafana_sidecar():
    (configmap,) = [d for d in rendered("prod-with-metrics")
                    if d["kind"] == "ConfigMap" and d["metadata"]["name"] == mc.DASHBOARD_CONFIG_MAP]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = configmap["data"].values()
    assert json.loads(text) == json.loads(mc.DASHBOARD.read_text())


def test_the_dashboard_page_describes_every_panel():
    dashboard = (ROOT / "docs/operating/dashboard.md").read_text()
    for panel in _panels():
        assert f"| {panel['title']} |" in dashboard, panel["title"]
