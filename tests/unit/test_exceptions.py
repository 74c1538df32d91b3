"""A policy's exceptions: whole local days that hold its family all day or release it (`now` is always given)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from job.decide.holding import holds_now
from job.decide.release import released
from job.model import calendar
from job.model.calendars import with_calendars
from job.model.policy import InvalidPolicy, Policy, parse
from tests.conftest import ROOT
from tests.unit.examples import examples
from tests.unit.factories import DEFAULT_KINDS


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def policy(*exceptions: dict[str, Any], zone: str = "UTC", windows: tuple[str, ...] = (), **spec: Any) -> Policy:
    found = parse({"metadata": {"name": "p", "generation": 1},
                   "spec": {"scope_prefix": "shop-", "time_zone": zone, "hold_windows": list(windows),
                            "exceptions": list(exceptions), **spec}}, default_kinds=DEFAULT_KINDS)
    assert isinstance(found, Policy), found
    return found


def invalid(*exceptions: dict[str, Any]) -> str:
    found = parse({"metadata": {"name": "p"}, "spec": {"scope_prefix": "shop-", "exceptions": list(exceptions)}},
                  default_kinds=DEFAULT_KINDS)
    assert isinstance(found, InvalidPolicy), found
    return found.message


# --- Time zones and a daylight-saving change ---------------------------------------------------------------

def test_a_public_holiday_holds_from_local_midnight_to_local_midnight_in_the_policys_zone():
    """Christmas Day in the US, in New York: from 05:00Z (EST midnight) to 05:00Z the next day, whatever the
    windows (there are none open on a Friday morning here)."""
    p = policy({"action": "hold", "holidays": {"country": "US"}}, zone="America/New_York",
               windows=("Sat,Sun 00:00-24:00",))
    schedule = p.schedule
    assert not schedule.holds(at("2026-12-25T04:59:59Z"))  # still Christmas Eve in New York
    assert schedule.holds(at("2026-12-25T05:00:00Z"))
    assert schedule.holds(at("2026-12-26T04:59:59Z"))
    assert schedule.next_change(at("2026-12-24T12:00:00Z")) == at("2026-12-25T05:00:00Z")
    # the 26th is a Saturday: the weekend window goes on where the holiday ends
    assert schedule.next_change(at("2026-12-25T12:00:00Z")) == at("2026-12-28T05:00:00Z")
    match = schedule.exception(at("2026-12-25T12:00:00Z"))
    assert match is not None and match.names == ("US public holidays: Christmas Day",)


def test_the_same_holiday_in_tokyo_starts_fourteen_hours_earlier():
    p = policy({"action": "hold", "holidays": {"country": "US"}}, zone="Asia/Tokyo", windows=("Sat,Sun 00:00-24:00",))
    assert p.schedule.next_change(at("2026-12-24T00:00:00Z")) == at("2026-12-24T15:00:00Z")
    assert p.schedule.next_change(at("2026-12-24T15:00:00Z")) == at("2026-12-27T15:00:00Z")  # then the weekend


def test_a_holiday_on_the_day_the_clocks_spring_forward_lasts_23_hours():
    """Easter Sunday 2027 is a public holiday in Brandenburg and the day Europe/Berlin moves to summer time:
    held from CET midnight (23:00Z) to CEST midnight (22:00Z)."""
    p = policy({"action": "hold", "holidays": {"country": "DE", "subdivision": "BB"}}, zone="Europe/Berlin",
               windows=("Mon-Fri 19:00-07:00",))
    schedule = p.schedule
    assert schedule.exception(at("2027-03-28T12:00:00Z")).names == ("DE-BB public holidays: Easter Sunday",)
    # Good Friday (26th) and Easter Monday (29th) are holidays too: Saturday the 27th is the only gap
    assert schedule.next_change(at("2027-03-27T12:00:00Z")) == at("2027-03-27T23:00:00Z")
    assert schedule.next_change(at("2027-03-27T23:00:00Z")) == at("2027-03-30T05:00:00Z")
    assert not schedule.holds(at("2027-03-27T22:59:59Z"))
    assert schedule.holds(at("2027-03-28T21:59:59Z")) and schedule.holds(at("2027-03-28T22:00:00Z"))


def test_a_day_whose_midnight_the_clock_skips_starts_when_the_clock_jumps():
    """Santiago de Chile moves from -04 to -03 at midnight on 2026-09-06: 00:00 never happens, and the day held
    starts at 04:00Z (01:00 -03), the first instant of that local date, and ends at 03:00Z the next day."""
    p = policy({"action": "hold", "date": "2026-09-06"}, zone="America/Santiago", windows=("Mon 09:00-10:00",))
    schedule = p.schedule
    assert not schedule.holds(at("2026-09-06T03:59:59Z"))
    assert schedule.holds(at("2026-09-06T04:00:00Z"))
    assert schedule.next_change(at("2026-09-05T12:00:00Z")) == at("2026-09-06T04:00:00Z")
    assert schedule.next_change(at("2026-09-06T04:00:00Z")) == at("2026-09-07T03:00:00Z")
    assert schedule.next_change(at("2026-09-07T03:00:00Z")) == at("2026-09-07T12:00:00Z")  # Monday's window


def test_a_day_the_clocks_fall_back_lasts_25_hours():
    p = policy({"action": "release", "date": "2026-10-25"}, zone="Europe/Berlin")
    assert p.schedule.next_change(at("2026-10-24T12:00:00Z")) == at("2026-10-24T22:00:00Z")
    assert p.schedule.next_change(at("2026-10-24T22:00:00Z")) == at("2026-10-25T23:00:00Z")


def test_a_window_starting_in_the_skipped_hour_opens_when_the_clock_jumps_also_with_exceptions():
    """On 2026-03-29 Berlin's clocks jump from 02:00 to 03:00: a 02:30-03:30 window opens at the jump (01:00Z),
    as without exceptions; a far-away exception does not change that."""
    p = policy({"action": "release", "date": "2026-12-24"}, zone="Europe/Berlin", windows=("02:30-03:30",))
    assert p.schedule.next_change(at("2026-03-29T00:00:00Z")) == at("2026-03-29T01:00:00Z")
    assert p.schedule.next_change(at("2026-03-29T01:00:00Z")) == at("2026-03-29T01:30:00Z")


# --- Which wins ------------------------------------------------------------------------------------------

def test_release_wins_over_hold_on_the_same_day_and_both_are_named():
    """A release weekend over a public holiday: the day is released; the status names the release."""
    p = policy({"action": "hold", "holidays": {"country": "DE", "subdivision": "BB"}},
               {"action": "release", "name": "release weekend", "date": "2027-03-27", "end": "2027-03-28"},
               zone="Europe/Berlin")
    sunday = p.schedule.exception(at("2027-03-28T12:00:00Z"))
    assert (sunday.action, sunday.names) == ("release", ("release weekend",))
    assert not p.schedule.holds(at("2027-03-28T12:00:00Z"))
    assert p.schedule.holds(at("2027-03-29T12:00:00Z"))  # Easter Monday holds again
    assert p.schedule.next_change(at("2027-03-28T12:00:00Z")) == at("2027-03-28T22:00:00Z")


@pytest.mark.parametrize(("exceptions", "expected"), [
    pytest.param([{"action": "hold", "date": "2026-12-24"}, {"action": "release", "date": "2026-12-24"}], False,
                 id="release-listed-second"),
    pytest.param([{"action": "release", "date": "2026-12-24"}, {"action": "hold", "date": "2026-12-24"}], False,
                 id="release-listed-first"),
    pytest.param([{"action": "hold", "date": "2026-12-24"}], True, id="hold-alone"),
    pytest.param([], False, id="windows-alone"),
])
def test_which_wins_on_a_day_does_not_depend_on_the_order(exceptions, expected):
    p = policy(*exceptions, windows=("Sat 10:00-11:00",)) if exceptions else None
    schedule = p.schedule if p else policy({"action": "hold", "date": "2030-01-01"},
                                           windows=("Sat 10:00-11:00",)).schedule
    assert schedule.holds(at("2026-12-24T12:00:00Z")) is expected


def test_until_and_suspend_win_over_an_exception():
    held = {"action": "hold", "date": "2026-12-24"}
    assert not policy(held, until="2026-12-24T06:00:00Z").schedule.holds(at("2026-12-24T12:00:00Z"))
    assert not holds_now(policy(held, suspend=True), at("2026-12-24T12:00:00Z"))
    assert holds_now(policy(held), at("2026-12-24T12:00:00Z"))


def test_a_policy_without_windows_holds_except_on_a_release_day():
    p = policy({"action": "release", "date": "2026-12-24", "end": "2026-12-26"})
    assert not p.schedule.always
    assert p.schedule.holds(at("2026-12-23T23:59:59Z")) and not p.schedule.holds(at("2026-12-24T00:00:00Z"))
    assert p.schedule.next_change(at("2026-12-24T00:00:00Z")) == at("2026-12-27T00:00:00Z")
    assert p.schedule.next_exception(at("2026-12-20T00:00:00Z")).day == dt.date(2026, 12, 24)
    assert p.schedule.next_exception(at("2026-12-27T00:00:00Z")) is None


# --- Recurrence rules --------------------------------------------------------------------------------------

def test_an_rrule_with_exdates_leaves_those_days_out():
    """Release the first weekend of each month from January, except the one in March."""
    p = policy({"action": "release", "date": "2027-01-01",
                "rrule": "FREQ=MONTHLY;BYDAY=1SA,1SU;COUNT=8", "exdates": ["2027-03-06", "2027-03-07"]})
    released = [d for d in (dt.date(2027, 1, 1) + dt.timedelta(days=n) for n in range(120))
                if not p.schedule.holds(dt.datetime.combine(d, dt.time(12), tzinfo=dt.UTC))]
    assert released == [dt.date(2027, 1, 2), dt.date(2027, 1, 3), dt.date(2027, 2, 6), dt.date(2027, 2, 7),
                        dt.date(2027, 4, 3), dt.date(2027, 4, 4)]
    assert p.schedule.next_exception(at("2027-02-08T00:00:00Z")).day == dt.date(2027, 4, 3)


def test_a_yearly_rule_is_found_a_year_ahead():
    p = policy({"action": "release", "name": "shutdown", "date": "2020-12-24", "rrule": "RRULE:FREQ=YEARLY"})
    assert p.schedule.next_change(at("2026-12-25T00:00:00Z")) == at("2027-12-24T00:00:00Z")


# --- ICS calendars -----------------------------------------------------------------------------------------

ICS = "\r\n".join([
    "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//shop//calendar//EN",
    "BEGIN:VEVENT", "UID:freeze@shop", "SUMMARY:Quarter-end freeze", "DTSTART;VALUE=DATE:20270329",
    "DTEND;VALUE=DATE:20270401", "RRULE:FREQ=MONTHLY;INTERVAL=3;COUNT=4", "EXDATE;VALUE=DATE:20270629", "END:VEVENT",
    "BEGIN:VEVENT", "UID:standup@shop", "SUMMARY:Late review", "DTSTART;TZID=America/New_York:20270105T220000",
    "DTEND;TZID=America/New_York:20270105T233000", "RRULE:FREQ=WEEKLY;BYDAY=TU;UNTIL=20270128T000000Z",
    "END:VEVENT",
    "BEGIN:VEVENT", "UID:standup@shop", "RECURRENCE-ID;TZID=America/New_York:20270112T220000",
    "SUMMARY:Late review (moved)", "DTSTART;TZID=America/New_York:20270114T100000",
    "DTEND;TZID=America/New_York:20270114T110000", "END:VEVENT",
    "END:VCALENDAR", ""])
REF = ("holidays", "shop.ics")


def with_ics(text: str | calendar.InvalidCalendar, zone: str = "Europe/Berlin") -> Policy | InvalidPolicy:
    # a window at 03:00 on Mondays only: at noon, only the calendar holds
    p = policy({"action": "hold", "calendar": {"name": "holidays", "key": "shop.ics"}},
               zone=zone, windows=("Mon 03:00-03:01",))
    [found] = with_calendars([p], {REF: text})
    return found


def days_held(p: Policy, first: dt.date, days: int, zone: str) -> list[dt.date]:
    return [d for d in (first + dt.timedelta(days=n) for n in range(days))
            if p.schedule.holds(dt.datetime.combine(d, dt.time(12), tzinfo=ZoneInfo(zone)))]


def test_an_ics_recurring_event_holds_every_day_it_covers_less_its_exdates():
    p = with_ics(ICS)
    assert isinstance(p, Policy)
    held = days_held(p, dt.date(2027, 3, 1), 310, "Europe/Berlin")
    quarter_end = [d for d in held if d.day >= 29 or d.day <= 2]
    # all-day, three days (DTEND excluded) every three months; June's left out by EXDATE
    assert quarter_end == [dt.date(2027, 3, 29), dt.date(2027, 3, 30), dt.date(2027, 3, 31),
                           dt.date(2027, 9, 29), dt.date(2027, 9, 30), dt.date(2027, 10, 1),
                           dt.date(2027, 12, 29), dt.date(2027, 12, 30), dt.date(2027, 12, 31)]
    assert p.schedule.exception(at("2027-03-30T12:00:00Z")).names == (
        "ConfigMap holidays key shop.ics: Quarter-end freeze",)


def test_a_timed_ics_event_covers_the_local_days_it_touches_in_the_policys_zone():
    """Tuesday 22:00-23:30 in New York is Wednesday 04:00-05:30 in Berlin: Wednesdays are held there; the
    occurrence moved by a RECURRENCE-ID is held on its new day (Thursday the 14th), not on the 13th."""
    p = with_ics(ICS)
    assert isinstance(p, Policy)
    held = days_held(p, dt.date(2027, 1, 1), 31, "Europe/Berlin")
    assert held == [dt.date(2027, 1, 6), dt.date(2027, 1, 14), dt.date(2027, 1, 20), dt.date(2027, 1, 27)]
    in_new_york = with_ics(ICS, zone="America/New_York")
    assert days_held(in_new_york, dt.date(2027, 1, 1), 31, "America/New_York") == [
        dt.date(2027, 1, 5), dt.date(2027, 1, 14), dt.date(2027, 1, 19), dt.date(2027, 1, 26)]


@pytest.mark.parametrize(("text", "words"), [
    pytest.param("not a calendar", "is not an RFC 5545 calendar", id="not-ics"),
    pytest.param("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "has no DTSTART",
                 id="no-start"),
    pytest.param(ICS.replace("FREQ=WEEKLY;BYDAY=TU", "FREQ=MINUTELY"), "FREQ must be one of", id="sub-day-rule"),
    pytest.param(calendar.InvalidCalendar("does not exist: create it"), "does not exist: create it",
                 id="missing-configmap"),
])
def test_a_broken_or_missing_calendar_makes_only_its_policy_invalid_naming_the_field(text, words):
    found = with_ics(text)
    assert isinstance(found, InvalidPolicy)
    assert found.message.startswith("spec.exceptions.0.calendar: ConfigMap holidays key shop.ics ")
    assert words in found.message


def test_policies_without_calendars_pass_through_untouched():
    plain = policy({"action": "hold", "date": "2026-12-24"})
    assert with_calendars([plain], {}) == [plain]


# --- Bad input -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("exception", "words"), [
    pytest.param({"action": "hold", "holidays": {"country": "XX"}},
                 "spec.exceptions.0.holidays: country 'XX' has no public holidays", id="unknown-country"),
    pytest.param({"action": "hold", "holidays": {"country": "DE", "subdivision": "ZZ"}},
                 "subdivision 'ZZ' is not one of DE's: BB, BE, BW, BY", id="unknown-region"),
    pytest.param({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=WEEKLY;BYDAY=XX"},
                 "spec.exceptions.0.rrule: rrule 'FREQ=WEEKLY;BYDAY=XX' is not an RFC 5545 rule", id="broken-rrule"),
    pytest.param({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=DAILY;BYSECOND=1,2"},
                 "BYSECOND split a day", id="sub-day-rrule"),
    pytest.param({"action": "hold", "rrule": "FREQ=DAILY"}, "rrule needs date", id="rrule-without-date"),
    pytest.param({"action": "hold", "date": "2027-01-02", "end": "2027-01-01"}, "is before date", id="end-first"),
    pytest.param({"action": "hold"}, "names no days", id="no-days"),
    pytest.param({"action": "hold", "date": "2027-01-01", "holidays": {"country": "DE"}}, "not with holidays",
                 id="two-ways"),
    pytest.param({"action": "pause", "date": "2027-01-01"}, "spec.exceptions.0.action", id="unknown-action"),
    pytest.param({"action": "hold", "date": "2027-02-30"}, "spec.exceptions.0.date", id="no-such-day"),
    pytest.param({"action": "hold", "calendar": {"namespace": "ops", "name": "holidays", "key": "shop.ics"}},
                 "spec.exceptions.0.calendar: a calendar names no namespace: put its ConfigMap in nsscaler's own "
                 "namespace", id="calendar-in-another-namespace"),
])
def test_bad_exceptions_name_the_field_and_the_fix(exception, words):
    assert words in invalid(exception)


def test_a_policy_without_exceptions_is_as_it_was():
    p = policy(windows=("Mon 09:00-10:00",))
    assert p.schedule.calendar is None and p.calendars == []
    assert p.schedule.next_change(at("2026-12-07T08:00:00Z")) == at("2026-12-07T09:00:00Z")


def test_a_release_ignores_calendars():
    """`nsscaler release` gives back everything at once: a day an exception holds holds nothing then."""
    p = policy({"action": "hold", "date": "2026-12-24"}, windows=("Sat 10:00-11:00",))
    now = at("2026-12-24T12:00:00Z")
    assert holds_now(p, now)
    [given_back] = released([p], now=now, wait=dt.timedelta(minutes=5))
    assert not holds_now(given_back, now) and given_back.schedule.calendar is None


def test_the_sample_is_a_valid_policy_and_its_calendar_reads():
    """kustomize/samples/holidays.yaml, as docs/operating/exceptions.md shows it."""
    configmap, obj = yaml.safe_load_all((ROOT / "kustomize/samples/holidays.yaml").read_text())
    ref = (configmap["metadata"]["name"], "shop.ics")
    [p] = with_calendars([parse(obj, default_kinds=DEFAULT_KINDS)], {ref: configmap["data"]["shop.ics"]})
    assert isinstance(p, Policy), p
    thursday = at("2027-03-25T12:00:00Z")  # a working day by day: no window, no exception
    assert not p.schedule.holds(thursday)
    assert p.schedule.next_exception(thursday).names == ("DE-BY public holidays: Good Friday",)
    assert p.schedule.exception(at("2027-03-30T12:00:00Z")).names == (
        "ConfigMap shop-calendar key shop.ics: Stocktaking",)
    assert p.schedule.exception(at("2027-03-29T12:00:00Z")).names == (
        "DE-BY public holidays: Easter Monday", "ConfigMap shop-calendar key shop.ics: Stocktaking")
    assert p.schedule.holds(at("2027-03-30T12:00:00Z")) and not p.schedule.holds(at("2027-04-03T12:00:00Z"))


def test_outside_the_run_a_calendar_not_read_counts_the_days_the_last_run_recorded():
    """The waker and the plugin read no ConfigMap: for a policy naming a calendar they take the days its status
    records (today's exception and the next), so they say who holds a namespace as the run does."""
    spec = {"scope_prefix": "shop-", "hold_windows": ["Mon 03:00-03:01"],
            "exceptions": [{"action": "hold", "calendar": {"name": "holidays", "key": "shop.ics"}}]}
    status = {"exception": {"date": "2027-01-04", "action": "hold", "name": "ConfigMap holidays: Stocktaking"},
              "nextException": {"date": "2027-01-18", "action": "hold", "name": "ConfigMap holidays: Stocktaking"}}
    outside = parse({"metadata": {"name": "p"}, "spec": spec, "status": status}, default_kinds=DEFAULT_KINDS)
    assert outside.schedule.holds(at("2027-01-04T12:00:00Z")) and outside.schedule.holds(at("2027-01-18T12:00:00Z"))
    assert not outside.schedule.holds(at("2027-01-11T12:00:00Z"))
    assert outside.schedule.next_change(at("2027-01-04T12:00:00Z")) == at("2027-01-05T00:00:00Z")
    # the run reads the calendar itself: what it read decides, not what it recorded before
    [read] = with_calendars([outside], {REF: ICS})
    assert not read.schedule.holds(at("2027-01-04T12:00:00Z"))
    broken = parse({"metadata": {"name": "p"}, "spec": spec, "status": {"exception": {"date": "x", "action": "hold"}}},
                   default_kinds=DEFAULT_KINDS)
    assert not broken.schedule.holds(at("2027-01-04T12:00:00Z"))


_days = st.dates(min_value=dt.date(2026, 1, 1), max_value=dt.date(2027, 12, 31))
_exception_st = st.one_of(
    st.builds(lambda a, d, n: {"action": a, "date": d.isoformat(), "end": (d + dt.timedelta(days=n)).isoformat()},
              st.sampled_from(["hold", "release"]), _days, st.integers(0, 9)),
    st.builds(lambda a, d: {"action": a, "date": d.isoformat(), "rrule": "FREQ=WEEKLY;BYDAY=SA,SU;COUNT=6"},
              st.sampled_from(["hold", "release"]), _days),
    st.builds(lambda a, c: {"action": a, "holidays": {"country": c}}, st.sampled_from(["hold", "release"]),
              st.sampled_from(["DE", "US", "CL", "AU"])),
)


@hyp_settings(max_examples=examples(100), deadline=None)
@given(st.lists(_exception_st, min_size=1, max_size=3),
       st.lists(st.sampled_from(["Mon-Fri 19:00-07:00", "Sat 00:00-24:00", "02:30-03:30"]), max_size=2),
       st.sampled_from(["UTC", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "Asia/Kolkata"]),
       st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2027, 12, 31),
                    timezones=st.just(dt.UTC)),
       st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=8))
