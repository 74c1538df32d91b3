"""`spec.exceptions` of an NSScaler: the days a policy holds its family all day, or releases it (parsing only).

Each exception names its days one way (`date` with an optional `end`, `rrule` from `date`, `holidays`, or
`calendar`: an ICS text in a ConfigMap) and what they do (`action: hold` or `release`). The days themselves
are `job.model.calendar`'s; an ICS text comes from the run's read of the ConfigMap it names
(`job.cluster.calendars`), and a policy whose calendar is missing or broken is invalid, alone
(`job.model.calendars`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from job.model import calendar
from job.model.calendar import Action

MAX_EXCEPTIONS = 50
MAX_EXDATES = 366
#: the longest date range one exception may name (`date` to `end`)
MAX_RANGE_DAYS = 366
#: the days an exception may name: a rule counted from the year 1 would cost the run millions of steps a year
FIRST_DAY, LAST_DAY = dt.date(1970, 1, 1), dt.date(9000, 1, 1)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_KEY = re.compile(r"[-._a-zA-Z0-9]+")


class HolidaySource(BaseModel):
    """`holidays`: a country's public holidays (ISO 3166 alpha-2), with a region (`subdivision`) if given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    country: str = Field(min_length=2, max_length=3)
    subdivision: str | None = Field(default=None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _known(self) -> HolidaySource:
        calendar.check_country(self.country, self.subdivision)
        return self


#: a calendar's ConfigMap name and key; the ConfigMap is always in nsscaler's own namespace
CalendarRef = tuple[str, str]


class ConfigMapKey(BaseModel):
    """`calendar`: the ICS text kept under `key` in ConfigMap `name` in nsscaler's own namespace. There is no
    `namespace`: nsscaler may read ConfigMaps only there (a Role in its namespace, not a ClusterRole), so that a
    run never reads other teams' configuration, and whoever may write the calendar is who may write nsscaler."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=253)
    key: str = Field(min_length=1, max_length=253)

    @model_validator(mode="before")
    @classmethod
    def _no_namespace(cls, value: Any) -> Any:
        if isinstance(value, dict) and "namespace" in value:
            raise ValueError("a calendar names no namespace: put its ConfigMap in nsscaler's own namespace (the "
                             "only one nsscaler may read ConfigMaps in) and leave namespace out")
        return value

    @model_validator(mode="after")
    def _names(self) -> ConfigMapKey:
        if not _DNS_SUBDOMAIN.fullmatch(self.name):
            raise ValueError(f"name {self.name!r} is not a ConfigMap name (lower-case letters, digits, '-', '.')")
        if not _KEY.fullmatch(self.key):
            raise ValueError(f"key {self.key!r} is not a ConfigMap key (letters, digits, '-', '_', '.')")
        return self

    @property
    def ref(self) -> CalendarRef:
        return (self.name, self.key)

    def words(self) -> str:
        return f"ConfigMap {self.name} key {self.key}"


class ExceptionSpec(BaseModel):
    """One entry of `spec.exceptions`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="", max_length=63)
    action: Action
    date: dt.date | None = None
    #: with `date` alone: the last day of the range (inclusive)
    end: dt.date | None = None
    #: an RFC 5545 RRULE value, its first occurrence on `date`
    rrule: str | None = Field(default=None, max_length=calendar.MAX_RULE_TEXT)
    #: with `rrule`: days the rule leaves out (EXDATE)
    exdates: tuple[dt.date, ...] = Field(default=(), max_length=MAX_EXDATES)
    holidays: HolidaySource | None = None
    calendar: ConfigMapKey | None = None

    @field_validator("date", "end")
    @classmethod
    def _date_in_range(cls, value: dt.date | None) -> dt.date | None:
        if value is not None and not FIRST_DAY <= value < LAST_DAY:
            raise ValueError(f"{value} is outside the days nsscaler reads ({FIRST_DAY} to before {LAST_DAY})")
        return value

    @field_validator("rrule")
    @classmethod
    def _rule_reads(cls, value: str | None) -> str | None:
        return None if value is None else calendar.check_rule(value)

    @model_validator(mode="after")
    def _one_source(self) -> ExceptionSpec:
        named = [f for f in ("rrule", "holidays", "calendar") if getattr(self, f) is not None]
        if len(named) > 1:
            raise ValueError(f"names its days {len(named)} ways ({', '.join(named)}); keep one per exception")
        if not named and self.date is None:
            raise ValueError("names no days: give one of date (with an optional end), rrule (from date), holidays "
                             "or calendar")
        if self.rrule is not None and self.date is None:
            raise ValueError("rrule needs date, its first day, e.g. date: \"2026-01-03\"")
        if (self.holidays or self.calendar) and self.date is not None:
            raise ValueError("date goes with a date range or an rrule, not with holidays or calendar")
        if self.end is not None and (self.date is None or self.rrule is not None):
            raise ValueError("end goes with date alone: the last day of a date range")
        if self.exdates and self.rrule is None:
            raise ValueError("exdates go with an rrule: the days it leaves out")
        if self.end is not None and self.date is not None:
            if self.end < self.date:
                raise ValueError(f"end {self.end} is before date {self.date}")
            if (self.end - self.date).days >= MAX_RANGE_DAYS:
                raise ValueError(f"date to end spans more than {MAX_RANGE_DAYS} days")
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.holidays is not None:
            region = f"-{self.holidays.subdivision}" if self.holidays.subdivision else ""
            return f"{self.holidays.country}{region} public holidays"
        if self.calendar is not None:
            return self.calendar.words()
        if self.rrule is not None:
            return f"rrule {self.rrule}"
        return f"{self.date}" + (f" to {self.end}" if self.end else "")


