"""Kinds from discovery, policies naming kinds, Job states, and the autoscaler decisions, as tables."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from job.cluster.access import Access, required_access
from job.decide.actions import Verb
from job.decide.autoscalers import hpa_problems, hpa_rechecks, plan_scaled_objects
from job.decide.plan import make_plan
from job.model import policy as policy_api
from job.model.autoscalers import scaled_object
from job.model.custom import resolve
from job.model.kinds import (
    BUILTIN,
    BUILTIN_GROUPS,
    BUILTIN_NAMES,
    CLAIMS_KEPT,
    FOLLOWED,
    FREEZES_CONTROLLED,
    KIND_PATTERN,
    Kind,
)
from job.model.kinds.builtin import BUILTIN_DATA
from job.model.kinds.registry import BUILTIN_ROWS
from job.model.kinds.rows import parse_builtin_rows, parse_rows
from job.model.marks import ANNOTATION_KEDA_PAUSED, ANNOTATION_ORIGINAL_PAUSED, ANNOTATION_SCALED_BY, LABEL_SCALED
from job.model.settings import Settings
from job.model.workloads import from_api
from job.plugin.workloads import BUILTIN_SERVED
from tests.unit.factories import DEFAULT_KINDS, namespaces, policy, settings, workload

ROOT = Path(__file__).resolve().parents[2]


def crd(kind: str, group: str, *, path: str | None = ".spec.replicas", scope: str = "Namespaced",
        plural: str = "things") -> dict[str, Any]:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True}
    if path is not None:
        version["subresources"] = {"scale": {"specReplicasPath": path, "statusReplicasPath": ".status.replicas"}}
    return {"spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural},
                     "versions": [{"name": "v0", "served": False, "storage": False}, version]}}


@pytest.mark.parametrize(("crds", "kind", "path", "problem"), [
    pytest.param([crd("Pool", "x.io", path=".spec.workers.count")], "Pool.x.io", ("spec", "workers", "count"), None,
                 id="nested-replica-path"),
    pytest.param([crd("Pool", "x.io")], "Pool.x.io", ("spec", "replicas"), None, id="spec-replicas"),
    pytest.param([crd("Pool", "x.io", path=None)], "Pool.x.io", None, "has no /scale subresource", id="no-scale"),
    pytest.param([crd("Pool", "x.io", scope="Cluster")], "Pool.x.io", None, "cluster-scoped", id="cluster-scoped"),
    pytest.param([crd("Pool", "y.io")], "Pool.x.io", None, "not served by this cluster", id="other-group"),
    pytest.param([], "Rollout.argoproj.io", None, "not served by this cluster", id="absent"),
    pytest.param([], "Deployment.apps", None, "is built in: write it as Deployment", id="built-in-with-group"),
])
def test_custom_kinds_resolve_from_their_crd(crds, kind, path, problem):
    found = resolve([Kind(kind), Kind.DEPLOYMENT], crds)
    assert Kind.DEPLOYMENT in found.handlers and Kind.JOB in found.handlers
    if problem:
        assert kind in found.unknown[Kind(kind)] and problem in found.unknown[Kind(kind)]
        assert Kind(kind) not in found.handlers
    else:
        handler = found.handlers[Kind(kind)]
        assert (handler.group, handler.version, handler.plural, getattr(handler, "path", None)) == (
            "x.io", "v1", "things", path)


@pytest.mark.parametrize(("kinds", "ok"), [
    pytest.param(["Job", "ReplicaSet", "ReplicationController", "CronJob"], True, id="built-ins"),
    pytest.param(["Rollout.argoproj.io"], True, id="kind-dot-group"),
    pytest.param(["Pod"], False, id="bare-unknown-kind"),
    pytest.param(["deployment"], False, id="lower-case"),
    pytest.param(["Rollout.Argoproj.io"], False, id="upper-case-group"),
])
def test_spec_kinds_accepts_built_ins_and_kind_dot_group(kinds, ok):
    parsed = policy_api.parse({"metadata": {"name": "p"}, "spec": {"scope_prefix": "a-", "kinds": kinds}},
                              default_kinds=DEFAULT_KINDS)
    assert isinstance(parsed, policy_api.Policy) is ok, parsed
    if not ok:
        assert "spec.kinds" in parsed.message and "<Kind>.<group>" in parsed.message  # type: ignore[union-attr]


def test_the_crd_accepts_exactly_what_the_job_accepts():
    crd_doc = yaml.safe_load((ROOT / "kustomize/base/crd.yaml").read_text())
    kinds = crd_doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["kinds"]
    assert kinds["items"]["pattern"] == KIND_PATTERN, (
        "kustomize/base/crd.yaml: set spec.kinds.items.pattern to job.model.kinds.KIND_PATTERN")
    assert all(name in kinds["description"] for name in BUILTIN_NAMES) and "<Kind>.<group>" in kinds["description"]
    assert set(BUILTIN_NAMES) == set(BUILTIN), (
        "job/model/kinds/kind.py: BUILTIN_NAMES must name exactly the kinds of BUILTIN (job/model/kinds/registry.py)")
    # restore_order names kinds too, so it accepts what spec.kinds does
    order = crd_doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "restore_order"]
    assert order["items"]["pattern"] == KIND_PATTERN, (
        "kustomize/base/crd.yaml: set spec.restore_order.items.pattern to job.model.kinds.KIND_PATTERN")


def _granted(rules: list[dict[str, Any]], access: Access) -> bool:
    return any(access.group in r.get("apiGroups", []) and access.resource in r.get("resources", [])
               and access.verb in r.get("verbs", []) for r in rules)


def test_the_shipped_cluster_role_grants_what_a_run_needs_for_every_built_in_kind():
    """The registry decides what a run asks for (`required_access`); the ClusterRole must grant it all."""
    role = next(d for d in yaml.safe_load_all((ROOT / "kustomize/base/rbac.yaml").read_text())
                if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "nsscaler-base")
    missing = [str(a) for a in required_access(settings(dry_run=False, events=True)) if not _granted(role["rules"], a)]
    assert not missing, f"kustomize/base/rbac.yaml: grant {', '.join(missing)} in the ClusterRole nsscaler-base"


def test_no_shipped_cluster_role_reads_configmaps_or_secrets():
    """Other teams' configuration stays theirs: the ICS calendars policies name are read through a Role in
    nsscaler's own namespace (kustomize/base/calendar-rbac.yaml), never through a ClusterRole."""
    granted = [f"{path.relative_to(ROOT)}: {d['metadata']['name']} {r['verbs']} {r['resources']}"
               for path in sorted((ROOT / "kustomize").rglob("*.yaml"))
               for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "ClusterRole"
               for r in d.get("rules") or [] if {"configmaps", "secrets", "*"} & set(r.get("resources", []))
               and "" in r.get("apiGroups", [])]
    assert not granted, f"grant ConfigMaps in nsscaler's namespace with a Role, not cluster-wide: {granted}"


