"""Schema-driven fuzzing through the real API server: NSScalers and Wakes generated from the CRDs' own
`openAPIV3Schema` and CEL rules (`tests.schema_fuzz`), and the annotations and labels nsscaler reads on real
workloads of every kind. What the API server refuses, it refuses with a message (4xx), never a 500, and never with
an error of nsscaler's own admission policies. Each test asserts a floor of admitted examples (a generator whose
examples are all refused fails), and for every admitted example:

- the run exits 0 or 1 (never a traceback, never 2 for one bad object), and the other policy is served in the
  same run (its held namespace frozen again, with its record);
- the fuzzed object's own outcome: an NSScaler is `InvalidSpec` with the field named (and its namespace left as
  it was), or its namespace is frozen with the record exactly where its status says it holds, and untouched
  where it does not; a Wake's namespace runs while the Wake is Active and is frozen with its record otherwise; a
  fuzzed workload in a held namespace is frozen with its record, excluded and untouched, or named in a failure
  with the mark at fault; in an active one it is never left frozen by the policy unless a failure names it.

A fixed number of examples per test (`FUZZ_EXAMPLES`, default 30) and a fixed seed (`schema_fuzz.DEFAULT_SEED`),
so the gate is the same every run; `FUZZ_SEED=<n>` replays another, `make fuzz-random` draws and prints a new one.
The tally (tried, admitted, refused, per kind) is printed at the end of the session.
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
    FROZEN_NODE_LABEL,
    LABEL_SCALED,
)
from tests import crds, schema_fuzz
from tests.conftest import CRD, WAKE_CRD

FUZZ = settings(max_examples=schema_fuzz.EXAMPLES, deadline=None, database=None, derandomize=False,
                suppress_health_check=list(HealthCheck), print_blob=True)
NSSCALER_SPEC = schema_fuzz.spec_schema(yaml.safe_load(CRD.read_text()))
WAKE_SPEC = schema_fuzz.spec_schema(yaml.safe_load(WAKE_CRD.read_text()))


#: an ICS calendar with one all-day event a year, Christmas Eve: what a team keeps in a ConfigMap
DESCRIBED_CALENDAR = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//nsscaler tests//EN\r\nBEGIN:VEVENT\r\n"
                      "UID:christmas-eve@nsscaler.test\r\nDTSTAMP:20260101T000000Z\r\nDTSTART;VALUE=DATE:20261224\r\n"
                      "DTEND;VALUE=DATE:20261225\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:Christmas Eve\r\nEND:VEVENT\r\n"
                      "END:VCALENDAR\r\n")


@dataclass
class World:
    """The other policy, which every run must serve: `<prefix>c-v1` held, its Deployment scaled up again before
    each run (as a person would), so that a run that serves it freezes it again, with its record."""

    api: AdminApi
    prefix: str

    @property
    def served(self) -> str:
        return self.prefix + "c-v1"

    @property
    def own(self) -> str:
        """nsscaler's own namespace, where the calendar the CRD's description names waits (`holidays`, `de.ics`):
        a fuzzed exception that names it is served, not reported for a calendar nobody wrote."""
        return self.prefix + "sys"

    def setup(self) -> None:
        self.api.create(builders.namespace(self.served))
        self.api.create(builders.deployment(self.served, "web", 3))
        self.api.create(builders.nsscaler(f"{self.prefix}c", self.prefix + "c-", []))
        self.api.create(builders.namespace(self.own))
        self.api.create({"apiVersion": "v1", "kind": "ConfigMap", "data": {"de.ics": DESCRIBED_CALENDAR},
                         "metadata": {"name": "holidays", "namespace": self.own}})

    def scale_up_the_other(self) -> None:
        self.api.patch("Deployment", "web", {"spec": {"replicas": 3}}, namespace=self.served)

    def check_the_other_served(self) -> None:
        obj = self.api.get("Deployment", "web", self.served)
        notes = obj["metadata"].get("annotations") or {}
        assert obj["spec"]["replicas"] == 0 and notes.get(ANNOTATION_ORIGINAL_REPLICAS) == "3", \
            f"the other policy was not served in this run: {obj['spec']['replicas']} replicas, {notes}"

    def run(self, run_job: Any) -> Any:
        self.scale_up_the_other()
        result = run_job("--own-namespace", self.own)
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


def admitted(api: AdminApi, obj: dict[str, Any], *, what: str, lawful: bool | None = None) -> bool:
    """POST `obj`: True when admitted; a refusal must be a client error with a message, never a 500."""
    resp = api.http.post(api.url(obj["kind"], obj["metadata"].get("namespace")), json=obj, timeout=60)
    note(f"{what}: {resp.status_code} {resp.text[:600]}")
    assert resp.status_code < 500, f"the API server failed on {what}: {resp.status_code} {resp.text[:2000]}"
    # nsscaler's own admission policies refuse with their reason, never with an error of their own
    assert "resulted in error" not in resp.text and "error applying patch" not in resp.text, resp.text[:2000]
    assert resp.status_code in (201, 400, 403, 409, 422), f"{what}: {resp.status_code} {resp.text[:2000]}"
    schema_fuzz.tally(what, admitted=resp.status_code == 201, lawful=lawful)
    return resp.status_code == 201


#: the least share of the lawful examples (three in four are drawn within the schema and its CEL rules) the API
#: server must admit, per test; each generated Wake keeps its requester one time in five, which is refused; the
#: workloads' marks are not told apart, so their floor is of all tried
NSSCALER_FLOOR, WAKE_FLOOR, MARKS_FLOOR = 0.8, 0.6, 0.9
_RECORD = [ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY]


def fresh(api: AdminApi, ns: str, name: str, replicas: int) -> None:
    """`ns/name` running `replicas` with no record, whatever the example before left: each example starts alike."""
    api.patch("Deployment", name, {"metadata": {"annotations": dict.fromkeys(_RECORD), "labels": {LABEL_SCALED: None}},
                                   "spec": {"replicas": replicas}}, namespace=ns)


def assert_frozen(api: AdminApi, ns: str, name: str, *, count: int, by: str) -> None:
    obj = api.get("Deployment", name, ns)
    notes, labels = obj["metadata"].get("annotations") or {}, obj["metadata"].get("labels") or {}
    assert (obj["spec"]["replicas"], notes.get(ANNOTATION_ORIGINAL_REPLICAS), notes.get(ANNOTATION_SCALED_BY),
            labels.get(LABEL_SCALED)) == (0, str(count), by, "true"), f"{ns}/{name} not frozen with its record: {obj}"


def assert_running(api: AdminApi, ns: str, name: str, *, count: int) -> None:
    obj = api.get("Deployment", name, ns)
    notes = obj["metadata"].get("annotations") or {}
    assert (obj["spec"]["replicas"], notes.get(ANNOTATION_ORIGINAL_REPLICAS)) == (count, None), \
        f"{ns}/{name} not running untouched: {obj}"


def remove(api: AdminApi, kind: str, name: str, namespace: str | None = None) -> None:
    """Delete an example's object at once, finalizers and all (a policy that woke on request carries one)."""
    if api.exists(kind, name, namespace):
        api.patch(kind, name, {"metadata": {"finalizers": None}}, namespace=namespace)
        api.delete(kind, name, namespace)