def test_with_exceptions_the_hold_changes_only_at_its_next_change(exceptions, windows, zone, now, fractions):
    """For any now, zone (clocks that skip midnight, half-hour shifts) and mix of exceptions and windows: holding
    stays as it is until next_change, and differs there."""
    chosen = policy(*exceptions, zone=zone, windows=tuple(windows)).schedule
    current = chosen.holds(now)
    change = chosen.next_change(now)
    end = change or now + dt.timedelta(days=60)
    span = int((end - now).total_seconds())
    for fraction in fractions:  # whole seconds strictly before the change
        assert chosen.holds(now + dt.timedelta(seconds=max(0, min(int(span * fraction), span - 1)))) is current
    if change is not None:
        assert change > now
        assert chosen.holds(change) is not current


@pytest.mark.parametrize("exception", [
    pytest.param({"action": "hold", "date": "0001-01-01", "rrule": "FREQ=DAILY"}, id="rule-from-year-1"),
    pytest.param({"action": "hold", "date": "2026-01-01", "end": "9999-01-01"}, id="end-in-9999"),
])
def test_days_far_from_now_are_refused(exception):
    assert "outside the days nsscaler reads (1970-01-01 to before 9000-01-01)" in invalid(exception)


def test_an_ics_event_from_the_year_1_is_refused():
    found = with_ics(ICS.replace("DTSTART;VALUE=DATE:20270329", "DTSTART;VALUE=DATE:00010329"))
    assert isinstance(found, InvalidPolicy) and "starts in 1; nsscaler reads events from 1970" in found.message


def test_a_run_imports_the_calendar_libraries_only_when_a_policy_needs_them():
    """holidays and icalendar cost every process that imports them 12 MB and 70 ms (measured here): the job and
    the plugin import them when a policy names a country or a calendar, never at start."""
    probe = ("import sys, job.run, job.cli, job.plugin.cli; "
             "print(sorted(m for m in ('holidays', 'icalendar', 'dateutil.rrule') if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"
    assert calendar.Holidays("DE").names(dt.date(2027, 12, 25))  # ... and a policy that names one still has it
