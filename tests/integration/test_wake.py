"""Wakes against the real control plane: real users (client certificates signed by the cluster's CA), real RBAC
(a RoleBinding to the built-in `edit`, which the clusterrole-aggregation controller extends with the Wake
ClusterRole), real admission (the shipped MutatingAdmissionPolicy and ValidatingAdmissionPolicy), and the
plugin run as `kubectl nsscaler`, found on PATH by kubectl itself.

Time is the run's `now`, injected: the wake's end is computed from its real creationTimestamp."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster import controlplane
from job import run
from job.cluster.kube import Kube
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY
from job.model.settings import Settings
from job.report import namespace_table
from tests.conftest import ROOT
from tests.faults import FaultProxy
from tests.users import User, grant_edit, plugin

BASE = ROOT / "kustomize" / "base"
SIZES = {"Deployment": 3, "StatefulSet": 2}


@pytest.fixture
def people(control_plane: controlplane.ControlPlane, tmp_path: Path, prefix: str) -> Iterator[dict[str, User]]:
    yield {who: User(control_plane, f"{prefix}{who}", tmp_path) for who in ("alice", "bob")}


def run_at(plane: controlplane.ControlPlane, now: dt.datetime) -> run.RunReport:
    """One run as cluster admin at the instant `now` (the clock injected through the run's own parameter)."""
    settings = Settings(kubeconfig=plane.admin_kubeconfig)
    report = run.run(Kube(settings), settings, now=now)
    assert report.exit_code == 0, (report.problems, [p.failures for p in report.policies])
    return report


def shop(api: AdminApi, prefix: str, **wake: Any) -> tuple[str, str]:
    """`<prefix>v1` (held, 3 + 2 replicas) and `<prefix>v2` (active), under one NSScaler."""
    for suffix in ("v1", "v2"):
        api.create(builders.namespace(prefix + suffix))
        api.create(builders.deployment(prefix + suffix, "web", SIZES["Deployment"]))
        api.create(builders.statefulset(prefix + suffix, "db", SIZES["StatefulSet"]))
    api.create(builders.nsscaler(f"{prefix}shop", prefix, ["v2"], **({"wake": wake} if wake else {})))
    return prefix + "v1", f"{prefix}shop"


def sizes(api: AdminApi, ns: str) -> dict[str, tuple[int, str | None, str | None]]:
    out = {}
    for kind, name in (("Deployment", "web"), ("StatefulSet", "db")):
        obj = api.get(kind, name, ns)
        notes = obj["metadata"].get("annotations") or {}
        out[kind] = (obj["spec"]["replicas"], notes.get(ANNOTATION_ORIGINAL_REPLICAS), notes.get(ANNOTATION_SCALED_BY))
    return out


def frozen(policy: str) -> dict[str, tuple[int, str | None, str | None]]:
    return {kind: (0, str(n), policy) for kind, n in SIZES.items()}


RUNNING = {kind: (n, None, None) for kind, n in SIZES.items()}


def only_wake(api: AdminApi, ns: str) -> dict[str, Any]:
    [found] = api.list("Wake", ns)
    return found


def created(obj: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(obj["metadata"]["creationTimestamp"])


@pytest.mark.versions
@pytest.mark.usefixtures("wake_admission")
def test_a_user_with_edit_wakes_a_held_namespace_on_the_record(api: AdminApi, control_plane, people, prefix):
    ns, policy = shop(api, prefix)
    now = dt.datetime.now(dt.UTC)
    run_at(control_plane, now)
    assert sizes(api, ns) == frozen(policy)
    alice = people["alice"]
    grant_edit(api, ns, alice)
    woke = alice.plugin("wake", "-n", ns, "--for", "3h", "--reason", "customer demo")
    assert woke.returncode == 0, woke.stderr
    assert "Pending until a run restores" in woke.stdout and "next nsscaler run: unknown" in woke.stdout
    wake = only_wake(api, ns)
    assert wake["spec"]["requestedBy"] == alice.name and wake["status"] == {"state": "Pending"}

    report = run_at(control_plane, now)
    assert report.count("applied") == 2
    [row] = [line for line in namespace_table(report).splitlines() if line.startswith(ns)]
    assert f"kept: woken by {alice.name} until" in row  # the dry-run table says why it runs
    assert sizes(api, ns) == RUNNING  # every workload back exactly
    status = only_wake(api, ns)["status"]
    end = created(wake) + dt.timedelta(hours=3)
    assert status["state"] == "Active" and status["policy"] == policy and status["capped"] is False
    assert status["appliedUntil"] == end.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert status["message"] == f"woken by {alice.name} until {end:%Y-%m-%dT%H:%MZ}: customer demo"
    shown = alice.plugin("status", "-n", ns).stdout
    assert f"{ns}: running\n  runs Deployment/web: 3\n  runs StatefulSet/db: 2\n" in shown, shown
    assert f"Wake {wake['metadata']['name']}: Active, by {alice.name}, until {status['appliedUntil']}" in shown
    shop_status = api.status(policy)
    assert shop_status["counts"]["wokenNamespaces"] == 1 and shop_status["counts"]["heldNamespaces"] == 0
    assert [(w["namespace"], w["by"], w["reason"]) for w in shop_status["wokenNamespaces"]] == \
        [(ns, alice.name, "customer demo")]
    events = [e for e in api.list("Event", ns) if e["involvedObject"]["kind"] == "Namespace"]
    assert [e["reason"] for e in events] == ["Woken"] and alice.name in events[0]["message"]

    seen = only_wake(api, ns)["metadata"]["resourceVersion"]
    steady = run_at(control_plane, now + dt.timedelta(hours=2, minutes=59))
    assert steady.count("applied") == 0
    assert only_wake(api, ns)["metadata"]["resourceVersion"] == seen  # an unchanged status is not sent again
    after = run_at(control_plane, end + dt.timedelta(minutes=1))
    assert after.count("applied") == 2
    assert sizes(api, ns) == frozen(policy)  # the record is the original one
    assert only_wake(api, ns)["status"]["state"] == "Expired"
    assert api.status(policy)["counts"]["wokenNamespaces"] == 0


@pytest.mark.versions
@pytest.mark.usefixtures("wake_admission")
def test_only_edit_may_wake_and_the_requester_cannot_be_forged(api: AdminApi, people, prefix):
    ns, _ = shop(api, prefix)
    alice, bob = people["alice"], people["bob"]
    grant_edit(api, ns, alice)
    refused = bob.plugin("wake", "-n", ns, "--for", "3h")
    assert refused.returncode == 1 and "forbidden" in refused.stderr, refused.stderr
    assert f'User "{bob.name}" cannot create resource "wakes"' in refused.stderr
    forged = alice.post(builders.wake(ns, "3h", name="forged", requestedBy=bob.name))
    assert forged.status_code == 403, forged.text
    assert f"spec.requestedBy must be your own user name, {alice.name}" in forged.text
    own = alice.post(builders.wake(ns, "3h", name="own", requestedBy=alice.name))  # her own name is no forgery
    assert own.status_code == 201, own.text
    # the sample Wake, as written but for its namespace and the user it names, is accepted on every version
    sample = yaml.safe_load((ROOT / "kustomize/samples/wake.yaml").read_text())
    assert sample["spec"]["requestedBy"] == "alice"
    sample["metadata"]["namespace"], sample["spec"]["requestedBy"] = ns, alice.name
    assert alice.post(sample).status_code == 201
    api.delete("Wake", sample["metadata"]["name"], namespace=ns)
    assert [w["metadata"]["name"] for w in api.list("Wake", ns)] == ["own"]
    # even cluster-admin cannot change alice's wake under her name (deleting it is another matter)
    taken = api.http.patch(api.url("Wake", ns, "own"), json={"spec": {"duration": "8h"}}, timeout=30,
                           headers={"Content-Type": "application/merge-patch+json"})
    assert taken.status_code == 403 and f"only {alice.name}, who asked for this Wake, may change its spec" in taken.text
    relabelled = api.patch("Wake", "own", {"metadata": {"labels": {"team": "shop"}}}, namespace=ns)
    assert relabelled["spec"] == {"duration": "3h", "requestedBy": alice.name}


@pytest.mark.usefixtures("wake_admission")
def test_two_editors_neither_takes_over_nor_stretches_the_others_wake(api: AdminApi, control_plane, people, prefix):
    """Two people with `edit` in one namespace: who asked for a Wake stays on its record whatever the other does,
    only its requester may change its spec, and no edit stretches it past the policy's cap."""
    ns, policy = shop(api, prefix, max_duration="2h")
    alice, bob = people["alice"], people["bob"]
    for person in (alice, bob):
        grant_edit(api, ns, person)
    made = alice.post(builders.wake(ns, "1h", name="alices"))
    assert made.status_code == 201, made.text
    born = created(made.json())

    cleared = bob.patch_wake(ns, "alices", {"spec": {"requestedBy": None}})  # stamped again, as bob, if allowed
    assert cleared.status_code == 422, cleared.text
    assert "spec.requestedBy cannot be changed once set; it names who asked for the Wake" in cleared.text
    renamed = bob.patch_wake(ns, "alices", {"spec": {"requestedBy": bob.name}})
    assert renamed.status_code == 422 and "cannot be changed once set" in renamed.text, renamed.text
    stretched = bob.patch_wake(ns, "alices", {"spec": {"duration": "720h"}})
    assert stretched.status_code == 403, stretched.text
    assert f"only {alice.name}, who asked for this Wake, may change its spec" in stretched.text
    assert f"(you are {bob.name})" in stretched.text
    assert api.get("Wake", "alices", ns)["spec"] == {"duration": "1h", "requestedBy": alice.name}

    own = alice.patch_wake(ns, "alices", {"spec": {"duration": "720h"}})  # her own, 30 days: allowed, and capped
    assert own.status_code == 200, own.text
    run_at(control_plane, dt.datetime.now(dt.UTC))
    status = only_wake(api, ns)["status"]
    assert (status["state"], status["capped"]) == ("Active", True)
    assert status["appliedUntil"] == (born + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"capped at 2h by NSScaler {policy}" in status["message"]
    assert only_wake(api, ns)["spec"]["requestedBy"] == alice.name


@pytest.mark.usefixtures("wake_admission")
def test_sleep_ends_a_wake_early(api: AdminApi, control_plane, people, prefix):
    ns, policy = shop(api, prefix)
    alice = people["alice"]
    grant_edit(api, ns, alice)
    now = dt.datetime.now(dt.UTC)
    run_at(control_plane, now)
    assert alice.plugin("wake", "-n", ns, "--for", "2h").returncode == 0
    run_at(control_plane, now)
    assert sizes(api, ns) == RUNNING
    slept = alice.plugin("sleep", "-n", ns)
    assert slept.returncode == 0 and "held again from the next run" in slept.stdout, slept.stderr
    assert api.list("Wake", ns) == []
    run_at(control_plane, now + dt.timedelta(minutes=10))
    assert sizes(api, ns) == frozen(policy)
    shown = alice.plugin("status", "-n", ns)
    assert shown.returncode == 0 and f"{ns}: held: 2 workloads frozen" in shown.stdout, shown.stdout
    assert "next nsscaler run: unknown (cannot read CronJob nsscaler/nsscaler: 403)" in shown.stdout
    api.create(builders.cronjob(prefix + "v2", "tick"))  # a CronJob the admin can read: "0 3 * * *"
    shown = plugin(control_plane.admin_kubeconfig, "status", policy, "--cronjob", f"{prefix}v2/tick")
    assert shown.returncode == 0, shown.stderr
    assert f"NSScaler {policy}: holding True, 1 held, 0 woken" in shown.stdout
    assert "next nsscaler run due " in shown.stdout and "(schedule '0 3 * * *')" in shown.stdout


@pytest.mark.usefixtures("wake_admission")
def test_a_wake_past_the_cap_runs_until_the_cap_and_says_so(api: AdminApi, control_plane, prefix):
    ns, policy = shop(api, prefix, max_duration="8h")
    now = dt.datetime.now(dt.UTC)
    run_at(control_plane, now)
    wake = api.create(builders.wake(ns, "720h", reason="a month off"))  # 30 days
    cap_end = created(wake) + dt.timedelta(hours=8)

    run_at(control_plane, now)
    status = only_wake(api, ns)["status"]
    assert (status["state"], status["capped"]) == ("Active", True)
    assert status["appliedUntil"] == cap_end.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"capped at 8h by NSScaler {policy}" in status["message"]
    assert sizes(api, ns) == RUNNING
    run_at(control_plane, cap_end - dt.timedelta(minutes=1))
    assert sizes(api, ns) == RUNNING
    run_at(control_plane, cap_end)  # ends exactly at its applied end
    assert sizes(api, ns) == frozen(policy)
    assert only_wake(api, ns)["status"]["state"] == "Expired"


@pytest.mark.usefixtures("wake_admission")
def test_a_policy_that_does_not_allow_wakes_ignores_them_and_says_why(api: AdminApi, control_plane, prefix):
    ns, policy = shop(api, prefix, allowed=False)
    now = dt.datetime.now(dt.UTC)
    run_at(control_plane, now)
    api.create(builders.wake(ns, "1h"))
    run_at(control_plane, now)
    assert sizes(api, ns) == frozen(policy)
    status = only_wake(api, ns)["status"]
    assert status["state"] == "Ignored"
    assert status["message"].startswith(f"NSScaler {policy} does not allow wakes (spec.wake.allowed: false)")
    events = [e for e in api.list("Event", ns) if e["involvedObject"]["kind"] == "Namespace"]
    assert [(e["reason"], e["type"]) for e in events] == [("WakeIgnored", "Warning")]


@pytest.mark.usefixtures("settled_cluster")
def test_a_steady_state_without_wakes_costs_one_list_of_wakes(api: AdminApi, control_plane, run_job, prefix,
                                                              admin_token, tmp_path):
    """Every request the run sends, as the proxy in front of the API server sees it: Wakes cost one LIST."""
    ns, _ = shop(api, prefix)
    assert run_job().exit_code == 0
    seen: list[tuple[str, str]] = []
    with FaultProxy(control_plane, fraction=0.0, before_forward=lambda m, p: seen.append((m, p))) as proxy:
        result = run_job(kubeconfig=proxy.kubeconfig(tmp_path / "count", admin_token))
    assert result.exit_code == 0, result.stderr
    assert sizes(api, ns) == frozen(f"{prefix}shop")
    about_wakes = [(m, p.split("?")[0]) for m, p in seen if "/wakes" in p]
    assert about_wakes == [("GET", f"/apis/{builders.NSSCALER_VERSION}/wakes")]
    assert sum(result.requests.values()) == len(seen)  # the run's own count agrees with the wire
