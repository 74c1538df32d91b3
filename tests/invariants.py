"""The promise nsscaler makes, as assertions: no pre-freeze replica count is ever lost."""

from __future__ import annotations

from devtools.builders import AdminApi
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS


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

