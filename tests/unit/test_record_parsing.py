"""Reading what a freeze left on an object: each kind's record parsed into the patch that puts it back (or refused
as malformed, never reinterpreted), and a workload's marks and metadata read into its view (job.model.workloads,
job.model.kinds). Tables of raw values as a user or the API server may leave them, and what each must read as."""

from __future__ import annotations

from typing import Any

import pytest

from job.errors import shown
from job.model.autoscalers import SCALED_OBJECTS
from job.model.kinds import BUILTIN, Kind, MalformedRecord, ReplicasHandler
from job.model.kinds.suspend import cronjob_template, job_running, job_template
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_KEDA_PAUSED,
    ANNOTATION_ORIGINAL_NODE_SELECTOR,
    ANNOTATION_ORIGINAL_REPLICAS,
    ANNOTATION_ORIGINAL_SUSPEND,
    ANNOTATION_RESTORE_TIER,
    ANNOTATION_SCALED_BY,
    FIELD_MANAGER,
    FROZEN_NODE_LABEL,
)
from job.model.workloads import adopt_patch, freeze_patch, from_api, namespace_from_api, recorded_from_api
from tests.unit.factories import workload

DEPLOYMENTS, CRONJOBS, DAEMONSETS = BUILTIN[Kind.DEPLOYMENT], BUILTIN[Kind.CRONJOB], BUILTIN[Kind.DAEMONSET]
POD = {"containers": [{"name": "app", "image": "app"}]}


@pytest.mark.parametrize(("record", "replicas"), [
    pytest.param("0", 0, id="zero"),
    pytest.param("3", 3, id="three"),
    pytest.param("007", 7, id="leading-zeros"),
    pytest.param("999999999", 999_999_999, id="nine-digits"),
])
def test_a_replica_record_gives_back_its_count(record, replicas):
    assert DEPLOYMENTS.restored_body(record) == {"spec": {"replicas": replicas}}
    assert DEPLOYMENTS.restored_size(record) == replicas


@pytest.mark.parametrize("record", [
    pytest.param("", id="empty"),
    pytest.param("1234567890", id="ten-digits"),
    pytest.param("-1", id="negative"),
    pytest.param("+3", id="signed"),
    pytest.param("1.5", id="fraction"),
    pytest.param("3 ", id="trailing-space"),
    pytest.param(" 3", id="leading-space"),
    pytest.param("3\n", id="trailing-newline"),
    pytest.param("\u0663", id="a-digit-python-reads-but-kubernetes-does-not"),
    pytest.param("three", id="words"),
])
def test_a_replica_record_that_is_not_a_whole_number_is_refused(record):
    with pytest.raises(MalformedRecord) as refused:
        DEPLOYMENTS.restored_size(record)
    assert str(refused.value) == f"{ANNOTATION_ORIGINAL_REPLICAS}={shown(record)} is not a whole number"


@pytest.mark.parametrize(("spec", "size"), [
    pytest.param({}, 1, id="unset-counts-as-the-servers-default-of-one"),
    pytest.param({"replicas": 0}, 0, id="zero"),
    pytest.param({"replicas": 5}, 5, id="five"),
])
def test_the_size_of_a_scalable_kind_is_its_replica_count(spec, size):
    assert DEPLOYMENTS.size_of({"spec": spec}) == size


@pytest.mark.parametrize(("record", "suspend", "size"), [
    pytest.param("true", True, 0, id="was-suspended"),
    pytest.param("false", False, 1, id="was-running"),
])
def test_a_suspend_record_gives_back_its_flag(record, suspend, size):
    assert CRONJOBS.restored_body(record) == {"spec": {"suspend": suspend}}
    assert CRONJOBS.restored_size(record) == size
    assert CRONJOBS.original_value(size) == record


@pytest.mark.parametrize("record", ["True", "FALSE", "", "yes", "1", '"true"'])
def test_a_suspend_record_that_is_not_true_or_false_is_refused(record):
    with pytest.raises(MalformedRecord) as refused:
        CRONJOBS.restored_size(record)
    assert str(refused.value) == f"{ANNOTATION_ORIGINAL_SUSPEND}={shown(record)} is neither true nor false"


