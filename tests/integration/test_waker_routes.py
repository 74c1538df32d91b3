"""HTTPRoutes follow the hold of namespaces whose policy wakes on request, against the real control plane with
the real Gateway API CRDs (their schema, defaults and validation: the version Traefik v3.6.12 pins).

This control plane has no kubelet: where a restored Deployment must be available, the test writes its Pods'
status as a kubelet would (`tests.gateway.ready_pods`), and the real ReplicaSet and Deployment controllers count
them. Where an app must never become available, nothing writes its Pods' status: they stay Pending.
Time passes through the run's own `now`, never a sleep."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster import controlplane
from job import release, run
from job.cluster.kube import Kube
from job.model.marks import (
    ANNOTATION_ORIGINAL_RULES,
    ANNOTATION_ROUTE_WAITING,
    ANNOTATION_SCALED_BY,
    FINALIZER_ROUTES,
    HEADER_NAMESPACE,
    LABEL_SCALED,
    WAKER_PORT,
    WAKER_SERVICE,
)
from job.model.settings import Settings
from tests.gateway import backend, gateway_crds, httproute, ready_pods

__all__ = ["gateway_crds"]
pytestmark = pytest.mark.usefixtures("crd", "gateway_crds")
NO_WAIT = ("--restore-wait-in-run", "0")


def rules() -> list[dict[str, Any]]:
    """A rule with a filter of its own that must survive (a header the app relies on), a weighted split, and a
    redirect rule without backends (never pointed at the waker)."""
    return [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
         "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"add": [{"name": "X-App",
                                                                                          "value": "shop"}]}}],
         "backendRefs": [{**backend("web", 80), "weight": 3}, {**backend("web-canary", 80), "weight": 1}]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
         "filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath",
                                                                             "replaceFullPath": "/"}}}]},
    ]


def shop(api: AdminApi, prefix: str, *, on_request: bool) -> tuple[str, str]:
    """`<prefix>v1` (held) and `<prefix>v2` (active), each with a Deployment and an HTTPRoute; the job's own
    namespace `<prefix>sys`, where the waker's ReferenceGrants go."""
    for suffix in ("v1", "v2"):
        ns = prefix + suffix
        api.create(builders.namespace(ns))
        api.create(builders.deployment(ns, "web", 1))
        api.create(httproute(ns, "shop", hostname=f"{suffix}.shop.example", rules=rules()))
    api.create(builders.namespace(f"{prefix}sys"))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"], wake={"on_request": on_request}))
    return prefix + "v1", f"{prefix}sys"


@pytest.mark.versions  # the route swap, on every supported version (with the Gateway API CRDs)
def test_a_held_namespace_s_routes_point_at_the_waker_with_the_record_in_the_same_write_and_come_back_exactly(
        api: AdminApi, prefix: str, run_job: Any) -> None:
    held, sys_ns = shop(api, prefix, on_request=True)
    before = api.get("HTTPRoute", "shop", held)
    active_before = api.get("HTTPRoute", "shop", prefix + "v2")

    first = run_job("--own-namespace", sys_ns, *NO_WAIT)
    assert first.exit_code == 0, first.stderr

    route = api.get("HTTPRoute", "shop", held)
    notes = route["metadata"]["annotations"]
    assert json.loads(notes[ANNOTATION_ORIGINAL_RULES]) == before["spec"]["rules"]  # exactly, defaults included
    assert notes[ANNOTATION_SCALED_BY] == f"{prefix}p" and route["metadata"]["labels"][LABEL_SCALED] == "true"
    pointed, redirect = route["spec"]["rules"]
    assert [(r["name"], r["namespace"], r["port"]) for r in pointed["backendRefs"]] == [
        (WAKER_SERVICE, sys_ns, WAKER_PORT)]
    header = next(f for f in pointed["filters"] if f["type"] == "RequestHeaderModifier")["requestHeaderModifier"]
    assert header["set"] == [{"name": HEADER_NAMESPACE, "value": held}]  # set: a client's own value is replaced
    assert header["add"] == [{"name": "X-App", "value": "shop"}]  # the route's own filter kept
    assert redirect == before["spec"]["rules"][1]
    assert FINALIZER_ROUTES in api.get("NSScaler", f"{prefix}p")["metadata"]["finalizers"]  # before the route
    grant = api.get("ReferenceGrant", f"nsscaler-waker-from-{held}", sys_ns)
    assert grant["spec"]["from"] == [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": held}]
    assert api.get("HTTPRoute", "shop", prefix + "v2")["metadata"]["resourceVersion"] == \
        active_before["metadata"]["resourceVersion"]  # an active namespace's route is not touched

    again = run_job("--own-namespace", sys_ns, *NO_WAIT)  # a held namespace's route is pointed once
    assert again.exit_code == 0, again.stderr
    assert api.get("HTTPRoute", "shop", held)["metadata"]["resourceVersion"] == route["metadata"]["resourceVersion"]

    # awake: its workloads come back first; the route waits until they are available (the last restore tier)
    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})
    restored = run_job("--own-namespace", sys_ns, *NO_WAIT)
    assert restored.exit_code == 0, restored.stderr
    assert api.replicas("Deployment", held, "web") == 1
    assert ANNOTATION_ORIGINAL_RULES in api.get("HTTPRoute", "shop", held)["metadata"]["annotations"]

    ready_pods(api, held, "app=web")
    builders.wait_until(lambda: (api.get("Deployment", "web", held).get("status") or {}).get(
        "availableReplicas") == 1, timeout=60, what="the Deployment controller to count web available")
    last = run_job("--own-namespace", sys_ns, *NO_WAIT)
    assert last.exit_code == 0, last.stderr
    after = api.get("HTTPRoute", "shop", held)
    assert after["spec"] == before["spec"], last.stderr
    assert ANNOTATION_ORIGINAL_RULES not in (after["metadata"].get("annotations") or {})
    assert LABEL_SCALED not in (after["metadata"].get("labels") or {})
    assert not api.exists("ReferenceGrant", f"nsscaler-waker-from-{held}", sys_ns)
    assert FINALIZER_ROUTES not in (api.get("NSScaler", f"{prefix}p")["metadata"].get("finalizers") or [])


