"""kube-state-metrics (built from its Go module) turns the status nsscaler writes into the documented metrics.

It runs against the test control plane with nothing but what the metrics component ships: the
CustomResourceStateMetrics config out of the rendered ConfigMap, and the rendered ClusterRole, bound to a
ServiceAccount whose token is all kube-state-metrics gets (not admin). nsscaler reconciles real policies,
and every metric is compared with the status it was made from.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from devtools import builders
from devtools import metrics_component as mc
from devtools.builders import AdminApi, end, wait_until
from devtools.cluster import controlplane
from job.waker.metrics import WakerMetrics
from tests.conftest import ROOT, apply_manifest, built_tool, kubectl, make_family

OVERLAY = ROOT / "kustomize" / "overlays" / "prod-with-metrics"
KSM_NAMESPACE, KSM_ACCOUNT = "kube-system", "kube-state-metrics"
_SAMPLE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Sample = tuple[str, frozenset[tuple[str, str]], float]


def parse(text: str) -> list[Sample]:
    """Samples of the Prometheus text format (comments skipped)."""
    samples = []
    for line in text.splitlines():
        if line and not line.startswith("#") and (match := _SAMPLE.match(line)):
            labels = frozenset(_LABEL.findall(match[2] or ""))
            samples.append((match[1], labels, float(match[3])))
    return samples


@dataclass
class KubeStateMetrics:
    url: str
    log: Path

    def scrape(self) -> list[Sample]:
        resp = requests.get(f"{self.url}/metrics", timeout=10)
        resp.raise_for_status()
        return parse(resp.text)

    def of(self, policy: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """This policy's nsscaler_* samples, keyed by name and labels other than `policy`."""
        out = {}
        for name, labels, value in self.scrape():
            if name.startswith("nsscaler_") and ("policy", policy) in labels:
                out[name, labels - {("policy", policy)}] = value
        return out


def component() -> list[dict[str, Any]]:
    out = subprocess.run([kubectl(), "kustomize", str(OVERLAY)], capture_output=True, text=True, check=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    return [d for d in docs if d["metadata"]["name"] == "nsscaler-kube-state-metrics"]


@pytest.fixture(scope="module")
def ksm_binary() -> Path:
    return built_tool("kube-state-metrics")


@pytest.fixture(scope="module")
def ksm(control_plane, api: AdminApi, crd, ksm_binary, tmp_path_factory) -> Iterator[KubeStateMetrics]:
    work = tmp_path_factory.mktemp("kube-state-metrics")
    shipped = {d["kind"]: d for d in component()}
    (work / "rbac.yaml").write_text(yaml.safe_dump_all([shipped["ClusterRole"], shipped["ClusterRoleBinding"]]))
    apply_manifest(control_plane.admin_kubeconfig, work / "rbac.yaml")
    if not api.exists("ServiceAccount", KSM_ACCOUNT, KSM_NAMESPACE):
        api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": KSM_ACCOUNT, "namespace": KSM_NAMESPACE}})
    kubeconfig = control_plane.service_account_kubeconfig(work / "kubeconfig", KSM_NAMESPACE, KSM_ACCOUNT)
    config = work / "config.yaml"
    config.write_text(shipped["ConfigMap"]["data"]["config.yaml"])
    port, telemetry = controlplane.free_ports(2)
    log = work / "kube-state-metrics.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(ksm_binary), "--kubeconfig", str(kubeconfig), "--custom-resource-state-only",
             "--custom-resource-state-config-file", str(config), "--host", "127.0.0.1", "--port", str(port),
             "--telemetry-host", "127.0.0.1", "--telemetry-port", str(telemetry)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=controlplane._die_with_parent)  # noqa: PLW1509 (as the control plane's own processes)
    running = KubeStateMetrics(f"http://127.0.0.1:{port}", log)
    try:
        wait_until(lambda: requests.get(f"{running.url}/livez", timeout=2).ok, timeout=60,
                   what=f"kube-state-metrics to serve (log: {log})")
        yield running
    finally:
        end(proc, grace=10)


def _seconds(timestamp: str) -> float:
    return dt.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


