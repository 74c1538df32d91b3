"""The kubectl plugin's pure parts: when the next run is due (cron), what a namespace's status says (held from
the records, whatever a status list leaves out), and its --help as its docs page shows it."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
from pathlib import Path

import pytest

import job
from job.plugin import cli, cron, status, workloads

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
    with pytest.raises(SystemExit) as exited:  # argparse's own exit, with the other arguments
        cli.main(["wake", "--kubeconfig", str(config), "--for", "soon"])
    assert exited.value.code == 2
    assert "argument --for: 'soon' is not a positive duration" in capsys.readouterr().err


def _found(*by: str, unreadable: tuple[str, ...] = (), readable: bool = True) -> workloads.Workloads:
    return workloads.Workloads(frozen=[workloads.Frozen("Deployment", f"d{i}", b) for i, b in enumerate(by)],
                               running=[], unreadable=list(unreadable), readable=readable)


#: a status as a run writes it for a policy holding 26 namespaces: its list cut at 20, its count whole
CUT = {"heldNamespaces": [f"shop-v{i:02}" for i in range(1, 21)], "counts": {"heldNamespaces": 26},
       "wokenNamespaces": [{"namespace": "shop-v30", "by": "ann", "until": "2026-12-04T12:00:00Z"}]}


@pytest.mark.parametrize(("ns", "found", "state"), [
    pytest.param("shop-v26", _found("shop"), "held (1 workloads frozen by it)", id="beyond the list: the records"),
    pytest.param("shop-v26", _found("other"), "not held (no workload carries", id="another policy's record"),
    pytest.param("shop-v02", _found(unreadable=("StatefulSet",)), "held", id="in the list, records unreadable"),
    pytest.param("shop-v30", _found(), "woken by ann until 2026-12-04T12:00:00Z", id="woken"),
    pytest.param("shop-v31", _found(unreadable=("StatefulSet",)), "not held, as far as these credentials may read",
                 id="not held as far as can be read"),
])
def test_held_is_read_from_the_records_not_from_the_cut_status_list(ns, found, state):
    assert status.policy_state(ns, "shop", CUT, found).startswith(state)


@pytest.mark.parametrize(("found", "line", "code"), [
    pytest.param(_found("shop", "shop"), "shop-v1: held: 2 workloads frozen", 0, id="held"),
    pytest.param(_found(), "shop-v1: running", 0, id="running"),
    pytest.param(_found(readable=False, unreadable=("Deployment",)),
                 "shop-v1: unknown: these credentials may read none of its workloads", 1, id="nothing readable"),
])
def test_a_namespace_is_running_only_when_its_workloads_could_be_read(found, line, code):
    assert status.headline("shop-v1", found) == (line, code)


def test_a_policys_held_list_says_when_it_is_cut():
    assert status.held_words(CUT, None).endswith(", shop-v20 (the first 20 of 26, as its status lists them)")
    assert status.held_words(CUT, {"shop-v01": 1, "shop-v26": 2}) == "shop-v01, shop-v26"
    assert status.held_words({}, None) == "none"


def test_the_version_is_the_packages(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"kubectl nsscaler {job.__version__}\n"