def test_a_deleted_policy_stays_until_the_routes_it_pointed_are_back(api: AdminApi, prefix: str,
                                                                     run_job: Any) -> None:
    """Deleting a policy that pointed routes does not leave them pointed at the waker: the routes finalizer keeps
    the NSScaler (being deleted, it holds nothing) until a run has given its workloads back and, once they are
    available, its routes; then the NSScaler goes."""
    held, sys_ns = shop(api, prefix, on_request=True)
    before = api.get("HTTPRoute", "shop", held)
    frozen = run_job("--own-namespace", sys_ns, *NO_WAIT)
    assert frozen.exit_code == 0, frozen.stderr
    assert ANNOTATION_ORIGINAL_RULES in api.get("HTTPRoute", "shop", held)["metadata"]["annotations"]

    api.delete("NSScaler", f"{prefix}p")
    assert api.get("NSScaler", f"{prefix}p")["metadata"]["deletionTimestamp"]  # kept by the finalizer
    woken = run_job("--own-namespace", sys_ns, *NO_WAIT)
    assert woken.exit_code == 0, woken.stderr
    assert api.replicas("Deployment", held, "web") == 1  # a policy being deleted holds nothing
    assert api.exists("NSScaler", f"{prefix}p")  # its route still waits for the workloads

    ready_pods(api, held, "app=web")
    builders.wait_until(lambda: (api.get("Deployment", "web", held).get("status") or {}).get(
        "availableReplicas") == 1, timeout=60, what="the Deployment controller to count web available")
    last = run_job("--own-namespace", sys_ns, *NO_WAIT)
    assert last.exit_code == 0, last.stderr
    assert api.get("HTTPRoute", "shop", held)["spec"] == before["spec"]
    builders.wait_until(lambda: not api.exists("NSScaler", f"{prefix}p"), timeout=30,
                        what="the deleted NSScaler to go once its routes are back")


@pytest.mark.versions
def test_a_held_namespace_whose_policy_does_not_wake_on_request_keeps_its_routes(
        api: AdminApi, prefix: str, run_job: Any) -> None:
    held, sys_ns = shop(api, prefix, on_request=False)
    before = api.get("HTTPRoute", "shop", held)
    result = run_job("--own-namespace", sys_ns, *NO_WAIT)
    assert result.exit_code == 0, result.stderr
    assert api.replicas("Deployment", held, "web") == 0  # held all the same
    assert api.get("HTTPRoute", "shop", held)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert not api.exists("ReferenceGrant", f"nsscaler-waker-from-{held}", sys_ns)


T0 = dt.datetime(2026, 12, 5, 9, tzinfo=dt.UTC)


def run_at(plane: controlplane.ControlPlane, sys_ns: str, now: dt.datetime) -> run.RunReport:
    """One run as cluster admin at the instant `now` (the clock injected through the run's own parameter)."""
    settings = Settings(kubeconfig=plane.admin_kubeconfig, own_namespace=sys_ns, restore_wait_in_run=0)
    report = run.run(Kube(settings), settings, now=now)
    assert report.exit_code == 0, (report.problems, [p.failures for p in report.policies])
    return report


def ours(route: dict[str, Any]) -> set[str]:
    return {k for k in (route["metadata"].get("annotations") or {}) if k.startswith("nsscaler.wubw.fun/")}


