"""Wake budgets: the arithmetic of woken time in a rolling window (job/decide/woken_time.py), and the budget in the
selection, run after run with the record each run leaves in the policy's status (job/decide/budget.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from job.decide import budget, woken_time
from job.decide.outcome import PolicyOutcome
from job.decide.selection import PolicySelection, Selection, select_namespaces
from job.decide.status import build_status
from job.model import policy as policy_api
from job.model.wake import STATE_ACTIVE, STATE_EXPIRED, STATE_IGNORED, Wake
from tests.unit.factories import namespaces, policy, settings

H = 3600
DAY = 24 * H
T0 = dt.datetime(2026, 12, 4, 22, 0, tzinfo=dt.UTC)  # two hours before midnight
HOUR = dt.timedelta(hours=1)


# --- the arithmetic -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("history", "start", "end"), [
    pytest.param([], 0, 2 * H, id="nothing woken: the whole allowance"),
    pytest.param([(0, H)], H, 2 * H, id="right after an hour: the hour left"),
    pytest.param([(0, 2 * H)], 2 * H, 2 * H, id="exactly at the budget: nothing"),
    pytest.param([(0, 2 * H)], DAY, DAY + 2 * H, id="a day later: all of it again"),
    pytest.param([(0, 2 * H)], DAY - H, DAY - H, id="an hour before the old time starts to leave: nothing"),
    pytest.param([(0, 2 * H)], DAY + H, DAY + 3 * H,
                 id="while the old time leaves the window: it leaves as fast as the new one comes"),
    pytest.param([(0, H), (0, H), (30 * 60, H)], H, 2 * H, id="the same time recorded three times counts once"),
    pytest.param([(10 * H, 11 * H)], 10 * H + 30 * 60, 12 * H, id="overlapping a wake still running: the union"),
])
def test_granted_end(history, start, end):
    assert woken_time.granted_end(history, start=start, allowance=2 * H, window=DAY) == end


@pytest.mark.parametrize(("history", "now", "frees"), [
    pytest.param([], 5 * H, 5 * H, id="nothing woken: now"),
    pytest.param([(0, 2 * H)], 2 * H, DAY, id="spent at once: when the oldest time starts to leave the window"),
    pytest.param([(0, H), (3 * H, 4 * H)], 4 * H, DAY, id="spent in two wakes: when the first starts to leave"),
    pytest.param([(0, 3 * H)], 3 * H, DAY + H, id="overspent (a budget lowered): once back to the allowance"),
])
def test_frees_at(history, now, frees):
    assert woken_time.frees_at(history, now=now, allowance=2 * H, window=DAY) == frees


@given(st.lists(st.tuples(st.integers(0, 3 * DAY), st.integers(1, 10 * H)).map(lambda p: (p[0], p[0] + p[1])),
                max_size=6), st.integers(0, 4 * DAY), st.integers(1, 20))
def test_a_granted_wake_never_passes_the_budget_in_any_window(history, start, hours):
    """Whatever was woken before, a wake granted until `end` keeps every window ending in it within the
    allowance, where the windows before it were (checked minute by minute, and at the end itself)."""
    allowance = hours * H
    end = woken_time.granted_end(history, start=start, allowance=allowance, window=DAY)
    assert end >= start
    spans = [*history, (start, end)]
    for at in [*range(start, end, 60), end]:
        before = woken_time.woken_within(history, since=at - DAY, until=at)
        assert woken_time.woken_within(spans, since=at - DAY, until=at) <= max(allowance, before)
    if end > start:  # a wake granted time is never granted less than it could have had
        over = [*history, (start, end + 60)]
        assert woken_time.woken_within(over, since=end + 60 - DAY, until=end + 60) > allowance


# --- in the selection, run after run ---------------------------------------------------------------------------

def shop(**budget_spec: object) -> policy_api.Policy:
    return policy("shop", "shop-", ["v2"], wake={"max_duration": "8h", "budget": budget_spec or
                                                 {"hours": 2, "per": "day"}})


def a_wake(name: str, created: dt.datetime, hours: float, uid: str | None = None) -> Wake:
    return Wake(namespace="shop-v1", name=name, created=created, requested_end=created + hours * HOUR,
                requested_by="alice", uid=uid or f"uid-{name}-{created:%H%M}")


class Runs:
    """Runs of the selection, each given the record the run before left in the policy's status."""

    def __init__(self, p: policy_api.Policy) -> None:
        self.policy = p

    def at(self, now: dt.datetime, *wakes: Wake) -> Selection:
        chosen = select_namespaces([self.policy], namespaces=namespaces("shop-v1", "shop-v2"), found={},
                                   settings=settings(), now=now, wakes=list(wakes))
        history = chosen.policies["shop"].wake_history
        assert history is not None
        self.policy = dataclasses.replace(self.policy, status={budget.STATUS_KEY: budget.entries(history)})
        return chosen

    def with_spec(self, p: policy_api.Policy) -> None:
        self.policy = dataclasses.replace(p, status=self.policy.status)


