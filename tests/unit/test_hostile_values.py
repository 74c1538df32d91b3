"""Whatever a spec holds, reading it never raises: a date or duration beyond the calendar is a clear error naming
the field and the limit (pure; the real API server's side is `tests/integration/test_hostile_input.py`)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job.decide import plan, selection, status, tiers
from job.decide.actions import Action, Verb
from job.decide.outcome import PolicyOutcome
from job.model import policy as policy_api
from job.model import resources, workloads
from job.model import wake as wake_api
from job.model.activity import Change
from job.model.kinds import Kind, ReplicasHandler
from tests.unit.factories import policy, workload

KINDS = frozenset({Kind.DEPLOYMENT})
NOW = dt.datetime(2026, 12, 4, 10, 0, tzinfo=dt.UTC)
ORDERED = policy("p", "shop-", ["v3"], restore_order=["StatefulSet"], restore_wait="5m")
CREATED = "2026-12-04T09:00:00Z"


def _policy(**spec):
    return policy_api.parse({"metadata": {"name": "p", "generation": 1}, "spec": {"scope_prefix": "shop-", **spec}},
                            default_kinds=KINDS)


def _wake(spec, created=CREATED):
    return wake_api.parse({"metadata": {"name": "w", "namespace": "shop-v1", "creationTimestamp": created},
                           "spec": spec})


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param({"until": "9999-12-31T23:59:59-01:00"}, "spec.until: '9999-12-31T23:59:59-01:00' is outside the "
                 "dates nsscaler reads (1970-01-01 to before 9000-01-01)", id="until-past-year-9999-in-utc"),
    pytest.param({"until": "0001-01-01T00:00:00+01:00"}, "is outside the dates", id="until-before-year-1"),
    pytest.param({"until": "1969-12-31T23:59:59Z"}, "is outside the dates", id="until-before-1970"),
    pytest.param({"until": "2026-12-24T18:00:00Z" + " " * 60}, "is not an RFC 3339 date-time", id="until-too-long"),
    pytest.param({"wake": {"max_duration": "3000000d"}}, "spec.wake.max_duration: '3000000d' is longer than 3650 "
                 "days", id="max-duration-millions-of-days"),
    pytest.param({"wake": {"max_duration": "9" * 30 + "d"}}, "is longer than 3650 days", id="max-duration-30-digits"),
    pytest.param({"restore_wait": "1" * 5000 + "s"}, "is not a duration of at most 32 characters",
                 id="restore-wait-5000-digits"),
    pytest.param({"restore_wait": "25h"}, "is longer than a day (24h)", id="restore-wait-over-a-day"),
])
def test_an_absurd_policy_value_is_invalid_with_the_field_and_the_limit(spec, message):
    parsed = _policy(**spec)
    assert isinstance(parsed, policy_api.InvalidPolicy)
    assert message in parsed.message
    assert parsed.message.startswith("spec.")


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param({"duration": "3000000d"}, "spec.duration: '3000000d' is longer than 3650 days", id="3000000d"),
    pytest.param({"until": "9999-12-31T23:59:59-01:00"}, "spec.until: '9999-12-31T23:59:59-01:00' is outside",
                 id="until-year-10000-in-utc"),
    pytest.param({"duration": "9" * 4400 + "s"}, "spec.duration: '99999", id="thousands-of-digits"),
    pytest.param({"duration": 3}, "spec.duration: '3' is not a positive duration", id="a-number"),
])
def test_an_absurd_wake_is_invalid_with_the_field_and_the_fix(spec, message):
    parsed = _wake(spec)
    assert parsed.requested_end is None and parsed.invalid.startswith(message)
    assert "fix: set one of spec.duration" in parsed.invalid


def test_a_wake_created_near_the_end_of_the_calendar_is_invalid_not_a_crash():
    parsed = _wake({"duration": "3d"}, created="9999-12-30T00:00:00Z")
    assert parsed.invalid.startswith("spec.duration: date value out of range")


def test_the_longest_durations_read_are_exact():
    assert policy_api.parse_duration("3650d") == dt.timedelta(days=3650)
    with pytest.raises(ValueError, match="longer than 3650 days"):
        policy_api.parse_duration("3650d1s")


_ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                         lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                     max_size=4), max_leaves=12)
_FIELDS = st.sampled_from(["until", "duration", "scope_prefix", "active_namespace_suffixes", "kinds", "wake",
                           "restore_wait", "restore_order", "hold_windows", "time_zone", "keep_recent", "reason",
                           "requestedBy", "suspend"])


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a busy machine builds slowly
@given(spec=st.dictionaries(_FIELDS, _ANY_JSON | st.sampled_from(["9999-12-31T23:59:59-01:00", "3000000d"])),
       meta=st.dictionaries(st.sampled_from(["name", "namespace", "generation", "creationTimestamp", "uid"]),
                            _ANY_JSON))
def test_reading_any_spec_never_raises(spec, meta):
    policy = policy_api.parse({"metadata": meta, "spec": spec}, default_kinds=KINDS)
    wake = wake_api.parse({"metadata": meta, "spec": spec})
    assert isinstance(policy, policy_api.Policy) or policy.message
    assert wake.requested_end is not None or wake.invalid


# What anyone who may edit a workload can write on it (found by an independent review of the boundaries).

@pytest.mark.parametrize("text", [
    pytest.param('{"pods":1e400}', id="pods-infinite"),
    pytest.param('{"pods":1,"unrequested":1e400}', id="unrequested-infinite"),
    pytest.param("[" * 100_000, id="nested-100k"),
    pytest.param('{"pods":1,"requests":{"cpu":"1e400"}}', id="cpu-1e400"),
    pytest.param('{"pods":1,"requests":{"cpu":"1e999999999"}}', id="cpu-exponent-of-a-billion"),
    pytest.param('{"pods":1,"requests":{"cpu":"-64"}}', id="negative-cpu"),
    pytest.param('{"pods":true}', id="pods-a-boolean"),
    pytest.param('{"pods":1.5}', id="pods-a-fraction"),
])
def test_a_freed_record_anyone_may_write_is_read_or_unknown_never_an_error(text):
    assert resources.parse_record(text) is None


def test_a_quantity_beyond_any_kubernetes_quantity_is_refused_at_once():
    for text in ("1e999999999", "9" * 41, "1e61"):
        with pytest.raises(resources.BadQuantity, match="out of the range"):
            resources.parse_quantity(text)
    assert resources.parse_quantity("1Ei") == 2**60 * resources.NANO


def test_a_forged_stamp_in_the_year_9999_delays_its_own_tier_by_the_clock_skew_at_most():
    db = dataclasses.replace(workload("shop-v1", "db", 1, kind=Kind.STATEFULSET), available=False,
                             written_by_nsscaler="9999-12-31T23:59:59Z")
    app = dataclasses.replace(workload("shop-v1", "app", 0, original="2", scaled_by="p"))
    found = tiers.in_tiers([Action(Verb.RESTORE, app, "p", None, 2, "active", False)], workloads=[db, app],
                           policies={"p": ORDERED}, now=NOW)
    (wait,) = found.waits
    assert wait.until == NOW + tiers.CLOCK_SKEW + dt.timedelta(minutes=5)


def test_a_forged_change_in_the_future_is_no_activity():
    forged = dataclasses.replace(workload("shop-v1"), last_user_change=Change(dt.datetime(9999, 1, 1, tzinfo=dt.UTC),
                                                                              "kubectl"))
    assert selection.activity([forged], now=NOW) == {}
    assert selection.activity([forged])  # without an instant (a re-plan of one object), as before


def test_a_value_quoted_in_a_failure_is_cut_and_the_status_stays_small():
    huge = dataclasses.replace(workload("shop-v1", original="\x01" * 262_000, scaled_by="p", size=0))
    message = plan._record_problem(huge, "p").message
    assert len(message) < 400 and "(1048002 characters)" in message
    body = status.build_status(PolicyOutcome("p", 1, failures=["x" * 5000] * 9), now=NOW, list_limit=20)
    assert [len(f) for f in body["failures"]] == [status.MAX_FAILURE_LENGTH] * status.MAX_FAILURES_IN_STATUS


def test_a_custom_kind_whose_replicas_are_not_a_number_is_read_with_an_unknown_size():
    handler = ReplicasHandler(Kind("Fleet.example.com"), group="example.com", version="v1", plural="fleets",
                              path=("spec", "replicas"))
    found = workloads.from_api(handler, {"metadata": {"name": "f", "namespace": "shop-v1", "resourceVersion": "1"},
                                         "spec": {"replicas": "x", "template": {"spec": {"containers": "x"}}}})
    assert found.size is None and found.footprint is None
