"""Nothing anyone may write stops nsscaler for everyone: absurd values are refused at admission with the limit in
the message, and what gets past admission anyway (a CRD without its bounds, an error nobody expected) is
reported on the object it came from while every other policy is served in the same run."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster.controlplane import ADMIN_USER
from job.decide import plan as plan_api
from job.decide import selection as selection_api
from job.decide import waking
from job.model.marks import ANNOTATION_KEDA_PAUSED, ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY
from tests import crds
from tests.conftest import CRD, WAKE_CRD, apply_manifest
from tests.schema_fuzz import without_bounds

#: the CRDs' bounds and the hostile cases hold on every supported Kubernetes version (its CEL and OpenAPI checks)
pytestmark = pytest.mark.versions
FAR = "9999-12-31T23:59:59-01:00"  # in the year 10000 once in UTC
#: a Wake written by hand names its requester: the API server fills it in only where it serves
#: MutatingAdmissionPolicy v1 (1.36 and later); on 1.34 and 1.35 one without it is refused
OWN = {"requestedBy": ADMIN_USER}


def family(api: AdminApi, prefix: str, *, deployments: tuple[str, ...] = ("web",)) -> str:
    """`<prefix>v1` with Deployments of 3 replicas, held whole by the NSScaler `<prefix>p`."""
    api.create(builders.namespace(prefix + "v1"))
    for name in deployments:
        api.create(builders.deployment(prefix + "v1", name, 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    return prefix + "v1"


def frozen_with_record(api: AdminApi, ns: str, name: str = "web") -> bool:
    obj = api.get("Deployment", name, ns)
    notes = obj["metadata"].get("annotations") or {}
    return obj["spec"]["replicas"] == 0 and notes.get(ANNOTATION_ORIGINAL_REPLICAS) == "3" \
        and ANNOTATION_SCALED_BY in notes


def ready(api: AdminApi, policy: str) -> dict[str, Any]:
    return next(c for c in api.status(policy).get("conditions", []) if c["type"] == "Ready")


def post(api: AdminApi, obj: dict[str, Any]) -> requests.Response:
    return api.http.post(api.url(obj["kind"], obj["metadata"].get("namespace")), json=obj, timeout=30)


@pytest.mark.usefixtures("wake_admission")
def test_absurd_dates_and_durations_are_refused_at_admission_with_the_limit(api: AdminApi, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    long_wake = post(api, builders.wake(ns, "3000000d", **OWN))
    assert long_wake.status_code == 422, long_wake.text
    assert "spec.duration: Invalid value" in long_wake.text and "must be at most 3650 days" in long_wake.text
    far_wake = post(api, {**builders.wake(ns, "1h"), "spec": {"until": FAR, **OWN}})
    assert far_wake.status_code == 422, far_wake.text
    assert "until must be from 1970-01-01T00:00:00Z to before 9000-01-01T00:00:00Z" in far_wake.text
    far_policy = post(api, builders.nsscaler(f"{prefix}p", prefix, [], until=FAR))
    assert far_policy.status_code == 422, far_policy.text
    assert "spec.until: Invalid value" in far_policy.text and "to before 9000-01-01T00:00:00Z" in far_policy.text
    for field, value, limit in (("max_duration", "8d", "at most 7 days"), ("restore_wait", "25h", "at most a day"),
                                ("max_duration", "9" * 40 + "h", "may not be more than 32")):
        spec = {"wake": {field: value}} if field == "max_duration" else {field: value}
        refused = post(api, builders.nsscaler(f"{prefix}p", prefix, [], **spec))
        assert refused.status_code == 422 and limit in refused.text, (field, value, refused.text)
    assert api.list("Wake", ns) == [] and not api.exists("NSScaler", f"{prefix}p")


@pytest.fixture
def crds_without_bounds(api: AdminApi, control_plane) -> Iterator[None]:
    """The NSScaler and Wake CRDs with a spec that takes anything (as a CRD from before the bounds, or a cluster
    where someone loosened them): the run's own checks are the only line left. The shipped CRDs come back after."""
    with tempfile.TemporaryDirectory() as folder:
        for source in (CRD, WAKE_CRD):
            loose = Path(folder) / source.name
            loose.write_text(yaml.safe_dump(without_bounds(yaml.safe_load(source.read_text()))))
            apply_manifest(control_plane.admin_kubeconfig, loose)
    try:
        yield
    finally:
        for source in (CRD, WAKE_CRD):
            apply_manifest(control_plane.admin_kubeconfig, source)


def created_once_admitted(api: AdminApi, obj: dict[str, Any]) -> None:
    """Create `obj`, waiting for the API server to take the loosened schema (it does so a moment after the apply)."""
    def admitted() -> bool:
        return post(api, obj).status_code == 201
    wait_until(admitted, timeout=60, what=f"{obj['kind']} {obj['metadata'].get('name')} to be admitted")


