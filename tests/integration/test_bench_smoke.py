"""A tiny run of the benchmark code (N=20, one repetition, a family of 5 in 20, memory at 30), so `make bench`
cannot rot unnoticed, and the bench's own rules checked without a cluster. Nothing here needs kube-downscaler:
without `--peer` nothing is compared with it."""

from __future__ import annotations

import json
import re

import pytest

from bench import apimetrics, markdown, peer, runs, summary, verify
from bench.__main__ import main


def test_benchmark_smoke(tmp_path, capsys):
    """Starts its own control plane without the Deployment controller, as `make bench` does."""
    assert main(["--sizes", "20", "--reps", "1", "--family", "5", "--family-cluster", "20", "--memory-sizes", "30",
                 "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "smoke.json").read_text())
    rows = {(r["scenario"], r["tool"]): r for r in result["rows"]}
    assert rows[("first run", "nsscaler")]["requests"]["patch"] >= 80  # 80 % of 100 Deployments, plus status
    assert rows[("first run", "limit")]["total_requests"] == 80
    assert rows[("steady state", "nsscaler")]["requests"].get("patch") == 1  # the status write only
    assert rows[("first run", "nsscaler")]["rss_mb"] > 10
    steady = rows[("steady state", "nsscaler")]
    assert steady["client_cpu_s"] > 0 and set(steady["stages"]) >= {"start", "read", "decide", "write", "report"}
    assert steady["imports"]["pydantic"] > 0 and steady["imports"]["job.cluster"] > 0  # -X importtime, by package
    record = rows[("first run", "nsscaler")]["record"]
    assert 0 < record["freed_bytes"] < record["record_bytes"]  # the freed-capacity record is part of the PATCH
    out = capsys.readouterr().out
    assert "| 20 | first run | nsscaler |" in out

    # The API server's own counts agree with what the tools counted: writes exactly; LISTs of APIs the
    # server does not serve (KEDA's) are answered 404 uncounted, so its LIST count may be lower.
    for key in (("first run", "nsscaler"), ("steady state", "nsscaler"), ("first run", "limit")):
        own, server = rows[key]["requests"], rows[key]["server_requests"]
        lease = rows[key].get("lease_requests") or {}  # the server's counts leave leases out
        # `version` (GET /version) reads no resource: the server's request metrics leave it out
        besides = {v: n - lease.get(v, 0) for v, n in own.items() if n > lease.get(v, 0)}
        assert {v: n for v, n in besides.items() if v not in ("list", "version")} == \
            {v: n for v, n in server.items() if v != "list"}
        assert server.get("list", 0) <= own.get("list", 0)
    assert rows[("steady state", "nsscaler")]["server_total_bytes"] > 0  # its LISTs' bodies

    family = {(r["scenario"], r["tool"]): r for r in result["family"]["rows"]}
    assert family[("first run", "nsscaler")]["server_requests"]["patch"] >= 20  # 80 % of 25 Deployments
    # 125 Deployments in 1 page, and the StatefulSets (none): the kinds the family's policy freezes
    assert family[("cluster-wide LIST", "reference")]["server_requests_by_resource"] == {
        "list/deployments": 1, "list/statefulsets": 1}
    assert_measured_in_this_run(result, family)
    assert "kube-downscaler was not run in this run" in out and "reference" not in out.split("## All-family")[0]
    machine = result["machine"]
    assert re.fullmatch(r"[0-9a-f]{40}", machine["commit"]) and machine["cpus"] >= 1
    assert re.fullmatch(r"v1\.[0-9]+\.[0-9]+", machine["server_version"]), machine  # as the server answered
    assert len(machine["load_before"]) == len(machine["load_after"]) == 3
    assert f"against kube-apiserver {machine['server_version']}" in out
    # what the tool wrote is what it renders from the JSON, and `bench.verify` finds nothing to say about it
    assert (tmp_path / "smoke.md").read_text() == markdown.render(result)
    assert verify.problems(tmp_path) == []


def assert_measured_in_this_run(result, family):
    """The memory slope and the family's verdicts come from this run's own figures, recomputed here."""
    assert [p["n"] for p in result["memory"]["points"]] == [20, 30]
    assert [p["rss_mb"] > 10 for p in result["memory"]["points"]] == [True, True]  # two processes measured
    assert result["memory"]["mb_per_1000_workloads"] == pytest.approx(summary.slope(
        [(p["workloads"] / 1000, p["rss_mb"]) for p in result["memory"]["points"]]))
    # N=100, 1000 and 10000 are not measured here: their targets say so, never met or missed from a stored figure;
    # the family's two are decided by the figures measured in this run: the steady state's bytes over the LIST's
    # (both measured: each read a body), its server CPU over the LIST's ("not measured" only when the LIST took
    # less than one CPU tick of the server)
    steady, listing = family[("steady state", "nsscaler")], family[("cluster-wide LIST", "reference")]
    assert steady["server_total_bytes"] > 0 and listing["server_total_bytes"] > 0
    by_bytes = steady["server_total_bytes"] / listing["server_total_bytes"]
    by_cpu = steady["server_cpu_s"] / listing["server_cpu_s"] if listing["server_cpu_s"] else None
    verdicts = ["not measured" if r is None else ("met" if r <= summary.FAMILY_RATIO else "missed")
                for r in (by_cpu, by_bytes)]
    assert [t["verdict"] for t in result["targets"]] == ["not measured"] * 7 + verdicts + ["not measured"] * 2


def test_peer_command_keeps_up_what_the_policy_keeps_up():
    """kube-downscaler splits --exclude-namespaces on commas and `fullmatch`es each regex (scaler.py): the
    bench's value must exclude every namespace outside the family and exactly the allowed ones in it."""
    value = peer.exclude_pattern("bench-", ["bench-n00000", "bench-n00005"])
    patterns = [re.compile(p) for p in value.split(",")]
    excluded = {ns for ns in ("default", "kube-system", "family-n00000", "bench-n00000", "bench-n00005",
                              "bench-n00001", "bench-n000050", "xbench-n00001")
                if any(p.fullmatch(ns) for p in patterns)}
    assert excluded == {"default", "kube-system", "family-n00000", "bench-n00000", "bench-n00005", "xbench-n00001"}
    assert peer.requirements('[tool.poetry.dependencies]\npython = ">=3.10"\nnew-pykube = "*"\nmypy = "^1.13.0"\n') \
        == ["new-pykube", "mypy>=1.13.0"]


def test_api_server_counts_leave_out_what_no_tool_sends():
    before = apimetrics.parse("")
    after = apimetrics.parse("\n".join([
        'apiserver_request_total{code="200",component="apiserver",resource="deployments",verb="LIST"} 3',
        'apiserver_request_total{code="200",component="apiserver",resource="deployments",verb="PATCH"} 2',
        'apiserver_request_total{code="200",component="apiserver",resource="leases",verb="PUT"} 7',
        'apiserver_request_total{code="200",component="apiserver",resource="pods",verb="WATCH"} 1',
        'apiserver_request_total{code="200",component="",resource="",subresource="/metrics",verb="GET"} 9',
        'apiserver_response_sizes_sum{component="apiserver",resource="deployments",verb="LIST"} 1.5e+06',
    ]))
    counted = apimetrics.delta(before, after)
    assert counted["server_requests"] == {"list": 3, "patch": 2}
    assert counted["server_bytes"] == {"list/deployments": 1_500_000}
    assert summary.slope([(1, 50.0), (2, 52.0), (3, 54.0)]) == 2.0


def test_import_times_are_summed_by_package():
    text = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:       100 |        100 |     pydantic_core._pydantic_core",
        "import time:       300 |        400 |   pydantic_core",
        "import time:        50 |         50 |     job.model.settings",
        "import time:        25 |         75 |   job.model",
        "some log line the run wrote",
    ])
    assert runs.by_package(text) == {"pydantic_core": 0.0004, "job.model": 0.000075}
