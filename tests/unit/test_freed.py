"""Footprints (job.model.resources) and what the freezes of a policy free (job.decide.freed): tables, worked out
by hand, and one property (a footprint survives its own record)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from job.decide import freed
from job.decide.actions import Action, ActionResult, Verb
from job.decide.outcome import PolicyOutcome
from job.decide.status import build_status
from job.model.kinds import BUILTIN, Kind
from job.model.marks import ANNOTATION_FREED
from job.model.resources import (
    NANO,
    BadQuantity,
    Footprint,
    footprint_of,
    format_quantity,
    overheads,
    parse_quantity,
    parse_record,
    pod_footprint,
)
from job.model.workloads import freeze_patch, from_api, restore_patch, with_overhead
from tests.unit import factories as f

MI, GI = 2**20, 2**30


def n(value: float) -> int:
    """An amount in nano-units, as job.model.resources holds them."""
    return round(value * NANO)


def c(name: str = "c", requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
      **extra: object) -> dict[str, object]:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}, **extra}


@pytest.mark.parametrize(("text", "value"), [
    pytest.param("250m", 250 * 10**6, id="millis"),
    pytest.param("1Gi", GI * NANO, id="binary"),
    pytest.param("1.5Gi", 3 * GI // 2 * NANO, id="binary-fraction"),
    pytest.param("500M", 500 * 10**6 * NANO, id="decimal"),
    pytest.param("1e3", 1000 * NANO, id="exponent"),
    pytest.param("1.5", 3 * NANO // 2, id="fraction"),
    pytest.param(".5", NANO // 2, id="no-whole-part"),
    pytest.param(2, 2 * NANO, id="number"),
    pytest.param("100n", 100, id="nanos"),
    pytest.param("1e-10", 1, id="finer-than-nano-rounds-up"),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1X", "Gi", "1 Gi", "--1", "."])
def test_parse_quantity_refuses_what_is_no_quantity(text):
    with pytest.raises(BadQuantity):
        parse_quantity(text)


@pytest.mark.parametrize(("value", "text"), [
    pytest.param(n(3.5), "3500m", id="cpu-millis"),
    pytest.param(n(4), "4", id="whole"),
    pytest.param(12 * GI * NANO, "12Gi", id="gibibytes"),
    pytest.param(1088 * MI * NANO, "1088Mi", id="mebibytes"),
    pytest.param(500 * 10**6 * NANO, "500M", id="decimal"),
    pytest.param(0, "0", id="zero"),
    pytest.param(NANO // 3, "334m", id="rounded-up"),
])
def test_format_quantity(value, text):
    assert format_quantity(value) == text


@given(st.integers(min_value=0, max_value=2**50 * NANO))
def test_a_formatted_quantity_reads_back_to_at_least_itself(value):
    back = parse_quantity(format_quantity(value))
    assert value <= back < value + 10**6


@pytest.mark.parametrize(("spec", "requests", "limits", "unrequested"), [
    pytest.param({"containers": [c()]}, {}, {}, 1, id="no-requests"),
    pytest.param({"containers": [c(requests={"cpu": "250m"}), c("b", requests={"cpu": "1", "memory": "1Gi"})]},
                 {"cpu": 1.25, "memory": GI}, {}, 0, id="apps-add-up"),
    pytest.param({"containers": [c(limits={"cpu": "2", "nvidia.com/gpu": "1"})]},
                 {"cpu": 2, "nvidia.com/gpu": 1}, {"cpu": 2, "nvidia.com/gpu": 1}, 0, id="request-defaults-to-limit"),
    pytest.param({"initContainers": [c("init", requests={"cpu": "3"})], "containers": [c(requests={"cpu": "1"})]},
                 {"cpu": 3}, {}, 0, id="a-larger-init-container-wins"),
    # app 200m + sidecar 100m = 300m; inits: 1, the sidecar's 100m, 500m + the sidecar started before = 600m
    pytest.param({"initContainers": [c("a", requests={"cpu": "1", "memory": "256Mi"}),
                                     c("s", requests={"cpu": "100m", "memory": "64Mi"}, restartPolicy="Always"),
                                     c("b", requests={"cpu": "500m", "memory": "512Mi"})],
                  "containers": [c(requests={"cpu": "200m", "memory": "128Mi"})]},
                 {"cpu": 1, "memory": 576 * MI}, {}, 0, id="sidecars-count-with-apps-and-later-inits"),
    pytest.param({"initContainers": [c("s", requests={"cpu": "2"}, restartPolicy="Always")],
                  "containers": [c(requests={"cpu": "1"})]},
                 {"cpu": 3}, {}, 0, id="a-sidecar-runs-beside-the-app"),
    pytest.param({"overhead": {"cpu": "250m", "memory": "120Mi"},
                  "containers": [c(requests={"cpu": "500m"}, limits={"memory": "1Gi"})]},
                 {"cpu": 0.75, "memory": GI + 120 * MI}, {"memory": GI + 120 * MI}, 0,
                 id="overhead-on-requests-and-on-set-limits-only"),
    pytest.param({"containers": [c(requests={"cpu": "1"}), c("idle")]}, {"cpu": 1}, {}, 1,
                 id="one-container-without-requests-marks-the-pod"),
])
def test_pod_footprint_counts_as_the_scheduler_does(spec, requests, limits, unrequested):
    found = pod_footprint(spec, pods=1)
    assert found == Footprint(1, {k: n(v) for k, v in requests.items()}, {k: n(v) for k, v in limits.items()},
                              unrequested)


def _obj(kind: str, spec: dict[str, object], **top: object) -> dict[str, object]:
    meta = {"name": "w", "namespace": "ns", "resourceVersion": "1"}
    if kind == "CronJob":
        return {"metadata": meta, "spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}, **top}}
    return {"metadata": meta, "spec": {"template": {"spec": spec}, **top}}


@pytest.mark.parametrize(("kind", "top", "pods"), [
    pytest.param("Deployment", {"replicas": 3}, 1, id="a-replica-is-one-pod"),
    pytest.param("Job", {"parallelism": 4}, 4, id="a-job-runs-its-parallelism"),
    pytest.param("Job", {}, 1, id="parallelism-defaults-to-one"),
    pytest.param("CronJob", {}, 0, id="a-cronjob-counts-through-its-jobs"),
])
def test_one_unit_of_each_kind(kind, top, pods):
    obj = _obj(kind, {"containers": [c(requests={"cpu": "1"})]}, **top)
    found, pending = footprint_of(*BUILTIN[Kind(kind)].pod_template(obj))
    assert pending is None
    assert found is not None and found.pods == pods and found.requests == ({"cpu": n(pods)} if pods else {})


def test_a_runtime_class_overhead_is_added_once_known():
    obj = _obj("Deployment", {"runtimeClassName": "kata", "containers": [c(requests={"cpu": "500m"})]}, replicas=2)
    w = from_api(Kind.DEPLOYMENT, obj)
    assert w.runtime_class == "kata"
    assert ANNOTATION_FREED not in freeze_patch(w, policy="p")["metadata"]["annotations"]  # not yet: unknown
    known = overheads([{"metadata": {"name": "kata"}, "overhead": {"podFixed": {"cpu": "250m"}}}])
    done = with_overhead(w, known)
    assert done.runtime_class is None
    assert freeze_patch(done, policy="p")["metadata"]["annotations"][ANNOTATION_FREED] == \
        '{"pods":1,"requests":{"cpu":"750m"}}'
    assert with_overhead(w, None).footprint is None and with_overhead(w, {}).footprint is None


def test_the_record_goes_with_the_freeze_and_leaves_with_the_restore():
    w = from_api(Kind.DEPLOYMENT, _obj("Deployment", {"containers": [c(requests={"memory": "1Gi"})]}, replicas=3))
    patch = freeze_patch(w, policy="p")
    assert patch["metadata"]["annotations"][ANNOTATION_FREED] == '{"pods":1,"requests":{"memory":"1Gi"}}'
    record = patch["metadata"]["annotations"][ANNOTATION_FREED]
    frozen = dataclasses.replace(w, original="3", scaled_by="p", freed=record)
    assert restore_patch(frozen)["metadata"]["annotations"][ANNOTATION_FREED] is None


@pytest.mark.parametrize("text", ["", "{", "[]", '{"pods":-1}', '{"pods":1,"unrequested":2}',
                                  '{"pods":1,"requests":{"cpu":"lots"}}'])
def test_a_record_that_is_not_one_is_unknown(text):
    assert parse_record(text) is None


def _frozen(ns: str, name: str, original: str, record: str | None, policy: str = "p") -> object:
    return dataclasses.replace(f.workload(ns, name, 0, original=original, scaled_by=policy), freed=record)


def test_by_policy_counts_what_stays_frozen_after_the_run():
    cpu = '{"pods":1,"requests":{"cpu":"250m","memory":"64Mi"}}'
    held = [_frozen("a", "web", "3", cpu), _frozen("a", "old", "2", None), _frozen("b", "api", "1", cpu),
            _frozen("b", "gone", "5", cpu), _frozen("c", "x", "4", cpu, policy="q"),
            dataclasses.replace(_frozen("a", "web-rs", "3", cpu), kind=Kind.REPLICASET, controller="Deployment",
                                controller_name="web")]  # a ReplicaSet copying its Deployment's record
    fresh = dataclasses.replace(f.workload("b", "new", 2), footprint='{"pods":1,"requests":{"cpu":"1"}}')
    results = [ActionResult(Action(Verb.RESTORE, held[3], "p", None, 5, "", False), "applied"),
               ActionResult(Action(Verb.FREEZE, fresh, "p", None, 0, "", True), "dry-run"),
               ActionResult(Action(Verb.ADOPT, held[4], "p", None, 0, "", False), "applied")]
    got = freed.by_policy(held, results)
    assert set(got) == {"p"}
    p = got["p"]
    # web 3 x 250m/64Mi, api 1 x the same, x 4 x the same (adopted from q), new 2 x 1 CPU; old unknown
    assert (p.workloads, p.unknown, p.total.pods) == (5, 1, 10)
    assert p.total.requests == {"cpu": n(8 * 0.25 + 2), "memory": n(8 * 64 * MI)}
    assert [ns for ns, _ in freed.top_namespaces(p, 2)] == ["b", "c"]  # b: 2.25 CPU, c: 1, a: 0.75
    assert freed.summary(p.total) == "10 Pods, 4 CPU, 512Mi memory"


def test_a_malformed_record_is_unknown_not_zero():
    got = freed.by_policy([_frozen("a", "web", "three", '{"pods":1,"requests":{"cpu":"1"}}')], [])
    assert (got["p"].workloads, got["p"].unknown, got["p"].total.pods) == (1, 1, 0)


def test_a_resource_freed_no_more_is_removed_from_the_status_merge_patch():
    before = {"freed": {"requests": {"cpu": "1", "memory": "0", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"}}}
    body = build_status(PolicyOutcome(name="p", previous_status=before), now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                        list_limit=5)
    assert body["freed"]["requests"] == {"nvidia.com/gpu": None, "cpu": "0", "memory": "0"}
    assert body["freed"]["limits"] == {"nvidia.com/gpu": None}


def test_a_refreeze_whose_footprint_is_unknown_drops_the_older_record():
    w = from_api(Kind.DEPLOYMENT, _obj("Deployment", {"runtimeClassName": "gone", "containers": [c()]}, replicas=3))
    stale = with_overhead(dataclasses.replace(w, original="3", scaled_by="p", freed='{"pods":1}'), {})
    assert stale.footprint is None
    assert freeze_patch(stale, policy="p")["metadata"]["annotations"][ANNOTATION_FREED] is None
