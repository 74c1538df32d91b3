"""Whatever a spec holds, reading it never raises: a date or duration beyond the calendar is a clear error naming
the field and the limit (pure; the real API server's side is `tests/integration/test_hostile_input.py`)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.kinds import Kind

KINDS = frozenset({Kind.DEPLOYMENT})
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
