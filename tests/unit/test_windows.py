"""Hold windows, time zones and expiry, read on a wall clock (`now` is always given)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from job.model.policy import InvalidPolicy, parse
from job.model.windows import DAYS, InvalidSchedule, Schedule, parse_until, parse_window
from tests.unit.examples import examples
from tests.unit.factories import DEFAULT_KINDS

UTC = dt.UTC


def at(text: str) -> dt.datetime:
    """An instant written as RFC 3339."""
    return dt.datetime.fromisoformat(text)


def schedule(*windows: str, zone: str = "UTC", until: str | None = None) -> Schedule:
    return Schedule(windows=tuple(parse_window(w) for w in windows), zone_name=zone,
                    until=parse_until(until) if until else None)


# 2026-12-04 is a Friday; 2026-03-29 and 2026-10-25 are the Sundays Europe/Berlin changes its clocks.
@pytest.mark.parametrize(
    ("windows", "zone", "now", "holds"),
    [
        pytest.param(["Fri 19:00-07:00"], "UTC", "2026-12-04T18:59:59Z", False, id="before-start"),
        pytest.param(["Fri 19:00-07:00"], "UTC", "2026-12-04T19:00:00Z", True, id="at-start"),
        pytest.param(["Fri 19:00-07:00"], "UTC", "2026-12-05T06:59:59Z", True, id="crosses-midnight-into-saturday"),
        pytest.param(["Fri 19:00-07:00"], "UTC", "2026-12-05T07:00:00Z", False, id="end-is-exclusive"),
        pytest.param(["Fri 19:00-07:00"], "UTC", "2026-12-04T06:00:00Z", False,
                     id="belongs-to-the-day-it-starts-on"),
        pytest.param(["Sat-Mon 22:00-02:00"], "UTC", "2026-12-07T23:00:00Z", True, id="wrapping-range-monday"),
        pytest.param(["Sat-Mon 22:00-02:00"], "UTC", "2026-12-08T01:00:00Z", True, id="monday-runs-into-tuesday"),
        pytest.param(["Sat-Mon 22:00-02:00"], "UTC", "2026-12-08T23:00:00Z", False, id="wrapping-range-not-tuesday"),
        pytest.param(["Sat-Mon 22:00-02:00"], "UTC", "2026-12-04T23:00:00Z", False, id="wrapping-range-not-friday"),
        pytest.param(["Sat-Mon 22:00-02:00"], "UTC", "2026-12-06T00:30:00Z", True, id="wrapping-range-sunday-night"),
        pytest.param(["Mon 09:00-24:00"], "UTC", "2026-12-07T23:59:59Z", True, id="until-midnight"),
        pytest.param(["Mon 09:00-24:00"], "UTC", "2026-12-08T00:00:00Z", False, id="midnight-ends-it"),
        pytest.param(["22:00-06:00"], "UTC", "2026-12-09T03:00:00Z", True, id="no-days-means-every-day"),
        pytest.param(["Mon,Wed 10:00-11:00"], "UTC", "2026-12-09T10:30:00Z", True, id="day-list"),
        pytest.param(["Mon,Wed 10:00-11:00"], "UTC", "2026-12-08T10:30:00Z", False, id="day-list-not-tuesday"),
        pytest.param(["Mon-Fri 19:00-07:00", "Sat-Sun 00:00-24:00"], "UTC", "2026-12-06T12:00:00Z", True,
                     id="second-window"),
        pytest.param(["Mon-Fri 19:00-07:00"], "Europe/Berlin", "2026-12-07T18:30:00Z", True,
                     id="berlin-winter-19:30-CET"),
        pytest.param(["Mon-Fri 19:00-07:00"], "Europe/Berlin", "2026-06-08T17:30:00Z", True,
                     id="berlin-summer-19:30-CEST"),
        pytest.param(["Mon-Fri 19:00-07:00"], "Europe/Berlin", "2026-06-08T16:59:00Z", False,
                     id="berlin-summer-18:59-CEST"),
        # spring forward: 02:00 CET becomes 03:00 CEST at 01:00Z, so 02:30 never shows on the wall
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-03-29T00:59:59Z", False, id="dst-spring-01:59"),
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-03-29T01:00:00Z", True,
                     id="dst-spring-skipped-start-opens-when-the-clock-jumps"),
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-03-29T02:00:00Z", False, id="dst-spring-04:00-CEST"),
        # fall back: 03:00 CEST becomes 02:00 CET at 01:00Z, so 02:00-03:00 shows twice
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-10-25T00:45:00Z", True, id="dst-fall-02:45-CEST"),
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-10-25T01:15:00Z", False,
                     id="dst-fall-clock-back-at-02:15-CET"),
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-10-25T01:45:00Z", True, id="dst-fall-02:45-CET"),
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-10-25T03:00:00Z", False, id="dst-fall-04:00-CET"),
        pytest.param(["Sat 23:00-24:00", "Sun 00:00-01:00"], "Europe/Berlin", "2026-10-24T22:30:00Z", True,
                     id="adjacent-windows"),
    ],
)
def test_holds_inside_windows_on_the_wall_clock(windows, zone, now, holds):
    assert schedule(*windows, zone=zone).holds(at(now)) is holds


@pytest.mark.parametrize(
    ("windows", "zone", "now", "expected"),
    [
        pytest.param(["Fri 19:00-07:00"], "UTC", "2026-12-04T12:00:00Z", "2026-12-04T19:00:00+00:00", id="opens"),
        pytest.param(["Fri 19:00-07:00"], "UTC", "2026-12-04T20:00:00Z", "2026-12-05T07:00:00+00:00", id="closes"),
        pytest.param(["Mon-Fri 19:00-07:00"], "UTC", "2026-12-04T20:00:00Z", "2026-12-05T07:00:00+00:00",
                     id="friday-night-ends-saturday"),
        pytest.param(["Mon-Sun 00:00-24:00"], "UTC", "2026-12-04T20:00:00Z", None, id="always-never-changes"),
        pytest.param(["Sat 23:00-24:00", "Sun 00:00-01:00"], "UTC", "2026-12-05T23:30:00Z",
                     "2026-12-06T01:00:00+00:00", id="adjacent-windows-are-one-hold"),
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T01:00:00+00:00",
                     id="skipped-start-at-the-clock-change"),
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-10-25T00:45:00Z", "2026-10-25T01:00:00+00:00",
                     id="repeated-hour-leaves-when-the-clock-goes-back"),
        pytest.param(["Sun 02:30-04:00"], "Europe/Berlin", "2026-10-25T01:15:00Z", "2026-10-25T01:30:00+00:00",
                     id="repeated-hour-enters-again"),
    ],
)
def test_next_change(windows, zone, now, expected):
    found = schedule(*windows, zone=zone).next_change(at(now))
    assert (found.isoformat() if found else None) == expected


@pytest.mark.parametrize(
    ("windows", "until", "now", "holds", "expired", "next_change"),
    [
        pytest.param([], "2026-12-24T18:00:00Z", "2026-12-01T00:00:00Z", True, False, "2026-12-24T18:00:00+00:00",
                     id="before-until"),
        pytest.param([], "2026-12-24T18:00:00Z", "2026-12-24T18:00:00Z", False, True, None, id="at-until"),
        pytest.param([], "2026-12-24T19:00:00+01:00", "2026-12-24T18:30:00Z", False, True, None,
                     id="until-with-offset"),
        pytest.param(["Fri 19:00-07:00"], "2026-12-24T18:00:00Z", "2026-12-21T12:00:00Z", False, False, None,
                     id="no-window-before-until"),
        pytest.param(["Fri 19:00-07:00"], "2026-12-05T01:00:00Z", "2026-12-04T20:00:00Z", True, False,
                     "2026-12-05T01:00:00+00:00", id="until-inside-a-window"),
    ],
)
def test_until(windows, until, now, holds, expired, next_change):
    chosen = schedule(*windows, until=until)
    assert chosen.holds(at(now)) is holds
    assert chosen.expired(at(now)) is expired
    found = chosen.next_change(at(now))
    assert (found.isoformat() if found else None) == next_change


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({"hold_windows": ["Mon-Fri 7pm-7am"]},
                     "spec.hold_windows: window 'Mon-Fri 7pm-7am' is not of the form", id="not-a-window"),
        pytest.param({"hold_windows": ["Fri 19:00-25:00"]}, "window 'Fri 19:00-25:00': '25:00' is not a time",
                     id="hour-25"),
        pytest.param({"hold_windows": ["Fri 24:00-02:00"]}, "'24:00' is not a time of day", id="24-as-start"),
        pytest.param({"hold_windows": ["Fri 10:60-11:00"]}, "'10:60' is not a time of day", id="minute-60"),
        pytest.param({"hold_windows": ["Fri 10:00-10:00"]}, "window 'Fri 10:00-10:00' starts and ends at the same",
                     id="empty-window"),
        pytest.param({"hold_windows": ["Fry 10:00-11:00"]}, "'Fry' is not a day or day range", id="unknown-day"),
        pytest.param({"hold_windows": ["Mon-Fry 10:00-11:00"]}, "'Mon-Fry' is not a day or day range",
                     id="unknown-day-in-range"),
        pytest.param({"time_zone": "Europe/Berlinn"}, "spec.time_zone: time zone 'Europe/Berlinn' is not an IANA",
                     id="unknown-zone"),
        pytest.param({"time_zone": "../../etc/passwd"}, "time zone '../../etc/passwd'", id="zone-path"),
        pytest.param({"until": "2026-12-24"}, "spec.until: '2026-12-24' is not an RFC 3339", id="date-only"),
        pytest.param({"until": "2026-12-24T18:00:00"}, "'2026-12-24T18:00:00' is not an RFC 3339", id="no-offset"),
        pytest.param({"until": "next friday"}, "'next friday' is not an RFC 3339", id="words"),
        pytest.param({"until": 1798135200}, "spec.until: 1798135200 is not an RFC 3339", id="a-number"),
        pytest.param({"keep_recent": 101}, "spec.keep_recent: 101 is not a whole number from 0 to 100",
                     id="keep-recent-too-many"),
        pytest.param({"keep_recent": -1}, "spec.keep_recent: -1 is not", id="keep-recent-negative"),
        pytest.param({"keep_recent": "3"}, "spec.keep_recent: '3' is not", id="keep-recent-text"),
        pytest.param({"keep_recent": True}, "spec.keep_recent: True is not", id="keep-recent-bool"),
    ],
)
def test_invalid_schedules_quote_the_offending_text(spec, message):
    parsed = parse({"metadata": {"name": "p"}, "spec": {"scope_prefix": "shop-", **spec}},
                   default_kinds=DEFAULT_KINDS)
    assert isinstance(parsed, InvalidPolicy)
    assert message in parsed.message


def test_parse_window_reads_days_and_times():
    window = parse_window("Sat-Mon 19:30-07:15")
    assert window.days == {DAYS.index("Sat"), DAYS.index("Sun"), DAYS.index("Mon")}
    assert (window.start, window.end) == (19 * 60 + 30, (24 + 7) * 60 + 15)
    with pytest.raises(InvalidSchedule):
        parse_window("")


# -- properties -------------------------------------------------------------------------------------------

_windows_st = st.builds(
    lambda first, span, start, length: (f"{DAYS[first]}-{DAYS[(first + span) % 7]} "
                                        f"{start // 60:02d}:{start % 60:02d}-"
                                        f"{(start + length) % 1440 // 60:02d}:{(start + length) % 60:02d}"),
    st.integers(0, 6), st.integers(0, 6), st.integers(0, 1439).map(lambda m: m - m % 15),
    st.integers(1, 1439).map(lambda m: max(15, m - m % 15)),
)
_instants = st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2027, 12, 31),
                         timezones=st.just(UTC))


@hyp_settings(max_examples=examples(150), deadline=None)
@given(st.lists(_windows_st, min_size=1, max_size=3),
       st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]),
       _instants, st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=8))
def test_a_window_changes_only_at_its_next_change(windows, zone, now, fractions):
    """For any now: holding stays as it is until next_change, and differs there."""
    chosen = schedule(*windows, zone=zone)
    current = chosen.holds(now)
    change = chosen.next_change(now)
    end = change or now + dt.timedelta(days=8)
    span = int((end - now).total_seconds())
    for fraction in fractions:  # whole seconds strictly before the change
        assert chosen.holds(now + dt.timedelta(seconds=max(0, min(int(span * fraction), span - 1)))) is current
    if change is not None:
        assert change > now
        assert chosen.holds(change) is not current
