"""API Priority and Fairness: the shipped FlowSchema puts the nsscaler ServiceAccount's requests in a
priority level of their own, so a run completes while another user's requests are being refused with 429.

The API server is the real one with APF on (its default). The other user is a ServiceAccount of its own whose
LISTs a FlowSchema made by the test sends to a deliberately tiny level (1 share, nothing to borrow, `Reject`):
a few threads saturate it for sure, on any machine. nsscaler runs as its own ServiceAccount (the shipped one,
with its token, as in a Pod) in a process of its own meanwhile. What served whom is read from the server's own
`apiserver_flowcontrol_*` counters, not inferred.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from tests.conftest import ROOT, apply_manifest, kubectl, make_family
from tests.integration.test_metrics import Sample, parse

OVERLAY = ROOT / "kustomize" / "overlays" / "prod"
NAMESPACE, ACCOUNT = "nsscaler", "nsscaler"
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
#: bounds of the load generator: it stops when the run is over, or at these limits, whichever comes first
LOAD_THREADS, LOAD_MAX_REQUESTS, LOAD_MAX_SECONDS = 8, 50_000, 240.0


def rendered(overlay: Path = OVERLAY) -> list[dict[str, Any]]:
    out = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def flowcontrol_counters(plane: controlplane.ControlPlane) -> dict[tuple[str, str, str], float]:
    """(metric, flow_schema, priority_level) -> value, summed over other labels, for the APF request counters."""
    wanted = ("apiserver_flowcontrol_dispatched_requests_total", "apiserver_flowcontrol_rejected_requests_total")
    resp = plane.session().get(f"{plane.server}/metrics", timeout=30)
    resp.raise_for_status()
    totals: dict[tuple[str, str, str], float] = {}
    samples: list[Sample] = parse(resp.text)
    for name, labels, value in samples:
        if name in wanted:
            found = dict(labels)
            key = (name, found.get("flow_schema", ""), found.get("priority_level", ""))
            totals[key] = totals.get(key, 0.0) + value
    return totals


def delta(before: dict[tuple[str, str, str], float], after: dict[tuple[str, str, str], float], metric: str,
          *, flow_schema: str | None = None, priority_level: str | None = None) -> int:
    keys = {k for k in (*before, *after) if k[0] == metric and flow_schema in (None, k[1])
            and priority_level in (None, k[2])}
    return int(sum(after.get(k, 0) - before.get(k, 0) for k in keys))


@dataclass
class Load:
    """Threads that LIST ConfigMaps as the other user until stopped or bounded; counts what came back."""

    url: str
    token: str
    ca: str
    statuses: Counter[int] = field(default_factory=Counter)
    retry_after: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    halt: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def _worker(self) -> None:
        session = requests.Session()
        session.trust_env = False
        session.verify = self.ca
        session.headers["Authorization"] = f"Bearer {self.token}"
        deadline = time.monotonic() + LOAD_MAX_SECONDS
        while not self.halt.is_set() and time.monotonic() < deadline and self.total() < LOAD_MAX_REQUESTS:
            try:
                resp = session.get(self.url, timeout=30)
            except requests.RequestException:
                code, after = 0, None
            else:
                code, after = resp.status_code, resp.headers.get("Retry-After")
            with self.lock:
                self.statuses[code] += 1
                if code == 429:
                    self.retry_after[str(after)] += 1

    def total(self) -> int:
        with self.lock:
            return sum(self.statuses.values())

    def count(self, code: int) -> int:
        with self.lock:
            return self.statuses[code]

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._worker, daemon=True) for _ in range(LOAD_THREADS)]
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.halt.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in self.threads), "a load thread did not stop"


def _flowcontrol(api: AdminApi, method: str, plural: str, name: str = "", body: dict[str, Any] | None = None) -> Any:
    url = f"{api.plane.server}{FLOWCONTROL}/{plural}" + (f"/{name}" if name else "")
    resp = api.http.request(method, url, json=body, timeout=30)
    if method == "DELETE" and resp.status_code == 404:
        return None
    if resp.status_code >= 300:
        raise AssertionError(f"{method} {plural}/{name}: {resp.status_code} {resp.text}")
    return resp.json()


@pytest.fixture
def other_user(control_plane: controlplane.ControlPlane, api: AdminApi, prefix: str) -> Iterator[Load]:
    """Another ServiceAccount, allowed to LIST ConfigMaps in its namespace (200 of 1 KiB: a LIST holds its seats a
    while), whose every request a FlowSchema of the test sends to a level of its own: 1 share of the server's
    concurrency, nothing lendable or borrowed, and `Reject` instead of a queue: beyond its few seats, 429."""
    ns, level = prefix + "load", f"{prefix}tiny"
    api.create(builders.namespace(ns))
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "loader", "namespace": ns}})
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    for plural, body in (
        ("roles", {"kind": "Role", "metadata": {"name": "loader"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
        ("rolebindings", {"kind": "RoleBinding", "metadata": {"name": "loader"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "loader"},
                          "subjects": [{"kind": "ServiceAccount", "name": "loader", "namespace": ns}]})):
        resp = api.http.post(f"{control_plane.server}{rbac}/namespaces/{ns}/{plural}",
                             json={"apiVersion": "rbac.authorization.k8s.io/v1", **body}, timeout=30)
        assert resp.status_code == 201, resp.text
    for i in range(200):
        resp = api.http.post(f"{control_plane.server}/api/v1/namespaces/{ns}/configmaps", timeout=30, json={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i:03d}"}, "data": {"x": "y" * 1024}})
        assert resp.status_code == 201, resp.text
    _flowcontrol(api, "POST", "prioritylevelconfigurations", body={
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": level},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                 "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}})
    _flowcontrol(api, "POST", "flowschemas", body={
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": level},
        "spec": {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 999,
                 "rules": [{"subjects": [{"kind": "ServiceAccount",
                                          "serviceAccount": {"name": "loader", "namespace": ns}}],
                            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                               "namespaces": ["*"], "clusterScope": True}]}]}})
    load = Load(url=f"{control_plane.server}/api/v1/namespaces/{ns}/configmaps",
                token=control_plane.service_account_token(ns, "loader"), ca=str(control_plane.ca_cert))
    try:
        yield load
    finally:
        load.stop()
        _flowcontrol(api, "DELETE", "flowschemas", level)
        _flowcontrol(api, "DELETE", "prioritylevelconfigurations", level)


@pytest.fixture
def installed(control_plane: controlplane.ControlPlane, api: AdminApi, crd: None) -> Path:
    """The prod overlay applied as a user does; returns a kubeconfig with the nsscaler ServiceAccount's token."""
    apply_manifest(control_plane.admin_kubeconfig, OVERLAY, kustomize=True)
    wait_until(lambda: api.exists("ServiceAccount", ACCOUNT, NAMESPACE), what="the nsscaler ServiceAccount")
    path = control_plane.state_dir / "nsscaler-sa-fairness.kubeconfig"
    return control_plane.service_account_kubeconfig(path, NAMESPACE, ACCOUNT)