@pytest.mark.parametrize(("status", "running"), [
    pytest.param({}, True, id="started"),
    pytest.param({"completionTime": "2026-12-04T09:00:00Z"}, False, id="completed"),
    pytest.param({"conditions": [{"type": "Complete", "status": "True"}]}, False, id="complete-condition"),
    pytest.param({"conditions": [{"type": "Failed", "status": "True"}]}, False, id="failed-condition"),
    pytest.param({"conditions": [{"type": "Failed", "status": "False"}]}, True, id="not-failed"),
    pytest.param({"conditions": [{"type": "Suspended", "status": "True"}]}, True, id="other-condition"),
])
def test_a_finished_job_is_not_running(status, running):
    assert job_running({"spec": {}, "status": status}) is running
    assert job_running({"spec": {"suspend": True}, "status": status}) is False


@pytest.mark.parametrize(("spec", "found"), [
    pytest.param({"template": {"spec": POD}}, (POD, 1), id="parallelism-unset-runs-one"),
    pytest.param({"template": {"spec": POD}, "parallelism": None}, (POD, 1), id="parallelism-null-runs-one"),
    pytest.param({"template": {"spec": POD}, "parallelism": 3}, (POD, 3), id="parallelism-three"),
    pytest.param({"template": {"spec": POD}, "parallelism": 0}, (POD, 0), id="parallelism-zero"),
    pytest.param({}, (None, 0), id="no-template-runs-nothing"),
])
def test_what_a_running_job_runs(spec, found):
    assert job_template({"spec": spec}) == found


@pytest.mark.parametrize(("spec", "found"), [
    pytest.param({"jobTemplate": {"spec": {"template": {"spec": POD}}}}, (POD, 0), id="its-jobs-pod-spec"),
    pytest.param({}, ({}, 0), id="no-job-template"),
])
def test_a_cronjob_runs_no_pod_of_its_own(spec, found):
    assert cronjob_template({"spec": spec}) == found


def _daemonset(selector: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {**POD, **({} if selector is None else {"nodeSelector": selector})}
    return {"spec": {"template": {"spec": spec}}}


@pytest.mark.parametrize(("selector", "state", "size"), [
    pytest.param(None, "null", 1, id="none"),
    pytest.param({}, "null", 1, id="empty-is-none"),
    pytest.param("zone=a", "null", 1, id="not-a-map-is-none"),
    pytest.param({"zone": "a", "disk": "ssd"}, '{"disk":"ssd","zone":"a"}', 1, id="keys-sorted"),
    pytest.param({"zone": "a", FROZEN_NODE_LABEL: "true"}, f'{{"{FROZEN_NODE_LABEL}":"true","zone":"a"}}', 0,
                 id="frozen"),
])
def test_a_daemonsets_selector_is_recorded_the_same_whatever_its_order(selector, state, size):
    assert DAEMONSETS.state_of(_daemonset(selector)) == state
    assert DAEMONSETS.size_of(_daemonset(selector)) == size


@pytest.mark.parametrize(("state", "record"), [
    pytest.param(None, "null", id="unknown-selector-records-none"),
    pytest.param('{"disk":"ssd"}', '{"disk":"ssd"}', id="known-selector"),
])
def test_a_daemonsets_record_is_its_selector_or_null(state, record):
    assert DAEMONSETS.original_value(1, state) == record
    assert DAEMONSETS.restored_size(record) == 1


@pytest.mark.parametrize(("record", "selector"), [
    pytest.param("null", {FROZEN_NODE_LABEL: None}, id="none"),
    pytest.param("{}", {FROZEN_NODE_LABEL: None}, id="empty"),
    pytest.param('{"disk":"ssd"}', {"disk": "ssd", FROZEN_NODE_LABEL: None}, id="one-key"),
])
def test_a_daemonsets_record_gives_back_its_selector_and_drops_the_freeze(record, selector):
    assert DAEMONSETS.restored_body(record) == {"spec": {"template": {"spec": {"nodeSelector": selector}}}}


@pytest.mark.parametrize("record", ['"ssd"', "[1]", '{"disk": 1}', "not json", "", "NULL"])
def test_a_daemonsets_record_that_is_not_a_selector_is_refused_with_its_value(record):
    with pytest.raises(MalformedRecord) as refused:
        DAEMONSETS.restored_size(record)
    assert str(refused.value) == (f"{ANNOTATION_ORIGINAL_NODE_SELECTOR}={shown(record)} is neither null nor a JSON "
                                  f"object of strings")


def test_a_daemonsets_unit_is_one_pod_of_its_template():
    assert DAEMONSETS.pod_template(_daemonset({"disk": "ssd"})) == ({**POD, "nodeSelector": {"disk": "ssd"}}, 1)


def _deployment(annotations: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "shop-v1", "annotations": annotations, **meta},
            "spec": {"replicas": 2, "template": {"spec": POD}}, "status": {"availableReplicas": 2}}


