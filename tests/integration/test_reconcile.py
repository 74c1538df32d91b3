"""The job against the real control plane: objects in, objects out."""

from __future__ import annotations

import re

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from job import __version__
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_ORIGINAL_REPLICAS,
    ANNOTATION_SCALED_BY,
    FIELD_MANAGER,
    LABEL_HOLD,
    LABEL_SCALED,
)
from tests.conftest import ROOT, make_family
from tests.faults import FaultProxy
from tests.invariants import one_write_each

FAMILY = {
    "v1": {"d-web": 3, "s-db": 1},
    "v2": {"d-web": 2, "d-api": 5},
    "v3": {"d-web": 1, "s-db": 2},
    "v4": {"d-web": 4, "s-db": 3},
    "v5": {"d-api": 0},
}


def record(obj) -> dict[str, str]:
    """nsscaler's annotations on an object (every other annotation is someone else's)."""
    return {k: v for k, v in (obj["metadata"].get("annotations") or {}).items() if k.startswith("nsscaler.wubw.fun/")}


def sizes(api: AdminApi, prefix: str, family=FAMILY) -> dict[str, int]:
    return {f"{suffix}/{name}": api.replicas("StatefulSet" if name.startswith("s-") else "Deployment",
                                             prefix + suffix, name)
            for suffix, workloads in family.items() for name in workloads}


def expected(prefix_active: set[str], family=FAMILY) -> dict[str, int]:
    return {f"{s}/{n}": (count if s in prefix_active else 0) for s, w in family.items() for n, count in w.items()}


@pytest.mark.versions
def test_original_operator_sample_works_unchanged(api: AdminApi, run_job, prefix):
    sample = yaml.safe_load((ROOT / "kustomize/samples/original-operator.yaml").read_text())
    api.create(builders.deployment("kube-public", f"{prefix}web", 2))
    api.create(builders.deployment("kube-system", f"{prefix}web", 1))
    api.create(sample)
    try:
        assert run_job().exit_code == 0
        assert api.replicas("Deployment", "kube-public", f"{prefix}web") == 0
        assert api.replicas("Deployment", "kube-system", f"{prefix}web") == 1
        assert "kube-public" in api.status("nsscaler-sample")["heldNamespaces"]
    finally:
        api.delete("NSScaler", "nsscaler-sample")
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", "kube-public", f"{prefix}web") == 2
    api.delete("Deployment", f"{prefix}web", "kube-public")
    api.delete("Deployment", f"{prefix}web", "kube-system")


@pytest.mark.versions
def test_family_freeze_switch_and_delete_restore_exact_counts(api: AdminApi, run_job, prefix):
    """Each run's every stored state of the family's workloads is replayed (`one_write_each`): a count is never
    at 0 without its record, nor back up with it."""
    make_family(api, prefix, FAMILY)
    name = f"{prefix}release"
    api.create(builders.nsscaler(name, prefix, ["v3"]))
    ran = {(prefix + suffix, workload) for suffix, made in FAMILY.items() for workload, n in made.items() if n}

    with one_write_each(api, prefix, ran) as states:
        first = run_job()
    assert first.exit_code == 0, first.stderr
    assert sizes(api, prefix) == expected({"v3"})
    web = api.get("Deployment", "d-web", prefix + "v1")
    assert web["metadata"]["annotations"][ANNOTATION_ORIGINAL_REPLICAS] == "3"
    assert web["metadata"]["annotations"][ANNOTATION_SCALED_BY] == name
    assert web["metadata"]["labels"][LABEL_SCALED] == "true"
    assert record(api.get("Deployment", "d-api", prefix + "v5")) == {}  # was at 0 already: not ours
    status = api.status(name)
    assert status["counts"]["frozen"] == 6 and status["counts"]["heldNamespaces"] == 4
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    events = api.list("Event", prefix + "v1", fieldSelector="reason=Frozen")
    assert any(name in e["message"] for e in events)

    frozen_at_once = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in states if o["spec"]["replicas"] == 0}
    assert frozen_at_once >= ran - {(prefix + "v3", w) for w in FAMILY["v3"]}, states  # the replay saw the freeze

    wait_until(lambda: all(not api.pods(prefix + s) for s in ("v1", "v2", "v4", "v5")), what="Pods to go")
    assert run_job().exit_code == 0
    status = api.status(name)
    assert status["done"] is True and status["counts"]["unchanged"] == 7 and status["counts"]["frozen"] == 0

    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v4"]}})
    with one_write_each(api, prefix, ran):
        assert run_job().exit_code == 0
    assert sizes(api, prefix) == expected({"v4"})
    assert record(api.get("Deployment", "d-web", prefix + "v4")) == {}
    assert api.status(name)["observedGeneration"] == 2
    assert api.status(name)["version"] == __version__, "the status names the version whose run wrote it"

    api.delete("NSScaler", name)
    with one_write_each(api, prefix, ran):
        assert run_job().exit_code == 0
    assert sizes(api, prefix) == expected(set(FAMILY))
    assert api.list("Deployment", prefix + "v1", labelSelector=LABEL_SCALED + "=true") == []


