"""The promise nsscaler makes, as assertions: no pre-freeze replica count is ever lost, and none is ever
written apart from its record."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from devtools.builders import AdminApi
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY, LABEL_SCALED


def snapshot(api: AdminApi, prefix: str) -> dict[tuple[str, str], tuple[int, str | None]]:
    """(namespace, name) -> (replicas, recorded original) for every Deployment of a family."""
    out = {}
    for d in api.list("Deployment"):
        meta = d["metadata"]
        if meta["namespace"].startswith(prefix):
            original = (meta.get("annotations") or {}).get(ANNOTATION_ORIGINAL_REPLICAS)
            out[(meta["namespace"], meta["name"])] = (int(d["spec"]["replicas"]), original)
    return out


def assert_nothing_lost(api: AdminApi, prefix: str, originals: dict[tuple[str, str], int]) -> None:
    """Every workload either still runs at its pre-freeze count with no record, or is at 0 with a record
    equal to its pre-freeze count. Anything else would be a lost count."""
    now = snapshot(api, prefix)
    assert set(now) == set(originals)
    broken = {key: (state, originals[key]) for key, state in now.items()
              if state not in ((originals[key], None), (0, str(originals[key])))}
    assert not broken, f"lost or wrong records (now, pre-freeze): {broken}"



#: the workload kinds whose stored states `one_write_each` replays
WORKLOADS = ("/apis/apps/v1/deployments", "/apis/apps/v1/statefulsets")


def _resource_version(api: AdminApi, path: str) -> str:
    resp = api.http.get(f"{api.plane.server}{path}", params={"limit": "1"}, timeout=30)
    resp.raise_for_status()
    return str(resp.json()["metadata"]["resourceVersion"])


def stored_since(api: AdminApi, url: str, resource_version: str, **params: str) -> list[dict[str, Any]]:
    """Every state the API server stored of the objects listed at `url` (narrowed by `params`, e.g. a
    fieldSelector) after `resource_version`, oldest first: a real watch from there replays each write, so two
    writes show as two states even when the second undoes the first."""
    resp = api.http.get(url, timeout=60, stream=True, params={
        "watch": "1", "resourceVersion": resource_version, "timeoutSeconds": "2", **params})
    resp.raise_for_status()
    states = []
    for line in resp.iter_lines():
        if not line:
            continue
        event = json.loads(line)
        if event["type"] == "ERROR":
            raise AssertionError(f"watching {url} from {resource_version}: {event['object']}")
        states.append(event["object"])
    return states


@contextlib.contextmanager
def one_write_each(api: AdminApi, prefix: str, ran: set[tuple[str, str]]) -> Iterator[list[dict[str, Any]]]:
    """Around a run: every state the API server stored of the family's Deployments and StatefulSets meanwhile
    is checked. A workload in `ran` (it ran before its freeze) is at 0 exactly when it carries its record (the
    original count, `scaled-by` and the `scaled` label): the count and its record are written in one PATCH,
    and taken away in one. A freeze that scaled first and recorded after, or a restore that scaled up before it
    dropped the record, leaves a state in between, and fails here. Yields the states seen, for more checks."""
    since = {path: _resource_version(api, path) for path in WORKLOADS}
    seen: list[dict[str, Any]] = []
    yield seen
    for path, resource_version in since.items():
        seen += [obj for obj in stored_since(api, f"{api.plane.server}{path}", resource_version)
                 if obj["metadata"]["namespace"].startswith(prefix)]
    apart = []
    for obj in seen:
        meta = obj["metadata"]
        if (meta["namespace"], meta["name"]) not in ran:
            continue
        notes, labels = meta.get("annotations") or {}, meta.get("labels") or {}
        marks = (ANNOTATION_ORIGINAL_REPLICAS in notes, ANNOTATION_SCALED_BY in notes, LABEL_SCALED in labels)
        at_zero = obj["spec"]["replicas"] == 0
        if marks != (at_zero, at_zero, at_zero):
            apart.append(f"{meta['namespace']}/{meta['name']} at {obj['spec']['replicas']} with "
                         f"{dict(zip(('record', 'scaled-by', 'label'), marks, strict=True))} "
                         f"(resourceVersion {meta['resourceVersion']})")
    assert not apart, f"a count and its record written apart: {apart}"