def expected_samples(obj: dict[str, Any]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """What the documented metrics must say about one NSScaler, computed from the object itself."""
    status = obj["status"]
    plain = frozenset(mc.KSM_LABELS.items())
    out = {
        ("nsscaler_policy_done", plain): float(status["done"]),
        ("nsscaler_policy_dry_run", plain): float(status["dryRun"]),
        ("nsscaler_policy_holding", plain): float(status["holding"]),
        ("nsscaler_policy_last_run_timestamp_seconds", plain): _seconds(status["lastRunTime"]),
        ("nsscaler_policy_observed_generation", plain): float(status["observedGeneration"]),
        ("nsscaler_policy_generation", plain): float(obj["metadata"]["generation"]),
    }
    for key, value in status["counts"].items():
        assert key in mc.count_metrics(), f"status.counts.{key} has no metric in {mc.CONFIG.name}"
        out[mc.count_metrics()[key], plain] = float(value)
    for cond in status["conditions"]:
        labels = plain | {("type", cond["type"]), ("status", cond["status"]), ("reason", cond["reason"])}
        out["nsscaler_policy_condition", labels] = 1.0 if cond["status"] == "True" else 0.0
    freed, metrics = status.get("freed") or {}, mc.freed_metrics()
    for key, value in freed.items():
        if not isinstance(value, (dict, list)):
            assert key in metrics, f"status.freed.{key} has no metric in {mc.CONFIG.name}"
            out[metrics[key], plain] = float(value)
    for entry in freed.get("resources") or []:
        for key in ("requests", "limits"):
            out[metrics[f"resources.{key}"], plain | {("resource", entry["resource"])}] = float(entry[key])
    return out


def test_every_metric_says_what_the_status_says(api, run_job, prefix, ksm):
    make_family(api, prefix, {"v1": {"d-web": 2, "s-db": 1}, "v2": {"d-web": 1}})
    names = {"ok": f"{prefix}ok", "bad": f"{prefix}bad", "off": f"{prefix}off"}
    api.create(builders.nsscaler(names["ok"], prefix, ["v2"]))
    # other families, so that neither one's active list keeps the first policy's namespaces running
    api.create(builders.nsscaler(names["bad"], f"{prefix}y-", ["x-"]))  # "...y-x-" is no namespace name
    api.create(builders.nsscaler(names["off"], f"{prefix}z-", ["v1"], suspend=True))
    assert run_job().exit_code == 1  # the invalid policy; the others are served
    objects = {key: api.get("NSScaler", name) for key, name in names.items()}

    for key, name in names.items():
        want = expected_samples(objects[key])
        try:
            wait_until(lambda n=name, w=want: ksm.of(n) == w, timeout=90, what=f"the metrics of {name}")
        except AssertionError:
            got = ksm.of(name)
            wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
            extra = sorted(set(got) - set(want))
            raise AssertionError(f"{name}: (scraped, wanted) {wrong}; not wanted {extra}\n"
                                 f"kube-state-metrics log:\n{ksm.log.read_text()[-3000:]}") from None

    ok, bad, off = (ksm.of(names[k]) for k in ("ok", "bad", "off"))
    plain = frozenset(mc.KSM_LABELS.items())
    assert ok["nsscaler_policy_frozen_workloads", plain] == 2
    assert ok["nsscaler_policy_held_namespaces", plain] == 1
    assert ok["nsscaler_policy_condition", plain | {("type", "Ready"), ("status", "True"),
                                                     ("reason", "Reconciled")}] == 1
    assert bad["nsscaler_policy_condition", plain | {("type", "Ready"), ("status", "False"),
                                                      ("reason", "InvalidSpec")}] == 0
    assert off["nsscaler_policy_condition", plain | {("type", "Ready"), ("status", "False"),
                                                      ("reason", "Suspended")}] == 0
    assert bad["nsscaler_policy_done", plain] == 0 and off["nsscaler_policy_done", plain] == 0
    # every count the status holds is exported; a count it lacks has no series (not a made-up zero)
    exported_counts = {name for (name, _) in ok if name in mc.count_metrics().values()}
    assert exported_counts == {mc.count_metrics()[k] for k in objects["ok"]["status"]["counts"]}


def test_a_spec_change_no_run_has_acted_on_shows_as_generation_ahead(api, run_job, prefix, ksm):
    make_family(api, prefix, {"v1": {"d-web": 1}})
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["v2"]))
    assert run_job().exit_code == 0
    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1"]}})
    plain = frozenset(mc.KSM_LABELS.items())

    def generation_ahead() -> bool:
        got = ksm.of(name)
        return got.get(("nsscaler_policy_generation", plain), 0) > got.get(("nsscaler_policy_observed_generation",
                                                                            plain), 0)

    wait_until(generation_ahead, timeout=90, what="metadata.generation ahead of observedGeneration")
    assert run_job().exit_code == 0
    wait_until(lambda: not generation_ahead(), timeout=90, what="the run to catch up with the spec")


