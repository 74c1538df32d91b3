"""The dry-run view says why each namespace is held or kept, then what would change."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json

from job.decide.actions import ActionResult
from job.decide.outcome import PolicyOutcome
from job.decide.plan import make_plan
from job.model.workloads import Namespace
from job.report import as_json, plan_table, write_json
from job.run import RunReport
from tests.unit.factories import policy, settings, workload

NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)


def _report(policies, namespaces, workloads) -> RunReport:
    plan = make_plan(policies, namespaces=namespaces, workloads=workloads, settings=settings(), now=NOW)
    assert plan.selection is not None
    outcomes = [PolicyOutcome(name=p.name, generation=1, held=plan.policies[p.name].held,
                              active=plan.policies[p.name].active,
                              kept_running_by=plan.policies[p.name].kept_running_by,
                              selection=plan.selection.policies[p.name]) for p in policies]
    return RunReport(started=NOW, dry_run=True, policies=outcomes,
                     results=[ActionResult(a, "dry-run") for a in plan.actions])


def test_dry_run_table_gives_the_reason_per_namespace():
    namespaces = [Namespace(f"shop-v{i}", created=dt.datetime(2026, 11, i, tzinfo=dt.UTC)) for i in (1, 2, 3)]
    report = _report([policy("p", "shop-", ["v1"], keep_recent=1),
                      policy("q", "shop-", hold_windows=["Sat-Sun 00:00-24:00"])],
                     namespaces, [workload("shop-v2", size=2)])
    lines = plan_table(report).splitlines()
    assert lines[0].split() == ["NAMESPACE", "POLICY", "WHY"]
    assert lines[1].split(None, 2) == ["shop-v1", "p", "kept: listed in active_namespace_suffixes"]
    assert lines[2].split(None, 2) == ["shop-v2", "p", "held by p: not listed in active_namespace_suffixes and "
                                                        "not the most recently active"]
    assert lines[3].split(None, 2) == ["shop-v3", "p", "kept: the most recently active (last change "
                                                        "2026-11-03T00:00Z by creation)"]
    assert lines[4].split(None, 2) == ["*", "q", "not held: outside hold_windows (UTC); next window opens "
                                                 "2026-12-05T00:00Z"]
    assert lines[6].split()[:5] == ["NAMESPACE", "KIND", "NAME", "REPLICAS", "ACTION"]
    assert lines[7].split()[:6] == ["shop-v2", "Deployment", "web", "2", "->", "0"]
    policies = {p["name"]: p for p in as_json(report)["policies"]}
    assert policies["q"]["holding"] is False
    assert policies["q"]["nextChange"] == "2026-12-05T00:00:00+00:00"
    assert policies["p"]["recent"] == {"shop-v3": {"lastActivity": "2026-11-03T00:00:00+00:00", "by": "creation"}}


def test_the_streamed_json_report_is_the_whole_report():
    """`--output json` writes one action at a time; what it writes parses to exactly `as_json`."""
    namespaces = [Namespace(f"shop-v{i}") for i in (1, 2, 3)]
    found = [workload("shop-v2", size=2), workload("shop-v3", name="db", size=1), workload("shop-v1", original="4")]
    for report in (_report([policy("p", "shop-", ["v1"])], namespaces, found),
                   _report([policy("p", "shop-", ["v1", "v2", "v3"])], namespaces, [])):
        out = io.StringIO()
        write_json(report, out)
        assert json.loads(out.getvalue()) == as_json(report)
    assert len(json.loads(out.getvalue())["actions"]) == 0


def test_the_dry_run_shows_what_each_freeze_would_free():
    namespaces = [Namespace(f"shop-v{i}") for i in (1, 2)]
    gpu = dataclasses.replace(workload("shop-v2", "train", 3),
                              footprint='{"pods":1,"requests":{"cpu":"2","memory":"8Gi","nvidia.com/gpu":"1"}}')
    old = workload("shop-v2", "api", 2)  # read from metadata only in a first glance: its footprint is not known
    report = _report([policy("p", "shop-", ["v1"])], namespaces, [gpu, old])
    lines = plan_table(report).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("NAMESPACE") and "FREES" in line)
    rows = {line.split()[2]: line for line in lines[header + 1:]}
    assert rows["train"].split()[0:7] == ["shop-v2", "Deployment", "train", "3", "->", "0", "freeze"]
    assert "3 Pods, 6 CPU, 24Gi memory, 3 nvidia.com/gpu" in rows["train"]
    assert "   unknown   " in rows["api"]
    actions = {a["name"]: a for a in as_json(report)["actions"]}
    assert actions["train"]["frees"] == {"pods": 3, "podsWithoutRequests": 0, "limits": {},
                                         "requests": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "3"}}
    assert actions["api"]["frees"] == "unknown"
