"""UTC instants as text, in one place: every time nsscaler writes in a status, a message or a log line is
`utc_stamp`'s, at the precision its reader needs (a person reads minutes, a status seconds, a log line
microseconds)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

Precision = Literal["minutes", "seconds", "microseconds"]

_FORMATS: dict[Precision, str] = {
    "minutes": "%Y-%m-%dT%H:%MZ",  # 2026-12-04T18:00Z: a Wake's words, why a namespace is kept
    "seconds": "%Y-%m-%dT%H:%M:%SZ",  # 2026-12-04T18:00:00Z: status fields (metav1.Time)
    "microseconds": "%Y-%m-%dT%H:%M:%S.%fZ",  # 2026-12-04T18:00:00.000000Z: a JSON log line
}


def utc_stamp(when: dt.datetime, *, precision: Precision = "seconds") -> str:
    """`when` in UTC, RFC 3339 with a `Z`, to the given precision (truncated, never rounded)."""
    return when.astimezone(dt.UTC).strftime(_FORMATS[precision])
