"""When a CronJob runs next, from its schedule (five fields, or a macro such as @hourly), in its time zone.

Pure: `now` is a parameter. Enough of cron for the plugin to say when the next nsscaler run is due."""

from __future__ import annotations

import datetime as dt
import zoneinfo

_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {**{m: i + 1 for i, m in enumerate(_MONTHS)}, **{d: i for i, d in enumerate(_DAYS)}}
#: how far ahead to look: four years and a day, so a leap day is found (a schedule that never fires: unknown)
HORIZON_DAYS = 4 * 365 + 2


class BadSchedule(ValueError):
    pass


def _value(text: str) -> int:
    return _NAMES[text.lower()] if text.lower() in _NAMES else int(text)


def _field(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if span == "*":
            start, end = low, high
        elif "-" in span:
            first, last = span.split("-", 1)
            start, end = _value(first), _value(last)
        else:
            start = _value(span)
            end = high if step_text else start
        if not (low <= start <= end <= high) or step < 1:
            raise BadSchedule(f"{part!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def parse(schedule: str) -> tuple[frozenset[int], ...]:
    """The five fields' allowed values (day of week 7 is Sunday, as 0); BadSchedule when it cannot be read."""
    fields = _MACROS.get(schedule.strip(), schedule).split()
    if len(fields) != 5:
        raise BadSchedule(f"{schedule!r} does not have five fields")
    try:
        parsed = [_field(text, low, high) for text, (low, high) in zip(fields, _RANGES, strict=True)]
    except (KeyError, ValueError) as exc:
        raise BadSchedule(f"{schedule!r}: {exc}") from None
    dow = frozenset(d % 7 for d in parsed[4])
    restricted = (fields[2] != "*", fields[4] != "*")
    return (*parsed[:4], dow, frozenset(i for i, r in enumerate(restricted) if r))


def _day_matches(day: dt.date, fields: tuple[frozenset[int], ...]) -> bool:
    dom, month, dow, restricted = fields[2], fields[3], fields[4], fields[5]
    if day.month not in month:
        return False
    by_dom, by_dow = day.day in dom, (day.weekday() + 1) % 7 in dow
    if len(restricted) == 2:  # both restricted: either matches (cron's rule)
        return by_dom or by_dow
    return by_dom and by_dow


def next_run(schedule: str, *, now: dt.datetime, time_zone: str | None = None) -> dt.datetime | None:
    """The first instant after `now` the schedule fires, in UTC; None when none within HORIZON_DAYS."""
    fields = parse(schedule)
    zone = zoneinfo.ZoneInfo(time_zone) if time_zone else dt.UTC
    local = now.astimezone(zone).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    day = local.date()
    for _ in range(HORIZON_DAYS):
        if _day_matches(day, fields):
            for hour in sorted(fields[1]):
                for minute in sorted(fields[0]):
                    when = dt.datetime.combine(day, dt.time(hour, minute), tzinfo=zone)
                    if when >= local:
                        return when.astimezone(dt.UTC)
        day += dt.timedelta(days=1)
    return None