def test_manual_scale_up_during_freeze_is_refrozen_and_restored_to_pre_freeze_count(api, run_job, prefix):
    make_family(api, prefix, {"v1": {"d-web": 3}, "v2": {}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job().exit_code == 0
    api.patch("Deployment", "d-web", {"spec": {"replicas": 6}}, namespace=prefix + "v1")
    assert run_job().exit_code == 0
    web = api.get("Deployment", "d-web", prefix + "v1")
    assert web["spec"]["replicas"] == 0 and web["metadata"]["annotations"][ANNOTATION_ORIGINAL_REPLICAS] == "3"
    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 3


def test_cronjobs_are_opt_in_and_suspended(api: AdminApi, run_job, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.cronjob(ns, "nightly"))
    api.create(builders.cronjob(ns, "paused", suspend=True))
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    assert run_job().exit_code == 0
    assert api.get("CronJob", "nightly", ns)["spec"]["suspend"] is False  # not selected by default
    api.patch("NSScaler", f"{prefix}p", {"spec": {"kinds": ["CronJob"]}})
    assert run_job().exit_code == 0
    assert api.get("CronJob", "nightly", ns)["spec"]["suspend"] is True
    assert "nsscaler.wubw.fun/scaled-by" not in api.get("CronJob", "paused", ns)["metadata"].get("annotations", {})
    api.delete("NSScaler", f"{prefix}p")
    assert run_job().exit_code == 0  # no policy selects CronJobs now: the label-selected sweep restores it
    assert api.get("CronJob", "nightly", ns)["spec"]["suspend"] is False
    assert api.get("CronJob", "paused", ns)["spec"]["suspend"] is True


def test_invalid_policy_is_reported_and_the_valid_one_still_acts(api: AdminApi, run_job, prefix):
    make_family(api, prefix, {"a": {"d-web": 2}})
    # Valid for the CRD's schema, invalid for nsscaler: prefix + suffix is longer than a namespace name.
    api.create(builders.nsscaler(f"{prefix}bad", prefix + "x" * 50, ["y" * 20]))
    api.create(builders.nsscaler(f"{prefix}good", prefix, ["b"]))
    result = run_job()
    assert result.exit_code == 1
    assert api.replicas("Deployment", prefix + "a", "d-web") == 0
    ready = {c["type"]: c for c in api.status(f"{prefix}bad")["conditions"]}["Ready"]
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert "not a valid namespace name" in ready["message"]
    assert api.status(f"{prefix}good")["conditions"][0]["status"] == "True"


def test_overlapping_policies_active_wins_and_status_says_by_whom(api: AdminApi, run_job, prefix):
    make_family(api, prefix, {"v1": {"d-web": 1}, "v2": {"d-web": 1}, "v3": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}a", prefix, ["v1"]))
    api.create(builders.nsscaler(f"{prefix}b", prefix, ["v2"]))
    assert run_job().exit_code == 0
    assert [api.replicas("Deployment", prefix + s, "d-web") for s in ("v1", "v2", "v3")] == [1, 1, 0]
    kept = api.status(f"{prefix}a")["keptRunning"]
    assert kept == [{"namespace": prefix + "v2", "by": [f"{prefix}b"]}]
    v3 = api.get("Deployment", "d-web", prefix + "v3")
    assert v3["metadata"]["annotations"][ANNOTATION_SCALED_BY] == f"{prefix}a"


def test_exclusion_annotation_is_respected(api: AdminApi, run_job, prefix):
    """The annotation read from a real object: the excluded Deployment is never written to (nsscaler's field
    manager is not among its writers), while the same run freezes its neighbour in the same namespace."""
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "keep", 2, annotations={ANNOTATION_EXCLUDE: "true"}))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    assert run_job().exit_code == 0
    keep = api.get("Deployment", "keep", ns)
    assert keep["spec"]["replicas"] == 2 and record(keep) == {ANNOTATION_EXCLUDE: "true"}
    assert FIELD_MANAGER not in {m.get("manager") for m in keep["metadata"]["managedFields"]}
    assert api.replicas("Deployment", ns, "web") == 0  # the run did act in that namespace
    counts = api.status(f"{prefix}p")["counts"]
    assert (counts["excluded"], counts["frozen"]) == (1, 1)


@pytest.mark.versions
@pytest.mark.parametrize("how", ["flag", "spec"])
def test_dry_run_changes_nothing(api: AdminApi, run_job, prefix, how):
    make_family(api, prefix, {"v1": {"d-web": 3}})
    extra = {"dry_run": True} if how == "spec" else {}
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], **extra))
    result = run_job("--dry-run") if how == "flag" else run_job()
    assert result.exit_code == 0
    assert [a["outcome"] for a in result.report["actions"]] == ["dry-run"]
    web = api.get("Deployment", "d-web", prefix + "v1")
    assert web["spec"]["replicas"] == 3 and record(web) == {}
    assert api.list("Event", prefix + "v1", fieldSelector="reason=Frozen") == []
    if how == "flag":
        assert api.status(f"{prefix}p") == {}  # a dry run writes no status
    else:
        assert api.status(f"{prefix}p")["dryRun"] is True