def test_the_docs_kind_table_names_every_built_in_kind():
    page = (ROOT / "docs/operating/behaviour.md").read_text()
    table = page.split("## What gets frozen", 1)[1].split("\n\n", 2)[1]
    named = {name for row in table.splitlines()[2:] for name in re.findall(r"`([^`]+)`", row.split("|")[1])}
    missing = sorted(set(BUILTIN_NAMES) - named)
    assert not missing, f"docs/operating/behaviour.md: add {missing} to the table under \"What gets frozen\""


def test_a_policy_naming_an_unknown_kind_is_invalid_and_the_others_stay():
    good, bad = policy("good", "a-"), policy("bad", "a-", kinds=["Deployment", "Rollout.argoproj.io"])
    out = policy_api.without_unknown_kinds([good, bad], resolve([Kind("Rollout.argoproj.io")], []).unknown)
    assert out[0] is good
    assert isinstance(out[1], policy_api.InvalidPolicy) and "Rollout.argoproj.io" in out[1].message


@pytest.mark.parametrize(("status", "spec", "running"), [
    pytest.param({}, {}, True, id="running"),
    pytest.param({}, {"suspend": True}, False, id="suspended"),
    pytest.param({"conditions": [{"type": "Complete", "status": "True"}]}, {}, False, id="complete"),
    pytest.param({"conditions": [{"type": "Failed", "status": "True"}]}, {}, False, id="failed"),
    pytest.param({"conditions": [{"type": "Failed", "status": "False"}]}, {}, True, id="not-failed"),
])
def test_only_a_running_job_counts_as_running(status, spec, running):
    job = {"metadata": {"namespace": "n", "name": "j"}, "spec": spec, "status": status}
    assert from_api(Kind.JOB, job).size == int(running)