@pytest.mark.parametrize(("annotations", "meta", "expected"), [
    pytest.param({}, {}, {"original": None, "scaled_by": None, "excluded": False, "resource_version": "", "uid": ""},
                 id="nothing-recorded"),
    pytest.param({ANNOTATION_ORIGINAL_REPLICAS: "3", ANNOTATION_SCALED_BY: "p"},
                 {"resourceVersion": "17", "uid": "u-1"},
                 {"original": "3", "scaled_by": "p", "excluded": False, "resource_version": "17", "uid": "u-1"},
                 id="frozen-by-p"),
    pytest.param({ANNOTATION_ORIGINAL_REPLICAS: "three"}, {},
                 {"original": "three", "scaled_by": None, "excluded": False, "resource_version": "", "uid": ""},
                 id="a-malformed-record-is-kept-raw"),
    pytest.param({ANNOTATION_EXCLUDE: "true"}, {},
                 {"original": None, "scaled_by": None, "excluded": True, "resource_version": "", "uid": ""},
                 id="excluded"),
    pytest.param({ANNOTATION_EXCLUDE: "True"}, {},
                 {"original": None, "scaled_by": None, "excluded": True, "resource_version": "", "uid": ""},
                 id="excluded-in-any-case"),
    pytest.param({ANNOTATION_EXCLUDE: "yes"}, {},
                 {"original": None, "scaled_by": None, "excluded": False, "resource_version": "", "uid": ""},
                 id="only-true-excludes"),
])
def test_a_workloads_marks_are_read_as_written(annotations, meta, expected):
    found = from_api(Kind.DEPLOYMENT, _deployment(annotations, **meta))
    assert {key: getattr(found, key) for key in expected} == expected


@pytest.mark.parametrize("metadata_only", [False, True])
def test_what_only_a_whole_object_tells_is_unknown_from_its_metadata(metadata_only):
    obj = _deployment({})
    if metadata_only:
        del obj["spec"], obj["status"]
    found = from_api(Kind.DEPLOYMENT, obj, metadata_only=metadata_only)
    # a Pod that requests nothing frees one Pod and nothing measured (`job.model.resources`)
    whole = (2, '{"pods":1,"unrequested":1}', True) if not metadata_only else (None, None, None)
    assert (found.size, found.footprint, found.available) == whole


def test_a_daemonsets_selector_is_read_only_from_the_whole_object():
    obj = {"metadata": {"name": "agent", "namespace": "shop-v1"}, **_daemonset({"disk": "ssd"})}
    assert from_api(Kind.DAEMONSET, obj).state == '{"disk":"ssd"}'
    assert from_api(Kind.DAEMONSET, {"metadata": obj["metadata"]}, metadata_only=True).state is None