def names_calendars(specs: Sequence[ExceptionSpec]) -> list[ConfigMapKey]:
    """The ConfigMap keys these exceptions read, each once, in order."""
    return list(dict.fromkeys(s.calendar for s in specs if s.calendar is not None))


def build(specs: Sequence[ExceptionSpec], *, tz: dt.tzinfo,
          events: Mapping[CalendarRef, tuple[calendar.Event, ...]],
          status: Mapping[str, Any]) -> calendar.Calendar:
    """The policy's calendar from its exceptions and the ICS events read for it. Where a calendar was not read
    (outside the run: the waker, the plugin), the days the last run recorded in `status` stand in for it."""
    found = [calendar.Exception_(s.action, s.label, _sources(s, events)) for s in specs]
    if any(s.calendar is not None and s.calendar.ref not in events for s in specs):
        found += recorded(status)
    return calendar.Calendar(tuple(found), tz)


def recorded(status: Mapping[str, Any]) -> list[calendar.Exception_]:
    """`status.exception` and `status.nextException` as exceptions of one day each; nothing from a status that
    does not read as one."""
    out = []
    for key in ("exception", "nextException"):
        entry = status.get(key)
        if not isinstance(entry, dict) or entry.get("action") not in (calendar.HOLD, calendar.RELEASE):
            continue
        try:
            day = dt.date.fromisoformat(str(entry.get("date")))
        except ValueError:
            continue
        name = str(entry.get("name") or "")[:512]
        out.append(calendar.Exception_(entry["action"], name, (calendar.Recorded(day, name),)))
    return out


def _sources(spec: ExceptionSpec, events: Mapping[CalendarRef, tuple[calendar.Event, ...]],
             ) -> tuple[calendar.Source, ...]:
    if spec.holidays is not None:
        return (calendar.Holidays(spec.holidays.country, spec.holidays.subdivision),)
    if spec.calendar is not None:
        return events.get(spec.calendar.ref, ())
    assert spec.date is not None  # _one_source: every other exception has a date
    if spec.rrule is not None:
        return (calendar.Rule(spec.rrule, spec.date, frozenset(spec.exdates)),)
    return (calendar.Dates(spec.date, spec.end or spec.date),)
