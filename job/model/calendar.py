"""A policy's exceptions as whole local days: which days hold the family all day, which release it (pure).

Every exception names days, never hours: a date or a range of dates, the days of a recurrence rule (RFC 5545
RRULE, with EXDATE), a country's public holidays (the `holidays` package, offline), or the events of an ICS
calendar. A day is a date on the wall clock of the policy's `time_zone`: it starts at that zone's local
midnight (or, on a day whose midnight the clock skips, when the clock jumps past it) and ends at the next one,
so it may last 23 or 25 hours. An ICS event with times covers every local day it touches.

When two exceptions name the same day, **release wins**: a day someone must keep running is never held
because another calendar says it is a holiday. Both exceptions are named in the status.

Days are worked out one calendar year at a time and kept on the `Calendar` for the life of the policy object
(a run, a waker's answer): expanding a rule or a country once per year, not once per question.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Literal

HOLD: Literal["hold"] = "hold"
RELEASE: Literal["release"] = "release"
Action = Literal["hold", "release"]

#: recurrence frequencies an exception may use: whole days, so nothing below a day
DAY_FREQUENCIES = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
#: rule parts that split a day, refused: an exception is whole days (and BYSECOND on a daily rule would be 86,400
#: occurrences a day for the run to count)
SUB_DAY_PARTS = ("BYHOUR", "BYMINUTE", "BYSECOND")
#: the longest recurrence rule text read
MAX_RULE_TEXT = 512
#: the most VEVENTs one ICS calendar may hold (a ConfigMap holds at most 1 MiB anyway)
MAX_EVENTS = 2000
#: the longest single event counted, in days: a multi-year "event" in a shared calendar is a mistake
MAX_EVENT_DAYS = 366


class InvalidCalendar(ValueError):
    """A rule, a country or an ICS text that cannot be read; the message says what to write instead."""


def check_rule(text: str) -> str:
    """An RRULE value (with or without `RRULE:`) that is whole days; InvalidCalendar naming the fix otherwise."""
    body = text.strip().removeprefix("RRULE:")
    if not body or len(body) > MAX_RULE_TEXT:
        raise InvalidCalendar(f"rrule {text[:64]!r} is not an RFC 5545 rule of at most {MAX_RULE_TEXT} characters "
                              f"such as \"FREQ=WEEKLY;BYDAY=SA,SU\"")
    parts = {}
    for part in body.split(";"):
        name, equals, value = part.partition("=")
        if not equals:
            raise InvalidCalendar(f"rrule {text!r}: {part!r} is not NAME=VALUE; write e.g. \"FREQ=YEARLY;BYMONTH=12\"")
        parts[name.strip().upper()] = value.strip().upper()
    if parts.get("FREQ") not in DAY_FREQUENCIES:
        raise InvalidCalendar(f"rrule {text!r}: FREQ must be one of {', '.join(DAY_FREQUENCIES)} (exceptions are "
                              f"whole days)")
    split = [p for p in SUB_DAY_PARTS if p in parts]
    if split:
        raise InvalidCalendar(f"rrule {text!r}: {', '.join(split)} split a day; exceptions are whole days, remove it")
    try:
        recurrence(body, dt.datetime(2000, 1, 1))
    except (ValueError, TypeError) as exc:
        raise InvalidCalendar(f"rrule {text!r} is not an RFC 5545 rule ({exc}); write e.g. "
                              f"\"FREQ=WEEKLY;BYDAY=SA,SU\"") from None
    return body


_UNTIL = re.compile(r"UNTIL=(\d{8})(T\d{6})?(Z?)")


def recurrence(text: str, start: dt.datetime) -> Any:
    """The rule's occurrences from `start`. RFC 5545 wants UNTIL in UTC exactly when the start has a zone; a
    calendar that writes it the other way means the same day, so UNTIL is read to match the start."""
    def until(match: re.Match[str]) -> str:
        day, time = match[1], match[2] or "T235959"
        return f"UNTIL={day}{time}{'Z' if start.tzinfo is not None else ''}"

    from dateutil import rrule as rfc5545  # type: ignore[import-untyped]  # noqa: PLC0415  # no stubs; see _holidays
    return rfc5545.rrulestr(_UNTIL.sub(until, text), dtstart=start)


def _holidays() -> ModuleType:
    """The `holidays` package, imported when a policy first names a country: it and icalendar cost every run that
    imported them 12 MB of peak RSS and 70 ms of start (measured here), and most runs name no calendar at all."""
    import holidays  # noqa: PLC0415
    return holidays


def check_country(country: str, subdivision: str | None) -> None:
    """InvalidCalendar naming the known codes when the `holidays` package does not know the country or region."""
    known = _holidays().list_supported_countries()
    if country not in known:
        raise InvalidCalendar(f"country {country!r} has no public holidays in this nsscaler; use an ISO 3166 "
                              f"alpha-2 code such as \"DE\", \"FR\" or \"US\"")
    if subdivision is not None and subdivision not in known[country]:
        listed = ", ".join(known[country][:30]) or "none"
        raise InvalidCalendar(f"subdivision {subdivision!r} is not one of {country}'s: {listed}")


@dataclass(frozen=True)
class Span:
    """Days from `first` to `last` (inclusive) as dates; the days an occurrence of an exception covers."""

    first: dt.date
    last: dt.date

    def days(self) -> Iterator[dt.date]:
        day = self.first
        while day <= self.last:
            yield day
            day += dt.timedelta(days=1)


@dataclass(frozen=True)
class Dates:
    """A date, or an inclusive range of dates."""

    first: dt.date
    last: dt.date

    def spans(self, year: int, tz: dt.tzinfo) -> Iterator[Span]:
        if self.first.year <= year <= self.last.year:
            yield Span(self.first, self.last)


@dataclass(frozen=True)
class Rule:
    """The days of a recurrence rule starting on `start`, less the `excluded` dates (EXDATE)."""

    text: str
    start: dt.date
    excluded: frozenset[dt.date] = frozenset()

    def spans(self, year: int, tz: dt.tzinfo) -> Iterator[Span]:
        rule = recurrence(self.text, dt.datetime.combine(self.start, dt.time()))
        for when in rule.between(dt.datetime(year, 1, 1), dt.datetime(year + 1, 1, 1), inc=True):
            if when.date() not in self.excluded:
                yield Span(when.date(), when.date())


@dataclass(frozen=True)
class Holidays:
    """A country's public holidays (with a region, a subdivision code of the `holidays` package)."""

    country: str
    subdivision: str | None = None

    def spans(self, year: int, tz: dt.tzinfo) -> Iterator[Span]:
        for day in _holidays().country_holidays(self.country, subdiv=self.subdivision, years=year):
            yield Span(day, day)

    def names(self, day: dt.date) -> str:
        found = _holidays().country_holidays(self.country, subdiv=self.subdivision, years=day.year).get(day)
        return str(found or "")


