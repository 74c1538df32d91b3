"""The run Lease against the real control plane: one run writes at a time across the cluster.

A second holder is a Lease written by hand as another process would (another host's identity), and a second run
is a real `nsscaler` process; every wait polls the API or the process's own log, bounded, never a sleep."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from job.cluster import lease
from job.cluster.kube import Kube
from job.decide.lease import LEASE_NAME, LEASE_SECONDS, RENEW_SECONDS
from job.model.settings import Settings
from tests.conftest import make_family
from tests.faults import FaultProxy
from tests.users import plugin

OTHER = "other-host/4242"


def stamp(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def lease_ns(api: AdminApi, prefix: str) -> Iterator[str]:
    """A namespace of the test's own for the Lease (the run's `--own-namespace`), so no other test sees it."""
    ns = f"{prefix}lease"
    api.create(builders.namespace(ns))
    yield ns


def hold(api: AdminApi, ns: str, *, holder: str, renewed: dt.datetime, seconds: int = 600) -> None:
    """The Lease held by `holder`, as another run writes it (created, or taken over if a run left one)."""
    spec = {"holderIdentity": holder, "leaseDurationSeconds": seconds, "acquireTime": stamp(renewed),
            "renewTime": stamp(renewed)}
    if api.exists("Lease", LEASE_NAME, ns):
        api.patch("Lease", LEASE_NAME, {"spec": spec}, ns)
    else:
        api.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": LEASE_NAME, "namespace": ns}, "spec": spec})


def frozen(api: AdminApi, ns: str) -> bool:
    return api.replicas("Deployment", ns, "d-web") == 0


def test_a_run_with_nothing_to_write_never_asks_for_the_lease(api: AdminApi, prefix: str, lease_ns: str,
                                                              run_job: object) -> None:
    """The steady state pays nothing for the Lease: while another run holds it, a run that finds its family as it
    left it reads, writes its status and exits 0 without asking for the Lease (had it asked, it would have found
    the other holder and said so, after its soft deadline at the latest)."""
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job("--own-namespace", lease_ns).exit_code == 0  # type: ignore[operator]
    assert frozen(api, prefix + "v1")
    hold(api, lease_ns, holder=OTHER, renewed=dt.datetime.now(dt.UTC))

    steady = run_job("--own-namespace", lease_ns, "--soft-deadline", "5")  # type: ignore[operator]

    assert steady.exit_code == 0, steady.stderr
    assert steady.report["summary"]["lease_held_by"] is None and OTHER not in steady.stderr
    assert frozen(api, prefix + "v1")
    assert api.get("Lease", LEASE_NAME, lease_ns)["spec"]["holderIdentity"] == OTHER


def test_a_run_that_waits_out_its_whole_wait_writes_nothing_and_exits_3_naming_the_holder(
        api: AdminApi, prefix: str, lease_ns: str, run_job: object, control_plane: controlplane.ControlPlane) -> None:
    """A live holder (renewed just now, for longer than this run may wait): the run that had changes to make
    writes none, not even the statuses (they stay as the last run wrote them, which says nothing of this one),
    says in one line who holds the Lease and until when, exits 3, and tells the people waiting for a Wake why."""
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job("--own-namespace", lease_ns).exit_code == 0  # type: ignore[operator]
    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})  # now v2 is to freeze
    api.create(builders.wake(prefix + "v2", "1h"))
    before = api.status(f"{prefix}p")
    hold(api, lease_ns, holder=OTHER, renewed=dt.datetime.now(dt.UTC))

    result = run_job("--own-namespace", lease_ns, "--lease-wait", "1")  # type: ignore[operator]

    assert result.exit_code == 3, result.stderr
    said = [line for line in result.stderr.splitlines() if "run wrote nothing" in line]
    assert len(said) == 1 and OTHER in said[0] and " until " in said[0] and said[0].endswith("exit 3"), said
    assert result.report["summary"]["exit_code"] == 3 and OTHER in result.report["summary"]["lease_held_by"]
    assert api.status(f"{prefix}p") == before  # not a "0 policies" status that reads like a clean run
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0  # nothing restored or frozen
    assert api.replicas("Deployment", prefix + "v2", "d-web") == 1
    assert api.get("Lease", LEASE_NAME, lease_ns)["spec"]["holderIdentity"] == OTHER  # not taken from its holder
    told = [e for e in api.list("Event", prefix + "v2") if e["reason"] == "RunLeaseHeld"]
    assert len(told) == 1 and OTHER in told[0]["message"] and told[0]["type"] == "Warning", told
    shown = plugin(control_plane.admin_kubeconfig, "status", "-n", prefix + "v2")  # what the person who woke it sees
    assert shown.returncode == 0 and "Wake w: Pending" in shown.stdout, shown
    assert f"holding the run Lease ({OTHER}" in shown.stdout and "exit 3" in shown.stdout, shown.stdout


def test_a_holder_that_stops_renewing_is_taken_over_after_one_lease_duration_whatever_its_clock_says(
        api: AdminApi, prefix: str, lease_ns: str, run_job: object) -> None:
    """The holder's clock runs an hour ahead (its renewTime is in the future, so the server's stamps alone
    would keep it held for an hour), and it stopped renewing: the waiting run, measuring on its own clock,
    takes the Lease over once it has watched it unrenewed for the Lease's duration, and does the work."""
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    hold(api, lease_ns, holder=OTHER, renewed=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1),
         seconds=LEASE_SECONDS)

    result = run_job("--own-namespace", lease_ns)  # type: ignore[operator]

    assert result.exit_code == 0, result.stderr
    assert "waiting" in result.stderr and OTHER in result.stderr
    assert frozen(api, prefix + "v1")
    spec = api.get("Lease", LEASE_NAME, lease_ns)["spec"]
    assert not spec.get("holderIdentity") and spec["leaseTransitions"] == 1, spec