def test_recreated_wakes_share_one_budget_across_midnight_and_the_third_is_ignored_saying_until_when():
    runs = Runs(shop())
    first = a_wake("nsscaler-waker", T0, 1)
    assert runs.at(T0, first).wakes[first.key].state == STATE_ACTIVE
    assert runs.at(T0 + HOUR, first).held_by == {"shop-v1": ["shop"]}  # ended at 23:00; then deleted
    second = a_wake("nsscaler-waker", T0 + 90 * dt.timedelta(minutes=1), 4)  # re-created at 23:30, same name
    chosen = runs.at(second.created, second)
    verdict = chosen.wakes[second.key]
    assert (verdict.state, verdict.capped, verdict.applied_end) == (STATE_ACTIVE, True, T0 + 150 * HOUR / 60)
    assert ("cut at 2026-12-05T00:30Z by the wake budget of NSScaler shop (2h per day, counted across all Wakes "
            "of the namespace)") in verdict.message
    assert "shop-v1" not in chosen.held_by
    after = runs.at(T0 + 3 * HOUR, second)  # 01:00 the next day: the rolling window still holds 22:00-00:30
    assert after.wakes[second.key].state == STATE_EXPIRED and after.held_by == {"shop-v1": ["shop"]}
    third = a_wake("nsscaler-waker", T0 + 3 * HOUR, 1, uid="third")
    ignored = runs.at(T0 + 3 * HOUR, third)
    verdict = ignored.wakes[third.key]
    assert verdict.state == STATE_IGNORED and ignored.held_by == {"shop-v1": ["shop"]}
    assert verdict.message == ("ignored: the wake budget of NSScaler shop (2h per day) is used up in namespace "
                               "shop-v1; the namespace stays held; the budget frees up "
                               "at 2026-12-05T22:00Z")
    [row] = ignored.policies["shop"].wake_budget
    assert row == {"namespace": "shop-v1", "budget": "2h per day", "woken": "2h", "freesAt": "2026-12-05T22:00:00Z"}
    assert [(e["wake"], e["from"], e["until"]) for e in runs.policy.status[budget.STATUS_KEY]] == [
        ("nsscaler-waker", "2026-12-04T22:00:00Z", "2026-12-04T23:00:00Z"),
        ("nsscaler-waker", "2026-12-04T23:30:00Z", "2026-12-05T00:30:00Z")]  # the ignored one costs nothing


def test_a_wake_deleted_early_costs_until_the_run_that_finds_it_gone():
    runs = Runs(shop())
    wake = a_wake("w", T0, 2)
    runs.at(T0, wake)
    runs.at(T0 + 30 * HOUR / 60)  # deleted (kubectl nsscaler sleep): it ran until this run
    later = a_wake("w2", T0 + HOUR, 3)
    verdict = runs.at(later.created, later).wakes[later.key]
    assert verdict.applied_end == T0 + HOUR + 90 * HOUR / 60  # 30 minutes spent, 90 left


def test_the_same_run_seen_twice_counts_once():
    """A run that recorded and then died, and the next one: the same record, the same verdict."""
    runs = Runs(shop())
    wake = a_wake("w", T0, 3)
    first = runs.at(T0, wake).wakes[wake.key]
    again = runs.at(T0, wake).wakes[wake.key]
    assert first == again and first.applied_end == T0 + 2 * HOUR
    assert len(runs.policy.status[budget.STATUS_KEY]) == 1


def test_a_wake_exactly_at_the_budget_runs_to_its_end_uncut():
    runs = Runs(shop())
    wake = a_wake("w", T0, 2)
    verdict = runs.at(T0, wake).wakes[wake.key]
    assert (verdict.state, verdict.capped, verdict.applied_end) == (STATE_ACTIVE, False, T0 + 2 * HOUR)
    assert "budget" not in verdict.message
    nothing_left = a_wake("more", T0 + 2 * HOUR, 1)
    assert runs.at(T0 + 2 * HOUR, nothing_left).wakes[nothing_left.key].state == STATE_IGNORED


def test_a_budget_lowered_mid_window_cuts_the_running_wake_and_a_raised_one_gives_time_back():
    runs = Runs(shop(hours=4, per="day"))
    wake = a_wake("w", T0, 6)
    assert runs.at(T0, wake).wakes[wake.key].applied_end == T0 + 4 * HOUR
    runs.with_spec(shop(hours=1, per="day"))
    lowered = runs.at(T0 + 90 * HOUR / 60, wake)
    assert lowered.wakes[wake.key].state == STATE_EXPIRED and lowered.held_by == {"shop-v1": ["shop"]}
    assert runs.policy.status[budget.STATUS_KEY][0]["until"] == "2026-12-04T23:30:00Z"  # it ran until this run
    runs.with_spec(shop(hours=3, per="week"))
    raised = runs.at(T0 + 2 * HOUR, wake).wakes[wake.key]
    # the same Wake again counts from its first start, as if it had run all along (never less than it ran)
    assert (raised.state, raised.applied_end) == (STATE_ACTIVE, T0 + 3 * HOUR)