@dataclass(frozen=True)
class Event:
    """One VEVENT of an ICS calendar: its start and end (dates for all-day events, date-times otherwise;
    naive date-times are read in the policy's zone), its recurrence and the starts it leaves out."""

    summary: str
    start: dt.date | dt.datetime
    end: dt.date | dt.datetime
    rule: str | None = None
    excluded: tuple[dt.date | dt.datetime, ...] = ()
    added: tuple[dt.date | dt.datetime, ...] = ()

    def _starts(self, year: int) -> Iterator[dt.date | dt.datetime]:
        length = _length(self.start, self.end)
        if self.rule is None:
            yield from [self.start, *self.added]
            return
        begin = _as_datetime(self.start)
        rule = recurrence(self.rule, begin)
        low = dt.datetime(year - 1, 12, 30) - length  # an occurrence begun before the year may reach into it
        high = dt.datetime(year + 1, 1, 2)
        if begin.tzinfo is not None:
            low, high = low.replace(tzinfo=dt.UTC), high.replace(tzinfo=dt.UTC)
        excluded = {_as_datetime(e, like=begin) for e in self.excluded}
        for when in rule.between(low, high, inc=True):
            if when not in excluded:
                yield when if isinstance(self.start, dt.datetime) else when.date()
        yield from self.added

    def spans(self, year: int, tz: dt.tzinfo) -> Iterator[Span]:
        length = _length(self.start, self.end)
        for start in self._starts(year):
            yield _covered(start, length, tz)


