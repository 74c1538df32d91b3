"""Hold windows and expiry: when a policy holds, read from a wall clock in its time zone (pure).

A window such as `Mon-Fri 19:00-07:00` belongs to the day it starts on; an end at or before its start
runs into the next day, and `24:00` is the end of the start day. Day ranges may wrap (`Sat-Mon`) and
days are optional (`22:00-06:00` is every day). Times are compared as a wall clock shows them, so on
daylight-saving days a window simply starts and ends when the clock on the wall says so: a start that
the clock skips happens when the clock jumps past it, and a repeated hour is inside the window both times.

`now` is always a parameter; nothing here reads the clock.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from job.model.calendar import HOLD, Calendar, Match

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MINUTES_PER_DAY = 24 * 60
#: Windows repeat weekly, so a change more than eight days ahead never comes first.
_HORIZON = dt.timedelta(days=8)
#: How far ahead a policy with exceptions looks for its next change and its next exception: a change further
#: away is reported as none (a yearly holiday is always found).
CALENDAR_HORIZON = dt.timedelta(days=400)

_DAY = r"[A-Za-z]{3}"
_DAY_SPEC = rf"{_DAY}(?:-{_DAY})?(?:,{_DAY}(?:-{_DAY})?)*"
_WINDOW = re.compile(rf"\s*(?:(?P<days>{_DAY_SPEC})\s+)?(?P<start>\d\d:\d\d)-(?P<end>\d\d:\d\d)\s*")
_DAY_INDEX = {d.lower(): i for i, d in enumerate(DAYS)}


class InvalidSchedule(ValueError):
    """A window or time zone that cannot be read; the message quotes the offending text."""


@dataclass(frozen=True)
class Window:
    """One weekly window: the weekdays it starts on (0 = Monday) and its start and end in minutes."""

    text: str
    days: frozenset[int]
    start: int
    end: int  # after start; more than a day's minutes when the window runs into the next day

    def contains(self, local: dt.datetime) -> bool:
        """Whether a naive wall-clock time is inside: the window that started today or yesterday."""
        for back in (0, 1):
            day = local.date() - dt.timedelta(days=back)
            if day.weekday() in self.days:
                midnight = dt.datetime.combine(day, dt.time())
                if midnight + dt.timedelta(minutes=self.start) <= local < midnight + dt.timedelta(minutes=self.end):
                    return True
        return False

    def boundaries(self, day: dt.date) -> list[dt.datetime]:
        """The wall-clock start and end of the window starting on `day`, if it starts on that day."""
        if day.weekday() not in self.days:
            return []
        midnight = dt.datetime.combine(day, dt.time())
        return [midnight + dt.timedelta(minutes=self.start), midnight + dt.timedelta(minutes=self.end)]


def _minutes(text: str, *, window: str, end: bool) -> int:
    hours, minutes = int(text[:2]), int(text[3:])
    if minutes > 59 or hours > 24 or (hours == 24 and (minutes or not end)):
        raise InvalidSchedule(f"window {window!r}: {text!r} is not a time of day (00:00 to 23:59, or 24:00 "
                              f"as an end)")
    return hours * 60 + minutes


def _days(spec: str | None, *, window: str) -> frozenset[int]:
    if spec is None:
        return frozenset(range(7))
    days: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.partition("-")
        try:
            a, b = _DAY_INDEX[first.lower()], _DAY_INDEX[(last or first).lower()]
        except KeyError:
            raise InvalidSchedule(f"window {window!r}: {part!r} is not a day or day range; days are "
                                  f"{', '.join(DAYS)}, ranges like Mon-Fri or Sat-Mon") from None
        days.update((a + i) % 7 for i in range((b - a) % 7 + 1))  # a range may wrap past Sunday
    return frozenset(days)


def parse_window(text: str) -> Window:
    """`[days ]HH:MM-HH:MM`, for example `Mon-Fri 19:00-07:00`, `Sat,Sun 00:00-24:00`, `22:00-06:00`."""
    match = _WINDOW.fullmatch(text)
    if not match:
        raise InvalidSchedule(f"window {text!r} is not of the form \"[days ]HH:MM-HH:MM\", for example "
                              f"\"Mon-Fri 19:00-07:00\"")
    start = _minutes(match["start"], window=text, end=False)
    end = _minutes(match["end"], window=text, end=True)
    if start == end:
        raise InvalidSchedule(f"window {text!r} starts and ends at the same time; a whole day is 00:00-24:00")
    if end < start:
        end += MINUTES_PER_DAY  # runs into the next day
    return Window(text=text, days=_days(match["days"], window=text), start=start, end=end)


def zone(name: str) -> ZoneInfo:
    """An IANA time zone; from the system database, or the tzdata package when the image has none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"time zone {name!r} is not an IANA time zone name such as \"Europe/Berlin\" "
                              f"or \"UTC\"") from None


