"""Policies joined with the ICS calendars their exceptions name, as the run read them (pure).

The run reads each ConfigMap a policy names (`job.cluster.calendars`); here each text becomes events, or the
policy that names a missing or broken one becomes invalid, alone, saying which exception and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from job.model import calendar
from job.model.exceptions import CalendarRef
from job.model.policy import InvalidPolicy, Policy

#: what a read of one ConfigMap key gave: its text, or why there is none (missing ConfigMap or key, no access)
CalendarText = str | calendar.InvalidCalendar


def with_calendars(policies: Sequence[Policy | InvalidPolicy],
                   texts: Mapping[CalendarRef, CalendarText]) -> list[Policy | InvalidPolicy]:
    """Each policy naming ICS calendars with their events; one whose calendar is missing or broken becomes
    invalid, naming the exception and the fix, and the others are served."""
    out: list[Policy | InvalidPolicy] = []
    for p in policies:
        if not isinstance(p, Policy) or not p.calendars:
            out.append(p)
            continue
        events, problems = {}, []
        for index, spec in enumerate(p.spec.exceptions):
            if spec.calendar is None:
                continue
            text = texts.get(spec.calendar.ref, calendar.InvalidCalendar("was not read"))
            try:
                if isinstance(text, calendar.InvalidCalendar):
                    raise text
                events[spec.calendar.ref] = calendar.parse_ics(text)
            except calendar.InvalidCalendar as exc:
                problems.append(f"spec.exceptions.{index}.calendar: {spec.calendar.words()} {exc}")
        if problems:
            out.append(InvalidPolicy(p.name, p.generation, "; ".join(problems), p.uid, p.status, p.life))
        else:
            out.append(replace(p, calendar_events=events))
    return out
