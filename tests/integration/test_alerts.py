"""The shipped alerts, evaluated by promtool (built from Prometheus' Go module): valid PromQL, and each alert
fires on the state it describes and stays quiet otherwise.

Series carry the label sets a real kube-state-metrics scrape gives these metrics (metrics_component.KSM_LABELS,
checked against a real scrape in test_metrics.py) plus the `job`/`instance` a Prometheus scrape adds.
promtool starts its clock at the Unix epoch, so a `last_run_timestamp_seconds` of 600 is "10 minutes in".
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import metrics_component as mc
from tests.conftest import built_tool

POLICY = "shop-release"
SCRAPE = {"job": "kube-state-metrics", "instance": "10.0.0.7:8080"}


@pytest.fixture(scope="session")
def promtool() -> Path:
    return built_tool("promtool")


def series(metric: str, **labels: str) -> str:
    every = {**SCRAPE, **mc.KSM_LABELS, "policy": POLICY, **labels}
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(every.items())) + "}"


def alert_labels(**labels: str) -> dict[str, str]:
    return {**SCRAPE, **mc.KSM_LABELS, "policy": POLICY, "severity": "warning", **labels}


def cronjob_series(metric: str) -> str:
    """A series of kube-state-metrics' own CronJob metrics, for nsscaler's CronJob."""
    every = {**SCRAPE, "namespace": "nsscaler", "cronjob": "nsscaler"}
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(every.items())) + "}"


def ready(status: str, reason: str) -> str:
    return series("nsscaler_policy_condition", type="Ready", status=status, reason=reason)


def rendered_annotations(alert: str, labels: dict[str, str], summary: str) -> dict[str, str]:
    """The rule's description with its `$labels` filled in (any other template would stay and fail the test);
    the summary, which also holds `$value`, is spelled out by each case; the runbook's address as the rule has it
    (its page is checked by tests/unit/test_metrics_component.py)."""
    (rule,) = [r for g in yaml.safe_load(mc.RULES.read_text())["groups"] for r in g["rules"] if r["alert"] == alert]
    description = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m[1]], rule["annotations"]["description"])
    return {"summary": summary, "description": description, "runbook_url": rule["annotations"]["runbook_url"]}


# (alert, {series: values}, minutes after start, the summary of the one alert expected, or None for no alert)
CASES = [
    pytest.param("NSScalerPolicyNotReady", {ready("False", "PartialFailure"): "0x40"}, 16,
                 f"NSScaler {POLICY} is not Ready: PartialFailure", id="not-ready-two-runs-fires"),
    pytest.param("NSScalerPolicyNotReady", {ready("False", "InvalidSpec"): "0x40"}, 30,
                 f"NSScaler {POLICY} is not Ready: InvalidSpec", id="invalid-spec-fires"),
    pytest.param("NSScalerPolicyNotReady", {ready("False", "PartialFailure"): "0x40"}, 14, None,
                 id="not-ready-one-run-quiet"),
    pytest.param("NSScalerPolicyNotReady", {ready("False", "PartialFailure"): "0x9 stale",
                                            ready("True", "Reconciled"): "_x10 1x30"}, 30, None,
                 id="failed-once-then-reconciled-quiet"),
    pytest.param("NSScalerPolicyNotReady", {ready("True", "Reconciled"): "1x40"}, 30, None, id="ready-quiet"),
    pytest.param("NSScalerPolicyNotReady", {ready("False", "Suspended"): "0x40"}, 30, None,
                 id="suspended-on-purpose-quiet"),
    pytest.param("NSScalerNoRecentRun", {series("nsscaler_policy_last_run_timestamp_seconds"): "0x60"}, 40,
                 f"No nsscaler run has reconciled NSScaler {POLICY} for 40m 0s", id="no-run-40-min-fires"),
    pytest.param("NSScalerNoRecentRun", {series("nsscaler_policy_last_run_timestamp_seconds"): "0x60"}, 35, None,
                 id="no-run-35-min-not-yet"),
    pytest.param("NSScalerNoRecentRun",
                 {series("nsscaler_policy_last_run_timestamp_seconds"): "0x29 1800x20"}, 45, None,
                 id="two-runs-missed-then-ran-quiet"),
    pytest.param("NSScalerNoRecentRun",
                 {series("nsscaler_policy_last_run_timestamp_seconds"):
                  " ".join(f"{600 * i}x9" for i in range(7))}, 65, None, id="runs-every-10-min-quiet"),
    pytest.param("NSScalerPodsLeftInHeldNamespaces", {series("nsscaler_policy_pods_left"): "3x40"}, 31,
                 f"3 Pods still run in namespaces NSScaler {POLICY} holds", id="pods-left-30-min-fires"),
    pytest.param("NSScalerPodsLeftInHeldNamespaces", {series("nsscaler_policy_pods_left"): "3x19 0x30"}, 45, None,
                 id="pods-gone-after-20-min-quiet"),
    pytest.param("NSScalerPodsLeftInHeldNamespaces", {series("nsscaler_policy_pods_left"): "0x40"}, 35, None,
                 id="drained-quiet"),
    pytest.param("NSScalerNoRecentRun", {series("nsscaler_policy_last_run_timestamp_seconds"): "0x60",
                                         cronjob_series("kube_cronjob_next_schedule_time"): "3600x60",
                                         cronjob_series("kube_cronjob_status_last_schedule_time"): "0x60"}, 40, None,
                 id="hourly-schedule-40-min-quiet"),
    pytest.param("NSScalerNoRecentRun", {series("nsscaler_policy_last_run_timestamp_seconds"): "0x200",
                                         cronjob_series("kube_cronjob_next_schedule_time"): "3600x200",
                                         cronjob_series("kube_cronjob_status_last_schedule_time"): "0x200"}, 187,
                 f"No nsscaler run has reconciled NSScaler {POLICY} for 3h 7m 0s", id="hourly-schedule-3-hours-fires"),
    pytest.param("NSScalerNoRecentRun", {series("nsscaler_policy_last_run_timestamp_seconds"): "0x40",
                                         cronjob_series("kube_cronjob_next_schedule_time"): "300x40",
                                         cronjob_series("kube_cronjob_status_last_schedule_time"): "0x40"}, 22,
                 f"No nsscaler run has reconciled NSScaler {POLICY} for 22m 0s",
                 id="every-5-min-schedule-22-min-fires"),
    pytest.param("NSScalerWorkloadsRevertedByGitOps", {series("nsscaler_policy_reverted_workloads"): "0x9 2x30"},
                 27, f"2 workloads held by NSScaler {POLICY} were scaled up again by someone else",
                 id="reverted-by-two-runs-fires"),
    pytest.param("NSScalerWorkloadsRevertedByGitOps", {series("nsscaler_policy_reverted_workloads"): "0x9 1x10 0x20"},
                 15, None, id="one-manual-scale-found-by-one-run-quiet"),
    pytest.param("NSScalerWorkloadsRevertedByGitOps", {series("nsscaler_policy_reverted_workloads"): "0x30"}, 20,
                 None, id="no-revert-quiet"),
    pytest.param("NSScalerWorkloadsRevertedByGitOps", {series("nsscaler_policy_done"): "1x30"}, 20, None,
                 id="older-status-without-the-count-quiet"),
]


def unit_test(alert: str, inputs: dict[str, str], minutes: int, summary: str | None,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A promtool rule test: `alert` at `minutes`, expected with `summary` (None: quiet) and `labels` (by default
    the first live NSScaler series' labels)."""
    expected = []
    if summary is not None:
        labels = labels or alert_labels(**next(_labels_of(s) for s in inputs
                                               if s.startswith("nsscaler_policy") and "stale" not in inputs[s]))
        expected.append({"exp_labels": labels,
                         "exp_annotations": rendered_annotations(alert, labels, summary)})
    return {"rule_files": [str(mc.RULES)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m",
                       "input_series": [{"series": s, "values": v} for s, v in inputs.items()],
                       "alert_rule_test": [{"eval_time": f"{minutes}m", "alertname": alert,
                                            "exp_alerts": expected}]}]}