@dataclass(frozen=True)
class Recorded:
    """A day as the last run recorded it (`status.exception`, `status.nextException`): what the waker and the
    plugin, which read no ConfigMap, know of the days of a calendar."""

    day: dt.date
    name: str

    def spans(self, year: int, tz: dt.tzinfo) -> Iterator[Span]:
        if self.day.year == year:
            yield Span(self.day, self.day)


Source = Dates | Rule | Holidays | Event | Recorded


def _length(start: dt.date | dt.datetime, end: dt.date | dt.datetime) -> dt.timedelta:
    length = _as_datetime(end, like=_as_datetime(start)) - _as_datetime(start)
    return max(length, dt.timedelta(0))


def _as_datetime(value: dt.date | dt.datetime, *, like: dt.datetime | None = None) -> dt.datetime:
    if isinstance(value, dt.datetime):
        if like is not None and (value.tzinfo is None) != (like.tzinfo is None):
            return value.replace(tzinfo=like.tzinfo) if value.tzinfo is None else value.replace(tzinfo=None)
        return value
    return dt.datetime.combine(value, dt.time(), tzinfo=like.tzinfo if like is not None else None)


def _covered(start: dt.date | dt.datetime, length: dt.timedelta, tz: dt.tzinfo) -> Span:
    """The local days an occurrence covers: an all-day one its dates (DTEND excluded), a timed one every day of
    the policy's zone it touches."""
    if not isinstance(start, dt.datetime):
        days = max(length.days, 1)
        return Span(start, start + dt.timedelta(days=days - 1))
    local = start.astimezone(tz).replace(tzinfo=None) if start.tzinfo is not None else start
    end = local + length
    last = (end - dt.timedelta(microseconds=1)).date() if length else local.date()
    return Span(local.date(), max(last, local.date()))


@dataclass(frozen=True)
class Exception_:
    """One exception: where its days come from, what it does on them, and the words that name it."""

    action: Action
    label: str
    sources: tuple[Source, ...]


@dataclass(frozen=True)
class Match:
    """The exceptions naming one day and what the day does (release wins)."""

    day: dt.date
    action: Action
    names: tuple[str, ...]

    def words(self) -> str:
        verb = "held all day" if self.action == HOLD else "released all day"
        return f"{verb} on {self.day.isoformat()} ({'; '.join(self.names)})"


@dataclass(frozen=True)
class Calendar:
    """A policy's exceptions in the order its spec lists them, read in its time zone."""

    exceptions: tuple[Exception_, ...]
    tz: dt.tzinfo
    _years: dict[int, dict[dt.date, list[tuple[Action, str]]]] = field(default_factory=dict, compare=False,
                                                                       hash=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.exceptions)

    def _year(self, year: int) -> dict[dt.date, list[tuple[Action, str]]]:
        if year not in self._years:
            found: dict[dt.date, list[tuple[Action, str]]] = {}
            for exception in self.exceptions:
                for source in exception.sources:
                    for span in _limited(source.spans(year, self.tz)):
                        for day in span.days():
                            if day.year == year:
                                found.setdefault(day, []).append((exception.action, _label(exception, source, day)))
            self._years[year] = found
        return self._years[year]

    def on(self, day: dt.date) -> Match | None:
        """What the exceptions say of `day`: None when none names it; release when any releases it."""
        named = self._year(day.year).get(day)
        if not named:
            return None
        action: Action = RELEASE if any(a == RELEASE for a, _ in named) else HOLD
        return Match(day, action, tuple(dict.fromkeys(n for a, n in named if a == action)))