def test_a_custom_kind_named_job_is_read_as_its_own_kind_never_as_a_batch_job():
    """Its handler, not its short name, says where its Pods come from: one per replica, whatever a field
    named `parallelism` says, and its size is its replica count even with `suspend` set."""
    custom = resolve([Kind("Job.example.com")], [crd("Job", "example.com")]).handlers[Kind("Job.example.com")]
    template = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    obj = {"metadata": {"namespace": "n", "name": "j"},
           "spec": {"replicas": 3, "parallelism": 4, "suspend": True, "template": {"spec": template}}}
    w = from_api(custom, obj)
    assert (w.kind, w.size, w.footprint) == ("Job.example.com", 3, '{"pods":1,"requests":{"cpu":"1"}}')
    batch = from_api(Kind.JOB, {**obj, "spec": {**obj["spec"], "suspend": False}})
    assert (batch.size, batch.footprint) == (1, '{"pods":4,"requests":{"cpu":"4"}}')


def test_controller_owner_is_read_from_owner_references():
    rs = {"metadata": {"namespace": "n", "name": "web-1", "ownerReferences": [
        {"kind": "Other", "name": "x", "controller": False},
        {"kind": "Deployment", "name": "web", "controller": True}]},
        "spec": {"replicas": 2}}
    w = from_api(BUILTIN[Kind.REPLICASET], rs)
    assert (w.controller, w.controller_name, w.owner_key) == ("Deployment", "web", ("Deployment", "n", "web"))


def so(name: str, target: str, annotations: dict[str, str] | None = None, kind: str | None = None) -> Any:
    ref = {"name": target, **({"kind": kind} if kind else {})}
    return scaled_object({"metadata": {"namespace": "shop-v1", "name": name, "resourceVersion": "5",
                                       "annotations": annotations or {}}, "spec": {"scaleTargetRef": ref}})


FAMILY = namespaces("shop-v1", "shop-v2")


@pytest.mark.parametrize(("before", "record"), [
    pytest.param({}, "null", id="no-annotation-before"),
    pytest.param({ANNOTATION_KEDA_PAUSED: "2"}, '"2"', id="paused-at-2-before"),
])
def test_scaled_object_of_a_frozen_workload_is_paused_and_resumed_exactly(before, record):
    freeze = make_plan([policy("p", "shop-")], namespaces=FAMILY, workloads=[workload("shop-v1", "web", 3)],
                       settings=settings()).actions
    keda = plan_scaled_objects(freeze, [so("web-so", "web", before), so("other", "api"),
                                        so("sts", "web", kind="StatefulSet")])
    assert keda.resumes == [] and len(keda.pauses) == 1
    pause, trigger = keda.pauses[0]
    assert pause.verb is Verb.PAUSE and trigger is freeze[0] and pause.workload.name == "web-so"
    assert pause.patch["metadata"]["annotations"] == {ANNOTATION_KEDA_PAUSED: "0", ANNOTATION_ORIGINAL_PAUSED: record,
                                                      ANNOTATION_SCALED_BY: "p"}
    paused = {**before, **{k: v for k, v in pause.patch["metadata"]["annotations"].items()}}
    restore = make_plan([], namespaces=FAMILY, workloads=[
        workload("shop-v1", "web", 0, original="3", scaled_by="p")], settings=settings()).actions
    keda = plan_scaled_objects(restore, [so("web-so", "web", paused)])
    ((resume, _),) = keda.resumes
    assert resume.verb is Verb.RESUME
    after = {**paused, **resume.patch["metadata"]["annotations"]}
    assert {k: v for k, v in after.items() if v is not None} == before
    assert resume.patch["metadata"]["labels"] == {LABEL_SCALED: None}


