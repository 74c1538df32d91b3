"""The hold marks a run writes (`job.decide.hold`): which namespace carries one, and that a mark is written only
when it changes (a steady state writes none)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from job.decide import hold, routes
from job.decide.selection import select_namespaces
from job.model.kinds import Kind, ReplicasHandler
from job.model.kinds.field import FieldHandler
from job.model.kinds.rows import parse_rows
from job.model.marks import (
    ANNOTATION_HOLD,
    ANNOTATION_HOLD_ACCOUNT,
    ANNOTATION_HOLD_EXCLUDED,
    ANNOTATION_HOLD_KINDS,
    LABEL_HOLD,
)
from tests.unit.factories import namespaces, policy, settings, workload

NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)


def select(policies, found, *, settings, now):
    return select_namespaces(policies, namespaces=found, found={}, settings=settings, now=now)


def marked(*found: hold.Mark) -> dict[str, str]:
    return {m.namespace: m.mode for m in found}


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({}, {"shop-v1": "deny"}, id="default-deny"),
    pytest.param({"hold": "warn"}, {"shop-v1": "warn"}, id="warn"),
    pytest.param({"hold": "off"}, {}, id="off"),
    pytest.param({"dry_run": True}, {}, id="dry-run-marks-nothing"),
    pytest.param({"suspend": True}, {}, id="suspended-marks-nothing"),
])
def test_only_a_held_namespace_is_marked_as_its_policy_says(spec, expected):
    found = namespaces("shop-v1", "shop-v2", "other")
    selection = select([policy("p", "shop-", ["v2"], **spec)], found, settings=settings(), now=NOW)
    assert marked(*hold.marks(found, selection, now=NOW)) == expected


def test_a_mark_is_written_once_and_lifted_first():
    found = namespaces("shop-v1", "shop-v2")
    selection = select([policy("p", "shop-", ["v2"])], found, settings=settings(), now=NOW)
    [first] = hold.marks(found, selection, now=NOW)
    assert dict(first.pairs)[LABEL_HOLD] == "deny"
    assert "kubectl nsscaler wake -n shop-v1 --for 1h" in dict(first.pairs)[ANNOTATION_HOLD]
    assert dict(first.pairs)[ANNOTATION_HOLD_KINDS] == " deployments.apps statefulsets.apps "
    steady = [dataclasses.replace(ns, hold=first.pairs) if ns.name == "shop-v1" else ns for ns in found]
    assert hold.marks(steady, selection, now=NOW) == []  # as it was: nothing to write
    # v1 kept running, v2 held: the lift comes before the new mark
    moved = select([policy("p", "shop-", ["v1"])], steady, settings=settings(), now=NOW)
    assert [(m.namespace, m.mode) for m in hold.marks(steady, moved, now=NOW)] == [("shop-v1", "lifted"),
                                                                                   ("shop-v2", "deny")]
    assert hold.marks(steady, moved, now=NOW)[0].body()["metadata"]["labels"] == {LABEL_HOLD: None}
    assert [m.namespace for m in hold.lifted(steady)] == ["shop-v1"]


@pytest.mark.parametrize(("wake", "hosts", "says"), [
    pytest.param({}, ("shop.example",), "kubectl nsscaler wake -n shop-v1 --for 1h", id="a-person-wakes-it"),
    pytest.param({"on_request": True}, ("a.shop.example", "b.shop.example"),
                 "or open a.shop.example or b.shop.example in a browser: it wakes on request", id="its-hosts"),
    pytest.param({"on_request": True}, ("a.x", "b.x", "c.x", "d.x"),
                 "open a.x or b.x or c.x (or another of its 4 hosts)", id="at-most-three-hosts"),
    pytest.param({"on_request": True}, (), "or open its web address in a browser", id="no-route-read-yet"),
    pytest.param({"max_duration": "30m"}, (), "--for 30m", id="no-longer-than-the-policy-allows"),
])
def test_the_words_say_how_to_wake_it_and_where_it_wakes_on_request(wake, hosts, says):
    found = namespaces("shop-v1", "shop-v2")
    selection = select([policy("p", "shop-", ["v2"], wake=wake)], found, settings=settings(), now=NOW)
    [mark] = hold.marks(found, selection, now=NOW, hosts={"shop-v1": hosts, "shop-v2": ("awake.example",)})
    words = dict(mark.pairs)[ANNOTATION_HOLD]
    assert says in words and "NSScaler p" in words, words
    if not wake.get("on_request"):
        assert "browser" not in words  # a host is named only where opening it wakes the namespace


def test_the_hosts_are_the_hostnames_of_each_namespace_s_routes():
    def route(ns, *names):
        return {"metadata": {"namespace": ns, "name": "r"}, "spec": {"hostnames": list(names)}}

    assert routes.hosts([route("a", "y.example", "x.example"), route("a", "x.example"), route("b"),
                  {"metadata": {"namespace": "c", "name": "r"}, "spec": {}}]) == {"a": ("x.example", "y.example")}


def test_the_mark_names_the_run_s_own_account_and_a_run_that_does_not_know_it_keeps_it():
    found = namespaces("shop-v1", "shop-v2")
    selection = select([policy("p", "shop-", ["v2"])], found, settings=settings(), now=NOW)
    account = hold.account_of("nsscaler")
    assert account == "system:serviceaccount:nsscaler:nsscaler"
    [mark] = hold.marks(found, selection, now=NOW, account=account)
    assert dict(mark.pairs)[ANNOTATION_HOLD_ACCOUNT] == account
    steady = [dataclasses.replace(ns, hold=mark.pairs) if ns.name == "shop-v1" else ns for ns in found]
    # a run by hand (no own namespace) leaves the mark as it is: nsscaler's restores stay let by
    assert hold.marks(steady, selection, now=NOW, account=hold.account_of(None)) == []
    assert hold.marks(steady, selection, now=NOW, account=account) == []


def test_the_mark_names_the_excluded_workloads_and_is_written_again_only_when_they_change():
    """A /scale request carries no annotation: the mark names the namespace's opted-out workloads for the hold."""
    found = namespaces("shop-v1", "shop-v2")
    selection = select([policy("p", "shop-", ["v2"])], found, settings=settings(), now=NOW)
    workloads = [workload("shop-v1", "keep", excluded=True), workload("shop-v1", "web"),
                 workload("shop-v1", "keep-5d8f", kind=Kind.REPLICASET, excluded=True, controller="Deployment",
                          controller_name="keep"),  # its owner's copy, renamed by each rollout
                 workload("shop-v2", "api", kind=Kind.STATEFULSET, excluded=True)]
    opted_out = hold.excluded(workloads)
    assert opted_out == {"shop-v1": ["deployments.apps/keep"], "shop-v2": ["statefulsets.apps/api"]}
    [first] = hold.marks(found, selection, now=NOW, opted_out=opted_out)
    assert dict(first.pairs)[ANNOTATION_HOLD_EXCLUDED] == " deployments.apps/keep "
    steady = [dataclasses.replace(ns, hold=first.pairs) if ns.name == "shop-v1" else ns for ns in found]
    assert hold.marks(steady, selection, now=NOW, opted_out=opted_out) == []  # as it was: nothing to write
    [none_left] = hold.marks(steady, selection, now=NOW, opted_out={})
    assert none_left.body()["metadata"]["annotations"][ANNOTATION_HOLD_EXCLUDED] is None
    assert none_left.body()["metadata"]["labels"] == {LABEL_HOLD: "deny"}