def test_without_a_budget_nothing_is_recorded_and_wakes_are_as_before():
    plain = policy("shop", "shop-", ["v2"], wake={"max_duration": "8h"})
    wakes = [a_wake("w", T0, 3), a_wake("x", T0 + 5 * HOUR, 3)]
    chosen = select_namespaces([plain], namespaces=namespaces("shop-v1"), found={}, settings=settings(),
                               now=T0 + 6 * HOUR, wakes=wakes)
    assert chosen.policies["shop"].wake_history is None and chosen.policies["shop"].wake_budget == []
    assert chosen.wakes[wakes[1].key].state == STATE_ACTIVE


@pytest.mark.parametrize("budget_spec", [
    pytest.param({"hours": 24, "per": "day"}, id="a whole day is no budget"),
    pytest.param({"hours": 0}, id="zero"),
    pytest.param({"hours": 200, "per": "week"}, id="more than a week"),
    pytest.param({"hours": 2, "per": "month"}, id="an unknown window"),
    pytest.param({"hours": "2"}, id="hours as text"),
    pytest.param({"hours": 2, "every": "day"}, id="an unknown field"),
])
def test_an_absurd_budget_makes_the_policy_invalid(budget_spec):
    parsed = policy_api.parse({"metadata": {"name": "shop"}, "spec": {"scope_prefix": "shop-",
                                                                      "wake": {"budget": budget_spec}}},
                              default_kinds=frozenset())
    assert isinstance(parsed, policy_api.InvalidPolicy) and "spec.wake.budget" in parsed.message


def test_a_wake_costs_nothing_while_its_namespace_runs_anyway_and_counts_from_the_run_that_holds_it_again():
    """Outside the policy's hold windows the namespace runs without the Wake: it keeps nothing running then."""
    runs = Runs(policy("shop", "shop-", ["v2"], hold_windows=["00:00-22:30"],
                       wake={"budget": {"hours": 2, "per": "day"}}))
    wake = a_wake("w", T0 + HOUR, 6)  # 23:00, outside the window that ends at 22:30
    free = runs.at(T0 + HOUR, wake)
    assert free.wakes[wake.key].state == STATE_ACTIVE and not free.wakes[wake.key].capped
    assert runs.policy.status[budget.STATUS_KEY] == []
    held_again = runs.at(T0 + 3 * HOUR, wake)  # 01:00: the window is open; the wake counts from here
    verdict = held_again.wakes[wake.key]
    assert (verdict.state, verdict.applied_end) == (STATE_ACTIVE, T0 + 5 * HOUR)
    assert "shop-v1" not in held_again.held_by


def test_the_status_sends_the_record_only_when_the_run_changes_it_and_removes_it_with_the_budget():
    """A run that changes nothing on the record never sends it (the merge patch keeps what a run beside it wrote);
    a policy that drops its budget drops the record and the figures too."""
    entry = budget.Woken("shop-v1", "w", "u1", T0, T0 + HOUR)
    stored = {budget.STATUS_KEY: budget.entries([entry]), "wakeBudget": []}

    def body(history: tuple[budget.Woken, ...] | None, previous: dict) -> dict:
        chosen = PolicySelection("shop", holding=True, wake_history=history)
        return build_status(PolicyOutcome("shop", 1, selection=chosen, previous_status=previous), now=T0,
                            list_limit=20)

    assert budget.STATUS_KEY not in body((entry,), stored) and body((entry,), stored)["wakeBudget"] == []
    longer = dataclasses.replace(entry, end=T0 + 2 * HOUR)
    assert body((longer,), stored)[budget.STATUS_KEY][0]["until"] == "2026-12-05T00:00:00Z"
    dropped = body(None, stored)
    assert dropped[budget.STATUS_KEY] is None and dropped["wakeBudget"] is None
    assert budget.STATUS_KEY not in body(None, {}) and "wakeBudget" not in body(None, {})
    suspended = PolicyOutcome("shop", 1, selection=PolicySelection("shop"), previous_status=stored, suspended=True)
    invalid = PolicyOutcome("shop", 1, previous_status=stored, invalid="spec.wake.budget: hours must be ...")
    for kept in (suspended, invalid):  # the record waits for the policy to serve again
        written = build_status(kept, now=T0, list_limit=20)
        assert budget.STATUS_KEY not in written and "wakeBudget" not in written
