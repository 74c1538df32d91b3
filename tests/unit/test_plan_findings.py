"""What the planner says beside each verb, rule by rule (job/decide/plan.py): why a workload comes back or is
frozen, which policy a problem is told to, when a change is only a dry run, which workloads must be read whole,
and what a re-plan given part of a run's findings still decides. The words are asserted whole: they are what a
user reads in the run's log lines and Events."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from job.decide.actions import Verb
from job.decide.plan import PolicyPlan, kinds_in_use, make_plan, select_from_workloads, sizes_needed
from job.model.activity import Change
from job.model.autoscalers import SCALED_OBJECTS
from job.model.kinds import Kind
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY
from job.model.policy import InvalidPolicy
from job.model.wake import Wake
from tests.unit.factories import namespaces, policy, settings, workload

NOW = dt.datetime(2026, 12, 4, 9, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
FAMILY = namespaces("shop-v1", "shop-v2", "shop-v3", "other", "kube-system")
#: frozen by p with 4 replicas recorded
FROZEN = workload("shop-v1", size=0, original="4", scaled_by="p")


def plan_of(policies, workloads, *, wakes=(), **overrides):
    """The plan of one run at NOW, its selection made with the Wakes (as `job.decide.decision` does)."""
    run_settings = settings(**overrides)
    chosen = select_from_workloads(policies, namespaces=FAMILY, workloads=workloads, settings=run_settings, now=NOW,
                                   wakes=wakes)
    return make_plan(policies, namespaces=FAMILY, workloads=workloads, settings=run_settings, now=NOW,
                     selection=chosen, excluded_owners=frozenset())


def demo_wake(namespace: str) -> Wake:
    return Wake(namespace=namespace, name="w", created=NOW - HOUR, requested_end=NOW + 2 * HOUR,
                requested_by="alice", reason="demo", status={})


@pytest.mark.parametrize(("policies", "wakes", "last_change", "reason"), [
    pytest.param([], (), None, "policy p no longer exists", id="its-policy-is-gone"),
    pytest.param([policy("p", "shop-", until="2026-12-01T00:00:00Z")], (), None,
                 "p holds nothing: expired at 2026-12-01T00:00:00Z (until)", id="its-policy-expired"),
    pytest.param([policy("p", "shop-")], [demo_wake("shop-v1")], None,
                 "woken by alice until 2026-12-04T11:00Z: demo", id="woken"),
    pytest.param([policy("p", "shop-"), policy("q", "shop-", ["v1"])], (), None,
                 "namespace is active for q", id="active-for-another-policy"),
    pytest.param([policy("p", "shop-"), policy("q", "shop-", ["v1"]), policy("r", "shop-", ["v1"])], (), None,
                 "namespace is active for q, r", id="active-for-two-policies"),
    pytest.param([policy("p", "shop-", keep_recent=1)], (), Change(NOW - 24 * HOUR, "helm"),
                 "kept: the most recently active (last change 2026-12-03T09:00Z by helm)",
                 id="kept-as-the-most-recently-active"),
    pytest.param([policy("p", "team-")], (), None, "namespace left the scope", id="left-the-scope"),
    pytest.param([policy("p", "shop-", kinds=["CronJob"])], (), None, "Deployment is no longer selected by p",
                 id="its-kind-is-no-longer-selected"),
])
def test_a_restore_says_why_it_comes_back(policies, wakes, last_change, reason):
    frozen = dataclasses.replace(FROZEN, last_user_change=last_change)
    (action,) = plan_of(policies, [frozen], wakes=wakes).actions
    assert (action.verb, action.policy, action.after, action.reason, action.dry_run) == (
        Verb.RESTORE, "p", 4, reason, False)


@pytest.mark.parametrize(("policies", "found", "verb", "reason", "dry_run"), [
    pytest.param([policy("p", "shop-")], workload("shop-v1", size=3), Verb.FREEZE,
                 "held by p: not listed in active_namespace_suffixes", False, id="first-freeze"),
    pytest.param([policy("p", "shop-", keep_recent=2)], workload("shop-v3", size=3), Verb.FREEZE,
                 "held by p: not listed in active_namespace_suffixes and not one of the 2 most recently active",
                 False, id="first-freeze-of-a-keep-recent-policy"),
    pytest.param([policy("p", "shop-")], workload("shop-v1", size=5, original="4", scaled_by="p"), Verb.FREEZE,
                 "scaled up again during the freeze", False, id="scaled-up-during-the-freeze"),
    pytest.param([policy("p", "shop-", dry_run=True)], workload("shop-v1", size=3), Verb.FREEZE,
                 "held by p: not listed in active_namespace_suffixes", True, id="a-dry-run-policy-only-plans"),
    pytest.param([policy("p", "shop-")], workload("shop-v1", size=0, original="4", scaled_by="gone"), Verb.ADOPT,
                 "record passes from gone to p", False, id="record-of-a-gone-policy-is-adopted"),
    pytest.param([policy("p", "shop-", dry_run=True)], workload("shop-v1", size=0, original="4", scaled_by="gone"),
                 Verb.ADOPT, "record passes from gone to p", True, id="adoption-by-a-dry-run-policy-only-plans"),
])
def test_a_held_workload_is_frozen_or_adopted_to_zero_and_says_why(policies, found, verb, reason, dry_run):
    (action,) = plan_of(policies, [found]).actions
    assert (action.verb, action.policy, action.after, action.reason, action.dry_run) == (
        verb, "p", 0, reason, dry_run)


@pytest.mark.parametrize(("policies", "run_dry", "dry_run"), [
    pytest.param([], False, False, id="policy-gone-run-for-real"),
    pytest.param([], True, True, id="policy-gone-run-dry"),
    pytest.param([policy("p", "shop-", ["v1"])], False, False, id="policy-for-real"),
    pytest.param([policy("p", "shop-", ["v1"], dry_run=True)], False, True, id="dry-run-policy"),
    pytest.param([policy("p", "shop-", ["v1"])], True, True, id="run-dry"),
])
def test_a_restore_is_a_dry_run_when_the_run_or_its_policy_is(policies, run_dry, dry_run):
    (action,) = plan_of(policies, [FROZEN], dry_run=run_dry).actions
    assert (action.verb, action.dry_run) == (Verb.RESTORE, dry_run)


@pytest.mark.parametrize(("policies", "found", "policy_told", "message"), [
    pytest.param([], workload("shop-v1", size=2, scaled_by="p"), "p",
                 f"deployment/web in shop-v1 carries {ANNOTATION_SCALED_BY}=p but no record "
                 f"({ANNOTATION_ORIGINAL_REPLICAS}): nsscaler does not know what to give back", id="a-stray-mark"),
    pytest.param([policy("q", "shop-")], workload("shop-v1", size=0, original="four", scaled_by="p"), "q",
                 f"malformed record on deployment/web in shop-v1: {ANNOTATION_ORIGINAL_REPLICAS}=",
                 id="a-malformed-record-is-told-to-the-holder"),
    pytest.param([], workload("shop-v1", size=0, original="four", scaled_by="p"), "p",
                 f"malformed record on deployment/web in shop-v1: {ANNOTATION_ORIGINAL_REPLICAS}=",
                 id="a-malformed-record-is-told-to-the-policy-that-froze-it"),
    pytest.param([policy("p", "shop-")], workload("shop-v1", size=None), "p",
                 "deployment/web in shop-v1: could not read its size", id="a-held-workload-of-unknown-size"),
    pytest.param([], workload("shop-v1", size=None, original="3", scaled_by="p"), "p",
                 "deployment/web in shop-v1: could not read its size", id="a-recorded-workload-of-unknown-size"),
    pytest.param([policy("q", "shop-"), policy("p", "shop-")], workload("shop-v1", handler=SCALED_OBJECTS), "p",
                 "scaledobject/web in shop-v1: left as it is: ", id="an-unexpected-error-is-told-to-the-first-holder"),
    pytest.param([policy("p", "shop-", ["v3"])], workload("shop-v3", handler=SCALED_OBJECTS, scaled_by="gone"),
                 "gone", "scaledobject/web in shop-v3: left as it is: ",
                 id="an-unexpected-error-where-nobody-holds-is-told-to-its-marks-policy"),
    pytest.param([policy("p", "shop-", ["v3"])], workload("shop-v3", handler=SCALED_OBJECTS), "",
                 "scaledobject/web in shop-v3: left as it is: ", id="an-unexpected-error-where-nobody-holds"),
])
def test_a_problem_names_the_workload_and_is_told_to_the_right_policy(policies, found, policy_told, message):
    plan = plan_of(policies, [found])
    assert plan.actions == []
    (problem,) = plan.problems
    assert (problem.policy, problem.workload) == (policy_told, found)
    assert problem.message.startswith(message), problem.message


def test_judging_one_workload_fails_alone():
    """A ScaledObject's view handed to the planner as a workload (it has no workload handler) is a problem on that
    one object; the other workloads of the run are still planned."""
    plan = plan_of([policy("p", "shop-")], [workload("shop-v1", handler=SCALED_OBJECTS), workload("shop-v2")])
    assert [(a.verb, a.workload.namespace) for a in plan.actions] == [(Verb.FREEZE, "shop-v2")]
    (problem,) = plan.problems
    assert "is not a workload" in problem.message


def test_only_the_workloads_a_decision_needs_are_read_whole():
    """In listing order, as the run reads them: the held one and the recorded one, never one in a protected
    namespace (even with a record), one nobody holds, one of known size, or one in a namespace not listed."""
    workloads = [
        workload("kube-system", "sys", size=None, original="2", scaled_by="p"),
        workload("shop-v1", "held", size=None),
        workload("other", "loose", size=None),
        workload("elsewhere", "unlisted", size=None),
        workload("shop-v2", "known", size=3),
        workload("other", "recorded", size=None, original="2", scaled_by="p"),
    ]
    policies = [policy("p", "shop-"), policy("k", "kube-")]
    chosen = select_from_workloads(policies, namespaces=FAMILY, workloads=workloads, settings=settings(), now=NOW)
    needed = sizes_needed(workloads, selection=chosen, excluded_owners=frozenset())
    assert [w.name for w in needed] == ["held", "recorded"]


@pytest.mark.parametrize("given", [
    pytest.param("selection", id="selection-given"),
    pytest.param("excluded_owners", id="excluded-owners-given"),
])
def test_a_replan_of_workloads_read_once_plans_every_one(given):
    """A re-plan hands the workloads as an iterator (read once) with part of the run's findings: whatever the
    planner still has to work out from them must not use them up before it judges them."""
    workloads = [dataclasses.replace(workload(f"shop-v{n}", name), last_user_change=Change(NOW - n * HOUR, "helm"))
                 for n, name in ((1, "a"), (2, "b"), (3, "c"))]
    policies = [policy("p", "shop-", keep_recent=1)]  # ranking activity reads the workloads too
    run_settings = settings()
    found = {"selection": select_from_workloads(policies, namespaces=FAMILY, workloads=workloads,
                                                settings=run_settings, now=NOW),
             "excluded_owners": frozenset()}
    plan = make_plan(policies, namespaces=FAMILY, workloads=iter(workloads), settings=run_settings, now=NOW,
                     **{given: found[given]})
    assert sorted(a.workload.name for a in plan.actions if a.verb is Verb.FREEZE) == ["b", "c"]


def test_a_replan_with_the_selection_of_fewer_policies_reports_the_others_holding_nothing():
    """A policy the given selection does not know (created since it was made) holds nothing in this plan."""
    run_settings = settings()
    earlier = select_from_workloads([policy("p", "shop-")], namespaces=FAMILY, workloads=[], settings=run_settings,
                                    now=NOW)
    plan = make_plan([policy("p", "shop-"), policy("q", "shop-", ["v1"])], namespaces=FAMILY, workloads=[],
                     settings=run_settings, now=NOW, selection=earlier, excluded_owners=frozenset())
    assert plan.policies["q"] == PolicyPlan(name="q", generation=1)
    assert plan.policies["p"].held == ["shop-v1", "shop-v2", "shop-v3"]


def test_the_kinds_listed_whole_are_those_a_serving_policy_freezes():
    """A suspended policy freezes nothing and an invalid one is never acted on: their kinds are LISTed only for
    the records nsscaler left."""
    policies = [policy("p", "shop-", kinds=["Deployment"]), policy("q", "shop-", kinds=["CronJob"], suspend=True),
                policy("r", "team-", kinds=["StatefulSet", "Job"]), InvalidPolicy("s", 1, "spec: broken")]
    assert kinds_in_use(policies) == {Kind.DEPLOYMENT, Kind.STATEFULSET, Kind.JOB}


def test_each_valid_policy_gets_its_findings_with_what_it_left_alone_counted():
    """Per policy, after an invalid one too: its generation, what it holds and lists, and the workloads it left
    as they are, counted by why (already frozen, excluded, kept frozen by `restore: false`)."""
    policies = [InvalidPolicy("a", 3, "spec: broken"), policy("p", "shop-", ["v3"]),
                policy("q", "team-", restore=False)]
    workloads = [workload("shop-v1", "frozen", size=0, original="2", scaled_by="p"),
                 workload("shop-v2", "opted-out", excluded=True),
                 workload("other", "kept", size=0, original="2", scaled_by="q")]
    plan = plan_of(policies, workloads)
    assert plan.actions == [] and plan.problems == []
    assert plan.policies == {
        "p": PolicyPlan(name="p", generation=1, held=["shop-v1", "shop-v2"], active=["shop-v3"], unchanged=1,
                        excluded=1, kept_frozen=0),
        "q": PolicyPlan(name="q", generation=1, held=[], active=[], unchanged=0, excluded=0, kept_frozen=1),
    }


def test_a_change_stamped_in_the_future_makes_no_namespace_the_most_recently_active():
    """managedFields times can be written by anyone who may update the object: one in 2099 is no activity, so
    the namespace changed an hour ago is the one kept."""
    workloads = [dataclasses.replace(workload("shop-v1", "forged"), last_user_change=Change(NOW.replace(year=2099),
                                                                                          "someone")),
                 dataclasses.replace(workload("shop-v2"), last_user_change=Change(NOW - HOUR, "helm"))]
    plan = make_plan([policy("p", "shop-", keep_recent=1)], namespaces=FAMILY, workloads=workloads,
                     settings=settings(), now=NOW)
    assert plan.policies["p"].held == ["shop-v1", "shop-v3"]
    assert [(a.verb, a.workload.name) for a in plan.actions] == [(Verb.FREEZE, "forged")]