def test_scaled_object_already_paused_by_us_is_left_alone_and_a_broken_record_is_reported():
    freeze = make_plan([policy("p", "shop-")], namespaces=FAMILY, workloads=[workload("shop-v1", "web", 3)],
                       settings=settings()).actions
    ours = {ANNOTATION_KEDA_PAUSED: "0", ANNOTATION_ORIGINAL_PAUSED: "null", ANNOTATION_SCALED_BY: "p"}
    assert plan_scaled_objects(freeze, [so("web-so", "web", ours)]).pauses == []
    restore = make_plan([], namespaces=FAMILY, workloads=[
        workload("shop-v1", "web", 0, original="3", scaled_by="p")], settings=settings()).actions
    broken = plan_scaled_objects(restore, [so("web-so", "web", {**ours, ANNOTATION_ORIGINAL_PAUSED: "3"})])
    assert broken.resumes == [] and "neither null nor a JSON string" in broken.problems[0].message


@pytest.mark.parametrize(("min_replicas", "problem"), [
    pytest.param(0, True, id="min-0-can-scale-a-frozen-workload-up"),
    pytest.param(1, False, id="min-1-leaves-a-workload-at-0-alone"),
    pytest.param(None, False, id="min-defaults-to-1"),
])
def test_hpa_with_min_replicas_0_is_reported_with_what_to_do(min_replicas, problem):
    freeze = make_plan([policy("p", "shop-")], namespaces=FAMILY, workloads=[workload("shop-v1", "web", 3)],
                       settings=settings()).actions
    spec: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    found = hpa_problems(freeze, [{"metadata": {"namespace": "shop-v1", "name": "web-hpa"}, "spec": spec}])
    assert bool(found) is problem
    if problem:
        assert found[0].policy == "p" and "minReplicas to 1 or more" in found[0].message


NAMED = ["HorizontalPodAutoscaler web-hpa in shop-v1 has minReplicas 0 and targets deployment/web in shop-v1: ..."]


@pytest.mark.parametrize(("failures", "frozen", "rechecked"), [
    pytest.param(NAMED, workload("shop-v1", "web", 0, original="3", scaled_by="p"), True,
                 id="status-names-an-hpa-and-web-stays-frozen"),
    pytest.param(["freeze deployment/api in shop-v1: 409"], workload("shop-v1", "web", 0, original="3", scaled_by="p"),
                 False, id="other-failures-read-no-hpa"),
    pytest.param(NAMED, workload("shop-v1", "web", 0, original="3", scaled_by="q"), False,
                 id="frozen-by-another-policy"),
    pytest.param(NAMED, workload("shop-v1", "web", 2), False, id="freeze-planned-so-checked-as-a-freeze"),
    pytest.param(NAMED, workload("other", "web", 0, original="3", scaled_by="p"), False,
                 id="restore-planned"),
])
def test_hpas_are_read_again_only_for_workloads_kept_frozen_by_a_policy_whose_status_names_one(
        failures, frozen, rechecked):
    p = dataclasses.replace(policy("p", "shop-"), status={"failures": failures})
    found = make_plan([p], namespaces=[*FAMILY, *namespaces("other")], workloads=[frozen], settings=settings())
    kept = hpa_rechecks([p], found.actions, [frozen])
    assert kept == ([("p", frozen)] if rechecked else [])
    spec = {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 0}
    problems = hpa_problems(found.actions, [{"metadata": {"namespace": "shop-v1", "name": "web-hpa"}, "spec": spec}],
                            kept=kept)
    assert [pr.policy for pr in problems] == (["p"] if rechecked or frozen.size else [])


def test_required_access_adds_list_get_patch_for_each_custom_kind_only():
    pool = resolve([Kind("Pool.x.io")], [crd("Pool", "x.io", plural="pools")]).handlers[Kind("Pool.x.io")]
    base = {str(a) for a in required_access(settings())}
    with_pool = {str(a) for a in required_access(settings(), custom=[pool])}
    assert with_pool - base == {"list pools.x.io", "get pools.x.io", "patch pools.x.io"}
    assert {"patch jobs.batch", "patch replicasets.apps", "patch replicationcontrollers", "patch scaledobjects.keda.sh",
            "list horizontalpodautoscalers.autoscaling", "list customresourcedefinitions.apiextensions.k8s.io"} <= base