def test_kube_state_metrics_runs_only_with_the_access_the_component_grants(control_plane, ksm):
    token = yaml.safe_load((ksm.log.parent / "kubeconfig").read_text())["users"][0]["user"]["token"]
    http = requests.Session()
    http.trust_env = False
    http.verify = str(control_plane.ca_cert)
    http.headers["Authorization"] = f"Bearer {token}"
    server = control_plane.server
    assert http.get(f"{server}/apis/{builders.NSSCALER_VERSION}/nsscalers", timeout=10).status_code == 200
    for path in ("/api/v1/secrets", "/api/v1/pods", "/apis/apps/v1/deployments", "/api/v1/namespaces"):
        assert http.get(server + path, timeout=10).status_code == 403, path
    assert http.patch(f"{server}/apis/{builders.NSSCALER_VERSION}/nsscalers/any", json={},
                      headers={"Content-Type": "application/merge-patch+json"}, timeout=10).status_code == 403
    assert "forbidden" not in ksm.log.read_text().lower(), ksm.log.read_text()[-3000:]


def test_every_freed_figure_has_its_series_with_the_same_value(api, run_job, prefix, ksm):
    """The freed block of tests/integration/test_freed.py (whose figures are written out by hand there), as
    kube-state-metrics exports it with the shipped config alone."""
    created = builders.mixed_requests(prefix)
    for obj in created:
        api.create(obj)
    name = f"{prefix}freed"
    try:
        api.create(builders.nsscaler(name, prefix, ["v1"]))
        assert run_job().exit_code == 0
        obj = api.get("NSScaler", name)
        want = expected_samples(obj)
        wait_until(lambda: ksm.of(name) == want, timeout=90, what=f"the metrics of {name}")
    finally:
        api.delete("RuntimeClass", created[3]["metadata"]["name"])
    plain = frozenset(mc.KSM_LABELS.items())
    got = ksm.of(name)

    def resource(metric: str, name: str) -> float:
        return got[f"nsscaler_policy_freed_{metric}", plain | {("resource", name)}]

    assert resource("requests", "cpu") == 4.25 and resource("limits", "cpu") == 0
    assert resource("requests", "memory") == 2928 * 2**20 and resource("limits", "memory") == 2 * 2**30
    assert resource("requests", "nvidia.com/gpu") == 1 and got["nsscaler_policy_freed_gpus", plain] == 1
    assert got["nsscaler_policy_freed_pods", plain] == 10
    assert got["nsscaler_policy_freed_pods_without_requests", plain] == 2
    assert got["nsscaler_policy_freed_workloads", plain] == 5
    assert got["nsscaler_policy_freed_unknown_workloads", plain] == 0
    figures = {k for k, v in obj["status"]["freed"].items() if not isinstance(v, (dict, list))}
    assert {mc.freed_metrics()[k] for k in figures} <= {n for n, _ in got}
    _dashboard_and_docs_queries_evaluate_over(ksm.scrape(), policy=name, status=obj["status"])


#: Prometheus' own labels on a scrape of kube-state-metrics (as in test_alerts.py)
SCRAPE = {"job": "kube-state-metrics", "instance": "10.0.0.7:8080"}
#: the series are replayed unchanged for 30 days, one sample an hour, and evaluated at the end
HOURS = 720


def docs_queries() -> dict[str, str]:
    """The PromQL questions of the Monitoring page, by question."""
    page = (ROOT / "docs/operating/monitoring.md").read_text()
    table = page[page.index("## Questions, in PromQL"):]
    return {m[1]: m[2] for m in re.finditer(r"^\| ([^|]+\?) \| `(.+)` \|$", table, re.M)}