@pytest.mark.usefixtures("settled_cluster")
def test_request_counts_stay_flat_as_namespaces_grow(api: AdminApi, control_plane, run_job, prefix, admin_token,
                                                     tmp_path):
    """Steady states compared: a run that finds its family as the last run left it sends the same requests for 3
    held namespaces as for 33. Between them, the run that first meets the 30 new ones writes exactly one hold mark
    on each of them (and none on the 3 marked before): what a new held namespace costs once."""
    make_family(api, prefix, {f"n{i}": {"d-web": 0} for i in range(3)})
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    assert run_job().exit_code == 0  # the first run marks the 3 held namespaces (and the token's own, `sa`)
    small = run_job().requests
    make_family(api, prefix, {f"m{i}": {"d-web": 0} for i in range(30)})
    marked: list[str] = []

    def record(method: str, path: str) -> None:
        bare = path.split("?", maxsplit=1)[0]
        if method == "PATCH" and bare.startswith("/api/v1/namespaces/") and bare.count("/") == 4:
            marked.append(bare.rsplit("/", 1)[1])

    with FaultProxy(control_plane, fraction=0.0, before_forward=record) as proxy:
        grown = run_job(kubeconfig=proxy.kubeconfig(tmp_path / "proxy", admin_token))
    assert grown.exit_code == 0, grown.stderr
    assert sorted(marked) == sorted(f"{prefix}m{i}" for i in range(30)), marked  # once each, the new ones only
    for i in range(30):
        assert api.get("Namespace", f"{prefix}m{i}")["metadata"]["labels"][LABEL_HOLD] == "deny"
    # beyond the marks, a run that writes them is a run that writes: it names what it lacks first (one access
    # review) and takes the run Lease (its GETs and PATCHes, counted apart: `release` lifts every mark under it)
    assert grown.report["summary"]["lease_requests"], grown.report["summary"]
    besides = grown.requests_besides_the_lease
    assert besides.pop("patch") == len(marked) + small["patch"], grown.requests
    assert besides == {**{k: v for k, v in small.items() if k != "patch"}, "create": 1}, (besides, small)

    large = run_job().requests
    assert small == large, (small, large)
    assert large.pop("version") == 1  # the server's version, read once at the start
    assert "create" not in large  # no access review: nothing is written but the status, and nothing refused
    # the steady state's 11 LISTs and its status PATCH (`steady_state_requests`), and one LIST more: Deployments at 0
    # replicas without a record are read whole again on every run (their size cannot be known from metadata)
    lists, patches = steady_state_requests()
    assert large == {"list": lists + 1, "patch": patches}, large


def steady_state_requests() -> tuple[int, int]:
    """The LISTs and PATCHes of a steady-state run as docs/operating/behaviour.md counts them ("Cost per run")."""
    text = " ".join((ROOT / "docs/operating/behaviour.md").read_text().split())
    m = re.search(r"A steady-state run .*? sends (\d+) requests \((\d+) LISTs .*?, (\d+) status PATCH\) after", text)
    assert m, "docs/operating/behaviour.md: the steady state's request count is gone from 'Cost per run'"
    total, lists, patches = map(int, m.groups())
    assert total == lists + patches, "docs/operating/behaviour.md: the parts do not add up to the whole"
    return lists, patches


@pytest.mark.usefixtures("settled_cluster")
def test_a_steady_state_sends_every_request_on_one_connection(api: AdminApi, control_plane, run_job, prefix,
                                                                admin_token, tmp_path):
    """A run that finds its family as it left it reads a few small pages: a second connection (a thread, a TLS
    handshake on both sides) would cost more than any overlap it buys. The proxy counts what the run opens.
    Earlier tests' namespaces must be gone first: with hundreds of their workloads still in the cluster, a
    family this small is read one namespace at a time (cheaper for the API server, two LISTs more here)."""
    make_family(api, prefix, {"v1": {"d-web": 2, "s-db": 1}, "v2": {"d-api": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job().exit_code == 0  # the freeze
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0
    assert api.replicas("StatefulSet", prefix + "v1", "s-db") == 0
    with FaultProxy(control_plane, fraction=0.0) as proxy:
        steady = run_job(kubeconfig=proxy.kubeconfig(tmp_path / "proxy", admin_token))
    assert steady.exit_code == 0, steady.stderr
    assert steady.requests.get("patch") == 1  # the status, nothing else written
    lists, patches = steady_state_requests()
    assert steady.requests == {"version": 1, "list": lists, "patch": patches}, (
        f"{steady.requests}: docs/operating/behaviour.md says {lists} LISTs and {patches} PATCH after the version")
    assert proxy.connections == 1, proxy.connections
    assert api.replicas("Deployment", prefix + "v2", "d-api") == 1
