"""DaemonSets: frozen by a node selector no node matches; the template's own selector recorded and restored."""

from __future__ import annotations

import pytest

from job.model.kinds import BUILTIN, Kind, MalformedRecord
from job.model.marks import ANNOTATION_FREED, ANNOTATION_ORIGINAL_NODE_SELECTOR, ANNOTATION_SCALED_BY, FROZEN_NODE_LABEL
from job.model.workloads import freeze_patch, from_api, restore_patch

DAEMONSETS = BUILTIN[Kind.DAEMONSET]


def daemonset(selector: dict[str, str] | None, annotations: dict[str, str] | None = None) -> dict:
    pod_spec: dict = {"containers": [{"name": "agent", "image": "agent"}]}
    if selector is not None:
        pod_spec["nodeSelector"] = selector
    return {"metadata": {"name": "agent", "namespace": "shop-v1", "resourceVersion": "4",
                         "annotations": annotations or {}}, "spec": {"template": {"spec": pod_spec}}}


@pytest.mark.parametrize(("selector", "recorded"), [
    pytest.param(None, "null", id="no-selector"),
    pytest.param({"disk": "ssd", "zone": "a"}, '{"disk":"ssd","zone":"a"}', id="a-selector"),
])
def test_freeze_and_restore_give_back_the_selector_exactly(selector, recorded):
    running = from_api(Kind.DAEMONSET, daemonset(selector))
    assert running.size == 1
    patch = freeze_patch(running, policy="p")
    assert patch["spec"] == {"template": {"spec": {"nodeSelector": {FROZEN_NODE_LABEL: "true"}}}}
    assert _without_freed(patch["metadata"]["annotations"]) == {
        ANNOTATION_ORIGINAL_NODE_SELECTOR: recorded,
                                                ANNOTATION_SCALED_BY: "p"}
    frozen = daemonset({**(selector or {}), FROZEN_NODE_LABEL: "true"}, patch["metadata"]["annotations"])
    assert from_api(Kind.DAEMONSET, frozen).size == 0
    back = restore_patch(from_api(Kind.DAEMONSET, frozen))
    assert back["spec"] == {"template": {"spec": {"nodeSelector": {**(selector or {}), FROZEN_NODE_LABEL: None}}}}
    assert _without_freed(back["metadata"]["annotations"]) == {
        ANNOTATION_ORIGINAL_NODE_SELECTOR: None, ANNOTATION_SCALED_BY: None}


@pytest.mark.parametrize("record", ['"ssd"', "[1]", '{"disk": 1}', "not json"])
def test_a_record_that_is_not_a_selector_is_reported_not_reinterpreted(record):
    with pytest.raises(MalformedRecord):
        DAEMONSETS.restored_body(record)


def test_a_frozen_daemonset_read_from_metadata_alone_is_known_frozen():
    """A steady state reads metadata only: nsscaler still owning its selector key settles the size."""
    meta = daemonset(None, {ANNOTATION_ORIGINAL_NODE_SELECTOR: "null", ANNOTATION_SCALED_BY: "p"})["metadata"]
    meta["managedFields"] = [{"manager": "nsscaler", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {
        "f:spec": {"f:template": {"f:spec": {"f:nodeSelector": {f"f:{FROZEN_NODE_LABEL}": {}}}}}}}]
    assert from_api(Kind.DAEMONSET, {"metadata": meta}, metadata_only=True).size == 0


def _without_freed(annotations: dict) -> dict:
    """The record's own keys: what the freeze frees (`ANNOTATION_FREED`) goes with it and is tested apart."""
    return {k: v for k, v in annotations.items() if k != ANNOTATION_FREED}