def _labels_of(selector: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', selector))


def promtool_run(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], capture_output=True, text=True, timeout=60, check=False)


def test_rules_are_valid_promql(promtool):
    result = promtool_run(promtool, "check", "rules", str(mc.RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


@pytest.mark.parametrize(("alert", "inputs", "minutes", "summary"), CASES)
def test_alert_fires_on_its_state_and_only_then(promtool, tmp_path, alert, inputs, minutes, summary):
    test_file = tmp_path / "alerts_test.yaml"
    test_file.write_text(yaml.safe_dump(unit_test(alert, inputs, minutes, summary), sort_keys=False))
    result = promtool_run(promtool, "test", "rules", str(test_file))
    assert result.returncode == 0, f"{result.stdout}{result.stderr}\n--- {test_file}:\n{test_file.read_text()}"


WAKER_SCRAPE = {"job": "nsscaler-waker", "instance": "10.0.0.9:8080", "namespace": "nsscaler",
                "pod": "nsscaler-waker-7d9f-abcde"}
KSM_WAKER = {**SCRAPE, "namespace": "nsscaler", "deployment": "nsscaler-waker"}


def labelled(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


AVAILABLE, WANTED = (labelled(f"kube_deployment_{m}", KSM_WAKER)
                     for m in ("status_replicas_available", "spec_replicas"))
ERRORS = labelled("nsscaler_waker_api_errors_total", WAKER_SCRAPE)
OTHER_SCRAPE = labelled("up", SCRAPE)
NO_METRICS = "No nsscaler metric for 30 minutes: every NSScaler alert is silent"
WAKER_DOWN = "No nsscaler waker Pod is available in nsscaler: held namespaces cannot be woken"
WAKER_ERRORS = f"The nsscaler waker {WAKER_SCRAPE['instance']} keeps failing its API calls"

# alerts about nsscaler itself rather than a policy: (alert, {series: values}, minutes, summary or None, labels)
SILENCE_AND_WAKER = [
    pytest.param("NSScalerMetricsAbsent", {OTHER_SCRAPE: "1x60"}, 35, NO_METRICS, {"severity": "warning"},
                 id="no-nsscaler-metric-for-35-min-fires"),
    pytest.param("NSScalerMetricsAbsent", {OTHER_SCRAPE: "1x60"}, 25, None, None,
                 id="no-nsscaler-metric-for-25-min-not-yet"),
    pytest.param("NSScalerMetricsAbsent", {series("nsscaler_policy_last_run_timestamp_seconds"): "0x9 stale",
                                           OTHER_SCRAPE: "1x60"}, 50, NO_METRICS, {"severity": "warning"},
                 id="config-broken-after-10-min-fires"),
    pytest.param("NSScalerMetricsAbsent", {series("nsscaler_policy_last_run_timestamp_seconds"): "0x60"}, 45, None,
                 None, id="metrics-present-quiet"),
    pytest.param("NSScalerWakerDown", {AVAILABLE: "0x20", WANTED: "2x20"}, 6, WAKER_DOWN,
                 {**KSM_WAKER, "severity": "critical"}, id="no-waker-pod-available-fires"),
    pytest.param("NSScalerWakerDown", {AVAILABLE: "1x20", WANTED: "2x20"}, 10, None, None,
                 id="one-of-two-available-quiet"),
    pytest.param("NSScalerWakerDown", {AVAILABLE: "0x3 2x20", WANTED: "2x20"}, 10, None, None,
                 id="a-rollout-of-3-min-quiet"),
    pytest.param("NSScalerWakerDown", {AVAILABLE: "0x20", WANTED: "0x20"}, 10, None, None,
                 id="scaled-to-zero-on-purpose-quiet"),
    pytest.param("NSScalerWakerApiErrors", {ERRORS: "0+1x40"}, 25, WAKER_ERRORS,
                 {**WAKER_SCRAPE, "severity": "warning"}, id="errors-for-25-min-fire"),
    pytest.param("NSScalerWakerApiErrors", {ERRORS: "0x10 3x30"}, 30, None, None, id="one-burst-quiet"),
    pytest.param("NSScalerWakerApiErrors", {ERRORS: "0x40"}, 30, None, None, id="no-errors-quiet"),
]


@pytest.mark.parametrize(("alert", "inputs", "minutes", "summary", "labels"), SILENCE_AND_WAKER)
def test_silence_and_waker_alerts_fire_on_their_state_and_only_then(promtool, tmp_path, alert, inputs, minutes,
                                                                    summary, labels):
    test_file = tmp_path / "alerts_test.yaml"
    test_file.write_text(yaml.safe_dump(unit_test(alert, inputs, minutes, summary, labels), sort_keys=False))
    result = promtool_run(promtool, "test", "rules", str(test_file))
    assert result.returncode == 0, f"{result.stdout}{result.stderr}\n--- {test_file}:\n{test_file.read_text()}"


FAILING = 'nsscaler_policy_condition{type="Ready", reason!="Suspended"} == 0'
FROZEN_NOW = ("sum(nsscaler_policy_frozen_workloads + nsscaler_policy_unchanged_workloads + "
              "nsscaler_policy_kept_frozen_workloads unless on (policy) nsscaler_policy_dry_run == 1)")


def _of(policy: str, metric: str, value: str, **labels: str) -> tuple[str, str]:
    return series(metric, **labels).replace(f'policy="{POLICY}"', f'policy="{policy}"'), value


WOKEN_SHARE = ("nsscaler_policy_woken_namespaces / (nsscaler_policy_held_namespaces + "
               "nsscaler_policy_woken_namespaces) > 0")


def _series_labels(policy: str, metric: str) -> str:
    """The labels of a policy's series without the metric name, as arithmetic leaves them."""
    named = _of(policy, metric, "")[0]
    return named[named.index("{"):]


QUERIES = [
    pytest.param(FAILING, dict([
        _of("a", "nsscaler_policy_condition", "1x20", type="Ready", status="True", reason="Reconciled"),
        _of("b", "nsscaler_policy_condition", "0x20", type="Ready", status="False", reason="PartialFailure"),
        _of("c", "nsscaler_policy_condition", "0x20", type="Ready", status="False", reason="Suspended"),
        _of("b", "nsscaler_policy_condition", "0x20", type="Drained", status="False", reason="PodsRemaining"),
    ]), [(_of("b", "nsscaler_policy_condition", "", type="Ready", status="False", reason="PartialFailure")[0], 0)],
        id="which-policies-are-failing"),
    pytest.param(FROZEN_NOW, dict([
        _of("a", "nsscaler_policy_frozen_workloads", "2x20"), _of("a", "nsscaler_policy_unchanged_workloads", "3x20"),
        _of("a", "nsscaler_policy_kept_frozen_workloads", "1x20"), _of("a", "nsscaler_policy_dry_run", "0x20"),
        _of("b", "nsscaler_policy_frozen_workloads", "4x20"), _of("b", "nsscaler_policy_unchanged_workloads", "0x20"),
        _of("b", "nsscaler_policy_kept_frozen_workloads", "0x20"), _of("b", "nsscaler_policy_dry_run", "0x20"),
        # a dry-run policy's "frozen" is what it would freeze: nothing is frozen
        _of("c", "nsscaler_policy_frozen_workloads", "9x20"), _of("c", "nsscaler_policy_unchanged_workloads", "0x20"),
        _of("c", "nsscaler_policy_kept_frozen_workloads", "0x20"), _of("c", "nsscaler_policy_dry_run", "1x20"),
    ]), [("{}", 10)], id="how-many-workloads-are-frozen-now"),
    pytest.param(WOKEN_SHARE, dict([
        _of("a", "nsscaler_policy_held_namespaces", "3x20"), _of("a", "nsscaler_policy_woken_namespaces", "1x20"),
        _of("b", "nsscaler_policy_held_namespaces", "2x20"), _of("b", "nsscaler_policy_woken_namespaces", "0x20"),
    ]), [(_series_labels("a", "nsscaler_policy_woken_namespaces"), 0.25)], id="how-much-is-woken"),
]


@pytest.mark.parametrize(("query", "inputs", "samples"), QUERIES)
def test_the_docs_questions_in_promql_give_the_answer(promtool, tmp_path, query, inputs, samples):
    assert f"`{query}`" in (mc.COMPONENT.parents[2] / "docs/operating/monitoring.md").read_text()
    test = {"rule_files": [], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in inputs.items()],
                       "promql_expr_test": [{"expr": query, "eval_time": "10m",
                                             "exp_samples": [{"labels": labels, "value": value}
                                                             for labels, value in samples]}]}]}
    test_file = tmp_path / "queries_test.yaml"
    test_file.write_text(yaml.safe_dump(test, sort_keys=False))
    result = promtool_run(promtool, "test", "rules", str(test_file))
    assert result.returncode == 0, f"{result.stdout}{result.stderr}\n--- {test_file}:\n{test_file.read_text()}"


def test_a_wrong_expectation_fails(promtool, tmp_path):
    """The harness can fail: a quiet state claimed to fire is reported by promtool."""
    test_file = tmp_path / "alerts_test.yaml"
    claim = unit_test("NSScalerPodsLeftInHeldNamespaces", {series("nsscaler_policy_pods_left"): "0x40"}, 35,
                      f"0 Pods still run in namespaces NSScaler {POLICY} holds")
    test_file.write_text(yaml.safe_dump(claim, sort_keys=False))
    result = promtool_run(promtool, "test", "rules", str(test_file))
    assert result.returncode == 1 and "NSScalerPodsLeftInHeldNamespaces" in result.stdout + result.stderr
