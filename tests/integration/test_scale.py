"""Cost follows the family: a small family in a large cluster is read one namespace at a time, and still
nothing outside it is missed (records left by a deleted policy come back)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS
from tests.invariants import snapshot


@pytest.fixture
def quiet_afterwards(api: AdminApi, prefix: str) -> Iterator[None]:
    """The crowd is gone before the next test starts: a family of a few namespaces is read cluster-wide only
    while the cluster is not crowded, and other tests count requests of small families."""
    yield
    mine = [ns["metadata"]["name"] for ns in api.list("Namespace") if ns["metadata"]["name"].startswith(prefix)]
    for name in mine:
        api.delete("Namespace", name)
    wait_until(lambda: not any(api.exists("Namespace", name) for name in mine), what="the crowd to go",
               timeout=300)


def crowd(api: AdminApi, prefix: str, count: int, *, start: int = 0) -> None:
    """`count` namespaces outside the family, three Deployments each (at 0: no Pods to wait for)."""
    def make(i: int) -> None:
        ns = f"{prefix}other{i:03d}"
        api.create(builders.namespace(ns))
        for j in range(3):
            api.create(builders.deployment(ns, f"d{j}", 0))
        api.create(builders.pod(ns, "bare"))  # Pending for good (this cluster has no node): still live
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(make, range(start, start + count)))


def ways(stderr: str) -> dict[str, str]:
    """How the run read each kind, from its debug log lines."""
    lines = (json.loads(line) for line in stderr.splitlines() if line.startswith("{"))
    return {line["kind"]: line["way"] for line in lines if line.get("event") == "read"}


@pytest.mark.usefixtures("settled_cluster", "quiet_afterwards")
def test_a_small_family_in_a_busy_cluster_is_read_per_namespace(api: AdminApi, run_job, prefix):
    family = prefix + "fam-"
    # A record a deleted policy left behind, outside every family: only the cluster-wide sweep can see it.
    api.create(builders.namespace(prefix + "old"))
    api.create(builders.deployment(prefix + "old", "web", 2))
    api.create(builders.nsscaler(f"{prefix}old", prefix + "old", []))
    assert run_job().exit_code == 0
    api.delete("NSScaler", f"{prefix}old")
    crowd(api, prefix, 60)
    for suffix, replicas in (("v1", 3), ("v2", 2)):
        api.create(builders.namespace(family + suffix))
        api.create(builders.deployment(family + suffix, "web", replicas))
    api.create(builders.nsscaler(f"{prefix}p", family, ["v2"]))

    api.create(builders.pod(family + "v1", "left"))
    first = run_job("--log-level", "debug", "--log-format", "json")
    assert first.exit_code == 0, first.stderr
    assert ways(first.stderr) == {"Deployment": "per-namespace", "StatefulSet": "cluster-wide", "Pod": "per-namespace"}
    [outcome] = [p for p in first.report["policies"] if p["name"] == f"{prefix}p"]
    assert not outcome["done"] and [r["owner"] for r in outcome["remaining"]] == ["Pod/left"]
    assert snapshot(api, family) == {(family + "v1", "web"): (0, "3"), (family + "v2", "web"): (2, None)}
    assert snapshot(api, prefix + "old") == {(prefix + "old", "web"): (2, None)}

    steady = run_job().requests
    crowd(api, prefix, 30, start=60)
    assert run_job().requests == steady  # 30 more namespaces and 90 Deployments outside cost nothing
    assert steady.get("get", 0) == 0 and steady.get("patch") == 1  # only the status: all known from metadata

    # The family's frozen Deployment now comes only with our records (its namespace's LIST asks for the
    # rest): the release moves on to v1, and v1 comes back exactly as it was.
    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
    moved = run_job("--log-level", "debug", "--log-format", "json")
    assert moved.exit_code == 0, moved.stderr
    assert ways(moved.stderr)["Deployment"] == "per-namespace"
    assert snapshot(api, family) == {(family + "v1", "web"): (3, None), (family + "v2", "web"): (0, "2")}


@pytest.mark.usefixtures("settled_cluster", "quiet_afterwards")
def test_a_tiny_family_reads_one_object_before_it_chooses(api: AdminApi, run_job, prefix):
    """With pages of 3, a family of one namespace is a tiny part of even a small cluster: the first page of
    each kind is one object, read for its item count. Deployments (many) are then read per namespace;
    StatefulSets (few) cluster-wide, going on from that first page. Nothing is missed either way."""
    crowd(api, prefix, 10)
    for i in range(2):
        api.create(builders.statefulset(f"{prefix}other{i:03d}", "db", 1))
    family = prefix + "fam-"
    api.create(builders.namespace(family + "v1"))
    api.create(builders.deployment(family + "v1", "web", 2))
    api.create(builders.statefulset(family + "v1", "db", 1))
    api.create(builders.nsscaler(f"{prefix}p", family, []))

    first = run_job("--page-size", "3", "--log-level", "debug", "--log-format", "json")
    assert first.exit_code == 0, first.stderr
    assert ways(first.stderr)["Deployment"] == "per-namespace"
    assert snapshot(api, family) == {(family + "v1", "web"): (0, "2")}
    db = api.get("StatefulSet", "db", family + "v1")
    assert (db["spec"]["replicas"], db["metadata"]["annotations"][ANNOTATION_ORIGINAL_REPLICAS]) == (0, "1")
    assert [api.replicas("StatefulSet", f"{prefix}other{i:03d}", "db") for i in range(2)] == [1, 1]
