"""NSScaler custom resources, parsed and validated into typed policies.

The CRD validates too, but a CR stored before the schema existed (or through a permissive CRD) can hold
anything, so every spec is validated again here. An invalid spec never stops the other policies: it
becomes an `InvalidPolicy` that the run reports in that CR's status.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from job.errors import unexpected
from job.model import calendar, windows
from job.model import exceptions as exceptions_api
from job.model.exceptions import ExceptionSpec
from job.model.kinds import Kind

GROUP = "operators.wubw.fun"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "nsscalers"
CRD_NAME = f"{PLURAL}.{GROUP}"
MAX_SUFFIXES = 1000
MAX_KEEP_RECENT = 100
MAX_WINDOWS = 50
MAX_KINDS = 20

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9][-a-z0-9]*")
_SUFFIX = re.compile(r"[-a-z0-9]+")
_DURATION_WHOLE = re.compile(r"(?:\d+[dhms])+")
_DURATION_PART = re.compile(r"(\d+)([dhms])")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


#: the longest duration nsscaler reads anywhere (a Wake's `spec.duration` is capped far below it by its policy):
#: beyond it a date computed from it may not exist, and nobody means it
MAX_DURATION = dt.timedelta(days=3650)
#: the longest duration text read: a few units of a few digits each, never a number with thousands of digits
MAX_DURATION_TEXT = 32
#: the longest `wake.max_duration` a policy may set
MAX_WAKE = dt.timedelta(days=7)
#: the longest `restore_wait` a policy may set
MAX_RESTORE_WAIT = dt.timedelta(days=1)


def parse_duration(text: str) -> dt.timedelta:
    """ "3h", "90m", "1h30m", "2d" (a Wake's `spec.duration`, a policy's `wake.max_duration`), at most
    `MAX_DURATION`; ValueError quoting the text (cut short) otherwise."""
    if not isinstance(text, str) or len(text) > MAX_DURATION_TEXT:
        shown = text[:MAX_DURATION_TEXT] + "..." if isinstance(text, str) else text
        raise ValueError(f"{shown!r} is not a duration of at most {MAX_DURATION_TEXT} characters such as \"3h\"")
    match = _DURATION_WHOLE.fullmatch(text)
    # whole seconds as a Python int first: a timedelta of 10**20 days would not exist
    seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text)) if match else 0
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration such as \"3h\", \"90m\" or \"1h30m\"")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{text!r} is longer than {MAX_DURATION.days} days, the longest duration nsscaler reads")
    return dt.timedelta(seconds=seconds)


def duration_at_most(text: str, cap: dt.timedelta, words: str) -> str:
    """`text` when it is a duration no longer than `cap`; ValueError naming the cap in `words` otherwise."""
    if parse_duration(text) > cap:
        raise ValueError(f"{text!r} is longer than {words}")
    return text


#: the rolling windows a wake budget counts over, by the name `wake.budget.per` gives them
BUDGET_WINDOWS = {"day": dt.timedelta(days=1), "week": dt.timedelta(days=7)}


class WakeBudget(BaseModel):
    """`spec.wake.budget`: at most `hours` of woken time per namespace in any rolling `per` (day or week),
    counted across all its Wakes, also those deleted since (`job.decide.budget`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hours: int = Field(strict=True)  # "8" or true is a mistake, never 8 or 1 hours
    per: str = "day"

    @field_validator("per")
    @classmethod
    def _known_window(cls, value: str) -> str:
        if value not in BUDGET_WINDOWS:
            raise ValueError(f"{value!r} is not one of {', '.join(BUDGET_WINDOWS)}")
        return value

    @model_validator(mode="after")
    def _less_than_its_window(self) -> WakeBudget:
        # a budget as long as its window is no budget: say "no budget" by leaving the field out instead
        longest = int(BUDGET_WINDOWS[self.per].total_seconds() // 3600) - 1
        if not 1 <= self.hours <= longest:
            raise ValueError(f"hours must be a whole number from 1 to {longest} per {self.per}")
        return self

    @property
    def allowance(self) -> dt.timedelta:
        return dt.timedelta(hours=self.hours)

    @property
    def window(self) -> dt.timedelta:
        return BUDGET_WINDOWS[self.per]

    @property
    def words(self) -> str:
        """ "2h per day" """
        return f"{self.hours}h per {self.per}"


class WakeSpec(BaseModel):
    """`spec.wake`: whether people may wake the namespaces this policy holds (`kind: Wake`), and for how long."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed: bool = True
    max_duration: str = "8h"
    #: wake on the first HTTP request: while a namespace is held, its HTTPRoutes point at the waker, whose answer
    #: creates the Wake (`job.waker`); off by default, and nothing is touched unless a policy turns it on
    on_request: bool = False
    #: with `on_request`: a request shows the waiting page only, and the namespace wakes on a click there
    on_request_click: bool = False
    #: at most this much woken time per namespace in a rolling day or week; None: no budget, only max_duration
    budget: WakeBudget | None = None

    @field_validator("max_duration")
    @classmethod
    def _at_most_a_week(cls, value: str) -> str:
        return duration_at_most(value, MAX_WAKE, "7 days (168h)")

    @property
    def cap(self) -> dt.timedelta:
        return parse_duration(self.max_duration)


class PolicySpec(BaseModel):
    """`spec` of an NSScaler. Field names keep the Go operator's snake_case so its CRs work verbatim."""

    # Unknown fields are an error, not ignored: a typo such as `active_namespace_sufixes` must never
    # silently mean "nothing is active" and freeze a whole namespace family.
    model_config = ConfigDict(extra="forbid", frozen=True)

    scope_prefix: str = Field(min_length=1, max_length=62)
    active_namespace_suffixes: tuple[str, ...] = Field(default=(), max_length=MAX_SUFFIXES)
    # Whether the cluster serves a kind (and with /scale) is only known in the run: see
    # `without_unknown_kinds`; parsing checks only the shape of the names.
    kinds: tuple[Kind, ...] | None = Field(default=None, min_length=1, max_length=MAX_KINDS)
    suspend: bool = False
    restore: bool = True
    dry_run: bool = False
    keep_recent: int = 0
    hold_windows: tuple[str, ...] = Field(default=(), max_length=MAX_WINDOWS)
    time_zone: str = "UTC"
    until: dt.datetime | None = None
    wake: WakeSpec = WakeSpec()
    #: restore tiers by kind: the first kind listed comes back first (tier 0), the next one after it, and every
    #: kind not listed last; a workload's own `restore-tier` annotation wins (`job.decide.tiers`)
    restore_order: tuple[Kind, ...] = Field(default=(), max_length=MAX_KINDS)
    #: how long a restore tier waits for the earlier ones to be available before it comes back anyway
    restore_wait: str = "5m"
    #: between runs, what the API server does with a request that would start Pods in a namespace this policy holds
    #: (`job.decide.hold`): refuse it, admit it with a warning, or nothing. Absent from the Go operator's CRs: "deny"
    hold: Literal["deny", "warn", "off"] = "deny"
    #: days the family is held all day, or released, whatever the windows say (`job.model.calendar`)
    exceptions: tuple[ExceptionSpec, ...] = Field(default=(), max_length=exceptions_api.MAX_EXCEPTIONS)

    @field_validator("restore_wait")
    @classmethod
    def _restore_wait_in_range(cls, value: str) -> str:
        return duration_at_most(value, MAX_RESTORE_WAIT, "a day (24h)")

    @field_validator("restore_order")
    @classmethod
    def _restore_order_unique(cls, value: tuple[Kind, ...]) -> tuple[Kind, ...]:
        twice = sorted({k for k in value if value.count(k) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed more than once")
        return value

    @field_validator("keep_recent", mode="before")
    @classmethod
    def _keep_recent_in_range(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_KEEP_RECENT:
            raise ValueError(f"{value!r} is not a whole number from 0 to {MAX_KEEP_RECENT}")
        return value

    @field_validator("hold_windows")
    @classmethod
    def _windows_parse(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            windows.parse_window(text)  # InvalidSchedule is a ValueError that quotes the text
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone_exists(cls, value: str) -> str:
        windows.zone(value)
        return value

    @field_validator("until", mode="before")
    @classmethod
    def _until_is_rfc3339(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not an RFC 3339 date-time such as \"2026-12-24T18:00:00Z\"")
        return windows.parse_until(value)

    @field_validator("scope_prefix")
    @classmethod
    def _prefix_is_dns(cls, value: str) -> str:
        if not _PREFIX.fullmatch(value):
            raise ValueError("must be lower-case letters, digits and '-', starting with a letter or digit")
        return value

    @field_validator("active_namespace_suffixes")
    @classmethod
    def _suffixes_are_dns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for suffix in value:
            if not _SUFFIX.fullmatch(suffix):
                raise ValueError(f"suffix {suffix!r} must be lower-case letters, digits and '-'")
        return value

    @model_validator(mode="after")
    def _active_names_are_namespaces(self) -> PolicySpec:
        for suffix in self.active_namespace_suffixes:
            name = self.scope_prefix + suffix
            if len(name) > 63 or not _DNS_LABEL.fullmatch(name):
                raise ValueError(f"{name!r} (scope_prefix + suffix) is not a valid namespace name")
        return self


@dataclass(frozen=True)
class Lifecycle:
    """What a policy's metadata says of its life: its finalizers, whether it is being deleted (it then holds
    nothing: it stays only until nsscaler has given back what it asked to finish), and the resourceVersion a
    write of its finalizers is conditioned on."""

    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    resource_version: str = ""


@dataclass(frozen=True)
class Policy:
    """A valid NSScaler, ready for the planner."""

    name: str
    generation: int
    spec: PolicySpec
    kinds: frozenset[Kind]
    uid: str = ""
    status: dict[str, Any] = field(default_factory=dict, compare=False)
    life: Lifecycle = field(default_factory=Lifecycle, compare=False)
    #: the events of each ICS calendar its exceptions name, as the run read them (`job.model.calendars`); a calendar
    #: not read counts no day
    calendar_events: Mapping[exceptions_api.CalendarRef, tuple[calendar.Event, ...]] = field(default_factory=dict,
                                                                                         compare=False)

    def in_scope(self, namespace: str) -> bool:
        return namespace.startswith(self.spec.scope_prefix)

    def lists_active(self, namespace: str) -> bool:
        return self.in_scope(namespace) and namespace[len(self.spec.scope_prefix):] in self.active_suffixes

    @property
    def active_suffixes(self) -> frozenset[str]:
        return frozenset(self.spec.active_namespace_suffixes)

    @property
    def restore_wait(self) -> dt.timedelta:
        return parse_duration(self.spec.restore_wait)

    @property
    def keeps_frozen(self) -> bool:
        """Whether what it froze stays frozen when its namespace is no longer held (suspended, or `restore: false`)."""
        return self.spec.suspend or not self.spec.restore

    @functools.cached_property
    def schedule(self) -> windows.Schedule:
        """When this policy holds (hold_windows, time_zone, until, exceptions); validated with the spec."""
        days = exceptions_api.build(self.spec.exceptions, tz=windows.zone(self.spec.time_zone),
                                    events=self.calendar_events, status=self.status) if self.spec.exceptions else None
        return windows.Schedule(windows=tuple(windows.parse_window(w) for w in self.spec.hold_windows),
                                zone_name=self.spec.time_zone, until=self.spec.until, calendar=days)

    @property
    def calendars(self) -> list[exceptions_api.ConfigMapKey]:
        """The ConfigMap keys its exceptions read ICS calendars from."""
        return exceptions_api.names_calendars(self.spec.exceptions)


@dataclass(frozen=True)
class InvalidPolicy:
    """An NSScaler whose spec cannot be served; `message` says what to fix."""

    name: str
    generation: int
    message: str
    uid: str = ""
    status: dict[str, Any] = field(default_factory=dict, compare=False)
    life: Lifecycle = field(default_factory=Lifecycle, compare=False)


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "spec"
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"spec.{where}: {message}" if where != "spec" else f"spec: {message}")
    return "; ".join(parts)


def parse(obj: dict[str, Any], *, default_kinds: frozenset[Kind]) -> Policy | InvalidPolicy:
    """Turn one NSScaler object from the API into a Policy, or an InvalidPolicy saying why not. Never raises:
    whatever its spec holds, one NSScaler can never stop the run for the others."""
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    name, uid = str(meta.get("name", "?")), str(meta.get("uid", ""))
    finalizers = meta.get("finalizers")
    life = Lifecycle(finalizers=tuple(str(f) for f in finalizers) if isinstance(finalizers, list) else (),
                     deleting=bool(meta.get("deletionTimestamp")),
                     resource_version=str(meta.get("resourceVersion") or ""))
    try:
        return replace(_parsed(obj, meta, name=name, uid=uid, default_kinds=default_kinds), life=life)
    except Exception as exc:
        return InvalidPolicy(name, 0, f"spec could not be read: {unexpected(exc)}", uid, {}, life)


def _parsed(obj: dict[str, Any], meta: dict[str, Any], *, name: str, uid: str,
            default_kinds: frozenset[Kind]) -> Policy | InvalidPolicy:
    generation = int(meta.get("generation") or 0)
    status: dict[str, Any] = obj["status"] if isinstance(obj.get("status"), dict) else {}
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return InvalidPolicy(name, generation, "spec is missing; it needs at least scope_prefix", uid, status)
    try:
        parsed = PolicySpec.model_validate(spec)
    except ValidationError as exc:
        return InvalidPolicy(name, generation, _describe(exc), uid, status)
    except (ValueError, OverflowError) as exc:  # raised inside a validator beyond what pydantic wraps
        return InvalidPolicy(name, generation, f"spec: {exc}", uid, status)
    kinds = frozenset(parsed.kinds) if parsed.kinds else default_kinds
    return Policy(name=name, generation=generation, spec=parsed, kinds=kinds, uid=uid, status=status)


def without_unknown_kinds(policies: Sequence[Policy | InvalidPolicy],
                          unknown: Mapping[Kind, str]) -> list[Policy | InvalidPolicy]:
    """A policy naming a kind the cluster cannot serve (absent, or without /scale) becomes invalid;
    the others stay as they are, so they are still served."""
    out: list[Policy | InvalidPolicy] = []
    for p in policies:
        bad = sorted(k for k in p.kinds if k in unknown) if isinstance(p, Policy) else []
        if isinstance(p, Policy) and bad:
            message = "; ".join(f"spec.kinds: {unknown[k]}" for k in bad)
            out.append(InvalidPolicy(p.name, p.generation, message, p.uid, p.status, p.life))
        else:
            out.append(p)
    return out

