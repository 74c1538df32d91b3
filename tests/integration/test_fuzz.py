"""Schema-driven fuzzing through the real API server: NSScalers and Wakes generated from the CRDs' own
`openAPIV3Schema` (`tests.schema_fuzz`), and the annotations and labels nsscaler reads on real workloads of every
kind. Whatever the API server admits, a run must serve or report: exit 0 or 1 (never a traceback, never 2 for one
bad object), the other policy served in the same run (its held namespace frozen again, with its record), and a
bad object named, with the field, in its status or the run's report. What the API server refuses, it refuses
with a message (4xx), never a 500, and never with an error of nsscaler's own admission policies.

A fixed number of examples per run (`FUZZ_EXAMPLES`, default 30 per test); the seed is random unless `FUZZ_SEED`
is set, and printed at the end of the session with the tally, so any failure replays with `FUZZ_SEED=<seed>`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from devtools import builders
from devtools.builders import AdminApi, wait_until
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_FREED,
    ANNOTATION_ORIGINAL_NODE_SELECTOR,
    ANNOTATION_ORIGINAL_REPLICAS,
    ANNOTATION_ORIGINAL_SUSPEND,
    ANNOTATION_ORIGINAL_WHEN_SCALED,
    ANNOTATION_RESTORE_TIER,
    ANNOTATION_SCALED_BY,
    LABEL_SCALED,
)
from tests import crds, schema_fuzz
from tests.conftest import CRD, WAKE_CRD

FUZZ = settings(max_examples=schema_fuzz.EXAMPLES, deadline=None, database=None, derandomize=False,
                suppress_health_check=list(HealthCheck), print_blob=True)
NSSCALER_SPEC = schema_fuzz.spec_schema(yaml.safe_load(CRD.read_text()))
WAKE_SPEC = schema_fuzz.spec_schema(yaml.safe_load(WAKE_CRD.read_text()))


@dataclass
class World:
    """The other policy, which every run must serve: `<prefix>c-v1` held, its Deployment scaled up again before
    each run (as a person would), so that a run that serves it freezes it again, with its record."""

    api: AdminApi
    prefix: str

    @property
    def served(self) -> str:
        return self.prefix + "c-v1"

    def setup(self) -> None:
        self.api.create(builders.namespace(self.served))
        self.api.create(builders.deployment(self.served, "web", 3))
        self.api.create(builders.nsscaler(f"{self.prefix}c", self.prefix + "c-", []))

    def scale_up_the_other(self) -> None:
        self.api.patch("Deployment", "web", {"spec": {"replicas": 3}}, namespace=self.served)

    def check_the_other_served(self) -> None:
        obj = self.api.get("Deployment", "web", self.served)
        notes = obj["metadata"].get("annotations") or {}
        assert obj["spec"]["replicas"] == 0 and notes.get(ANNOTATION_ORIGINAL_REPLICAS) == "3", \
            f"the other policy was not served in this run: {obj['spec']['replicas']} replicas, {notes}"

    def run(self, run_job: Any) -> Any:
        self.scale_up_the_other()
        result = run_job()
        note(f"exit {result.exit_code}; problems {result.report.get('problems')}; stderr {result.stderr[-2000:]}")
        assert "Traceback" not in result.stderr, result.stderr
        assert result.exit_code in (0, 1), result.stderr
        self.check_the_other_served()
        return result


@pytest.fixture
def world(api: AdminApi, prefix: str, crd: None) -> World:
    made = World(api, prefix)
    made.setup()
    return made


def admitted(api: AdminApi, obj: dict[str, Any], *, what: str) -> bool:
    """POST `obj`: True when admitted; a refusal must be a client error with a message, never a 500."""
    resp = api.http.post(api.url(obj["kind"], obj["metadata"].get("namespace")), json=obj, timeout=60)
    note(f"{what}: {resp.status_code} {resp.text[:600]}")
    assert resp.status_code < 500, f"the API server failed on {what}: {resp.status_code} {resp.text[:2000]}"
    # nsscaler's own admission policies refuse with their reason, never with an error of their own
    assert "resulted in error" not in resp.text and "error applying patch" not in resp.text, resp.text[:2000]
    schema_fuzz.tally(what, admitted=resp.status_code == 201)
    return resp.status_code == 201


def aimed_at(prefix: str, spec: Any, aim: bool) -> Any:
    """A generated spec whose scope stays inside this test's prefix: at `<prefix>z` itself (where a namespace
    and a Deployment wait) when `aim`, else at `<prefix>z<generated prefix>` (the generated text still fuzzed)."""
    if not isinstance(spec, dict):
        return spec
    given_prefix = spec.get("scope_prefix")
    scope = f"{prefix}z" if aim or not isinstance(given_prefix, str) else f"{prefix}z{given_prefix}"
    return {**spec, "scope_prefix": scope}


@FUZZ
@seed(schema_fuzz.SEED)
@given(spec=schema_fuzz.specs(NSSCALER_SPEC), aim=st.booleans())
def test_every_admitted_nsscaler_is_served_or_reported(api: AdminApi, run_job, world: World, spec, aim):
    name = f"{world.prefix}fuzz"
    if not api.exists("Namespace", f"{world.prefix}zv1"):
        api.create(builders.namespace(f"{world.prefix}zv1"))
        api.create(builders.deployment(f"{world.prefix}zv1", "app", 2))
    obj = {"apiVersion": builders.NSSCALER_VERSION, "kind": "NSScaler", "metadata": {"name": name},
           "spec": aimed_at(world.prefix, spec, aim)}
    if not admitted(api, obj, what="NSScaler"):
        return
    try:
        result = world.run(run_job)
        status = api.status(name)
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        if ready["reason"] == "InvalidSpec":
            assert result.exit_code == 1 and ready["message"].startswith("spec"), ready
        assert status["observedGeneration"] >= 1, status
    finally:
        api.delete("NSScaler", name)


@pytest.fixture
def woken_family(api: AdminApi, world: World) -> str:
    ns = world.prefix + "w-v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "app", 2))
    api.create(builders.nsscaler(f"{world.prefix}w", world.prefix + "w-", []))
    return ns


@pytest.mark.usefixtures("wake_admission")
@FUZZ
@seed(schema_fuzz.SEED)
@given(spec=schema_fuzz.specs(WAKE_SPEC), keep_requester=st.integers(0, 4))
def test_every_admitted_wake_is_served_or_reported(api: AdminApi, run_job, world: World, woken_family: str,
                                                   spec, keep_requester):
    if isinstance(spec, dict) and keep_requester != 3:  # a generated requester is refused: mostly leave it out
        spec = {k: v for k, v in spec.items() if k != "requestedBy"}
    obj = {"apiVersion": builders.NSSCALER_VERSION, "kind": "Wake",
           "metadata": {"name": "fuzz", "namespace": woken_family}, "spec": spec}
    if not admitted(api, obj, what="Wake"):
        return
    try:
        result = world.run(run_job)
        status = api.get("Wake", "fuzz", woken_family).get("status") or {}
        assert status.get("state") in ("Active", "Expired", "Ignored"), status
        unreadable = [p for p in result.report.get("problems", []) if p.startswith(f"Wake {woken_family}/fuzz")]
        if unreadable:
            assert result.exit_code == 1 and status["state"] == "Ignored"
            assert status["message"].startswith("spec"), status
    finally:
        api.delete("Wake", "fuzz", woken_family)


_MARKS = [ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_ORIGINAL_SUSPEND, ANNOTATION_ORIGINAL_WHEN_SCALED,
          ANNOTATION_ORIGINAL_NODE_SELECTOR, ANNOTATION_FREED, ANNOTATION_SCALED_BY, ANNOTATION_EXCLUDE,
          ANNOTATION_RESTORE_TIER]
_VALUES = st.one_of(
    st.sampled_from(["0", "1", "3", "-1", "true", "false", "null", "{}", "[]", '"3"', "Delete", "Retain", "9",
                     "10", "²", "٣", "1e3", "0x10", " 3", "3 ", "", '{"disk": "ssd"}', '{"a": 1}', "{", '{"pods": 1}',
                     '{"pods": -1, "requests": {"cpu": 5}}', '{"pods": 1, "requests": {"cpu": "1e400"}}']),
    st.from_regex(r"-?[0-9]{1,30}", fullmatch=True), st.text(max_size=40), st.just("9" * 5000),
    st.builds(json.dumps, st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5)),
                                          max_size=3)))
_KINDS = ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job", "ReplicaSet", "ReplicationController", "Fleet"]
#: the kinds as a policy names them: a custom kind with its group (a test CRD with /scale, `tests/crds.py`)
_POLICY_KINDS = [k if k != "Fleet" else f"Fleet.{crds.GROUP}" for k in _KINDS]
#: the numbers a fuzzed record may restore stay small in this shared control plane
_SMALL_NUMBER = 5


def workload(kind: str, ns: str, name: str) -> dict[str, Any]:
    if kind == "Deployment":
        return builders.deployment(ns, name, 1)
    if kind == "StatefulSet":
        return builders.statefulset(ns, name, 1)
    if kind == "DaemonSet":
        return builders.daemonset(ns, name)
    if kind == "CronJob":
        return builders.cronjob(ns, name)
    if kind == "Job":
        return builders.job(ns, name)
    if kind == "Fleet":
        return builders.custom(kind, ns, name, {"replicas": 1})
    return builders.replicaset(ns, name, 1, kind=kind)


def small(value: str) -> str:
    """A fuzzed count a restore would really apply is kept small: a controller would try to make that many Pods."""
    try:
        return str(min(int(value), _SMALL_NUMBER)) if int(value) > _SMALL_NUMBER else value
    except ValueError:
        return value


@pytest.fixture
def marked_family(api: AdminApi, world: World) -> str:
    """`<prefix>m-held` (held) and `<prefix>m-up` (active: a record there is restored), under one policy; no Pod
    can start in either (a ResourceQuota of 0 Pods), whatever count a fuzzed record restores."""
    for suffix in ("held", "up"):
        ns = f"{world.prefix}m-{suffix}"
        api.create(builders.namespace(ns))
        api.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods", "namespace": ns},
                    "spec": {"hard": {"pods": "0"}}})
    crds.install(api, crds.TEST_KINDS)
    api.create(builders.nsscaler(f"{world.prefix}m", world.prefix + "m-", ["up"], kinds=_POLICY_KINDS))
    return world.prefix + "m-"


@FUZZ
@seed(schema_fuzz.SEED)
@given(kind=st.sampled_from(_KINDS), held=st.booleans(), scaled=st.booleans(), no_replicas=st.booleans(),
       marks=st.dictionaries(st.sampled_from(_MARKS), _VALUES, max_size=5))
def test_every_mark_on_every_kind_is_served_or_reported(api: AdminApi, run_job, world: World, marked_family: str,
                                                        kind, held, scaled, no_replicas, marks):
    ns = marked_family + ("held" if held else "up")
    obj = workload(kind, ns, "fuzz")
    obj["metadata"]["annotations"] = {k: small(v) if k == ANNOTATION_ORIGINAL_REPLICAS else v
                                      for k, v in marks.items()}
    obj["metadata"]["labels"] = {LABEL_SCALED: "true"} if scaled else {}
    if no_replicas:
        obj["spec"].pop("replicas", None)  # the API server defaults it (to 1) where the kind has one
    if not admitted(api, obj, what=f"{kind} with marks"):
        return
    try:
        result = world.run(run_job)
        if result.exit_code == 1:  # whatever failed names the workload
            said = json.dumps([result.report.get("problems"), [p["failures"] for p in result.report["policies"]]])
            assert f"{kind}/fuzz" in said or "fuzz" in said, said
    finally:
        api.delete(kind, "fuzz", ns)
        _gone(api, kind, ns)


def _gone(api: AdminApi, kind: str, ns: str) -> None:
    """The next example reuses the name: wait until this one is gone."""
    wait_until(lambda: not api.exists(kind, "fuzz", ns), timeout=60, what=f"{kind} {ns}/fuzz to be deleted")
