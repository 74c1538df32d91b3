"""Wakes in the selection: table tests of the rules (job/decide/waking.py) and properties over generated
policies, namespaces, wakes and instants (hypothesis): a wake only ever adds running namespaces, never holds
one, and ends exactly at its applied end."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from job.decide import events, waking
from job.decide.selection import Selection, select_namespaces
from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.wake import Wake
from tests.unit.examples import examples
from tests.unit.factories import namespaces, policy, settings

T0 = dt.datetime(2026, 12, 4, 9, 0, tzinfo=dt.UTC)
H = dt.timedelta(hours=1)


def a_wake(ns: str, *, hours: float = 3, name: str = "w", by: str = "alice", reason: str = "demo",
           created: dt.datetime = T0, status: dict[str, str] | None = None) -> Wake:
    return Wake(namespace=ns, name=name, created=created, requested_end=created + hours * H, requested_by=by,
                reason=reason, status=status or {})


def run(policies: list[policy_api.Policy], wakes_: list[Wake], now: dt.datetime,
        names: tuple[str, ...] = ("shop-v1", "shop-v2", "shop-v3", "other-v1", "kube-system")) -> Selection:
    return select_namespaces(policies, namespaces=namespaces(*names), found={}, settings=settings(), now=now,
                             wakes=wakes_)


def test_a_woken_namespace_runs_and_says_who_until_when_and_why():
    chosen = run([policy("shop", "shop-", ["v2"])], [a_wake("shop-v1")], T0 + H)
    assert chosen.held_by == {"shop-v3": ["shop"]}
    assert chosen.verdicts["shop-v1"].holder_for(policy("shop", "shop-").kinds) is None
    state = chosen.policies["shop"]
    assert list(state.woken) == ["shop-v1"]
    assert state.reason("shop-v1") == "kept: woken by alice until 2026-12-04T12:00Z: demo"
    assert chosen.wakes[("shop-v1", "w")].state == wake_api.STATE_ACTIVE


@pytest.mark.parametrize(("now", "state"), [
    pytest.param(T0 + 3 * H - dt.timedelta(seconds=1), wake_api.STATE_ACTIVE, id="a second before its end"),
    pytest.param(T0 + 3 * H, wake_api.STATE_EXPIRED, id="at its end"),
    pytest.param(T0 + 30 * H, wake_api.STATE_EXPIRED, id="long after"),
])
def test_a_wake_ends_exactly_at_its_end(now, state):
    chosen = run([policy("shop", "shop-")], [a_wake("shop-v1")], now)
    assert chosen.wakes[("shop-v1", "w")].state == state
    assert ("shop-v1" in chosen.held_by) is (state == wake_api.STATE_EXPIRED)


def test_the_policy_caps_a_long_wake_and_says_so():
    capped = policy("shop", "shop-", wake={"max_duration": "8h"})
    verdict = run([capped], [a_wake("shop-v1", hours=720)], T0 + H).wakes[("shop-v1", "w")]
    assert (verdict.state, verdict.applied_end, verdict.capped) == (wake_api.STATE_ACTIVE, T0 + 8 * H, True)
    assert "capped at 8h by NSScaler shop (requested until 2027-01-03T09:00Z)" in verdict.message
    assert run([capped], [a_wake("shop-v1", hours=720)], T0 + 8 * H).wakes[("shop-v1", "w")].state == "Expired"


@pytest.mark.parametrize(("policies", "ns", "why"), [
    pytest.param([policy("shop", "shop-", wake={"allowed": False})], "shop-v1",
                 "NSScaler shop does not allow wakes (spec.wake.allowed: false)", id="not allowed"),
    pytest.param([policy("shop", "shop-"), policy("strict", "shop-v", wake={"allowed": False})], "shop-v1",
                 "NSScaler strict does not allow wakes", id="one of two policies forbids"),
    pytest.param([policy("shop", "shop-")], "other-v1", "no serving NSScaler has namespace other-v1 in scope",
                 id="no policy has it in scope"),
    pytest.param([policy("shop", "shop-", suspend=True)], "shop-v1", "no serving NSScaler", id="suspended"),
    pytest.param([policy("kube", "kube-")], "kube-system", "nsscaler never touches namespace kube-system",
                 id="protected"),
])
def test_an_ignored_wake_says_why_and_changes_nothing(policies, ns, why):
    with_wake = run(policies, [a_wake(ns)], T0 + H)
    assert with_wake.held_by == run(policies, [], T0 + H).held_by
    verdict = with_wake.wakes[(ns, "w")]
    assert verdict.state == wake_api.STATE_IGNORED and why in verdict.message


def test_the_latest_end_wins_and_a_wake_outside_a_hold_window_changes_nothing():
    both = run([policy("shop", "shop-")], [a_wake("shop-v1", hours=2, name="a"), a_wake("shop-v1", hours=5, name="b")],
               T0 + H)
    assert both.policies["shop"].woken["shop-v1"].wake.name == "b"
    windowed = policy("shop", "shop-", hold_windows=["19:00-07:00"])
    during_the_day = run([windowed], [a_wake("shop-v1")], T0 + H)  # 10:00: outside the window, nothing held
    assert during_the_day.held_by == {} and during_the_day.policies["shop"].woken == {}


def test_wake_specs_are_read_or_refused_with_the_reason():
    obj = {"metadata": {"namespace": "shop-v1", "name": "w", "creationTimestamp": "2026-12-04T09:00:00Z"},
           "spec": {"duration": "1h30m", "requestedBy": "alice"}}
    assert wake_api.parse(obj).requested_end == T0 + 1.5 * H
    assert wake_api.parse({**obj, "spec": {"until": "2026-12-04T18:00:00+01:00"}}).requested_end == T0 + 8 * H
    assert "exactly one of until" in wake_api.parse({**obj, "spec": {}}).invalid
    assert "is not a positive duration" in wake_api.parse({**obj, "spec": {"duration": "soon"}}).invalid
    too_long = policy_api.parse({"metadata": {"name": "shop"}, "spec": {"scope_prefix": "shop-", "wake": {
        "max_duration": "169h"}}}, default_kinds=frozenset())
    assert isinstance(too_long, policy_api.InvalidPolicy)
    assert too_long.message == "spec.wake.max_duration: '169h' is longer than 7 days (168h)"


def test_a_wake_status_is_sent_only_when_it_changes_and_its_event_once():
    pending = a_wake("shop-v1", status={"state": "Pending"})
    verdict = run([policy("shop", "shop-")], [pending], T0).wakes[("shop-v1", "w")]
    [(_, body)] = waking.status_updates([verdict])
    assert body["state"] == "Active" and body["appliedUntil"] == "2026-12-04T12:00:00Z"
    [event] = events.of_wakes([verdict])
    assert (event.namespace, event.reason, event.warning) == ("shop-v1", "Woken", False)
    seen = a_wake("shop-v1", status=body)
    again = run([policy("shop", "shop-")], [seen], T0 + H).wakes[("shop-v1", "w")]
    assert waking.status_updates([again]) == [] and events.of_wakes([again]) == []


# -- properties ------------------------------------------------------------------------------------------

NAMES = ("shop-v1", "shop-v2", "shop-v3", "shop-x1", "other-v1", "kube-system")
policies_st = st.lists(
    st.builds(lambda name, prefix, active, suspend, windows, allowed, cap: policy(
        name, prefix, active, suspend=suspend, hold_windows=windows, wake={"allowed": allowed, "max_duration": cap}),
        st.sampled_from(["a", "b", "c"]), st.sampled_from(["shop-", "shop-v", "other-", "kube-"]),
        st.lists(st.sampled_from(["v1", "v2", "1", "x1", "system"]), unique=True, max_size=2), st.booleans(),
        st.sampled_from([[], ["09:00-17:00"], ["Mon-Fri 19:00-07:00"]]), st.booleans(),
        st.sampled_from(["1h", "8h", "7d"])),
    max_size=3, unique_by=lambda p: p.name)
wakes_st = st.lists(
    st.builds(lambda ns, name, offset, hours: a_wake(ns, name=name, created=T0 + offset * H, hours=hours),
              st.sampled_from(NAMES), st.sampled_from(["a", "b"]), st.integers(-48, 48), st.integers(1, 240)),
    max_size=4, unique_by=lambda w: w.key)
instants = st.integers(-72 * 60, 72 * 60).map(lambda minutes: T0 + dt.timedelta(minutes=minutes))


@hyp_settings(max_examples=examples(120), deadline=None)
@given(policies_st, wakes_st, instants)
def test_a_wake_only_ever_adds_running_namespaces(policies, wakes_, now):
    without, with_ = run(policies, [], now, NAMES), run(policies, wakes_, now, NAMES)
    assert set(with_.held_by) <= set(without.held_by)  # never holds one
    for ns in set(without.held_by) - set(with_.held_by):  # what it releases, a current wake released
        assert any(v.active and v.wake.namespace == ns and now < v.applied_end for v in with_.wakes.values())
    for ns in with_.held_by:  # a held namespace has no wake that should apply
        assert not any(v.active for v in with_.wakes.values() if v.wake.namespace == ns and
                       all(p.spec.wake.allowed for p in policies if p.in_scope(ns) and not p.spec.suspend))
    untouched = {ns for ns, v in without.verdicts.items() if v.untouchable}
    assert not (set(with_.held_by) ^ set(without.held_by)) & untouched


@hyp_settings(max_examples=examples(120), deadline=None)
@given(policies_st, wakes_st, instants)
def test_a_wake_ends_exactly_at_its_applied_end(policies, wakes_, now):
    for key, verdict in run(policies, wakes_, now, NAMES).wakes.items():
        if verdict.applied_end is None:
            continue
        assert verdict.applied_end <= verdict.wake.requested_end
        assert verdict.applied_end - verdict.wake.created <= policy_api.MAX_WAKE
        just_before = run(policies, wakes_, verdict.applied_end - dt.timedelta(seconds=1), NAMES).wakes[key]
        at_end = run(policies, wakes_, verdict.applied_end, NAMES).wakes[key]
        assert (just_before.state, at_end.state) == (wake_api.STATE_ACTIVE, wake_api.STATE_EXPIRED)