def aimed_at(prefix: str, spec: Any, aim: bool) -> Any:
    """A generated spec whose scope stays inside this test's prefix: at `<prefix>z` itself (where a namespace
    and a Deployment wait) when `aim`, else at `<prefix>z<generated prefix>` (the generated text still fuzzed)."""
    if not isinstance(spec, dict):
        return spec
    given_prefix = spec.get("scope_prefix")
    scope = f"{prefix}z" if aim or not isinstance(given_prefix, str) else f"{prefix}z{given_prefix}"
    return {**spec, "scope_prefix": scope}


def check_policy_outcome(api: AdminApi, name: str, spec: dict[str, Any], result: Any, target: str) -> bool:
    """The fuzzed policy's own outcome: refused by nsscaler with its field named, or its namespace frozen with the
    record exactly where its status says it holds it (and nsscaler freezes Deployments for it, for real). True
    when the policy was served (not reported `InvalidSpec`)."""
    status = api.status(name)
    assert status["observedGeneration"] >= 1, status
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    if ready["reason"] == "InvalidSpec":
        assert result.exit_code == 1 and ready["message"].startswith("spec"), ready
        assert_running(api, target, "app", count=2)
        return False
    freezes = "Deployment" in spec.get("kinds", ["Deployment"]) and not spec.get("dry_run")
    if target in (status.get("heldNamespaces") or []) and freezes:
        assert_frozen(api, target, "app", count=2, by=name)
    else:
        assert_running(api, target, "app", count=2)
    return True