@pytest.mark.parametrize(("owned_by_nsscaler", "size"), [
    pytest.param(("spec", "replicas"), 0, id="nsscaler-still-owns-the-count"),
    pytest.param(("metadata", "annotations"), None, id="someone-else-wrote-the-count-since"),
])
def test_a_frozen_workloads_size_from_metadata_alone(owned_by_nsscaler, size):
    """Known from metadata only while nsscaler still owns the size field it zeroed; owning only its annotations
    says nothing about the count, which someone else has written since."""
    first, second = owned_by_nsscaler
    meta = _deployment({ANNOTATION_ORIGINAL_REPLICAS: "3", ANNOTATION_SCALED_BY: "p"})["metadata"]
    meta["managedFields"] = [
        {"manager": FIELD_MANAGER, "operation": "Update", "fieldsV1": {f"f:{first}": {f"f:{second}": {}}}},
        {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:template": {}}}},
    ]
    assert from_api(Kind.DEPLOYMENT, {"metadata": meta}, metadata_only=True).size == size


def test_a_custom_kind_keeps_its_own_handler_and_a_built_in_one_uses_the_registry():
    pools = ReplicasHandler(Kind("Pool.test.nsscaler.io"), "test.nsscaler.io", "v1", "pools")
    obj = _deployment({ANNOTATION_ORIGINAL_REPLICAS: "3"})
    assert from_api(pools, obj).handler is pools
    assert from_api(Kind.DEPLOYMENT, obj).handler is None
    assert from_api(DEPLOYMENTS, obj).handler is None


def test_a_scaled_objects_record_is_read_with_its_size_from_the_whole_object():
    obj = {"metadata": {"name": "web", "namespace": "shop-v1", "annotations": {ANNOTATION_KEDA_PAUSED: "0"}}}
    found = recorded_from_api(SCALED_OBJECTS, obj)
    assert (found.size, found.handler) == (0, SCALED_OBJECTS)


def test_an_adoption_changes_only_the_policy_that_holds_the_record():
    frozen = workload("shop-v1", size=0, original="3", scaled_by="gone", rv="8")
    assert adopt_patch(frozen, policy="p") == {"metadata": {"resourceVersion": "8",
                                                            "annotations": {ANNOTATION_SCALED_BY: "p"}}}


@pytest.mark.parametrize(("meta", "name", "terminating"), [
    pytest.param({"name": "shop-v1"}, "shop-v1", False, id="live"),
    pytest.param({"name": "shop-v2", "deletionTimestamp": "2026-12-04T09:00:00Z"}, "shop-v2", True, id="terminating"),
])
def test_a_namespace_is_read_with_whether_it_is_going(meta, name, terminating):
    found = namespace_from_api({"metadata": {**meta, "creationTimestamp": "2026-11-01T09:00:00Z"}})
    assert (found.name, found.terminating) == (name, terminating)
    assert found.created is not None and found.created.isoformat() == "2026-11-01T09:00:00+00:00"


def _entry(manager: str, fields: dict[str, Any], time: str = "2026-12-04T09:00:00Z") -> dict[str, Any]:
    return {"manager": manager, "operation": "Update", "time": time, "fieldsV1": fields}


REPLICAS_FIELD, TEMPLATE_FIELD = {"f:spec": {"f:replicas": {}}}, {"f:spec": {"f:template": {}}}


@pytest.mark.parametrize(("annotations", "labels", "managed", "expected"), [
    pytest.param({}, {}, [], {"replicas_manager": None, "gitops": None, "tier": None, "written_by_nsscaler": None},
                 id="nothing"),
    pytest.param({}, {}, [_entry(FIELD_MANAGER, REPLICAS_FIELD, "2026-12-04T08:00:00Z"),
                          _entry("kubectl", REPLICAS_FIELD, "2026-12-04T09:30:00Z")],
                 {"replicas_manager": "kubectl", "gitops": None, "tier": None,
                  "written_by_nsscaler": "2026-12-04T08:00:00Z"}, id="scaled-up-by-hand-after-nsscaler"),
    pytest.param({}, {}, [_entry(FIELD_MANAGER, REPLICAS_FIELD), _entry("helm", TEMPLATE_FIELD)],
                 {"replicas_manager": None, "gitops": None, "tier": None,
                  "written_by_nsscaler": "2026-12-04T09:00:00Z"}, id="only-nsscaler-wrote-the-count"),
    pytest.param({}, {}, [_entry("kustomize-controller", TEMPLATE_FIELD)],
                 {"replicas_manager": None, "gitops": "Flux", "tier": None, "written_by_nsscaler": None},
                 id="written-by-a-gitops-controller"),
    pytest.param({}, {"kustomize.toolkit.fluxcd.io/name": "shop"}, [],
                 {"replicas_manager": None, "gitops": "Flux", "tier": None, "written_by_nsscaler": None},
                 id="labelled-by-a-gitops-tool"),
    pytest.param({ANNOTATION_RESTORE_TIER: "2"}, {}, [],
                 {"replicas_manager": None, "gitops": None, "tier": "2", "written_by_nsscaler": None},
                 id="a-restore-tier-kept-raw"),
])
def test_who_wrote_a_workload_and_its_tier_are_read_from_its_metadata(annotations, labels, managed, expected):
    found = from_api(Kind.DEPLOYMENT, _deployment(annotations, labels=labels, managedFields=managed))
    assert {key: getattr(found, key) for key in expected} == expected


def test_no_record_is_no_valid_record():
    assert workload("shop-v1").record_is_valid() is False
    assert workload("shop-v1", original="3").record_is_valid() is True


def test_a_freeze_needs_a_size_or_a_record():
    with pytest.raises(ValueError, match=r"^deployment/web in shop-v1: freezing needs its size, read only from"):
        freeze_patch(workload("shop-v1", size=None), policy="p")