def _limited(spans: Iterator[Span]) -> Iterator[Span]:
    """Spans cut to MAX_EVENT_DAYS each: one long event must not cost the run years of days."""
    for span in spans:
        yield Span(span.first, min(span.last, span.first + dt.timedelta(days=MAX_EVENT_DAYS - 1)))


def _label(exception: Exception_, source: Source, day: dt.date) -> str:
    if isinstance(source, Holidays):
        holiday = source.names(day)
        return f"{exception.label}: {holiday}" if holiday else exception.label
    if isinstance(source, Event) and source.summary:
        return f"{exception.label}: {source.summary}"
    if isinstance(source, Recorded):
        return source.name
    return exception.label


def parse_ics(text: str) -> tuple[Event, ...]:
    """The VEVENTs of an ICS calendar; InvalidCalendar saying what is wrong with the text otherwise."""
    try:
        import icalendar  # noqa: PLC0415  # see _holidays
        calendar = icalendar.Calendar.from_ical(text)
        events = [_event(component) for component in calendar.walk("VEVENT")]
    except InvalidCalendar:
        raise
    except Exception as exc:
        raise InvalidCalendar(f"is not an RFC 5545 calendar ({str(exc)[:200]}); export it again as .ics") from None
    if len(events) > MAX_EVENTS:
        raise InvalidCalendar(f"has {len(events)} events, more than the {MAX_EVENTS} nsscaler reads; split it")
    return _with_overrides(events)


def _event(component: Any) -> tuple[Event, Any]:
    start = component.get("DTSTART")
    if start is None:
        raise InvalidCalendar(f"event {str(component.get('SUMMARY', ''))!r} has no DTSTART")
    begin = start.dt
    if not 1970 <= begin.year < 9000:  # a recurrence counted from the year 1 would cost millions of steps a year
        raise InvalidCalendar(f"event {str(component.get('SUMMARY', ''))!r} starts in {begin.year}; nsscaler reads "
                              f"events from 1970 to before 9000")
    if component.get("DTEND") is not None:
        end = component.get("DTEND").dt
    elif component.get("DURATION") is not None:
        end = begin + component.get("DURATION").dt
    else:  # RFC 5545: an all-day event without an end is one day; a timed one, an instant
        end = begin + dt.timedelta(days=1) if not isinstance(begin, dt.datetime) else begin
    rule = component.get("RRULE")
    text = check_rule(rule.to_ical().decode()) if rule is not None else None
    recurrence_id = component.get("RECURRENCE-ID")
    return Event(summary=str(component.get("SUMMARY", "")), start=begin, end=end, rule=text,
                 excluded=tuple(_dates(component.get("EXDATE"))), added=tuple(_dates(component.get("RDATE")))), \
        (str(component.get("UID", "")), recurrence_id.dt if recurrence_id is not None else None)


def _dates(prop: Any) -> Iterator[dt.date | dt.datetime]:
    for item in prop if isinstance(prop, list) else [prop] if prop is not None else []:
        for value in item.dts:
            yield value.dt


def _with_overrides(found: Sequence[tuple[Event, Any]]) -> tuple[Event, ...]:
    """An event with a RECURRENCE-ID moves one occurrence of the recurring event with its UID: that occurrence
    is left out of the series, and the override counts on its own dates."""
    moved: dict[str, list[dt.date | dt.datetime]] = {}
    for _, (uid, recurrence_id) in found:
        if recurrence_id is not None:
            moved.setdefault(uid, []).append(recurrence_id)
    events = []
    for event, (uid, recurrence_id) in found:
        if recurrence_id is None and uid in moved and event.rule is not None:
            events.append(replace(event, excluded=(*event.excluded, *moved[uid])))
        else:
            events.append(event)
    return tuple(events)
