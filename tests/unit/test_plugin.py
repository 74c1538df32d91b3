"""The kubectl plugin's pure parts: when the next run is due (cron), and its --help as its docs page shows it."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
from pathlib import Path

import pytest

from job.plugin import cli, cron

PAGE = (Path(__file__).resolve().parents[2] / "docs/using/plugin.md").read_text()
NOW = dt.datetime(2026, 12, 4, 4, 33, 20, tzinfo=dt.UTC)  # a Friday


@pytest.mark.parametrize(("schedule", "zone", "due"), [
    pytest.param("*/10 * * * *", None, "2026-12-04T04:40", id="every ten minutes"),
    pytest.param("33 * * * *", None, "2026-12-04T05:33", id="this minute has begun: the next hour"),
    pytest.param("@daily", None, "2026-12-05T00:00", id="macro"),
    pytest.param("0 9 * * mon-fri", None, "2026-12-04T09:00", id="weekdays by name"),
    pytest.param("0 9 * * 1-5", None, "2026-12-04T09:00", id="weekdays"),
    pytest.param("0 9 * * 0,6", None, "2026-12-05T09:00", id="weekend"),
    pytest.param("0 9 * * 7", None, "2026-12-06T09:00", id="7 is Sunday"),
    pytest.param("0 0 1 * 1", None, "2026-12-07T00:00", id="day of month or day of week"),
    pytest.param("30 8 * * *", "Europe/Berlin", "2026-12-04T07:30", id="in the CronJob's time zone"),
    pytest.param("0 0 29 2 *", None, "2028-02-29T00:00", id="leap day"),
])
def test_the_next_run_follows_the_schedule(schedule, zone, due):
    assert cron.next_run(schedule, now=NOW, time_zone=zone) == dt.datetime.fromisoformat(due).replace(tzinfo=dt.UTC)


@pytest.mark.parametrize("schedule", ["* * * *", "61 * * * *", "*/0 * * * *", "0 0 * * funday"])
def test_an_unreadable_schedule_is_refused(schedule):
    with pytest.raises(cron.BadSchedule):
        cron.next_run(schedule, now=NOW)


def test_a_schedule_that_never_fires_within_the_horizon_is_unknown():
    assert cron.next_run("0 0 31 2 *", now=NOW) is None


@pytest.mark.parametrize("command", ["", "wake", "sleep", "status"])
def test_the_plugin_page_shows_each_help_as_it_is(command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "110")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main([command, "--help"] if command else ["--help"])
    assert f"$ kubectl nsscaler {command + ' ' if command else ''}--help\n{out.getvalue()}" in PAGE


def test_a_bad_duration_is_refused_before_any_request(tmp_path, capsys):
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: {server: "
                      "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: "
                      "{cluster: k, user: u, namespace: shop-v1}}]\n")
    assert cli.main(["wake", "--kubeconfig", str(config), "--for", "soon"]) == 2
    assert "'soon' is not a positive duration" in capsys.readouterr().err