#: the instants an `until` may name: any date a person means is inside, and dates near the ends of the calendar
#: (year 1, year 9999 with an offset) would leave it when converted to UTC or when a run counts from them
EARLIEST_UNTIL = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST_UNTIL = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)
#: the longest `until` text read (RFC 3339 with fractions and an offset is about 35 characters)
MAX_UNTIL_TEXT = 64


def parse_until(text: str) -> dt.datetime:
    """An RFC 3339 instant with its offset, e.g. 2026-12-24T18:00:00Z, from 1970 to before the year 9000."""
    example = "for example \"2026-12-24T18:00:00Z\""
    if not isinstance(text, str) or len(text) > MAX_UNTIL_TEXT:
        raise InvalidSchedule(f"{str(text)[:MAX_UNTIL_TEXT]!r}... is not an RFC 3339 date-time, {example}")
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise InvalidSchedule(f"{text!r} is not an RFC 3339 date-time with an offset, {example}")
    try:
        instant = value.astimezone(dt.UTC)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is in the year 10000 in UTC
        instant = None
    if instant is None or not EARLIEST_UNTIL <= instant < LATEST_UNTIL:
        raise InvalidSchedule(f"{text!r} is outside the dates nsscaler reads ({EARLIEST_UNTIL:%Y-%m-%d} to "
                              f"before {LATEST_UNTIL:%Y-%m-%d}), {example}")
    return instant


@dataclass(frozen=True)
class Schedule:
    """When a policy holds: before `until`, all day on a day an exception holds, never on a day one releases
    (release wins), and otherwise inside any window (always, without windows)."""

    windows: tuple[Window, ...] = ()
    zone_name: str = "UTC"
    until: dt.datetime | None = None
    calendar: Calendar | None = None

    @property
    def always(self) -> bool:
        return not self.windows and self.until is None and not self.calendar

    def expired(self, now: dt.datetime) -> bool:
        return self.until is not None and now >= self.until

    def in_window(self, now: dt.datetime) -> bool:
        if not self.windows:
            return True
        local = now.astimezone(zone(self.zone_name)).replace(tzinfo=None)
        return any(w.contains(local) for w in self.windows)

    def exception(self, now: dt.datetime) -> Match | None:
        """The exception deciding the local day `now` falls on, if any."""
        if not self.calendar:
            return None
        return self.calendar.on(now.astimezone(zone(self.zone_name)).date())

    def in_effect(self, now: dt.datetime) -> bool:
        """Whether it holds at `now`, `until` aside: the day's exception, else the windows."""
        match = self.exception(now)
        return match.action == HOLD if match is not None else self.in_window(now)

    def holds(self, now: dt.datetime) -> bool:
        return not self.expired(now) and self.in_effect(now)

    def next_change(self, now: dt.datetime) -> dt.datetime | None:
        """The first instant after `now` at which `holds` changes, or None if it never will (with exceptions:
        none within CALENDAR_HORIZON)."""
        if self.expired(now):
            return None
        if self.calendar:
            change = _next_calendar_change(self, now)
        else:
            change = _next_window_change(self, now) if self.windows else None
        if self.until is None or (change is not None and change < self.until):
            return change
        # no change before `until`: the result flips there only if it holds until then
        return self.until if self.in_effect(now) else None

    def next_exception(self, now: dt.datetime, *, after_today: bool = False) -> Match | None:
        """The first day from `now`'s local day on (or after it) that an exception names, within the horizon."""
        if not self.calendar:
            return None
        today = now.astimezone(zone(self.zone_name)).date()
        for ahead in range(1 if after_today else 0, CALENDAR_HORIZON.days + 1):
            match = self.calendar.on(today + dt.timedelta(days=ahead))
            if match is not None:
                return match
        return None


