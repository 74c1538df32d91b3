"""Restore in tiers on a real node: the StatefulSet of a namespace comes back first and the Deployment only once
its Pod is really Ready (kubelet, a real readiness probe, the StatefulSet controller's `readyReplicas`), or once
`restore_wait` has passed when it never gets Ready. The CronJob's own image decides; every claim is read from
the objects themselves: the Pods' own times, the API server's managedFields stamps, the status, the Events.

No assertion depends on how fast the node is: only on order and on lower bounds."""

from __future__ import annotations

import copy
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS
from tests.node.conftest import NAMESPACE, JobResult, job_result, run_cronjob_now

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("installed")]

#: where the StatefulSet's container says it is ready (the busybox image has nothing but /bin/busybox)
READY_FILE = "/ready"


def probed(workload: dict[str, Any], *, ready_after: int | None) -> dict[str, Any]:
    """`workload` (already `on_node`) whose container passes an exec readiness probe `ready_after` seconds after
    it starts, or never (None); it stops at once on SIGTERM, as `on_node`'s does."""
    (box,) = workload["spec"]["template"]["spec"]["containers"]
    ready = f"/bin/busybox sleep {ready_after}; /bin/busybox touch {READY_FILE}; " if ready_after is not None else ""
    box["command"] = ["/bin/busybox", "sh", "-c",
                      f"trap 'exit 0' TERM; {ready}while true; do /bin/busybox sleep 1; done"]
    probe_file = READY_FILE if ready_after is not None else "/nonexistent"
    box["readinessProbe"] = {"exec": {"command": ["/bin/busybox", "cat", probe_file]}, "periodSeconds": 1,
                             "failureThreshold": 1, "successThreshold": 1}
    return workload


def family(api: AdminApi, prefix: str, *, db_ready_after: int | None) -> str:
    """`<prefix>a` with StatefulSet `db` (1, with the readiness probe) and Deployment `app` (1), and
    `<prefix>live`; returns `<prefix>a` once both Pods run (and db's is Ready if it ever gets so)."""
    ns = prefix + "a"
    api.create(builders.namespace(ns))
    api.create(builders.namespace(prefix + "live"))
    image = images.busybox_image()
    api.create(probed(builders.on_node(builders.statefulset(ns, "db", 1), image), ready_after=db_ready_after))
    api.create(builders.on_node(builders.deployment(ns, "app", 1), image))
    wait_until(lambda: phase(pod_of(api, ns, "app")) == "Running", timeout=180, what="app's Pod Running")
    if db_ready_after is None:
        wait_until(lambda: phase(pod_of(api, ns, "db")) == "Running", timeout=180, what="db's Pod Running")
    else:
        wait_until(lambda: ready_since(pod_of(api, ns, "db")) is not None, timeout=180, what="db's Pod Ready")
    return ns


def pod_of(api: AdminApi, ns: str, app: str) -> dict[str, Any] | None:
    """The one Pod of workload `app` that is not going away, or None."""
    pods = [p for p in api.list("Pod", ns, labelSelector=f"app={app}") if not p["metadata"].get("deletionTimestamp")]
    assert len(pods) <= 1, f"more than one Pod of {app}: {[p['metadata']['name'] for p in pods]}"
    return pods[0] if pods else None


def phase(pod: dict[str, Any] | None) -> str | None:
    return None if pod is None else pod.get("status", {}).get("phase")


