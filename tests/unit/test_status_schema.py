"""The status nsscaler writes and the CRD's status schema name the same fields: a figure added to one and not the
other fails here, naming the field and the file to change (an unknown field would be pruned by the API server,
silently; a field in the schema that nothing writes is a promise nobody keeps)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import yaml

from job.decide.budget import Woken
from job.decide.outcome import PolicyOutcome
from job.decide.selection import PolicySelection
from job.decide.status import build_status
from tests.conftest import CRD

NOW = dt.datetime(2026, 12, 4, 9, 0, tzinfo=dt.UTC)
#: a policy with a wake budget (its record and what is left are written only then)
BUDGETED = PolicySelection("p", holding=True, wake_history=(Woken("shop-v1", "w", "u", NOW, NOW),), wake_budget=[
    {"namespace": "shop-v1", "budget": "2h per day", "woken": "2h", "freesAt": "2026-12-05T09:00:00Z"}])
SCHEMA = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]


def _unknown(value: Any, schema: dict[str, Any], where: str) -> Iterator[str]:
    """Every key of `value` (at any depth) that `schema` does not declare."""
    if isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            if key not in schema["properties"]:
                yield f"{where}.{key}"
            else:
                yield from _unknown(item, schema["properties"][key], f"{where}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            yield from _unknown(item, schema["items"], f"{where}[]")


def test_every_status_field_written_is_in_the_crd_status_schema():
    body = build_status(PolicyOutcome("p", 1, held=["shop-v1"], active=["shop-v2"], selection=BUDGETED), now=NOW,
                        list_limit=20)
    assert list(_unknown(body, SCHEMA, "status")) == [], "add these to kustomize/base/crd.yaml's status schema"


def test_every_count_and_top_level_field_of_the_schema_is_written():
    body = build_status(PolicyOutcome("p", 1, selection=BUDGETED), now=NOW, list_limit=20)
    assert sorted(SCHEMA["properties"]["counts"]["properties"]) == sorted(body["counts"]), \
        "status.counts in kustomize/base/crd.yaml and build_status (job/decide/status.py) differ"
    assert sorted(SCHEMA["properties"]) == sorted(body), \
        "status in kustomize/base/crd.yaml and build_status (job/decide/status.py) differ"
