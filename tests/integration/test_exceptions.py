"""Holidays and exceptions against the real control plane: the clock is the run's own `now` parameter, fixed on
days whose holidays are known (Easter 2027 in Brandenburg), so the same runs give the same result any day.

The ICS calendar lives in a real ConfigMap, read by the run with its own request."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import requests

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster import controlplane
from job import run
from job.cluster.kube import Kube
from job.model.settings import Settings
from job.report import namespace_table
from tests.users import plugin

pytestmark = pytest.mark.usefixtures("crd")  # the CRD of this tree: its schema is part of what is tested


def run_at(plane: controlplane.ControlPlane, now: dt.datetime, *, own_namespace: str | None = None) -> run.RunReport:
    """One run as cluster admin at the instant `now`; `own_namespace` is where nsscaler is installed (where it reads
    calendars), unknown by default as for a run outside a Pod."""
    settings = Settings(kubeconfig=plane.admin_kubeconfig, own_namespace=own_namespace)
    return run.run(Kube(settings), settings, now=now)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def family(api: AdminApi, prefix: str) -> tuple[str, str]:
    """`<prefix>v1` (held when the policy holds, 3 replicas) and `<prefix>v2` (its active one)."""
    for suffix in ("v1", "v2"):
        api.create(builders.namespace(prefix + suffix))
        api.create(builders.deployment(prefix + suffix, "web", 3))
    return prefix + "v1", prefix + "v2"


def ready(api: AdminApi, name: str) -> dict[str, Any]:
    return next(c for c in api.status(name)["conditions"] if c["type"] == "Ready")


def seen_before_it_happens(api: AdminApi, plane: controlplane.ControlPlane, name: str,
                           friday: run.RunReport) -> None:
    """Good Friday's run: the status, the dry-run table, the plugin and the Event name today's exception, the next
    one and the next change."""
    status = api.status(name)
    assert status["holding"] is True
    assert status["exception"] == {"date": "2027-03-26", "action": "hold",
                                   "name": "DE-BB public holidays: Good Friday"}
    assert status["nextException"] == {"date": "2027-03-27", "action": "release", "name": "release weekend"}
    assert status["nextChange"] == "2027-03-26T23:00:00Z"  # Berlin's midnight: the release weekend begins
    [line] = [row for row in namespace_table(friday).splitlines() if row.startswith("*")]
    assert "calendar: today held all day on 2027-03-26 (DE-BB public holidays: Good Friday)" in line
    assert "next exception: released all day on 2027-03-27 (release weekend)" in line
    started = [e for e in api.list("Event", "default", fieldSelector="reason=ExceptionStarted")
               if e["involvedObject"]["name"] == name]
    assert [e["message"].split(":")[0] for e in started] == ["held all day on 2027-03-26 (DE-BB public holidays"]

    shown = plugin(plane.admin_kubeconfig, "status", name)
    assert shown.returncode == 0, shown.stderr
    assert ("  next change: 2027-03-26T23:00:00Z\n"
            "  today: held all day on 2027-03-26 (DE-BB public holidays: Good Friday)\n"
            "  next exception: released all day on 2027-03-27 (release weekend)\n") in shown.stdout, shown.stdout


def test_a_family_is_held_all_day_on_a_public_holiday_and_released_on_a_release_weekend(api: AdminApi,
                                                                                         control_plane, prefix):
    """Brandenburg, Easter 2027: Good Friday (26th) held all day though the windows hold only at night; the
    release weekend (27th-28th) released, also on Easter Sunday, a holiday (release wins); Easter Monday held;
    Tuesday noon outside the windows, released."""
    held, active = family(api, prefix)
    name = f"{prefix}easter"
    api.create(builders.nsscaler(name, prefix, ["v2"], hold_windows=["Mon-Fri 19:00-07:00"],
                                 time_zone="Europe/Berlin", exceptions=[
                                     {"action": "hold", "holidays": {"country": "DE", "subdivision": "BB"}},
                                     {"action": "release", "name": "release weekend", "date": "2027-03-27",
                                      "end": "2027-03-28"}]))

    friday = run_at(control_plane, at("2027-03-26T12:00:00Z"))  # 13:00 in Berlin: no window open
    assert friday.exit_code == 0, friday.problems
    assert api.replicas("Deployment", held, "web") == 0 and api.replicas("Deployment", active, "web") == 3
    seen_before_it_happens(api, control_plane, name, friday)

    again = run_at(control_plane, at("2027-03-26T18:00:00Z"))  # the same day: no second Event
    assert again.exit_code == 0 and again.count("applied") == 0
    assert len([e for e in api.list("Event", "default", fieldSelector="reason=ExceptionStarted")
                if e["involvedObject"]["name"] == name]) == 1

    for when, day in (("2027-03-27T12:00:00Z", "2027-03-27"), ("2027-03-28T12:00:00Z", "2027-03-28")):
        weekend = run_at(control_plane, at(when))
        assert weekend.exit_code == 0, weekend.problems
        assert api.replicas("Deployment", held, "web") == 3, when
        status = api.status(name)
        assert status["holding"] is False and status["exception"]["action"] == "release"
        assert status["exception"]["date"] == day and status["exception"]["name"] == "release weekend"
        assert "holds nothing: released all day on" in ready(api, name)["message"]
    assert api.status(name)["nextChange"] == "2027-03-28T22:00:00Z"  # summer time: midnight is 22:00Z now

    monday = run_at(control_plane, at("2027-03-29T12:00:00Z"))
    assert monday.exit_code == 0, monday.problems
    assert api.replicas("Deployment", held, "web") == 0
    assert api.status(name)["exception"]["name"] == "DE-BB public holidays: Easter Monday"

    tuesday = run_at(control_plane, at("2027-03-30T10:00:00Z"))  # 12:00 in Berlin, a working day
    assert tuesday.exit_code == 0, tuesday.problems
    assert api.replicas("Deployment", held, "web") == 3
    status = api.status(name)
    assert "exception" not in status and status["holding"] is False
    assert status["nextChange"] == "2027-03-30T17:00:00Z"  # 19:00 CEST, the window


ICS = "\r\n".join([
    "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//shop//freeze//EN",
    "BEGIN:VEVENT", "UID:freeze@shop", "SUMMARY:Stocktaking", "DTSTART;VALUE=DATE:20270104",
    "DTEND;VALUE=DATE:20270105", "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=4", "EXDATE;VALUE=DATE:20270111", "END:VEVENT",
    "END:VCALENDAR", ""])


def configmap(ns: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def test_a_broken_calendar_is_reported_with_the_fix_while_another_policy_is_served(api: AdminApi, control_plane,
                                                                                 prefix):
    """The calendar is read in nsscaler's own namespace (here `<prefix>sys`) and nowhere else: a ConfigMap of the
    same name in another namespace is not it. Each thing wrong with it makes only its policy invalid, saying the
    fix; the other policy is served."""
    held, _ = family(api, prefix)
    other = f"{prefix}o-"
    api.create(builders.namespace(other + "v1"))
    api.create(builders.deployment(other + "v1", "web", 2))
    own, elsewhere = prefix + "sys", prefix + "ops"
    for ns in (own, elsewhere):
        api.create(builders.namespace(ns))
    api.create(configmap(elsewhere, "freeze", {"shop.ics": ICS}))  # another team's: never read
    name, served = f"{prefix}ics", f"{prefix}other"
    api.create(builders.nsscaler(name, prefix, ["v2"], hold_windows=["Sat 00:00-01:00"],
                                 exceptions=[{"action": "hold", "calendar": {"name": "freeze", "key": "shop.ics"}}]))
    api.create(builders.nsscaler(served, other, []))
    monday = at("2027-01-04T12:00:00Z")

    def run_monday() -> run.RunReport:
        return run_at(control_plane, monday, own_namespace=own)

    missing = run_monday()
    assert missing.exit_code == 1  # the run finished, something failed: an invalid CR
    assert api.replicas("Deployment", other + "v1", "web") == 0  # the other policy was served
    assert api.replicas("Deployment", held, "web") == 3
    message = ready(api, name)["message"]
    assert ready(api, name)["reason"] == "InvalidSpec"
    assert message == (f"spec.exceptions.0.calendar: ConfigMap freeze key shop.ics does not exist in nsscaler's "
                       f"namespace {own}: create it there (kubectl -n {own} create configmap freeze --from-file=...) "
                       f"or fix the name")

    api.create(configmap(own, "freeze", {"other.ics": ICS}))
    assert run_monday().exit_code == 1
    assert "has no key 'shop.ics' (its keys: other.ics)" in ready(api, name)["message"]

    api.patch("ConfigMap", "freeze", {"data": {"shop.ics": "BEGIN:VCALENDAR\r\nnot a calendar\r\n"}}, own)
    assert run_monday().exit_code == 1
    assert "is not an RFC 5545 calendar" in ready(api, name)["message"]
    assert api.replicas("Deployment", other + "v1", "web") == 0

    api.patch("ConfigMap", "freeze", {"data": {"shop.ics": ICS}}, own)
    fixed = run_monday()
    assert fixed.exit_code == 0, fixed.problems
    assert api.replicas("Deployment", held, "web") == 0  # Stocktaking Monday: held all day
    assert api.status(name)["exception"] == {"date": "2027-01-04", "action": "hold",
                                             "name": "ConfigMap freeze key shop.ics: Stocktaking"}
    assert api.status(name)["nextException"]["date"] == "2027-01-18"  # the 11th is an EXDATE
    assert run_at(control_plane, at("2027-01-11T12:00:00Z"), own_namespace=own).exit_code == 0
    assert api.replicas("Deployment", held, "web") == 3

    # a run outside a Pod that is not told nsscaler's namespace reads no calendar, and says how to tell it
    outside = run_at(control_plane, monday)
    assert outside.exit_code == 1
    assert ready(api, name)["message"] == (
        "spec.exceptions.0.calendar: ConfigMap freeze key shop.ics cannot be read: this run does not know "
        "nsscaler's namespace, where calendars live (it runs outside a Pod); set --own-namespace "
        "(NSSCALER_OWN_NAMESPACE) to the namespace nsscaler is installed in")
    assert api.replicas("Deployment", held, "web") == 3  # an invalid policy changes nothing


def test_a_policy_naming_no_calendar_reads_no_configmap(api: AdminApi, control_plane, prefix):
    """The steady state's requests are the same with exceptions as without: only a calendar costs a GET."""
    family(api, prefix)
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"], exceptions=[
        {"action": "release", "date": "2027-01-01", "rrule": "FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1"}]))
    assert run_at(control_plane, at("2027-01-02T12:00:00Z")).exit_code == 0
    steady = run_at(control_plane, at("2027-01-02T12:05:00Z"))
    assert steady.exit_code == 0 and "get" not in steady.requests, steady.requests