def ready_since(pod: dict[str, Any] | None) -> dt.datetime | None:
    """When the Pod became Ready (its Ready condition's lastTransitionTime), None while it is not."""
    if pod is None:
        return None
    found = [c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"]
    return stamp(found[0]["lastTransitionTime"]) if found else None


def stamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def nsscaler_wrote_at(obj: dict[str, Any]) -> dt.datetime:
    """The API server's stamp of nsscaler's last write of the object itself (managedFields, no subresource)."""
    times = [stamp(e["time"]) for e in obj["metadata"].get("managedFields", [])
             if e.get("manager") == "nsscaler" and not e.get("subresource") and e.get("time")]
    assert times, f"no managedFields entry of nsscaler on {obj['kind']} {obj['metadata']['name']}: " \
                  f"{obj['metadata'].get('managedFields')}"
    return max(times)


def entry(entries: list[dict[str, Any]] | None, ns: str) -> dict[str, Any] | None:
    return next((e for e in entries or [] if e.get("namespace") == ns), None)


def run_job_now(plane: controlplane.ControlPlane, api: AdminApi, env: dict[str, str]) -> JobResult:
    """A Job from the CronJob's own template, as `kubectl create job --from=cronjob/nsscaler` makes it, with
    these environment variables added to the container (as an overlay would set them); wait for it to finish."""
    cron = api.get("CronJob", "nsscaler", NAMESPACE)
    template = copy.deepcopy(cron["spec"]["jobTemplate"])
    (container,) = template["spec"]["template"]["spec"]["containers"]
    container["env"] = [*container.get("env", []), *({"name": k, "value": v} for k, v in env.items())]
    name = f"tiers-{time.monotonic_ns() % 10**9}"
    api.create({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": NAMESPACE,
                             "labels": template.get("metadata", {}).get("labels", {}),
                             "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                             "ownerReferences": [builders.controller_ref(cron)]},
                "spec": template["spec"]})
    return job_result(plane, api, name)


def runs_until_app_back(run: Callable[[], JobResult], api: AdminApi, *, name: str, ns: str, tries: int,
                        pause: float = 0, late_while_waiting: bool = True) -> list[dict[str, Any]]:
    """Run nsscaler (`run`, `pause` s apart) until the Deployment `app` is back; every run must exit 0, and every
    run that leaves app frozen must have brought db back and say in its status that the namespace waits for db.
    Returns each run's status."""
    runs: list[dict[str, Any]] = []
    for _ in range(tries):
        if runs and pause:
            time.sleep(pause)
        result = run()
        assert result.exit_code == 0, f"run {len(runs) + 1}:\n{result.log}"
        runs.append(api.status(name))
        if api.replicas("Deployment", ns, "app") == 1:
            return runs
        waiting = entry(runs[-1].get("restoring"), ns)
        assert waiting is not None and "statefulset/db" in waiting["waitingFor"], \
            f"run {len(runs)} left app frozen without saying it waits for db: {runs[-1].get('restoring')}"
        assert late_while_waiting or not entry(runs[-1].get("restoredLate"), ns), runs[-1].get("restoredLate")
        assert api.replicas("StatefulSet", ns, "db") == 1, "the StatefulSet's tier did not come back first"
    raise AssertionError(f"app not back after {len(runs)} runs; last status: {runs[-1]}")


def freeze(control_plane: controlplane.ControlPlane, api: AdminApi, ns: str) -> None:
    frozen = run_cronjob_now(control_plane, api)
    assert frozen.exit_code == 0, frozen.log
    wait_until(lambda: not api.pods(ns), timeout=120, what=f"every Pod of {ns} to go after the freeze")
    assert api.replicas("StatefulSet", ns, "db") == 0 and api.replicas("Deployment", ns, "app") == 0


def test_a_two_tier_namespace_brings_the_deployment_back_only_after_the_statefulset_is_ready(
        control_plane: controlplane.ControlPlane, api: AdminApi, prefix: str, figures: list[str]) -> None:
    ns = family(api, prefix, db_ready_after=6)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"], restore_order=["StatefulSet"], restore_wait="10m"))
    freeze(control_plane, api, ns)

    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["live", "a"]}})
    started = time.monotonic()
    # each run waits in place for the next tier (--restore-wait-in-run, 30 s by default)
    runs = runs_until_app_back(lambda: run_cronjob_now(control_plane, api), api, name=name, ns=ns, tries=6)
    restore_seconds = time.monotonic() - started

    wait_until(lambda: phase(pod_of(api, ns, "app")) == "Running", timeout=180, what="app's Pod Running again")
    wait_until(lambda: ready_since(pod_of(api, ns, "db")) is not None, timeout=180, what="db's Pod Ready again")
    db_pod, app_pod = pod_of(api, ns, "db"), pod_of(api, ns, "app")
    assert db_pod is not None and app_pod is not None
    db_ready = ready_since(db_pod)
    assert db_ready is not None
    app_created = stamp(app_pod["metadata"]["creationTimestamp"])
    app_started = stamp(app_pod["status"]["startTime"])
    db = api.get("StatefulSet", "db", ns)
    app = api.get("Deployment", "app", ns)
    db_restored, app_restored = nsscaler_wrote_at(db), nsscaler_wrote_at(app)
    # 1 s resolution everywhere: "not earlier", never "later"
    assert app_created >= db_ready, (f"app's Pod was created at {app_created}, before db's Pod became Ready at "
                                     f"{db_ready}: the Deployment did not wait for the StatefulSet")
    assert app_started >= db_ready, f"app's Pod started at {app_started}, before db's Pod was Ready at {db_ready}"
    assert app_restored >= db_ready, (f"nsscaler restored app at {app_restored}, before db's Pod was Ready at "
                                      f"{db_ready}")
    assert db_restored <= db_ready, f"db's Pod was Ready at {db_ready}, before nsscaler restored db at {db_restored}?"

    assert db["spec"]["replicas"] == 1 and app["spec"]["replicas"] == 1
    for kind, obj in (("StatefulSet", db), ("Deployment", app)):
        assert ANNOTATION_ORIGINAL_REPLICAS not in (obj["metadata"].get("annotations") or {}), \
            f"{kind} {obj['metadata']['name']} still carries its record: {obj['metadata'].get('annotations')}"
    status = api.status(name)
    assert not status.get("restoring"), f"status.restoring after the last tier came back: {status.get('restoring')}"
    assert not status.get("restoredLate"), f"db was Ready in time, yet status.restoredLate: {status['restoredLate']}"
    figures.append(f"tiers: db restored {db_restored:%H:%M:%S}, db Pod Ready {db_ready:%H:%M:%S}, app restored "
                   f"{app_restored:%H:%M:%S}, app Pod created {app_created:%H:%M:%S} (started {app_started:%H:%M:%S});"
                   f" {len(runs)} run(s), {restore_seconds:.0f} s from the switch to app back")


