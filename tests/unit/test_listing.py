"""How a run reads a kind: which LISTs cost the API server least, and what metadata alone settles (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from job.decide import listing, reads
from job.decide.listing import Fetch
from job.decide.plan import excluded_owners_of, select_from_workloads, sizes_needed
from job.model.kinds import BUILTIN
from job.model.marks import ANNOTATION_EXCLUDE
from job.model.workloads import Kind, from_api, size_from_metadata
from tests.unit.factories import namespaces, policy, settings
from tests.unit.test_gitops import entry

FROZEN_BY_US = entry("nsscaler", "2026-01-02T00:00:00Z", "spec.replicas", "metadata.annotations")
CREATED = entry("kubectl-client-side-apply", "2026-01-01T00:00:00Z", "spec.template")
SCALED_BY_HAND = entry("kubectl", "2026-01-03T00:00:00Z", "spec.replicas", subresource="scale")


@pytest.mark.parametrize(("total", "family", "cluster", "one_by_one"), [
    pytest.param(15_000, 50, 3_000, True, id="small-family-in-a-large-cluster"),
    pytest.param(5_000, 1_000, 1_000, False, id="the-family-is-the-cluster"),
    pytest.param(5_000, 800, 1_000, False, id="most-of-the-cluster"),
    pytest.param(0, 50, 3_000, False, id="no-objects-of-the-kind"),
    pytest.param(3, 1, 10, False, id="one-small-page-is-cheapest"),
    pytest.param(None, 50, 3_000, False, id="count-unknown-reads-cluster-wide"),
    pytest.param(20_000, 0, 3_000, True, id="empty-family-needs-only-the-record-sweep"),
])
def test_where_a_kind_is_listed(total, family, cluster, one_by_one):
    assert listing.per_namespace(total=total, namespaces=family, all_namespaces=cluster,
                                 page_size=500) is one_by_one


@pytest.mark.parametrize(("family", "cluster", "limit"), [
    pytest.param(50, 3_000, listing.PROBE_LIMIT, id="a-tiny-family-counts-before-it-reads"),
    pytest.param(1_000, 1_005, 500, id="the-family-is-the-cluster"),
    pytest.param(3, 10, 500, id="a-small-cluster"),
    pytest.param(2, 65, 500, id="a-small-family-in-a-cluster-of-few-namespaces"),
])
def test_how_large_the_first_page_is(family, cluster, limit):
    assert listing.first_page_limit(namespaces=family, all_namespaces=cluster, page_size=500) == limit


@pytest.mark.parametrize(("missing", "objects", "way"), [
    pytest.param({"a": 1}, {"a": 5, "b": 5}, Fetch.GET, id="a-new-workload"),
    pytest.param({"a": 1, "b": 1}, {"a": 30, "b": 30, "c": 4000}, Fetch.GET, id="two-reverts-in-busy-namespaces"),
    pytest.param({"a": 3, "b": 2}, {"a": 5, "b": 5, "c": 4000}, Fetch.NAMESPACES, id="a-namespace-scaled-up"),
    pytest.param({f"n{i}": 5 for i in range(40)}, {f"n{i}": 5 for i in range(3000)}, Fetch.NAMESPACES,
                 id="newly-held-namespaces-of-a-small-family"),
    pytest.param({f"n{i}": 5 for i in range(800)}, {f"n{i}": 5 for i in range(1000)}, Fetch.CLUSTER,
                 id="first-run-of-a-large-family"),
])
def test_how_whole_objects_are_read(missing, objects, way):
    assert listing.fetch(missing=missing, objects=objects, page_size=500) is way


def meta(*managed: dict[str, Any], record: str | None = "3", **annotations: str) -> dict[str, Any]:
    notes = dict(annotations)
    if record is not None:
        notes["nsscaler.wubw.fun/original-replicas"] = record
    return {"name": "web", "namespace": "shop-v1", "resourceVersion": "7", "annotations": notes,
            "managedFields": list(managed)}


@pytest.mark.parametrize(("metadata", "size"), [
    pytest.param(meta(CREATED, FROZEN_BY_US), 0, id="frozen-and-untouched"),
    pytest.param(meta(CREATED, FROZEN_BY_US, SCALED_BY_HAND), 0, id="scaled-to-the-same-value-shares"),
    pytest.param(meta(CREATED, SCALED_BY_HAND), None, id="scaled-up-again-by-hand"),
    pytest.param(meta(CREATED, FROZEN_BY_US, record=None), None, id="restored-by-us-no-record"),
    pytest.param(meta(CREATED, record="2"), None, id="record-of-the-go-operator"),
    pytest.param(meta(record="2"), None, id="no-managed-fields"),
])
def test_size_known_from_metadata(metadata, size):
    """Only nsscaler still owning the size field of an object with our record says it is still frozen."""
    assert size_from_metadata(BUILTIN[Kind.DEPLOYMENT], metadata) == size


def test_a_frozen_cronjob_is_known_suspended_from_its_metadata():
    frozen = entry("nsscaler", "2026-01-02T00:00:00Z", "spec.suspend")
    notes = {"nsscaler.wubw.fun/original-suspend": "false"}
    assert size_from_metadata(BUILTIN[Kind.CRONJOB], {"annotations": notes, "managedFields": [frozen]}) == 0


def workload(ns: str, name: str, *managed: dict[str, Any], record: str | None = None, **notes: str):
    return from_api(Kind.DEPLOYMENT, {"metadata": {**meta(*managed, record=record, **notes), "namespace": ns,
                                                   "name": name}}, metadata_only=True)


def test_sizes_needed_are_those_a_decision_reads():
    p = policy("shop", prefix="shop-", active=["v3"])
    found = [
        workload("shop-v1", "new", CREATED),                                   # held, never frozen: needed
        workload("shop-v1", "frozen", CREATED, FROZEN_BY_US, record="3"),      # known 0: not needed
        workload("shop-v1", "kept", CREATED, **{ANNOTATION_EXCLUDE: "true"}),  # excluded: not needed
        workload("shop-v3", "running", CREATED),                               # kept running: not needed
        workload("shop-v3", "reverted", CREATED, SCALED_BY_HAND, record="2"),  # restore: size read again
        workload("kube-system", "dns", CREATED),                               # not in scope: not needed
    ]
    chosen = select_from_workloads([p], namespaces=namespaces("shop-v1", "shop-v3", "kube-system"), workloads=found,
                    settings=settings(), now=None)
    needed = sizes_needed(found, selection=chosen, excluded_owners=excluded_owners_of(found))
    assert sorted(w.name for w in needed) == ["new", "reverted"]


def test_a_family_is_the_namespaces_a_policy_may_hold():
    """Active namespaces are left out (their records come with the sweep), unless activity decides which
    namespaces stay up; a suspended policy and other families add nothing."""
    found = namespaces("shop-v1", "shop-v2", "shop-v3", "blog-v1", "blog-v2", "misc")
    policies = [policy("shop", "shop-", ["v3"]), policy("blog", "blog-", ["v1"], keep_recent=1),
                policy("off", "misc", [], suspend=True)]
    family = reads.families(policies, [BUILTIN[Kind.DEPLOYMENT]], found)
    assert family == {Kind.DEPLOYMENT: frozenset({"shop-v1", "shop-v2", "blog-v1", "blog-v2"})}
