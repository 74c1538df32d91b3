"""The run Lease against the real control plane: one run writes at a time across the cluster.

A second holder is a Lease written by hand as another process would (another host's identity), and a second run
is a real `nsscaler` process; every wait polls the API or the process's own log, bounded, never a sleep."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster import controlplane
from job.decide.lease import LEASE_NAME
from tests.conftest import make_family

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


def test_a_run_writes_nothing_while_another_holds_the_lease_and_exits_0_naming_it(
        api: AdminApi, prefix: str, lease_ns: str, run_job: object) -> None:
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    hold(api, lease_ns, holder=OTHER, renewed=dt.datetime.now(dt.UTC))

    result = run_job("--own-namespace", lease_ns, "--soft-deadline", "0.5")  # type: ignore[operator]

    assert result.exit_code == 0, result.stderr
    assert OTHER in result.stderr and "writes nothing" in result.stderr
    assert OTHER in result.report["summary"]["lease_held_by"]
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 2
    assert api.get("Lease", LEASE_NAME, lease_ns)["spec"]["holderIdentity"] == OTHER  # not taken from its holder


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