def pod_named(api: AdminApi, ns: str, name: str) -> str:
    """A real Pod object (Pending: no node here); its uid."""
    made = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                       "spec": {"containers": [{"name": "nsscaler", "image": "nsscaler"}]}})
    return str(made["metadata"]["uid"])


@pytest.mark.parametrize("case", ["pod-gone", "pod-replaced-same-name", "pod-alive"])
def test_a_holder_whose_pod_is_gone_is_taken_over_at_once(api: AdminApi, prefix: str, lease_ns: str,
                                                          run_job: object, case: str) -> None:
    """The Lease names a run in a Pod: force-deleted (no Pod of that name), or replaced by another Pod of the
    same name: taken over at once, without waiting for the Lease to expire. While the Pod lives, it is held."""
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    name = "nsscaler-29000-zyxwv"
    if case == "pod-gone":
        holder = f"{name}/1/a-deleted-pods-uid"  # no Pod of that name any more
    elif case == "pod-replaced-same-name":
        pod_named(api, lease_ns, name)
        holder = f"{name}/1/the-first-pods-uid"  # the Pod of that name now is another one
    else:
        holder = f"{name}/1/{pod_named(api, lease_ns, name)}"
    hold(api, lease_ns, holder=holder, renewed=dt.datetime.now(dt.UTC), seconds=LEASE_SECONDS)

    result = run_job("--own-namespace", lease_ns, "--lease-wait", "2")  # type: ignore[operator]

    if case == "pod-alive":
        assert result.exit_code == 3 and holder in result.stderr, result.stderr
        assert api.replicas("Deployment", prefix + "v1", "d-web") == 2
        return
    assert result.exit_code == 0, result.stderr
    assert "whose Pod or process is gone" in result.stderr and holder in result.stderr
    assert "waiting" not in result.stderr  # at once: not one poll of waiting
    assert frozen(api, prefix + "v1")


def test_an_expired_lease_is_taken_and_given_back(api: AdminApi, prefix: str, lease_ns: str,
                                                   run_job: object) -> None:
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    hold(api, lease_ns, holder=OTHER, renewed=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1), seconds=60)

    result = run_job("--own-namespace", lease_ns)  # type: ignore[operator]

    assert result.exit_code == 0, result.stderr
    assert frozen(api, prefix + "v1")
    spec = api.get("Lease", LEASE_NAME, lease_ns)["spec"]
    assert not spec.get("holderIdentity"), spec  # given back at the end
    assert spec["leaseTransitions"] == 1