def test_the_schema_refuses_what_it_can_at_admission(api: AdminApi, prefix):
    def post(*exceptions: dict[str, Any]) -> requests.Response:
        obj = builders.nsscaler(f"{prefix}p", prefix, [], exceptions=list(exceptions))
        return api.http.post(api.url("NSScaler", None), json=obj, timeout=30)

    for exception, words in (
            ({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=SECONDLY"}, "needs FREQ=DAILY"),
            ({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=DAILY;BYHOUR=3"}, "split a day"),
            ({"action": "hold", "holidays": {"country": "de"}}, "ISO 3166 country code in capitals"),
            ({"action": "hold", "date": "27-1-1"}, "must be a day that exists, from 1970 to 8999"),
            ({"action": "hold", "date": "0001-01-01", "rrule": "FREQ=DAILY"}, "must be a day that exists"),
            ({"action": "hold", "date": "2027-02-30"}, "must be a day that exists"),
            ({"action": "hold", "date": "2027-01-01", "end": "8059-04-31"}, "must be a day that exists"),
            ({"action": "hold", "date": "2100-02-29"}, "must be a day that exists"),
            ({"action": "hold", "date": "2027-01-01", "end": "2028-01-02"}, "spans at most 366 days"),
            ({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=DAILY", "exdates": ["2027-06-31"]},
             "must be a day that exists"),
            ({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=DAILY;"}, "no ';' at the end"),
            ({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=DAILY;;COUNT=2"}, "no ';' at the end"),
            ({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=DAILY;COUNT"}, "NAME=VALUE"),
            ({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=DAILY;COLOUR=RED"},
             "only RFC 5545's other day parts"),
            ({"action": "hold", "date": "2027-01-01", "rrule": "FREQ=WEEKLY;byday=MO"}, "in upper case"),
            ({"action": "hold", "calendar": {"name": "", "key": "de.ics"}},
             "calendar.name in body should be at least 1"),
            ({"action": "hold", "calendar": {"name": "Holidays", "key": "de.ics"}},
             "calendar.name in body should match"),
            ({"action": "hold", "calendar": {"name": "holidays", "key": ""}},
             "calendar.key in body should be at least 1"),
            ({"action": "hold", "calendar": {"name": "holidays", "key": "de/ics"}},
             "calendar.key in body should match"),
            ({"action": "later", "date": "2027-01-01"}, "Unsupported value"),
            ({"action": "hold"}, "name the days with date"),
            ({"action": "hold", "date": "2027-01-02", "end": "2027-01-01"}, "end goes with date alone"),
            ({"action": "hold", "date": "2027-01-01", "holidays": {"country": "DE"}}, "not with holidays"),
            ({"action": "hold", "calendar": {"name": "x"}}, "spec.exceptions[0].calendar.key")):
        refused = post(exception)
        assert refused.status_code == 422 and words in refused.text, (exception, refused.text)
    # a calendar in another namespace cannot be named: kubectl (strict field validation) refuses the field
    obj = builders.nsscaler(f"{prefix}p", prefix, [], exceptions=[
        {"action": "hold", "calendar": {"name": "x", "namespace": "y", "key": "k.ics"}}])
    refused = api.http.post(api.url("NSScaler", None), json=obj, params={"fieldValidation": "Strict"}, timeout=30)
    assert refused.status_code == 400, refused.text
    assert 'unknown field "spec.exceptions[0].calendar.namespace"' in refused.json()["message"], refused.text
    assert not api.exists("NSScaler", f"{prefix}p")
    # the same rules let lawful days through: leap days, the last day of each month's length, RRULE: and dotted names
    admitted = post({"action": "hold", "date": "2028-02-29", "end": "2028-04-30"},
                    {"action": "hold", "date": "2027-03-01", "end": "2028-02-29"},  # 366 days, the longest range
                    {"action": "release", "date": "2000-02-29", "rrule": "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=-1",
                     "exdates": ["2100-02-28", "8999-12-31"]},
                    {"action": "hold", "calendar": {"name": "team.holidays-2027", "key": "DE_by.ics"}})
    assert admitted.status_code == 201, admitted.text
    api.delete("NSScaler", f"{prefix}p")


def test_a_wake_wakes_a_namespace_an_exception_holds(api: AdminApi, control_plane, prefix):
    """A Wake is judged on the held namespace whatever holds it: here a day the policy holds all day though its
    only window is hours away. The Wake's end counts from its real creation, so the run's `now` is the real one
    (today and tomorrow are both exception days: a run just past midnight is still inside one)."""
    held, _ = family(api, prefix)
    now = dt.datetime.now(dt.UTC)
    later = now + dt.timedelta(hours=6)
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"], hold_windows=[f"{later:%H}:00-{later:%H}:30"],
                                 exceptions=[{"action": "hold", "name": "stocktaking", "date": f"{now:%Y-%m-%d}",
                                              "end": f"{now + dt.timedelta(days=1):%Y-%m-%d}"}]))
    assert run_at(control_plane, now).exit_code == 0
    assert api.replicas("Deployment", held, "web") == 0
    assert api.status(f"{prefix}p")["exception"]["name"] == "stocktaking"

    api.create(builders.wake(held, "1h", requestedBy=controlplane.ADMIN_USER))  # the admin is who asks
    woken = run_at(control_plane, dt.datetime.now(dt.UTC))
    assert woken.exit_code == 0, woken.problems
    assert api.replicas("Deployment", held, "web") == 3
    assert api.get("Wake", "w", held)["status"]["state"] == "Active"
