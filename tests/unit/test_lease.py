"""The run Lease's rules (pure, `job.decide.lease`): held, renewed, expired, a holder that stopped renewing, a
holder whose Pod is gone, replaced under the same name, or terminated."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from job.decide.lease import (
    LEASE_SECONDS,
    RENEW_DEADLINE_SECONDS,
    RENEW_SECONDS,
    Holder,
    held_by_other,
    pod_is_gone,
    renewal_of,
    stamp,
    taken_spec,
)

NOW = dt.datetime(2026, 12, 5, 9, 0, tzinfo=dt.UTC)
ME = "nsscaler-29001-abcde/1/me-uid"
OTHER = "nsscaler-29000-zyxwv/1/other-uid"


def lease(holder: str | None, *, renewed: dt.datetime | None = NOW, seconds: Any = LEASE_SECONDS) -> dict[str, Any]:
    spec: dict[str, Any] = {"holderIdentity": holder, "leaseDurationSeconds": seconds}
    if renewed is not None:
        spec |= {"acquireTime": stamp(renewed - dt.timedelta(minutes=1)), "renewTime": stamp(renewed)}
    return {"metadata": {"resourceVersion": "7"}, "spec": spec}


def pod(uid: str = "other-uid", *, phase: str = "Running", terminated: bool = False) -> dict[str, Any]:
    state = {"terminated": {"exitCode": 137}} if terminated else {"running": {}}
    return {"metadata": {"name": "nsscaler-29000-zyxwv", "uid": uid},
            "status": {"phase": phase, "containerStatuses": [{"name": "nsscaler", "state": state}]}}


@pytest.mark.parametrize(("found", "kwargs", "held"), [
    pytest.param(None, {}, False, id="no-lease-free"),
    pytest.param(lease(None), {}, False, id="given-back-free"),
    pytest.param(lease(ME), {}, False, id="mine-free-taking-again-renews"),
    pytest.param(lease(OTHER), {}, True, id="held-just-renewed"),
    pytest.param(lease(OTHER, renewed=NOW - dt.timedelta(seconds=LEASE_SECONDS - 1)), {}, True,
                 id="held-renewed-within-its-duration"),
    pytest.param(lease(OTHER, renewed=NOW - dt.timedelta(seconds=LEASE_SECONDS)), {}, False,
                 id="expired-by-the-servers-stamps"),
    pytest.param(lease(OTHER), {"unrenewed_for": LEASE_SECONDS - 0.5}, True, id="watched-not-yet-a-duration"),
    pytest.param(lease(OTHER), {"unrenewed_for": LEASE_SECONDS}, False,
                 id="watched-a-whole-duration-without-renewal-free-whatever-the-clocks-say"),
    pytest.param(lease(OTHER), {"gone": True}, False, id="holder-gone-free-at-once"),
    pytest.param(lease(OTHER, renewed=None), {}, False, id="never-said-when-holds-nothing"),
    pytest.param(lease(OTHER, seconds=True), {}, False, id="duration-not-a-number-holds-nothing"),
])
def test_the_lease_rules(found, kwargs, held):
    answer = held_by_other(found, me=ME, now=NOW, **kwargs)
    assert (answer is not None) == held
    if held:
        assert answer.holder == OTHER and answer.until > NOW and OTHER in str(answer)


@pytest.mark.parametrize(("found", "gone"), [
    pytest.param(pod(), False, id="running"),
    pytest.param(pod(phase="Pending"), False, id="pending-not-started-yet"),
    pytest.param(None, True, id="pod-gone-force-deleted"),
    pytest.param(pod("a-new-uid"), True, id="pod-replaced-under-the-same-name"),
    pytest.param(pod(phase="Failed"), True, id="pod-failed"),
    pytest.param(pod(phase="Succeeded"), True, id="pod-succeeded"),
    pytest.param(pod(terminated=True), True, id="container-terminated-phase-not-yet-updated"),
])
def test_a_holders_pod_as_read_says_whether_it_is_gone(found, gone):
    assert pod_is_gone(found, Holder.parse(OTHER)) is gone


def test_an_identity_round_trips_and_a_process_has_no_pod():
    assert str(Holder.parse(OTHER)) == OTHER
    assert Holder.parse(OTHER).pod_uid == "other-uid"
    laptop = Holder.parse("laptop/4242")
    assert laptop.pod_uid is None and laptop.pid == "4242" and str(laptop) == "laptop/4242"


def test_a_renewal_changes_what_a_waiting_run_watches_and_nothing_else_does():
    before = lease(OTHER)
    renewed = lease(OTHER, renewed=NOW + dt.timedelta(seconds=RENEW_SECONDS))
    assert renewal_of(before) != renewed and renewal_of(before) != renewal_of(renewed)
    labelled = {**before, "metadata": {"resourceVersion": "8", "labels": {"a": "b"}}}
    assert renewal_of(labelled) == renewal_of(before)


def test_taking_counts_a_change_of_holder_and_renewing_keeps_the_acquire_time():
    taken = taken_spec(me=ME, now=NOW, previous=lease(OTHER, renewed=NOW - dt.timedelta(hours=1)))
    assert taken["holderIdentity"] == ME and taken["leaseDurationSeconds"] == LEASE_SECONDS
    assert taken["leaseTransitions"] == 1 and taken["acquireTime"] == taken["renewTime"]
    again = taken_spec(me=ME, now=NOW + dt.timedelta(seconds=5), previous={"spec": taken})
    assert again["acquireTime"] == taken["acquireTime"] and again["leaseTransitions"] == 1


def test_a_holder_stops_writing_before_anyone_else_may_take_its_lease():
    """The holder's deadline to renew (on its clock) ends before a waiter's watch (on its own) frees the Lease,
    with room for at least one more renewal attempt."""
    assert RENEW_SECONDS < RENEW_DEADLINE_SECONDS < LEASE_SECONDS