def test_every_admitted_nsscaler_is_served_or_reported(api: AdminApi, run_job, world: World):
    target, names = f"{world.prefix}zv1", iter(range(10**6))
    api.create(builders.namespace(target))
    api.create(builders.deployment(target, "app", 2))
    before = schema_fuzz.counted("NSScaler")

    @FUZZ
    @seed(schema_fuzz.SEED)
    @given(drawn=schema_fuzz.tagged_specs(NSSCALER_SPEC), aim=st.booleans())
    def example(drawn, aim):
        lawful, spec = drawn
        name = f"{world.prefix}fuzz{next(names)}"  # a name of its own: the one before may still be going
        fresh(api, target, "app", 2)
        obj = {"apiVersion": builders.NSSCALER_VERSION, "kind": "NSScaler", "metadata": {"name": name},
               "spec": aimed_at(world.prefix, spec, aim)}
        if not admitted(api, obj, what="NSScaler", lawful=lawful):
            return
        try:
            result = world.run(run_job)
            served = check_policy_outcome(api, name, obj["spec"], result, target)
            if isinstance(spec, dict) and spec.get("exceptions"):
                schema_fuzz.outcome("NSScaler with exceptions", served=served)
        finally:
            remove(api, "NSScaler", name)

    example()
    print(schema_fuzz.assert_floor("NSScaler", before=before, share=NSSCALER_FLOOR, tagged=True))


@pytest.fixture
def woken_family(api: AdminApi, world: World) -> str:
    ns = world.prefix + "w-v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "app", 2))
    api.create(builders.nsscaler(f"{world.prefix}w", world.prefix + "w-", []))
    return ns


@pytest.mark.usefixtures("wake_admission")
def test_every_admitted_wake_is_served_or_reported(api: AdminApi, run_job, world: World, woken_family: str):
    before = schema_fuzz.counted("Wake")

    @FUZZ
    @seed(schema_fuzz.SEED)
    @given(drawn=schema_fuzz.tagged_specs(WAKE_SPEC), keep_requester=st.integers(0, 4))
    def example(drawn, keep_requester):
        lawful, spec = drawn
        if isinstance(spec, dict) and keep_requester != 3:  # a generated requester is refused: mostly leave it out
            spec = {k: v for k, v in spec.items() if k != "requestedBy"}
        obj = {"apiVersion": builders.NSSCALER_VERSION, "kind": "Wake",
               "metadata": {"name": "fuzz", "namespace": woken_family}, "spec": spec}
        if not admitted(api, obj, what="Wake", lawful=lawful):
            return
        try:
            result = world.run(run_job)
            status = api.get("Wake", "fuzz", woken_family).get("status") or {}
            assert status.get("state") in ("Active", "Expired", "Ignored"), status
            unreadable = [p for p in result.report.get("problems", []) if p.startswith(f"Wake {woken_family}/fuzz")]
            if unreadable:
                assert result.exit_code == 1 and status["state"] == "Ignored"
                assert status["message"].startswith("spec"), status
            # the Wake's own outcome: its namespace runs while it is Active, and is held (with its record) otherwise
            if status["state"] == "Active":
                assert_running(api, woken_family, "app", count=2)
            else:
                assert_frozen(api, woken_family, "app", count=2, by=f"{world.prefix}w")
        finally:
            remove(api, "Wake", "fuzz", woken_family)
            _gone(api, "Wake", woken_family)

    example()
    print(schema_fuzz.assert_floor("Wake", before=before, share=WAKE_FLOOR, tagged=True))


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


