"""A woken namespace's HTTPRoutes come back within `restore_wait` even when its app never becomes available
(`job.decide.routes`, rule 5): the wait is marked on the route, the route is given back once it has passed, and
what was not available is named in the policy's status and a Warning Event."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest

from job.decide.decision import Decision, with_late_routes
from job.decide.events import REASON_TIER_LATE, _tiers
from job.decide.outcome import PolicyOutcome
from job.decide.plan import Plan, PolicyPlan
from job.decide.routes import RouteWorld, finalizers_to_remove, not_awake, plan_routes, waits_of
from job.decide.status import build_status
from job.decide.tiers import DEFAULT_RESTORE_WAIT, ROUTES_TIER
from job.model.kinds import Kind
from job.model.kinds.httproute import Waker
from job.model.marks import (
    ANNOTATION_ORIGINAL_RULES,
    ANNOTATION_ROUTE_WAITING,
    ANNOTATION_SCALED_BY,
    FINALIZER_ROUTES,
)
from job.model.policy import Lifecycle
from job.model.stamps import utc_stamp
from tests.unit.factories import policy, workload

NOW = dt.datetime(2026, 12, 5, 12, tzinfo=dt.UTC)
RULES = [{"backendRefs": [{"name": "web", "port": 80}]}]
WAKER = Waker("nsscaler")
BROKEN = {"shop-v1": ("deployment/web",)}


def pointed(*, since: dt.datetime | None = None, by: str = "p", name: str = "shop") -> dict:
    notes = {ANNOTATION_ORIGINAL_RULES: json.dumps(RULES), ANNOTATION_SCALED_BY: by}
    if since is not None:
        notes[ANNOTATION_ROUTE_WAITING] = utc_stamp(since)
    return {"metadata": {"name": name, "namespace": "shop-v1", "resourceVersion": "7", "annotations": notes},
            "spec": {"rules": [{"backendRefs": [WAKER.backend()]}]}}


def world(*, waits: dict[str, dt.timedelta] | None = None, opted: dict[str, str] | None = None,
          blocking: dict[str, tuple[str, ...]] | None = None) -> RouteWorld:
    return RouteWorld(opted=opted or {}, blocking=BROKEN if blocking is None else blocking,
                      waits={"p": dt.timedelta(minutes=5)} if waits is None else waits, now=NOW)


@pytest.mark.parametrize(("since", "waits", "verbs", "late"), [
    pytest.param(None, None, ["mark"], False, id="the-first-run-that-finds-it-waiting-marks-when-the-wait-began"),
    pytest.param(NOW - dt.timedelta(minutes=4), None, [], False, id="within-restore_wait-it-keeps-waiting"),
    pytest.param(NOW - dt.timedelta(minutes=5), None, ["restore"], True, id="restore_wait-passed-it-comes-back"),
    pytest.param(NOW - dt.timedelta(seconds=30), {"p": dt.timedelta(seconds=10)}, ["restore"], True,
                 id="the-pointing-policy-s-own-restore_wait"),
    pytest.param(NOW - DEFAULT_RESTORE_WAIT + dt.timedelta(seconds=1), {}, [], False,
                 id="a-gone-policy-waits-the-default-not-forever"),
    pytest.param(NOW - DEFAULT_RESTORE_WAIT, {}, ["restore"], True, id="a-gone-policy-s-route-comes-back"),
])
def test_a_woken_namespace_s_route_waits_at_most_restore_wait(since, waits, verbs, late):
    plan = plan_routes([pointed(since=since)], world=world(waits=waits), waker=WAKER)
    assert [s.verb for s in plan.steps] == verbs
    assert bool(plan.late) == late
    assert plan.waiting == ([] if late else ["shop-v1"])
    if verbs == ["mark"]:
        assert plan.steps[0].body["metadata"]["annotations"] == {ANNOTATION_ROUTE_WAITING: utc_stamp(NOW)}
    if late:
        (t,) = plan.late
        assert (t.namespace, t.policy, t.tier, t.routes, t.not_ready, t.since) == (
            "shop-v1", "p", ROUTES_TIER, ("shop",), ("deployment/web",), since)
        body = plan.steps[0].body
        assert body["spec"] == {"rules": RULES}  # exactly as before, and every mark of ours goes with the record
        assert body["metadata"]["annotations"] == {ANNOTATION_ORIGINAL_RULES: None, ANNOTATION_SCALED_BY: None,
                                                   ANNOTATION_ROUTE_WAITING: None}
        assert plan.ungrants == ["shop-v1"]


def test_an_awake_namespace_s_route_comes_back_at_once_and_is_not_late():
    plan = plan_routes([pointed(since=NOW - dt.timedelta(hours=3))], world=world(blocking={"shop-v1": ()}),
                       waker=WAKER)
    assert [s.verb for s in plan.steps] == ["restore"] and plan.late == []


def test_a_namespace_held_again_loses_the_mark_so_the_next_wake_waits_afresh():
    plan = plan_routes([pointed(since=NOW - dt.timedelta(hours=3))], world=world(opted={"shop-v1": "p"}),
                       waker=WAKER)
    (step,) = plan.steps
    assert step.verb == "mark" and step.body["metadata"]["annotations"] == {ANNOTATION_ROUTE_WAITING: None}
    assert plan.late == [] and plan.waiting == []


def test_a_deleted_policy_s_finalizer_goes_once_its_late_route_is_back():
    leaving = dataclasses.replace(policy("p", "shop-"), life=Lifecycle(finalizers=(FINALIZER_ROUTES,)))
    route = pointed(since=NOW - dt.timedelta(minutes=5))
    plan = plan_routes([route], world=world(waits=waits_of([leaving])), waker=WAKER)
    restored = {(s.namespace, s.name) for s in plan.steps if s.verb == "restore"}
    assert finalizers_to_remove([route], [leaving], restored=restored, pointed_by=()) == ["p"]


def test_what_stands_in_the_way_is_named_and_a_frozen_one_says_so():
    down = dataclasses.replace(workload("shop-v1", "web"), available=False)
    frozen = workload("shop-v1", "db", original="2")
    fine = dataclasses.replace(workload("shop-v1", "ok"), available=True)
    found = not_awake([down, frozen, fine, dataclasses.replace(workload("shop-v1", "x", excluded=True),
                                                               available=False)], ["shop-v1", "shop-v3"])
    assert found == {"shop-v1": ("deployment/web", "deployment/db (still frozen)"), "shop-v3": ()}
    replicas = dataclasses.replace(workload("shop-v3", "web-1", kind=Kind.REPLICASET, controller="Deployment"),
                                   available=False)
    assert not_awake([replicas, dataclasses.replace(workload("shop-v3"), available=True)], ["shop-v3"]) == {
        "shop-v3": ("replicaset/web-1",)}  # only a controlled one stands: it is named, not waited on silently
    assert not_awake([replicas, dataclasses.replace(down, namespace="shop-v3")],
                     ["shop-v3"]) == {"shop-v3": ("deployment/web",)}


def test_a_late_route_is_in_the_policy_s_status_and_a_warning_event():
    (late,) = plan_routes([pointed(since=NOW - dt.timedelta(minutes=6))], world=world(), waker=WAKER).late
    plan = Plan(actions=[], problems=[], policies={"p": PolicyPlan(name="p")}, held_by={})
    decision = with_late_routes(Decision(plan=plan, problems=()), [late, dataclasses.replace(late, policy="gone")])
    found = decision.plan.policies["p"].late
    assert found == [late]
    outcome = PolicyOutcome(name="p", late=found)
    status = build_status(outcome, now=NOW, list_limit=20)
    assert status["restoredLate"] == [{"namespace": "shop-v1", "tier": ROUTES_TIER, "notReady": ["deployment/web"],
                                       "since": utc_stamp(NOW - dt.timedelta(minutes=6)), "routes": ["shop"]}]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")["message"]
    assert "HTTPRoute shop restored after restore_wait" in ready and "deployment/web" in ready
    ((reason, message, warning),) = _tiers(outcome)
    assert (reason, warning) == (REASON_TIER_LATE, True)
    assert message == ("shop-v1: restore HTTPRoute shop came back after restore_wait, before deployment/web was "
                       "available")


def test_a_release_s_bounded_wait_wins_over_the_policy_as_it_is():
    released = policy("p", "shop-", restore_wait="1s")
    assert waits_of([released, policy("p", "shop-", restore_wait="1h")]) == {"p": dt.timedelta(seconds=1)}