@pytest.mark.parametrize(("names", "limit", "kept", "left"), [
    pytest.param([], 20, [], [], id="none"),
    pytest.param(["a/x", "a/y"], 20, ["a/x", "a/y"], [], id="within"),
    pytest.param(["a/x", "a/y"], 9, ["a/x", "a/y"], [], id="exactly the bound: ' a/x a/y ' is 9"),
    pytest.param(["a/x", "a/y", "a/z"], 9, ["a/x", "a/y"], ["a/z"], id="past it: the first kept, the rest named"),
    pytest.param(["a/very-long"], 5, [], ["a/very-long"], id="not even one"),
])
def test_the_excluded_names_are_bounded_keeping_the_first(names, limit, kept, left):
    assert hold.bounded(names, limit) == (kept, left)
    if kept:
        assert len(f" {' '.join(kept)} ") <= limit


def test_past_the_bound_the_mark_names_what_fits_and_says_what_it_left_out():
    """The mark stays inside a Namespace's annotation budget: the first names kept (the hold opens for no more than
    it names), the others carried by the Mark to be reported; under the bound nothing is left out."""
    found = namespaces("shop-v1", "shop-v2")
    selection = select([policy("p", "shop-", ["v2"])], found, settings=settings(), now=NOW)
    many = [f"deployments.apps/{'w' * 200}-{i:04}" for i in range(400)]
    [mark] = hold.marks(found, selection, now=NOW, opted_out={"shop-v1": many})
    carried = dict(mark.pairs)[ANNOTATION_HOLD_EXCLUDED]
    assert len(carried) <= hold.MAX_EXCLUDED_CHARS < len(f" {' '.join(many)} ")
    assert carried.split() + list(mark.left_out) == many
    [few] = hold.marks(found, selection, now=NOW, opted_out={"shop-v1": many[:3]})
    assert few.left_out == ()


def test_the_kinds_the_hold_does_not_cover_are_those_without_a_catalogue_row_or_a_row_the_server_reads():
    """Rule 7: a plain /scale kind and a row of the --kind-rows file are not held between runs; a catalogue kind,
    a built-in one and a row the API server reads (an NSScalerKind's) are."""
    file_row, team_row = parse_rows([
        {"kind": "Paused.test.nsscaler.io", "versions": ["v1"],
         "freeze": {"method": "field", "path": "spec.paused", "value": True}},
        {"kind": "Sleeper.test.nsscaler.io", "versions": ["v1"],
         "freeze": {"method": "annotation", "key": "example.com/h", "value": "on"}}], origin="test")[0]
    paused = FieldHandler(file_row.kind, "test.nsscaler.io", "v1", "pauseds", where=("spec", "paused"),
                          value=True, row=file_row)
    sleeper = FieldHandler(team_row.kind, "test.nsscaler.io", "v1", "sleepers",
                           where=("metadata", "annotations", "example.com/h"), value="on", row=team_row)
    fleet = ReplicasHandler(Kind("Fleet.test.nsscaler.io"), "test.nsscaler.io", "v1", "fleets")
    found = [workload("a", "web"), workload("a", "p", handler=paused), workload("a", "s", handler=sleeper),
             workload("b", "f", handler=fleet), workload("b", "s", handler=sleeper)]
    assert hold.unheld(found, [file_row]) == {"a": ["Paused.test.nsscaler.io"], "b": ["Fleet.test.nsscaler.io"]}
    assert hold.unheld(found) == {"b": ["Fleet.test.nsscaler.io"]}