#: the record each kind's freeze leaves, and how a frozen one looks
_RECORD_KEY = {"CronJob": ANNOTATION_ORIGINAL_SUSPEND, "Job": ANNOTATION_ORIGINAL_SUSPEND,
               "DaemonSet": ANNOTATION_ORIGINAL_NODE_SELECTOR}


def looks_frozen(kind: str, obj: dict[str, Any]) -> bool:
    spec = obj["spec"]
    if kind in ("CronJob", "Job"):
        return spec.get("suspend") is True
    if kind == "DaemonSet":
        return FROZEN_NODE_LABEL in (spec["template"]["spec"].get("nodeSelector") or {})
    return spec.get("replicas") == 0


def check_mark_outcome(api: AdminApi, sent: dict[str, Any], result: Any, *, held: bool, policy: str) -> None:
    """The fuzzed workload's own outcome: named in a failure with the mark at fault; or, in the held namespace,
    excluded and untouched or frozen with its record by this policy; in the active one, never left frozen by it."""
    kind, ns = sent["kind"], sent["metadata"]["namespace"]
    obj = api.get(kind, "fuzz", ns)
    notes, labels = obj["metadata"].get("annotations") or {}, obj["metadata"].get("labels") or {}
    said = [str(p) for p in result.report.get("problems", [])]
    said += [str(f) for p in result.report.get("policies", []) for f in p.get("failures", [])]
    named = [f for f in said if f"{kind.lower()}/fuzz" in f.lower() and f" {ns}" in f]
    where = f"{kind} {ns}/fuzz (sent {sent['metadata']}): now {obj['metadata']} {obj['spec']}; said {said}"
    if named:
        assert result.exit_code == 1, where
        assert any(key in f for f in named for key in [*_MARKS, LABEL_SCALED]), f"no mark named: {where}"
        return
    if not held:
        assert not (looks_frozen(kind, obj) and notes.get(ANNOTATION_SCALED_BY) == policy), f"left frozen: {where}"
        return
    if (sent["metadata"]["annotations"].get(ANNOTATION_EXCLUDE) or "").lower() == "true":
        assert not looks_frozen(kind, obj) and notes == sent["metadata"]["annotations"], f"touched: {where}"
        return
    record = _RECORD_KEY.get(kind, ANNOTATION_ORIGINAL_REPLICAS)
    assert looks_frozen(kind, obj) and record in notes, f"not frozen with its record: {where}"
    assert (notes.get(ANNOTATION_SCALED_BY), labels.get(LABEL_SCALED)) == (policy, "true"), f"unmarked: {where}"


def test_every_mark_on_every_kind_is_served_or_reported(api: AdminApi, run_job, world: World, marked_family: str):
    before = schema_fuzz.counted("workload with marks")

    @FUZZ
    @seed(schema_fuzz.SEED)
    @given(kind=st.sampled_from(_KINDS), held=st.booleans(), scaled=st.booleans(), no_replicas=st.booleans(),
           marks=st.dictionaries(st.sampled_from(_MARKS), _VALUES, max_size=5))
    def example(kind, held, scaled, no_replicas, marks):
        ns = marked_family + ("held" if held else "up")
        obj = workload(kind, ns, "fuzz")
        obj["metadata"]["annotations"] = {k: small(v) if k == ANNOTATION_ORIGINAL_REPLICAS else v
                                          for k, v in marks.items()}
        obj["metadata"]["labels"] = {LABEL_SCALED: "true"} if scaled else {}
        if no_replicas:
            obj["spec"].pop("replicas", None)  # the API server defaults it (to 1) where the kind has one
        if not admitted(api, obj, what="workload with marks"):
            return
        try:
            result = world.run(run_job)
            check_mark_outcome(api, obj, result, held=held, policy=f"{world.prefix}m")
        finally:
            api.delete(kind, "fuzz", ns)
            _gone(api, kind, ns)

    example()
    print(schema_fuzz.assert_floor("workload with marks", before=before, share=MARKS_FLOOR))


def _gone(api: AdminApi, kind: str, ns: str) -> None:
    """The next example reuses the name: wait until this one is gone."""
    wait_until(lambda: not api.exists(kind, "fuzz", ns), timeout=60, what=f"{kind} {ns}/fuzz to be deleted")
