"""A StatefulSet's claims survive its freeze: the retention policy's record, freeze and restore (pure)."""

from __future__ import annotations

import pytest

from job.decide.actions import Action, ActionResult, Verb, failure_message
from job.model.kinds import Kind
from job.model.marks import (
    ANNOTATION_FREED,
    ANNOTATION_ORIGINAL_REPLICAS,
    ANNOTATION_ORIGINAL_WHEN_SCALED,
    ANNOTATION_SCALED_BY,
)
from job.model.workloads import freeze_patch, from_api, restore_patch

RETENTION = "persistentVolumeClaimRetentionPolicy"


def statefulset(replicas: int, when_scaled: str | None, annotations: dict[str, str] | None = None) -> dict:
    spec: dict = {"replicas": replicas}
    if when_scaled is not None:
        spec[RETENTION] = {"whenDeleted": "Retain", "whenScaled": when_scaled}
    return {"metadata": {"name": "db", "namespace": "shop-v1", "resourceVersion": "7",
                         "annotations": annotations or {}}, "spec": spec}


@pytest.mark.parametrize(("when_scaled", "sets", "records"), [
    pytest.param("Delete", {RETENTION: {"whenScaled": "Retain"}}, {ANNOTATION_ORIGINAL_WHEN_SCALED: "Delete"},
                 id="delete-becomes-retain-and-is-recorded"),
    pytest.param("Retain", {}, {}, id="retain-is-left-alone"),
    pytest.param(None, {}, {}, id="no-policy-is-left-alone"),
])
def test_the_freeze_sets_retain_in_the_same_patch_as_zero(when_scaled, sets, records):
    patch = freeze_patch(from_api(Kind.STATEFULSET, statefulset(3, when_scaled)), policy="p")
    assert patch["spec"] == {"replicas": 0, **sets}
    assert _without_freed(patch["metadata"]["annotations"]) == {
        ANNOTATION_ORIGINAL_REPLICAS: "3", ANNOTATION_SCALED_BY: "p",
        **records}


def test_a_refreeze_keeps_the_first_record_and_sets_retain_again():
    """Scaled up and set back to Delete by hand during the freeze: Retain again, the first value kept."""
    found = statefulset(2, "Delete", {ANNOTATION_ORIGINAL_REPLICAS: "3", ANNOTATION_SCALED_BY: "p",
                                      ANNOTATION_ORIGINAL_WHEN_SCALED: "Delete"})
    patch = freeze_patch(from_api(Kind.STATEFULSET, found), policy="p")
    assert patch["spec"] == {"replicas": 0, RETENTION: {"whenScaled": "Retain"}}
    assert _without_freed(patch["metadata"]["annotations"]) == {
        ANNOTATION_ORIGINAL_REPLICAS: "3", ANNOTATION_SCALED_BY: "p"}


@pytest.mark.parametrize("metadata_only", [False, True], ids=["whole", "metadata-only"])
def test_the_restore_puts_the_recorded_policy_back_and_removes_the_record(metadata_only):
    frozen = statefulset(0, "Retain", {ANNOTATION_ORIGINAL_REPLICAS: "3", ANNOTATION_SCALED_BY: "p",
                                       ANNOTATION_ORIGINAL_WHEN_SCALED: "Delete"})
    if metadata_only:
        frozen = {"metadata": frozen["metadata"]}
    patch = restore_patch(from_api(Kind.STATEFULSET, frozen, metadata_only=metadata_only))
    assert patch["spec"] == {"replicas": 3, RETENTION: {"whenScaled": "Delete"}}
    assert _without_freed(patch["metadata"]["annotations"]) == {
        ANNOTATION_ORIGINAL_REPLICAS: None, ANNOTATION_SCALED_BY: None,
        ANNOTATION_ORIGINAL_WHEN_SCALED: None}


def test_a_refused_freeze_says_why_the_retention_change_matters():
    workload = from_api(Kind.STATEFULSET, statefulset(3, "Delete"))
    refused = ActionResult(Action(Verb.FREEZE, workload, "p", None, 0, "held", False), "failed", "403 denied")
    assert failure_message(refused).startswith("403 denied; nsscaler sets persistentVolumeClaimRetentionPolicy")
    plain = from_api(Kind.STATEFULSET, statefulset(3, "Retain"))
    assert failure_message(ActionResult(Action(Verb.FREEZE, plain, "p", None, 0, "held", False), "failed",
                                        "403 denied")) == "403 denied"


def _without_freed(annotations: dict) -> dict:
    """The record's own keys: what the freeze frees (`ANNOTATION_FREED`) goes with it and is tested apart."""
    return {k: v for k, v in annotations.items() if k != ANNOTATION_FREED}
