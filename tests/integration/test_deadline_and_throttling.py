"""Release day: a busy API server throttles nsscaler (429), and a run that cannot finish in time stops in time.

Faults land at chosen requests through the fault proxy (tests/faults.py), never after a sleep of the test's."""

from __future__ import annotations

import re
import threading
import time

import pytest

from devtools import builders
from devtools.builders import AdminApi
from tests.faults import FaultProxy
from tests.invariants import assert_nothing_lost, snapshot

pytestmark = pytest.mark.usefixtures("crd")


def family(api: AdminApi, prefix: str, namespaces: int) -> dict[tuple[str, str], int]:
    originals = {}
    for i in range(namespaces):
        ns = f"{prefix}n{i}"
        api.create(builders.namespace(ns))
        api.create(builders.deployment(ns, "d0", 1 + i % 3))
        originals[(ns, "d0")] = 1 + i % 3
    return originals


def test_throttled_requests_wait_for_retry_after_and_are_counted(api, control_plane, run_job, prefix,
                                                                  admin_token, tmp_path):
    """Every fault is a 429 with `Retry-After: 1`, as API Priority and Fairness sends it: each is retried
    after exactly the server's delay (not the client's own backoff), counted, and the run still succeeds."""
    originals = family(api, prefix, 12)
    api.create(builders.nsscaler(f"{prefix}p", prefix + "n", []))
    with FaultProxy(control_plane, fraction=0.25, faults=("429",), seed=3) as proxy:
        result = run_job("--retry-attempts", "10", kubeconfig=proxy.kubeconfig(tmp_path / "busy", admin_token))
    injected = proxy.injected["429"]
    assert injected >= 3, proxy.injected
    assert result.exit_code == 0, result.stderr
    assert result.report["summary"]["throttled"] == injected
    delays = re.findall(r"retrying in ([0-9.]+)s", result.stderr)
    assert delays and set(delays) == {"1.0"}, delays  # the server's Retry-After, every time
    assert snapshot(api, prefix + "n") == {key: (0, str(count)) for key, count in originals.items()}


def test_a_run_past_its_soft_deadline_stops_writing_says_how_far_it_got_and_the_next_run_goes_on(
        api, control_plane, run_job, prefix, admin_token, tmp_path):
    """The fifth PATCH is held until the deadline has surely passed (measured from before the run started),
    so the run cannot finish in time however fast or slow the machine: what it sent is recorded, the rest is
    deferred, nothing is half-done, and the next run completes the freeze with every original count."""
    originals = family(api, prefix, 30)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix + "n", []))
    deadline, patches, lock = 5.0, [], threading.Lock()
    started = time.monotonic()

    def hold_the_fifth_patch(method: str, path: str) -> None:
        if method != "PATCH" or "/deployments/" not in path:
            return
        with lock:
            patches.append(path)
            fifth = len(patches) == 5
        if fifth:
            while time.monotonic() < started + deadline + 1:
                time.sleep(0.05)  # holds this one request until the deadline has passed, whatever the load

    with FaultProxy(control_plane, fraction=0.0, before_forward=hold_the_fifth_patch) as proxy:
        first = run_job("--concurrency", "1", "--soft-deadline", str(deadline),
                        kubeconfig=proxy.kubeconfig(tmp_path / "slow", admin_token))
    summary = first.report["summary"]
    assert first.exit_code == 1, first.stderr
    assert summary["deferred"] >= 30 - 9  # at most the held one and the four queued behind it, plus four before
    assert summary["frozen"] + summary["deferred"] == 30
    assert any("soft deadline" in p for p in first.report["problems"])
    status = api.status(name)
    assert status["counts"]["frozen"] == summary["frozen"] and status["counts"]["failed"] == summary["deferred"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and "soft deadline" in ready["message"]
    assert_nothing_lost(api, prefix + "n", originals)
    second = run_job()
    assert second.exit_code == 0, second.stderr
    assert second.report["summary"]["frozen"] == summary["deferred"]
    assert snapshot(api, prefix + "n") == {key: (0, str(count)) for key, count in originals.items()}


def test_a_run_throttled_from_its_first_request_exits_1_so_the_job_retries_it(control_plane, run_job,
                                                                             admin_token, tmp_path):
    """Exit 2 means "retrying will not help" and fails the Job for good (its podFailurePolicy): a server that
    only says "not now" (429 after every retry) must not end the release day's run that way."""
    with FaultProxy(control_plane, fraction=1.0, faults=("429",), seed=1) as proxy:
        result = run_job("--retry-attempts", "2", kubeconfig=proxy.kubeconfig(tmp_path / "saturated", admin_token))
    assert proxy.injected["429"] == 2
    assert result.exit_code == 1, result.stderr
    assert "overloaded or unavailable" in result.stderr and "retries the run" in result.stderr