@pytest.mark.usefixtures("wake_admission", "crds_without_bounds")
def test_past_admission_the_run_names_the_bad_objects_and_serves_every_other_policy(api: AdminApi, run_job, prefix):
    other = family(api, prefix + "c-")
    woken = family(api, prefix + "w-")
    bad = f"{prefix}far"
    try:
        created_once_admitted(api, builders.nsscaler(bad, prefix + "b-", [], until=FAR))
        created_once_admitted(api, builders.wake(woken, "3000000d", name="long", **OWN))
        created_once_admitted(api, {**builders.wake(woken, "1h", name="far"), "spec": {"until": FAR, **OWN}})
        result = run_job()
        assert result.exit_code == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert frozen_with_record(api, other) and frozen_with_record(api, woken)  # the other policies served
        assert ready(api, f"{prefix}c-p")["status"] == "True"

        condition = ready(api, bad)
        assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
        assert condition["message"].startswith(f"spec.until: '{FAR}' is outside the dates nsscaler reads")
        events = api.list("Event", "default", fieldSelector=f"involvedObject.name={bad}")
        assert [e["reason"] for e in events] == ["InvalidSpec"] and "spec.until" in events[0]["message"]
        for name, field in (("long", "spec.duration: '3000000d' is longer than 3650 days"),
                            ("far", f"spec.until: '{FAR}' is outside the dates")):
            status = api.get("Wake", name, woken)["status"]
            assert status["state"] == "Ignored" and status["message"].startswith(field), status
            assert "fix: set one of spec.duration" in status["message"]
        assert sorted(p.split(":")[0] for p in result.report["problems"]) == \
            [f"Wake {woken}/far ignored", f"Wake {woken}/long ignored"]
        warnings = {e["message"].split(":")[0] for e in api.list("Event", woken, fieldSelector="reason=WakeIgnored")}
        assert warnings == {"Wake far", "Wake long"}
    finally:
        api.delete("NSScaler", bad)
        for name in ("long", "far"):
            api.delete("Wake", name, woken)


@pytest.mark.usefixtures("wake_admission")
def test_an_unexpected_error_stays_with_its_policy_wake_or_workload(api: AdminApi, run_job, prefix, monkeypatch):
    """An exception injected into the decision for one policy, one Wake and one workload (each raised where
    nsscaler decides about that object alone): each is reported on its object, and everything else is served."""
    served = family(api, prefix + "a-", deployments=("web", "boom"))
    broken = family(api, prefix + "b-")
    api.create(builders.wake(served, "1h", name="odd", **OWN))
    failing_policy, failing_wake = f"{prefix}b-p", (served, "odd")

    schedule_state = selection_api._schedule_state
    def policy_raises(policy, now):
        if policy.name == failing_policy:
            raise RuntimeError("injected into one policy")
        return schedule_state(policy, now)
    judge = waking.judge
    def wake_raises(wake, in_scope, **kwargs):
        if wake.key == failing_wake:
            raise KeyError("injected into one Wake")
        return judge(wake, in_scope, **kwargs)
    hold = plan_api._Judge._hold
    def workload_raises(self, workload, holder):
        if workload.name == "boom":
            raise ZeroDivisionError("injected into one workload")
        return hold(self, workload, holder)
    monkeypatch.setattr(selection_api, "_schedule_state", policy_raises)
    monkeypatch.setattr(waking, "judge", wake_raises)
    monkeypatch.setattr(plan_api._Judge, "_hold", workload_raises)

    result = run_job()
    assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
    assert frozen_with_record(api, served)  # the served policy's other workload, though the Wake and `boom` failed
    assert api.replicas("Deployment", served, "boom") == 3 and api.replicas("Deployment", broken, "web") == 3
    condition = ready(api, failing_policy)
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert condition["message"].startswith("could not be served: RuntimeError: injected into one policy")
    assert "please report it" in condition["message"]
    events = api.list("Event", "default", fieldSelector=f"involvedObject.name={failing_policy}")
    assert "injected into one policy" in events[0]["message"]
    failures = api.status(f"{prefix}a-p")["failures"]
    assert any("deployment/boom" in f and "ZeroDivisionError: injected into one workload" in f for f in failures)
    wake = api.get("Wake", "odd", served)["status"]
    assert wake["state"] == "Ignored" and wake["message"].startswith("could not be judged: KeyError")


def test_odd_objects_anywhere_in_the_cluster_are_served_or_reported(api: AdminApi, run_job, prefix):
    """What nsscaler reads from the cluster at large, as a careless or hostile writer may leave it: a /scale whose
    replica field is missing, a string or huge, ScaledObjects whose fields have other types, an HPA aimed at
    something that does not exist. The run never crashes; the Deployment beside them is served."""
    crds.install(api, [*crds.TEST_KINDS, crds.SCALED_OBJECT])
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 3))
    odd = [builders.custom("Pool", ns, "stringy", {"workers": "three"}), builders.custom("Pool", ns, "bare", {}),
           builders.custom("Pool", ns, "deep", {"workers": {"count": {"of": 3}}}),
           builders.custom("Fleet", ns, "words", {"replicas": "two"}),
           builders.custom("Fleet", ns, "huge", {"replicas": 2**62}),
           builders.custom("Fleet", ns, "negative", {"replicas": -3}),
           {**builders.scaled_object(ns, "flat", "web", annotations={ANNOTATION_KEDA_PAUSED: "many"}),
            "spec": {"scaleTargetRef": "web"}},
           {**builders.scaled_object(ns, "listed", "web"), "spec": {"scaleTargetRef": {"name": ["web"]}}},
           builders.scaled_object(ns, "nameless", ""),
           builders.hpa(ns, "aimless", "nothing-here", min_replicas=1)]
    admitted = [obj["metadata"]["name"] for obj in odd if post(api, obj).status_code == 201]  # the server refuses some
    assert {"bare", "flat", "listed", "nameless", "aimless"} <= set(admitted), admitted
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["Deployment", "Pool.test.nsscaler.io",
                                                                  "Fleet.test.nsscaler.io"]))
    for _ in range(2):  # the freeze, then the steady state
        result = run_job()
        assert result.exit_code in (0, 1) and "Traceback" not in result.stderr, result.stderr
        assert frozen_with_record(api, ns), result.stderr
        said = json.dumps([result.report["problems"], api.status(f"{prefix}p").get("failures")])
        if result.exit_code == 1:
            assert any(name in said for name in admitted), said