def _day_starts(day: dt.date, tz: ZoneInfo) -> set[dt.datetime]:
    """The instants local midnight of `day` may be (twice when repeated; a skipped one is an offset change)."""
    wall = dt.datetime.combine(day, dt.time())
    return {wall.replace(tzinfo=tz, fold=fold).astimezone(dt.UTC) for fold in (0, 1)}


def _next_calendar_change(schedule: Schedule, now: dt.datetime) -> dt.datetime | None:
    """As `_next_window_change`, over the calendar's horizon a week at a time: the candidates are every local
    midnight (an exception starts or ends), every window boundary and every offset change."""
    tz = zone(schedule.zone_name)
    current = schedule.in_effect(now)
    first_day = now.astimezone(tz).date()
    for week in range(0, CALENDAR_HORIZON.days, 7):
        start, end = now + dt.timedelta(days=week), now + dt.timedelta(days=week + 7)
        candidates = set(_offset_changes(tz, start, end))
        for back in range(week - 1, week + 9):
            day = first_day + dt.timedelta(days=back)
            candidates |= _day_starts(day, tz)
            for window in schedule.windows:
                for wall in window.boundaries(day):
                    candidates.update(wall.replace(tzinfo=tz, fold=fold).astimezone(dt.UTC) for fold in (0, 1))
        for instant in sorted(c for c in candidates if start < c <= end and c > now):
            if schedule.in_effect(instant) != current:
                return instant
    return None


def _next_window_change(schedule: Schedule, now: dt.datetime) -> dt.datetime | None:
    """Every instant at which a window boundary or a clock change may flip the result is a candidate;
    the first candidate whose result differs from now's is the next change."""
    tz = zone(schedule.zone_name)
    today = now.astimezone(tz).date()
    candidates: set[dt.datetime] = set(_offset_changes(tz, now, now + _HORIZON))
    for back in range(-1, _HORIZON.days + 2):
        day = today + dt.timedelta(days=back)
        for window in schedule.windows:
            for wall in window.boundaries(day):
                # an ambiguous wall time happens twice; a skipped one is covered by the offset change
                candidates.update(wall.replace(tzinfo=tz, fold=fold).astimezone(dt.UTC) for fold in (0, 1))
    current = schedule.in_window(now)
    for instant in sorted(c for c in candidates if c > now):
        if schedule.in_window(instant) != current:
            return instant
    return None


def _offset_changes(tz: ZoneInfo, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    """The instants in (start, end] at which the zone's UTC offset changes, to the second."""

    def offset(seconds: int) -> dt.timedelta | None:
        return dt.datetime.fromtimestamp(seconds, tz).utcoffset()

    changes = []
    t, last = int(start.timestamp()), int(end.timestamp())
    while t < last:
        step = t + 3600  # no zone changes its offset twice within an hour
        if offset(t) != offset(step):
            low, high = t, step  # offset(low) is the old offset, offset(high) the new one
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if offset(mid) == offset(low) else (low, mid)
            changes.append(dt.datetime.fromtimestamp(high, dt.UTC))
        t = step
    return changes