def test_a_tier_whose_pod_never_gets_ready_releases_the_next_tier_after_restore_wait(
        control_plane: controlplane.ControlPlane, api: AdminApi, prefix: str, figures: list[str]) -> None:
    ns = family(api, prefix, db_ready_after=None)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"], restore_order=["StatefulSet"], restore_wait="20s"))
    freeze(control_plane, api, ns)

    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["live", "a"]}})
    started = time.monotonic()
    # No waiting in the run (the CronJob's 30 s in-run wait would outlast restore_wait): the tier's wait crosses
    # runs, the normal case (docs/operating/restore-tiers.md). Runs at least 5 s apart: 8 runs span more than
    # restore_wait however fast.
    runs = runs_until_app_back(lambda: run_job_now(control_plane, api, {"NSSCALER_RESTORE_WAIT_IN_RUN": "0"}), api,
                               name=name, ns=ns, tries=8, pause=5, late_while_waiting=False)
    restore_seconds = time.monotonic() - started
    assert len(runs) >= 2, "app came back in the run that restored db, though db's Pod is never Ready"

    last = runs[-1]
    late = entry(last.get("restoredLate"), ns)
    assert late is not None and "statefulset/db" in late["notReady"], \
        f"app came back without status.restoredLate naming db: {last.get('restoredLate')}"
    assert not entry(last.get("restoring"), ns), f"nothing waits any more, yet: {last.get('restoring')}"
    db, app = api.get("StatefulSet", "db", ns), api.get("Deployment", "app", ns)
    db_restored, app_restored = nsscaler_wrote_at(db), nsscaler_wrote_at(app)
    assert app_restored - db_restored >= dt.timedelta(seconds=20), \
        f"app restored at {app_restored}, only {app_restored - db_restored} after db at {db_restored} (wait 20s)"
    assert stamp(late["since"]) == db_restored, f"restoredLate.since {late['since']} is not db's restore {db_restored}"
    assert db["spec"]["replicas"] == 1 and app["spec"]["replicas"] == 1
    assert ready_since(pod_of(api, ns, "db")) is None, "db's Pod got Ready though its probe can never pass"

    events = [e for e in api.list("Event", "default")
              if e["involvedObject"].get("kind") == "NSScaler" and e["involvedObject"].get("name") == name]
    lates = [e for e in events if e.get("reason") == "RestoreTierLate"]
    assert lates and all(e["type"] == "Warning" for e in lates), \
        f"no Warning RestoreTierLate Event on NSScaler {name}: {[(e['reason'], e['type']) for e in events]}"
    assert any(ns in e["message"] and "statefulset/db" in e["message"] for e in lates), [e["message"] for e in lates]
    waits = [e for e in events if e.get("reason") == "RestoreTierWaiting"]
    assert waits and all(e["type"] == "Normal" for e in waits), \
        f"no Normal RestoreTierWaiting Event on NSScaler {name}: {[(e['reason'], e['type']) for e in events]}"
    wait_until(lambda: phase(pod_of(api, ns, "app")) == "Running", timeout=180, what="app's Pod Running again")
    figures.append(f"tiers late: db restored {db_restored:%H:%M:%S}, app restored {app_restored:%H:%M:%S} "
                   f"({(app_restored - db_restored).total_seconds():.0f} s later, restore_wait 20 s); {len(runs)} runs,"
                   f" {restore_seconds:.0f} s from the switch to app back")