# --- The built-in kinds are rows: every fact from job/model/kinds/builtin.py, and whatever names them follows ----

#: what each built-in kind's row must make of it (the handlers were written by hand before they were rows): its
#: handler, record, facts, and which objects count as running and what one unit runs
BUILT_IN_FACTS = {
    "Deployment": ("ReplicasHandler", "original-replicas", None, frozenset(), False, True),
    "StatefulSet": ("ReplicasHandler", "original-replicas", CLAIMS_KEPT, frozenset(), False, True),
    "ReplicaSet": ("ReplicasHandler", "original-replicas", None, frozenset(), False, True),
    "ReplicationController": ("ReplicasHandler", "original-replicas", None, frozenset(), False, False),
    "CronJob": ("SuspendHandler", "original-suspend", None, frozenset(), False, True),
    "Job": ("SuspendHandler", "original-suspend", None, frozenset({Kind.CRONJOB}), True, True),
    "DaemonSet": ("NodeSelectorHandler", "original-node-selector", None, frozenset(), False, True),
}


@pytest.mark.parametrize("name", list(BUILT_IN_FACTS))
def test_each_built_in_kind_is_made_from_its_row_with_the_facts_it_always_had(name):
    handler, record, guard, owner_selects, freezes_controlled, followed = BUILT_IN_FACTS[name]
    (row,) = [r for r in BUILTIN_DATA if r["kind"] == name]
    built = BUILTIN[Kind(name)]
    assert (type(built).__name__, built.record_key, built.guard, built.owner_selects, built.freezes_controlled,
            built.followed, built.data_tier) == (handler, f"nsscaler.wubw.fun/{record}", guard, owner_selects,
                                                 freezes_controlled, followed, False)
    assert (built.api_version, built.plural) == (f"{row['group']}/v1" if row["group"] else "v1", row["plural"])
    assert (str(name) in FOLLOWED) is followed and built.group in BUILTIN_GROUPS
    assert (str(name) in FREEZES_CONTROLLED) is freezes_controlled


@pytest.mark.parametrize(("obj", "cronjob", "job"), [
    pytest.param({"spec": {}}, 1, 1, id="running"),
    pytest.param({"spec": {"suspend": True}}, 0, 0, id="suspended"),
    pytest.param({"spec": {}, "status": {"completionTime": "2026-01-01T00:00:00Z"}}, 1, 0, id="finished"),
])
def test_a_finished_object_stops_counting_only_for_the_row_that_finishes(obj, cronjob, job):
    template = {"containers": [{"name": "c"}]}
    assert (BUILTIN[Kind.CRONJOB].size_of(obj), BUILTIN[Kind.JOB].size_of(obj)) == (cronjob, job)
    spec = {"parallelism": 3, "template": {"spec": template}, "jobTemplate": {"spec": {"template": {"spec": template}}}}
    assert BUILTIN[Kind.CRONJOB].pod_template({"spec": spec}) == (template, 0)  # pods: jobTemplate
    assert BUILTIN[Kind.JOB].pod_template({"spec": spec}) == (template, 3)  # pods: parallelism


def test_the_built_in_names_are_the_rows_and_every_named_constant_is_one():
    from_rows = tuple(r["kind"] for r in BUILTIN_DATA)
    assert BUILTIN_NAMES == from_rows == tuple(BUILTIN) == tuple(r.kind for r in BUILTIN_ROWS)
    assert set(BUILT_IN_FACTS) == set(BUILTIN_NAMES), (
        "tests/unit/test_kinds.py: give each built-in row its line in BUILT_IN_FACTS (and no other)")
    constants = {v for v in vars(Kind).values() if isinstance(v, Kind)}
    assert constants <= set(BUILTIN_NAMES), f"job/model/kinds/kind.py: {sorted(constants - set(BUILTIN_NAMES))}"