def _dashboard_and_docs_queries_evaluate_over(samples: list[Sample], *, policy: str, status: dict[str, Any]) -> None:
    """promtool evaluates every dashboard panel's queries and every query of the Monitoring page over what
    kube-state-metrics just exported for `policy`: each panel's query must return a series; the savings queries
    their value, worked out from the freed figures by hand (4.25 cores and 2928Mi each hour of 30 days)."""
    ours = [(n, dict(labels), v) for n, labels, v in samples
            if n.startswith("nsscaler_") and ("policy", policy) in labels]
    series = [{"series": n + "{" + ",".join(f'{k}="{v}"' for k, v in sorted({**SCRAPE, **labels}.items())) + "}",
               "values": f"{int(value) if value.is_integer() else value!r}x{HOURS}"} for n, labels, value in ours]
    panels = [p for p in json.loads(mc.DASHBOARD.read_text())["panels"]
              if p["type"] != "row" and not waker_panel(p)]  # the waker's: test_the_waker_panels_evaluate
    exprs = {f"{p['title']} ({t['refId']})": t["expr"].replace("$policy", ".*") for p in panels for t in p["targets"]}
    questions = docs_queries()
    # how many series each question of the Monitoring page returns in this state (a filter may rightly return none)
    answers = {"Which policies are failing, and why?": 0, "Which spec changes has no run acted on yet?": 0,
               "Which policies still have Pods running where they should not?": int(status["counts"]["podsLeft"] > 0),
               # nobody woke a namespace of this policy: the woken questions select nothing here
               "Which policies have namespaces woken by their people right now, and how many?": 0,
               "How much of what a policy would hold is woken?": 0}
    tests = [{"expr": f"count({expr}) or vector(0)", "eval_time": f"{HOURS}h",
              "exp_samples": [{"labels": "{}", "value": answers.get(name, 1)}]}
             for name, expr in {**exprs, **questions}.items()]
    core_hours = 4.25 * HOURS
    gib_hours = 2928 / 1024 * HOURS
    tests += [{"expr": questions["How many core-hours did the freezes free in the last 30 days?"],
               "eval_time": f"{HOURS}h", "exp_samples": [{"labels": f'{{policy="{policy}"}}', "value": core_hours}]},
              {"expr": questions["What did that save, at a price I set?"], "eval_time": f"{HOURS}h",
               "exp_samples": [{"labels": f'{{policy="{policy}"}}', "value": core_hours * 0.031 + gib_hours * 0.004}]}]
    promtool_passes(series, tests, interval="1h")
    assert len(exprs) >= 15 and len(questions) == 9 and len(series) > 20, (len(exprs), len(questions), len(series))


def waker_panel(panel: dict[str, Any]) -> bool:
    """A panel over the waker's own /metrics, not kube-state-metrics'."""
    return any("nsscaler_waker_" in t["expr"] for t in panel.get("targets", []))


def test_the_waker_panels_evaluate_over_the_waker_s_own_metrics() -> None:
    """promtool evaluates the waker's panels over what the waker's own code serves, scraped every minute for ten
    minutes while it woke a namespace each minute (ready after 4 s): each query returns its series."""
    metrics, scraped = WakerMetrics(), []
    for _minute in range(11):
        scraped.append(metrics.text())
        for _request in range(3):
            metrics.answered(503)
        metrics.woke("request")
        metrics.started_run()
        metrics.ready_after(4.0)
    values: dict[str, list[str]] = {}
    for text in scraped:
        for line in text.splitlines():
            if line.startswith("nsscaler_waker_"):  # the process' own figures change between scrapes
                name, value = line.rsplit(" ", 1)
                values.setdefault(name, []).append(value)
    series = [{"series": name if "{" in name else name + "{}", "values": " ".join(v)} for name, v in values.items()]
    panels = [p for p in json.loads(mc.DASHBOARD.read_text())["panels"] if waker_panel(p)]
    exprs = {t["expr"].replace("$__rate_interval", "5m"): t["legendFormat"] for p in panels for t in p["targets"]}
    expected = {"{{source}}": 3}  # request, click and person: every source is served from the start
    tests = [{"expr": f"count({expr})", "eval_time": "10m",
              "exp_samples": [{"labels": "{}", "value": expected.get(legend, 1)}]} for expr, legend in exprs.items()]
    tests.append({"expr": exprs_by_legend(exprs, "median"), "eval_time": "10m",
                  "exp_samples": [{"labels": "{}", "value": 2.5}]})  # every one in the bucket (0, 5]: interpolated
    promtool_passes(series, tests, interval="1m")
    assert len(panels) == 2 and len(exprs) == 4


def exprs_by_legend(exprs: dict[str, str], legend: str) -> str:
    return next(expr for expr, shown in exprs.items() if shown == legend)


def promtool_passes(series: list[dict[str, str]], tests: list[dict[str, Any]], *, interval: str) -> None:
    """`promtool test rules` of `tests` over `series` sampled every `interval` passes."""
    with tempfile.TemporaryDirectory() as tmp:
        test_file = Path(tmp) / "queries_test.yaml"
        test_file.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": interval, "tests": [
            {"interval": interval, "input_series": series, "promql_expr_test": tests}]}, sort_keys=False))
        result = subprocess.run([str(built_tool("promtool")), "test", "rules", str(test_file)],
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, f"{result.stdout}{result.stderr}\n--- {test_file}:\n{test_file.read_text()}"
