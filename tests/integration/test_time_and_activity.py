"""Policies that follow time and activity, against the real control plane.

Activity is what the API server itself records in managedFields: the rollout below is a real
`kubectl set image`. Windows and `until` are chosen relative to the real current time; nothing patches the
clock.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import time

from devtools import builders
from devtools.builders import AdminApi
from job.model.marks import ANNOTATION_FREED, ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY
from tests.conftest import kubectl

SIZES = {"v1": 3, "v2": 2, "v3": 1, "v4": 2, "v5": 1}


def _next_second() -> None:
    """Wait for the wall clock's next second: the API server stamps objects to the second, and the test
    needs each namespace (and the rollout) strictly newer than the one before."""
    start = int(time.time())
    while int(time.time()) == start:
        time.sleep(0.02)


def _sizes(api: AdminApi, prefix: str) -> dict[str, int]:
    return {s: api.replicas("Deployment", prefix + s, "d-web") for s in SIZES}


def _records(api: AdminApi, prefix: str, suffix: str) -> dict[str, str]:
    annotations = api.get("Deployment", "d-web", prefix + suffix)["metadata"].get("annotations") or {}
    return {k: v for k, v in annotations.items() if k.startswith("nsscaler.wubw.fun/")}


def _ready(api: AdminApi, name: str) -> dict[str, str]:
    return next(c for c in api.status(name)["conditions"] if c["type"] == "Ready")


def test_keep_recent_follows_rollouts(api: AdminApi, run_job, prefix, control_plane):
    for suffix, replicas in SIZES.items():  # created one after another: v5 is the newest
        _next_second()
        api.create(builders.namespace(prefix + suffix))
        api.create(builders.deployment(prefix + suffix, "d-web", replicas))
    name = f"{prefix}recent"
    api.create(builders.nsscaler(name, prefix, [], keep_recent=2))

    first = run_job()
    assert first.exit_code == 0, first.stderr
    assert _sizes(api, prefix) == {"v1": 0, "v2": 0, "v3": 0, "v4": 2, "v5": 1}
    status = api.status(name)
    assert [r["namespace"] for r in status["recentNamespaces"]] == [prefix + "v4", prefix + "v5"]
    assert {r["by"] for r in status["recentNamespaces"]} <= {"creation", "python-requests"}
    assert status["holding"] is True

    _next_second()
    rollout = subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "-n", prefix + "v1",
                              "set", "image", "deployment/d-web", "app=registry.invalid/app:2"],
                             capture_output=True, text=True, check=False)
    assert rollout.returncode == 0, rollout.stderr

    second = run_job()
    assert second.exit_code == 0, second.stderr
    assert _sizes(api, prefix) == {"v1": 3, "v2": 0, "v3": 0, "v4": 0, "v5": 1}
    assert _records(api, prefix, "v1") == {}
    assert _records(api, prefix, "v4") == {ANNOTATION_ORIGINAL_REPLICAS: "2", ANNOTATION_SCALED_BY: name,
                                           ANNOTATION_FREED: '{"pods":1,"unrequested":1}'}  # one Pod, no requests
    recent = {r["namespace"]: r["by"] for r in api.status(name)["recentNamespaces"]}
    assert recent == {prefix + "v1": "kubectl-set", prefix + "v5": recent[prefix + "v5"]}

    third = run_job()
    assert third.exit_code == 0, third.stderr
    assert third.report["actions"] == []
    # the only PATCHes left are the status writes, one per NSScaler in the cluster
    assert third.requests.get("patch") == len(api.list("NSScaler"))
    assert _sizes(api, prefix) == {"v1": 3, "v2": 0, "v3": 0, "v4": 0, "v5": 1}


def _window(start: dt.datetime, end: dt.datetime) -> str:
    return f"{start:%H:%M}-{end:%H:%M}"


def test_windows_and_until(api: AdminApi, run_job, prefix):
    for suffix in ("v1", "v2"):
        api.create(builders.namespace(prefix + suffix))
        api.create(builders.deployment(prefix + suffix, "d-web", SIZES[suffix]))
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    hour = now.replace(minute=0)
    around_now = _window(hour - dt.timedelta(hours=1), hour + dt.timedelta(hours=2))  # every day, may cross midnight
    later = _window(hour + dt.timedelta(hours=3), hour + dt.timedelta(hours=4))
    name = f"{prefix}nights"
    api.create(builders.nsscaler(name, prefix, ["v2"], hold_windows=[around_now]))

    inside = run_job()
    assert inside.exit_code == 0, inside.stderr
    assert (api.replicas("Deployment", prefix + "v1", "d-web"), api.replicas("Deployment", prefix + "v2", "d-web")) \
        == (0, 2)
    status = api.status(name)
    assert status["holding"] is True
    assert status["nextChange"] == f"{hour + dt.timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"

    api.patch("NSScaler", name, {"spec": {"hold_windows": [later]}})
    outside = run_job()
    assert outside.exit_code == 0, outside.stderr
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 3
    assert _records(api, prefix, "v1") == {}
    status = api.status(name)
    assert status["holding"] is False
    assert status["nextChange"] == f"{hour + dt.timedelta(hours=3):%Y-%m-%dT%H:%M:%SZ}"
    assert _ready(api, name)["reason"] == "Reconciled"

    api.patch("NSScaler", name, {"spec": {"hold_windows": [around_now]}})
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0

    past = now - dt.timedelta(minutes=5)
    api.patch("NSScaler", name, {"spec": {"hold_windows": None, "until": f"{past:%Y-%m-%dT%H:%M:%SZ}"}})
    expired = run_job()
    assert expired.exit_code == 0, expired.stderr
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 3
    assert _records(api, prefix, "v1") == {}
    ready = _ready(api, name)
    assert (ready["status"], ready["reason"]) == ("True", "Expired")
    assert f"expired at {past:%Y-%m-%dT%H:%M:%SZ}" in ready["message"]
    assert api.status(name)["holding"] is False
    assert "nextChange" not in api.status(name)