def test_a_woken_namespace_whose_app_never_becomes_available_gets_its_route_back_after_restore_wait(
        api: AdminApi, prefix: str, control_plane: controlplane.ControlPlane) -> None:
    """A broken app shows its own error, not "Waking..." forever: the route waits at most the policy's
    restore_wait (here 5m) from the run that first found it waiting, then comes back exactly, and the policy's
    status and a Warning Event name the Deployment that was not available in time."""
    held, sys_ns = shop(api, prefix, on_request=True)
    name = f"{prefix}p"
    api.patch("NSScaler", name, {"spec": {"restore_wait": "5m"}})
    before = api.get("HTTPRoute", "shop", held)
    run_at(control_plane, sys_ns, T0)
    assert ANNOTATION_ORIGINAL_RULES in ours(api.get("HTTPRoute", "shop", held))

    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})  # woken
    woken = T0 + dt.timedelta(minutes=1)
    run_at(control_plane, sys_ns, woken)
    assert api.replicas("Deployment", held, "web") == 1  # back, but its Pod never runs here
    route = api.get("HTTPRoute", "shop", held)
    assert route["metadata"]["annotations"][ANNOTATION_ROUTE_WAITING] == woken.strftime("%Y-%m-%dT%H:%M:%SZ")

    run_at(control_plane, sys_ns, woken + dt.timedelta(minutes=4, seconds=59))  # within the wait: still waiting
    assert ANNOTATION_ORIGINAL_RULES in ours(api.get("HTTPRoute", "shop", held))
    assert FINALIZER_ROUTES in api.get("NSScaler", name)["metadata"]["finalizers"]

    run_at(control_plane, sys_ns, woken + dt.timedelta(minutes=5))
    after = api.get("HTTPRoute", "shop", held)
    assert after["spec"] == before["spec"] and ours(after) == set()
    assert not (api.get("Deployment", "web", held).get("status") or {}).get("availableReplicas")  # really late
    assert not api.exists("ReferenceGrant", f"nsscaler-waker-from-{held}", sys_ns)
    assert FINALIZER_ROUTES not in (api.get("NSScaler", name)["metadata"].get("finalizers") or [])
    late = api.status(name)["restoredLate"]
    assert late == [{"namespace": held, "tier": 10, "notReady": ["deployment/web"], "routes": ["shop"],
                     "since": "2026-12-05T09:01:00Z"}]
    events = [e for e in api.list("Event", "default")
              if e["involvedObject"].get("name") == name and e["reason"] == "RestoreTierLate"]
    assert [(e["type"], e["message"]) for e in events] == [
        ("Warning", f"{held}: restore HTTPRoute shop came back after restore_wait, before deployment/web was "
                    f"available")]


def test_a_deleted_policy_whose_app_never_becomes_available_is_gone_after_restore_wait(
        api: AdminApi, prefix: str, control_plane: controlplane.ControlPlane) -> None:
    """No finalizer blocks a deletion for longer than restore_wait: the policy being deleted holds nothing, its
    route waits for the broken app at most that long, comes back, and the finalizer goes with it."""
    held, sys_ns = shop(api, prefix, on_request=True)
    name = f"{prefix}p"
    before = api.get("HTTPRoute", "shop", held)
    run_at(control_plane, sys_ns, T0)
    api.delete("NSScaler", name)
    assert api.get("NSScaler", name)["metadata"]["deletionTimestamp"]  # kept by the finalizer

    run_at(control_plane, sys_ns, T0 + dt.timedelta(minutes=1))
    assert api.replicas("Deployment", held, "web") == 1
    assert api.exists("NSScaler", name)  # its route waits, within the wait

    run_at(control_plane, sys_ns, T0 + dt.timedelta(minutes=6))  # restore_wait is 5m (the default)
    assert api.get("HTTPRoute", "shop", held)["spec"] == before["spec"]
    builders.wait_until(lambda: not api.exists("NSScaler", name), timeout=30,
                        what="the deleted NSScaler to go once its route is back")


def test_a_release_gives_back_a_route_whose_app_never_becomes_available_within_its_own_wait(
        api: AdminApi, prefix: str, control_plane: controlplane.ControlPlane) -> None:
    """An uninstall is not held up by a broken app: the release bounds every policy's restore_wait by its own
    wait (`--restore-wait-in-run`, here 0, so 1 s), so the release after the one that found the route waiting
    gives it back, and the finalizer goes (the policy itself is not deleted: a release leaves the CRs)."""
    held, sys_ns = shop(api, prefix, on_request=True)
    name = f"{prefix}p"
    api.patch("NSScaler", name, {"spec": {"restore_wait": "1h"}})  # what the release does not wait for
    before = api.get("HTTPRoute", "shop", held)
    run_at(control_plane, sys_ns, T0)
    settings = Settings(kubeconfig=control_plane.admin_kubeconfig, own_namespace=sys_ns, restore_wait_in_run=0)

    first = release.release(Kube(settings), settings, now=T0 + dt.timedelta(minutes=1))
    assert first.exit_code == 1 and first.routes_left == [
        f"the HTTPRoutes of {held} still point at the waker: its workloads are not available yet"]
    assert api.replicas("Deployment", held, "web") == 1

    second = release.release(Kube(settings), settings, now=T0 + dt.timedelta(minutes=1, seconds=1))
    assert second.exit_code == 0, second.routes_left
    assert api.get("HTTPRoute", "shop", held)["spec"] == before["spec"]
    assert FINALIZER_ROUTES not in (api.get("NSScaler", name)["metadata"].get("finalizers") or [])