@pytest.mark.parametrize(("change", "reason"), [
    pytest.param({"guard": "claimsKept", "freeze": {"method": "suspend"}, "pods": "parallelism"}, "guard",
                 id="guard-on-suspend"),
    pytest.param({"pods": "parallelism"}, "does not fit freeze by scale", id="parallelism-on-scale"),
    pytest.param({"freeze": {"method": "suspend"}}, "does not fit freeze by suspend", id="suspend-without-pods"),
    pytest.param({"finishes": True}, "finishes is for freeze by suspend", id="finishes-on-scale"),
    pytest.param({"ownerSelects": ["Rollout"]}, "ownerSelects ['Rollout']", id="owner-not-built-in"),
    pytest.param({"kind": "Deployment"}, "Deployment has a row already", id="kind-twice"),
    pytest.param({"kind": "Pool.apps"}, "kind", id="kind-with-group"),
    pytest.param({"freeze": {"method": "annotation"}}, "freeze.method", id="catalogue-only-method"),
    pytest.param({"guard": "claimsLost"}, "guard", id="unknown-guard"),
    pytest.param({"followed": True, "extra": 1}, "extra", id="unknown-field"),
])
def test_a_bad_built_in_row_fails_at_import_naming_the_file_and_the_row(change, reason):
    pool = {"kind": "Pool", "group": "apps", "version": "v1", "plural": "pools", "freeze": {"method": "scale"}}
    assert [r.kind for r in parse_builtin_rows([*BUILTIN_DATA, pool])][-1] == "Pool"
    with pytest.raises(ValueError, match=r"^job/model/kinds/builtin\.py: ") as raised:
        parse_builtin_rows([*BUILTIN_DATA, {**pool, **change}])
    assert reason in str(raised.value)


@pytest.mark.parametrize("kind", ["Deployment", "Job", "DaemonSet.apps", "Job.batch", "StatefulSet.apps"])
def test_a_teams_row_cannot_claim_a_built_in_kind(kind):
    rows, (problem,) = parse_rows([{"kind": kind, "versions": ["v1"], "freeze": {"method": "scale"}}], origin="t")
    assert rows == [] and "is built in" in problem and kind in problem


def test_a_built_in_name_in_another_group_is_a_teams_to_claim():
    rows, problems = parse_rows([{"kind": "Job.example.com", "versions": ["v1"], "freeze": {"method": "scale"}}],
                                origin="t")
    assert [r.kind for r in rows] == ["Job.example.com"] and problems == []


def test_whatever_else_names_the_built_in_kinds_names_each_of_them():
    """Copies of the kind list that are prose, each checked against the rows (one once lost DaemonSet)."""
    default_kinds = Settings.model_fields["default_kinds"].description or ""
    spec_kinds = next(line for line in (ROOT / "docs/reference/nsscaler.md").read_text().splitlines()
                      if line.startswith("| `spec.kinds` |"))
    served = {s.name for s in BUILTIN_SERVED}
    lagging = {"job/model/settings.py (default_kinds)": [n for n in BUILTIN_NAMES if n not in default_kinds],
               "docs/reference/nsscaler.md (spec.kinds)": [n for n in BUILTIN_NAMES if f"`{n}`" not in spec_kinds],
               "job/plugin/workloads.py (BUILTIN_SERVED)": sorted(set(BUILTIN_NAMES) ^ served)}
    assert not {f: names for f, names in lagging.items() if names}, f"name these kinds in: {lagging}"


#: how the docs' kind table says each way of freezing
FREEZE_SAYS = {"scale": "`spec.replicas: 0`", "suspend": "`spec.suspend: true`", "nodeSelector": "`nodeSelector`"}


def test_the_docs_kind_table_says_how_each_built_in_kind_is_frozen():
    page = (ROOT / "docs/operating/behaviour.md").read_text()
    table = page.split("## What gets frozen", 1)[1].split("\n\n", 2)[1]
    said = {name: row.split("|")[2] for row in table.splitlines()[2:]
            for name in re.findall(r"`([^`]+)`", row.split("|")[1])}
    wrong = [f"{r.kind}: {FREEZE_SAYS[r.freeze.method]}" for r in BUILTIN_ROWS
             if FREEZE_SAYS[r.freeze.method] not in said.get(r.kind, "")]
    assert not wrong, f"docs/operating/behaviour.md, \"What gets frozen\": say {wrong}"
    stray = sorted(n for n in said if re.fullmatch(r"[A-Z][A-Za-z]*", n) and n not in BUILTIN_NAMES)
    assert not stray, f"docs/operating/behaviour.md, \"What gets frozen\": {stray} are not built-in kinds"