def run_nsscaler(kubeconfig: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """One run in a process of its own, with the ServiceAccount's token and the CronJob's JSON logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSSCALER_") and k != "KUBECONFIG"}
    env |= {"NSSCALER_KUBECONFIG": str(kubeconfig), "NSSCALER_OWN_NAMESPACE": NAMESPACE,
            "NSSCALER_LOG_FORMAT": "json", "NSSCALER_OUTPUT": "json"}
    started = time.monotonic()
    result = subprocess.run([str(Path(sys.executable).parent / "nsscaler")], env=env, capture_output=True,
                            text=True, timeout=180, check=False)
    return result, time.monotonic() - started


def test_shipped_flow_schema_matches_the_shipped_service_account():
    """Cluster-scoped objects carry no namespace, and the FlowSchema names the ServiceAccount the CronJob uses."""
    docs = rendered()
    (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    (schema,) = [d for d in docs if d["kind"] == "FlowSchema"]
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    for doc in docs:
        if doc["kind"] in ("FlowSchema", "PriorityLevelConfiguration", "PriorityClass"):
            assert "namespace" not in doc["metadata"], doc["metadata"]
    subjects = [s for rule in schema["spec"]["rules"] for s in rule["subjects"]]
    assert subjects == [{"kind": "ServiceAccount", "serviceAccount": {
        "name": account["metadata"]["name"], "namespace": account["metadata"]["namespace"]}}]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert cron["metadata"]["namespace"] == account["metadata"]["namespace"]
    (level,) = [d for d in docs if d["kind"] == "PriorityLevelConfiguration"]
    assert schema["spec"]["priorityLevelConfiguration"]["name"] == level["metadata"]["name"]


def test_the_shipped_flow_schema_is_live_and_catches_the_service_account(control_plane, api, installed):
    schema = _flowcontrol(api, "GET", "flowschemas", "nsscaler")
    dangling = [c for c in schema.get("status", {}).get("conditions", []) if c["type"] == "Dangling"]
    assert dangling and dangling[0]["status"] == "False", schema.get("status")
    # The server says which schema and level served a request, in two response headers (APF's own).
    token = yaml.safe_load(installed.read_text())["users"][0]["user"]["token"]
    http = requests.Session()
    http.trust_env, http.verify = False, str(control_plane.ca_cert)
    resp = http.get(f"{control_plane.server}/api/v1/namespaces?limit=1", timeout=30,
                    headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-Kubernetes-PF-FlowSchema-UID"] == schema["metadata"]["uid"]
    level = _flowcontrol(api, "GET", "prioritylevelconfigurations", "nsscaler")
    assert resp.headers["X-Kubernetes-PF-PriorityLevel-UID"] == level["metadata"]["uid"]


def test_a_run_completes_in_its_own_level_while_another_user_gets_429(control_plane, api, installed, other_user,
                                                                       prefix):
    make_family(api, prefix, {"v1": {"d-web": 2, "s-db": 1}, "v2": {"d-api": 3}, "v3": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v3"]))
    other_user.start()
    # Saturated before nsscaler starts: the other user has been refused at least once.
    wait_until(lambda: other_user.count(429) > 0, timeout=60, what="the other user's first 429")
    before, refused_before = flowcontrol_counters(control_plane), other_user.count(429)
    result, seconds = run_nsscaler(installed)
    refused_during = other_user.count(429) - refused_before
    after = flowcontrol_counters(control_plane)
    other_user.stop()

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    sent = sum(report["summary"]["requests"].values())
    assert report["summary"]["frozen"] == 3, report["summary"]
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0
    assert api.replicas("StatefulSet", prefix + "v1", "s-db") == 0
    assert api.replicas("Deployment", prefix + "v2", "d-api") == 0
    assert api.replicas("Deployment", prefix + "v3", "d-web") == 1
    retries = [json.loads(line) for line in result.stderr.splitlines() if '"retry"' in line]

    served = delta(before, after, "apiserver_flowcontrol_dispatched_requests_total", flow_schema="nsscaler")
    served_level = delta(before, after, "apiserver_flowcontrol_dispatched_requests_total",
                         flow_schema="nsscaler", priority_level="nsscaler")
    rejected = delta(before, after, "apiserver_flowcontrol_rejected_requests_total", flow_schema="nsscaler")
    tiny = f"{prefix}tiny"
    other_served = delta(before, after, "apiserver_flowcontrol_dispatched_requests_total", flow_schema=tiny)
    other_rejected = delta(before, after, "apiserver_flowcontrol_rejected_requests_total", flow_schema=tiny,
                           priority_level=tiny)
    figure = (
        f"run {seconds:.2f}s wall ({report['summary'].get('seconds')}s by its report), {sent} requests "
        f"{report['summary']['requests']}; flow_schema=nsscaler: {served} dispatched (priority_level=nsscaler: "
        f"{served_level}), {rejected} rejected, {len(retries)} retries; other user during the run: "
        f"{other_served} dispatched, {other_rejected} rejected by the server, {refused_during} 429s seen; "
        f"other user in all: {dict(other_user.statuses)}, Retry-After {dict(other_user.retry_after)}")
    print(f"APF figures: {figure}")  # shown by `pytest -rP`
    # Every request of the run went through the shipped schema into the shipped level, and none was refused.
    assert served == served_level == sent, figure
    assert rejected == 0 and not retries, figure
    # Meanwhile the other user's level was saturated: the server refused it, and it saw 429s.
    assert other_rejected > 0 and refused_during > 0, figure



def test_the_cronjobs_pods_get_the_shipped_priority(control_plane, api, installed):
    """The Priority admission plugin resolves the class: a Job made from the CronJob has a Pod of priority 1000000
    that may preempt (on this control plane without a node it stays Pending; tests/node shows the preemption)."""
    (klass,) = [d for d in rendered() if d["kind"] == "PriorityClass"]
    name = f"priority-{time.monotonic_ns() % 10**9}"
    subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "-n", NAMESPACE, "create", "job",
                    "--from=cronjob/nsscaler", name], check=True, capture_output=True)
    try:
        wait_until(lambda: api.list("Pod", NAMESPACE, labelSelector=f"job-name={name}"), timeout=60,
                   what="the Job's Pod")
        (pod,) = api.list("Pod", NAMESPACE, labelSelector=f"job-name={name}")
    finally:
        api.http.delete(api.url("Job", NAMESPACE, name), params={"propagationPolicy": "Background"}, timeout=30)
    assert pod["spec"]["priorityClassName"] == klass["metadata"]["name"] == "nsscaler"
    assert pod["spec"]["priority"] == klass["value"] == 1_000_000
    assert pod["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert not api.http.get(f"{control_plane.server}/apis/scheduling.k8s.io/v1/priorityclasses/nsscaler",
                            timeout=30).json().get("globalDefault")
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "50m", "memory": "64Mi"}


def test_the_opt_out_overlay_has_no_priority_class():
    docs = rendered(ROOT / "kustomize" / "overlays" / "prod-without-priority-class")
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    assert not [d for d in docs if d["kind"] == "PriorityClass"]
    assert "priorityClassName" not in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert {d["kind"] for d in docs} == {d["kind"] for d in rendered()} - {"PriorityClass"}
