"""UTC instants as text: one helper, three precisions, each byte-identical to what the statuses, the words and
the JSON log lines said before it existed."""

from __future__ import annotations

import datetime as dt

import pytest

from job.model.stamps import utc_stamp

BERLIN = dt.timezone(dt.timedelta(hours=1))
WHEN = dt.datetime(2026, 12, 4, 19, 5, 7, 123456, tzinfo=BERLIN)


@pytest.mark.parametrize(("precision", "expected"), [
    pytest.param("minutes", "2026-12-04T18:05Z", id="minutes-words"),
    pytest.param("seconds", "2026-12-04T18:05:07Z", id="seconds-status"),
    pytest.param("microseconds", "2026-12-04T18:05:07.123456Z", id="microseconds-log-line"),
])
def test_one_instant_at_each_precision_in_utc(precision, expected) -> None:
    assert utc_stamp(WHEN, precision=precision) == expected


def test_seconds_is_the_default() -> None:
    assert utc_stamp(WHEN) == utc_stamp(WHEN, precision="seconds")