def test_two_runs_started_together_one_writes_the_other_waits_then_goes_on_and_nothing_is_lost(
        api: AdminApi, prefix: str, lease_ns: str, control_plane: controlplane.ControlPlane) -> None:
    """The first run is held by hand (the Lease written as it would write it); the second, a real process,
    waits (its log says so) and writes nothing; once the first gives the Lease back, the second takes it and
    does the whole work."""
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    hold(api, lease_ns, holder=OTHER, renewed=dt.datetime.now(dt.UTC))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "job", "--kubeconfig", str(control_plane.admin_kubeconfig), "--output", "json",
         "--own-namespace", lease_ns],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        said = []  # it reads, finds something to write, then waits: its log says so (or, if not, what instead)
        while (line := proc.stderr.readline()) and not ("waiting" in line and OTHER in line):
            said.append(line)
        assert "waiting" in line and OTHER in line, "".join(said)
        assert api.replicas("Deployment", prefix + "v1", "d-web") == 2  # nothing written while it waits
        lease = api.get("Lease", LEASE_NAME, lease_ns)
        api.patch("Lease", LEASE_NAME, {"metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                                        "spec": {"holderIdentity": None}}, lease_ns)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    summary = json.loads(out)["summary"]
    assert summary["frozen"] == 1 and summary["lease_held_by"] is None, summary
    assert frozen(api, prefix + "v1")


def test_a_run_renews_its_lease_while_it_writes_and_stops_writing_once_another_run_has_it(
        api: AdminApi, prefix: str, lease_ns: str, run_job: object, control_plane: controlplane.ControlPlane,
        admin_token: str, tmp_path: Path) -> None:
    """At the run's 3rd Deployment PATCH, another run takes the Lease over (as it may once a holder's renewals
    stop reaching the server); that PATCH is held in the proxy until the run's next renewal has been refused,
    then forwarded. The run sends no write after it (each left one is deferred), writes no status and no Event,
    and exits 1 naming the loss; the next run converges. The renewal comes on the run's own schedule
    (`RENEW_SECONDS`); the test waits on requests the proxy sees, never on a clock."""
    make_family(api, prefix, {f"n{i}": {"d-web": 2} for i in range(8)})
    api.create(builders.nsscaler(f"{prefix}p", prefix + "n", []))
    lock, written = threading.Lock(), set[str]()
    stolen, refused = threading.Event(), threading.Event()

    def before(method: str, path: str) -> str | None:
        if method != "PATCH" or "/deployments/" not in path:
            return None
        with lock:  # the 3rd workload written, not the 3rd request: a request sent again is the same write
            third = path not in written and len(written) == 2
            written.add(path)
        if third:  # set first: a renewal refused between the theft and `set` would otherwise go unseen
            stolen.set()
            hold(api, lease_ns, holder=OTHER, renewed=dt.datetime.now(dt.UTC), seconds=LEASE_SECONDS)
            assert refused.wait(timeout=60), "the run did not try to renew its Lease"
        return None

    def after(method: str, path: str, status: int) -> None:
        if method == "PATCH" and "/leases/" in path and status == 422 and stolen.is_set():
            refused.set()

    with FaultProxy(control_plane, fraction=0.0, before_forward=before, after_forward=after) as proxy:
        config = proxy.kubeconfig(tmp_path / "run", admin_token)
        result = run_job("--own-namespace", lease_ns, "--concurrency", "1",  # type: ignore[operator]
                         kubeconfig=config)

    assert result.exit_code == 1, result.stderr
    assert refused.is_set() and "lost the run Lease" in result.stderr, result.stderr
    sizes = {ns: api.replicas("Deployment", f"{prefix}n{ns}", "d-web") for ns in range(8)}
    assert sorted(sizes.values()) == [0, 0, 0, 2, 2, 2, 2, 2], (sizes, result.stderr)  # the 3rd landed, no more
    assert not api.status(f"{prefix}p"), "a run that lost its Lease wrote a status"
    assert api.get("Lease", LEASE_NAME, lease_ns)["spec"]["holderIdentity"] == OTHER  # never taken back
    deferred = [a for a in result.report["actions"] if a["outcome"] == "deferred"]
    assert len(deferred) == 5 and all("run Lease" in a["message"] for a in deferred), deferred

    hold(api, lease_ns, holder="", renewed=dt.datetime.now(dt.UTC))  # the other run ended and gave it back
    assert run_job("--own-namespace", lease_ns).exit_code == 0  # type: ignore[operator]
    assert all(api.replicas("Deployment", f"{prefix}n{ns}", "d-web") == 0 for ns in range(8))


def test_a_held_lease_is_renewed_on_its_holders_schedule_and_given_back(
        api: AdminApi, lease_ns: str, control_plane: controlplane.ControlPlane) -> None:
    kube = Kube(Settings(kubeconfig=control_plane.admin_kubeconfig))
    run_lease = lease.RunLease(kube, lease_ns, wait=0)
    try:
        assert run_lease.ensure()
        first = api.get("Lease", LEASE_NAME, lease_ns)["spec"]
        assert first["leaseDurationSeconds"] == LEASE_SECONDS and first["holderIdentity"] == run_lease.me
        wait_until(lambda: api.get("Lease", LEASE_NAME, lease_ns)["spec"]["renewTime"] != first["renewTime"],
                   timeout=RENEW_SECONDS * 3, what="the holder to renew its Lease")
        assert run_lease.holding() and run_lease.requests["patch"] >= 1  # taken by a create; renewed by PATCH
    finally:
        run_lease.give_back()
    assert not api.get("Lease", LEASE_NAME, lease_ns)["spec"].get("holderIdentity")
