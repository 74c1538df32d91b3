"""The records of the fields a freeze sets besides the size (a StatefulSet's `whenScaled`, a DaemonSet's template
`nodeSelector`): for any object, freeze then restore, each applied as the API server applies a merge patch, gives
back exactly the object it was, and every other annotation, label and field untouched."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from job.model.kinds import Kind
from job.model.workloads import freeze_patch, from_api, restore_patch
from tests.unit.examples import examples
from tests.unit.factories import _merge

_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz./-", min_size=1, max_size=12).filter(
    lambda k: k[0].isalpha() and not k.startswith("nsscaler"))
_VALUES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", max_size=8)
_MAPS = st.dictionaries(_KEYS, _VALUES, max_size=4)


def _served(obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server gives back: empty maps are not kept (Go's `omitempty`)."""
    if isinstance(obj, dict):
        return {k: _served(v) for k, v in obj.items() if not (isinstance(v, dict) and not _served(v))}
    return obj


def _applied(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in patch.items() if k != "metadata"}
    meta = {k: v for k, v in patch["metadata"].items() if k != "resourceVersion"}
    return _served(_merge(_merge(obj, body), {"metadata": meta}))


def _roundtrip(kind: Kind, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    frozen = _applied(obj, freeze_patch(from_api(kind, obj), policy="p"))
    assert from_api(kind, frozen).size == 0
    return frozen, _applied(frozen, restore_patch(from_api(kind, frozen)))


def _object(kind: str, spec: dict[str, Any], annotations: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    return _served({"kind": kind, "metadata": {"name": "w", "namespace": "shop-v1", "resourceVersion": "7",
                                               "annotations": dict(annotations), "labels": dict(labels)},
                    "spec": spec})


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 50), st.sampled_from([None, "Retain", "Delete"]), st.sampled_from([None, "Retain", "Delete"]),
       _MAPS, _MAPS)
def test_a_statefulset_comes_back_with_its_retention_policy_exactly(replicas, when_scaled, when_deleted,
                                                                    annotations, labels):
    retention = {k: v for k, v in (("whenScaled", when_scaled), ("whenDeleted", when_deleted)) if v}
    spec: dict[str, Any] = {"replicas": replicas, "serviceName": "w",
                            **({"persistentVolumeClaimRetentionPolicy": retention} if retention else {})}
    original = _object("StatefulSet", spec, annotations, labels)
    frozen, back = _roundtrip(Kind.STATEFULSET, copy.deepcopy(original))
    # while frozen, nothing would delete its claims
    assert frozen["spec"].get("persistentVolumeClaimRetentionPolicy", {}).get("whenScaled") in (None, "Retain")
    assert back == original


@settings(max_examples=examples(200), deadline=None)
@given(st.one_of(st.none(), _MAPS), _MAPS, _MAPS)
def test_a_daemonset_comes_back_with_its_node_selector_exactly(selector, annotations, labels):
    pod_spec: dict[str, Any] = {"containers": [{"name": "agent", "image": "agent"}]}
    if selector is not None:
        pod_spec["nodeSelector"] = selector
    original = _object("DaemonSet", {"template": {"spec": pod_spec}}, annotations, labels)
    _, back = _roundtrip(Kind.DAEMONSET, copy.deepcopy(original))
    assert back == original
