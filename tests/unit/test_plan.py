"""The planner's decisions, rule by rule, as tables."""

from __future__ import annotations

import pytest

from job.decide.plan import make_plan
from job.model.kinds import ReplicasHandler
from job.model.marks import (
    ANNOTATION_ORIGINAL_REPLICAS,
    ANNOTATION_ORIGINAL_SUSPEND,
    ANNOTATION_SCALED_BY,
    LABEL_SCALED,
)
from job.model.workloads import Kind
from tests.unit.factories import apply_plan, namespaces, policy, settings, workload

FAMILY = namespaces("shop-v1", "shop-v2", "shop-v3", "other")


def verbs(plan):
    return sorted((a.verb.value, a.workload.namespace, a.workload.name) for a in plan.actions)


@pytest.mark.parametrize(
    ("policies", "workloads", "expected"),
    [
        pytest.param(
            [policy("p", "shop-", ["v3"])],
            [workload("shop-v1"), workload("shop-v3"), workload("other")],
            [("freeze", "shop-v1", "web")],
            id="freeze-only-held-namespaces",
        ),
        pytest.param(
            [policy("p", "shop-", ["v3"])],
            [workload("shop-v1", size=0)],
            [],
            id="already-at-zero-without-record-is-left-alone",
        ),
        pytest.param(
            [policy("p", "shop-", ["v3"])],
            [workload("shop-v1", size=0, original="4", scaled_by="p")],
            [],
            id="already-frozen-is-unchanged",
        ),
        pytest.param(
            [policy("p", "shop-", ["v3"])],
            [workload("shop-v1", size=5, original="4", scaled_by="p")],
            [("freeze", "shop-v1", "web")],
            id="scaled-up-during-freeze-is-frozen-again",
        ),
        pytest.param(
            [policy("p", "shop-", ["v1"])],
            [workload("shop-v1", size=0, original="4", scaled_by="p")],
            [("restore", "shop-v1", "web")],
            id="allowed-again-is-restored",
        ),
        pytest.param(
            [],
            [workload("shop-v1", size=0, original="4", scaled_by="p")],
            [("restore", "shop-v1", "web")],
            id="policy-deleted-restores",
        ),
        pytest.param(
            [policy("p", "shop-", ["v3"], restore=False)],
            [workload("other", size=0, original="4", scaled_by="p")],
            [],
            id="restore-false-keeps-frozen",
        ),
        pytest.param(
            [policy("p", "shop-", ["v3"], suspend=True)],
            [workload("shop-v1"), workload("shop-v2", size=0, original="1", scaled_by="p")],
            [],
            id="suspended-neither-freezes-nor-restores",
        ),
        pytest.param(
            [policy("p", "shop-", ["v3"])], [workload("shop-v1", excluded=True)], [], id="excluded-is-skipped"
        ),
        pytest.param(
            [policy("p", "shop-", ["v3"]), policy("q", "shop-", ["v1"])],
            [workload("shop-v1"), workload("shop-v3"), workload("shop-v2")],
            [("freeze", "shop-v2", "web")],
            id="active-wins",
        ),
        pytest.param(
            [policy("b", "shop-"), policy("a", "shop-")],
            [workload("shop-v2", size=0, original="2", scaled_by="gone")],
            [("adopt", "shop-v2", "web")],
            id="record-passes-to-current-holder",
        ),
        pytest.param(
            [policy("p", "shop-")], [workload("shop-v1", kind=Kind.CRONJOB, size=1)], [], id="cronjob-is-opt-in"
        ),
        pytest.param(
            [policy("p", "shop-", kinds=["CronJob"])],
            [workload("shop-v1", kind=Kind.CRONJOB, size=1), workload("shop-v1", "dep")],
            [("freeze", "shop-v1", "web")],
            id="kinds-limit-what-is-frozen",
        ),
        pytest.param(
            [policy("p", "shop-", kinds=["CronJob"])],
            [workload("shop-v1", "dep", size=0, original="3", scaled_by="p")],
            [("restore", "shop-v1", "dep")],
            id="kind-no-longer-selected-is-restored",
        ),
        pytest.param(
            [policy("p", "shop-", kinds=["ReplicaSet", "Deployment"])],
            [workload("shop-v1", "solo", 2, kind=Kind.REPLICASET),
             workload("shop-v1", "web-5d8f", 2, kind=Kind.REPLICASET, controller="Deployment")],
            [("freeze", "shop-v1", "solo")],
            id="a-deployments-replicaset-is-never-frozen-on-its-own",
        ),
        pytest.param(
            [policy("p", "shop-", kinds=["ReplicationController"])],
            [workload("shop-v1", "rc", 1, kind=Kind.REPLICATIONCONTROLLER)],
            [("freeze", "shop-v1", "rc")],
            id="standalone-replicationcontroller-is-frozen",
        ),
        pytest.param(
            [policy("p", "shop-", kinds=["CronJob"])],
            [workload("shop-v1", "nightly-29", 1, kind=Kind.JOB, controller="CronJob"),
             workload("shop-v1", "oneoff", 1, kind=Kind.JOB)],
            [("freeze", "shop-v1", "nightly-29")],
            id="cronjob-policy-suspends-the-running-jobs-of-its-cronjobs",
        ),
        pytest.param(
            [policy("p", "shop-", kinds=["Job"])],
            [workload("shop-v1", "nightly-29", 1, kind=Kind.JOB, controller="CronJob"),
             workload("shop-v1", "oneoff", 1, kind=Kind.JOB), workload("shop-v1", "done", 0, kind=Kind.JOB)],
            [("freeze", "shop-v1", "nightly-29"), ("freeze", "shop-v1", "oneoff")],
            id="job-policy-suspends-running-jobs-whoever-owns-them-and-skips-finished-ones",
        ),
        pytest.param(
            [policy("p", "shop-", kinds=["CronJob"])],
            [workload("shop-v1", "nightly", 1, kind=Kind.CRONJOB, excluded=True),
             workload("shop-v1", "nightly-29", 1, kind=Kind.JOB, controller="CronJob", controller_name="nightly"),
             workload("shop-v2", "nightly-29", 1, kind=Kind.JOB, controller="CronJob", controller_name="nightly"),
             workload("shop-v1", "hourly-7", 1, kind=Kind.JOB, controller="CronJob", controller_name="hourly")],
            [("freeze", "shop-v1", "hourly-7"), ("freeze", "shop-v2", "nightly-29")],
            id="an-excluded-cronjob-keeps-its-own-jobs-running-only",
        ),
        pytest.param(
            [policy("p", "shop-", ["v1"], kinds=["ReplicaSet"])],
            [workload("shop-v1", "rs", 0, kind=Kind.REPLICASET, controller="Deployment", original="2", scaled_by="p")],
            [],
            id="a-record-a-deployment-copied-onto-its-replicaset-is-ignored",
        ),
    ],
)
def test_decisions(policies, workloads, expected):
    assert verbs(make_plan(policies, namespaces=FAMILY, workloads=workloads, settings=settings())) == expected


@pytest.mark.parametrize(
    ("ns_names", "overrides", "terminating"),
    [
        pytest.param(["kube-system"], {}, (), id="kube-system-protected-by-default"),
        pytest.param(["team-a"], {"protected_namespaces": ["team-a"]}, (), id="protected-list"),
        pytest.param(["team-a"], {"own_namespace": "team-a"}, (), id="own-namespace"),
        pytest.param(["team-a"], {}, ("team-a",), id="terminating"),
    ],
)
def test_never_touches_untouchable_namespaces(ns_names, overrides, terminating):
    policies = [policy("p", "kube-" if ns_names[0].startswith("kube") else "team-")]
    workloads = [workload(ns_names[0]), workload(ns_names[0], "old", size=0, original="2", scaled_by="gone")]
    plan = make_plan(
        policies,
        namespaces=namespaces(*ns_names, terminating=terminating),
        workloads=workloads,
        settings=settings(**overrides),
    )
    assert plan.actions == []


def test_freeze_patch_records_and_scales_in_one_patch():
    (action,) = make_plan(
        [policy("p", "shop-", ["v3"])],
        namespaces=FAMILY,
        workloads=[workload("shop-v1", size=3, rv="42")],
        settings=settings(),
    ).actions
    assert action.patch == {
        "metadata": {
            "resourceVersion": "42",
            "annotations": {ANNOTATION_ORIGINAL_REPLICAS: "3", ANNOTATION_SCALED_BY: "p"},
            "labels": {LABEL_SCALED: "true"},
        },
        "spec": {"replicas": 0},
    }


def test_refreeze_keeps_the_pre_freeze_count():
    (action,) = make_plan(
        [policy("p", "shop-", ["v3"])],
        namespaces=FAMILY,
        workloads=[workload("shop-v1", size=7, original="3", scaled_by="p")],
        settings=settings(),
    ).actions
    assert action.patch["metadata"]["annotations"][ANNOTATION_ORIGINAL_REPLICAS] == "3"


def test_restore_patch_gives_back_count_and_removes_record():
    (action,) = make_plan(
        [], namespaces=FAMILY, workloads=[workload("shop-v1", size=0, original="3", scaled_by="p")], settings=settings()
    ).actions
    assert action.patch["spec"] == {"replicas": 3}
    assert action.patch["metadata"]["annotations"] == {ANNOTATION_ORIGINAL_REPLICAS: None, ANNOTATION_SCALED_BY: None}
    assert action.patch["metadata"]["labels"] == {LABEL_SCALED: None}


def test_cronjob_is_suspended_and_restored_to_its_flag():
    p = policy("p", "shop-", kinds=["CronJob"])
    (freeze,) = make_plan(
        [p], namespaces=FAMILY, workloads=[workload("shop-v1", kind=Kind.CRONJOB, size=1)], settings=settings()
    ).actions
    assert freeze.patch["spec"] == {"suspend": True}
    assert freeze.patch["metadata"]["annotations"][ANNOTATION_ORIGINAL_SUSPEND] == "false"
    (restore,) = make_plan(
        [],
        namespaces=FAMILY,
        workloads=[workload("shop-v1", kind=Kind.CRONJOB, size=0, original="false", scaled_by="p")],
        settings=settings(),
    ).actions
    assert restore.patch["spec"] == {"suspend": False}


@pytest.mark.parametrize("original", ["three", "-1", "", "1.5"])
def test_malformed_record_is_reported_not_restored(original):
    plan = make_plan(
        [],
        namespaces=FAMILY,
        workloads=[workload("shop-v1", size=0, original=original, scaled_by="p")],
        settings=settings(),
    )
    assert plan.actions == []
    assert len(plan.problems) == 1 and "malformed record" in plan.problems[0].message


@pytest.mark.parametrize("size", [0, 2, None])
def test_a_stray_scaled_by_without_a_record_is_named_and_left_as_it_is(size):
    """`scaled-by` with no record, where no policy holds: nothing says what to give back (a size read from
    metadata alone is fine: nothing needs it). Found by the marks fuzzer, once reported as "could not read its
    size"."""
    plan = make_plan([], namespaces=FAMILY, workloads=[workload("shop-v1", size=size, scaled_by="p")],
                     settings=settings())
    assert plan.actions == []
    (problem,) = plan.problems
    assert f"{ANNOTATION_SCALED_BY}=p but no record" in problem.message and "remove the" in problem.message


def test_cap_blocks_every_freeze_but_not_restores():
    workloads = [
        workload("shop-v1", "a"),
        workload("shop-v2", "b"),
        workload("other", "c", 0, original="1", scaled_by="p"),
    ]
    plan = make_plan(
        [policy("p", "shop-", ["v3"])], namespaces=FAMILY, workloads=workloads, settings=settings(max_freeze=1)
    )
    assert verbs(plan) == [("restore", "other", "c")]
    assert plan.cap_message and "over the cap of 1" in plan.cap_message
    under_cap = make_plan(
        [policy("p", "shop-", ["v3"])], namespaces=FAMILY, workloads=workloads, settings=settings(max_freeze=2)
    )
    assert under_cap.cap_message is None


def test_dry_run_policy_marks_its_actions_only():
    plan = make_plan(
        [policy("p", "shop-", ["v3"], dry_run=True), policy("q", "other")],
        namespaces=FAMILY,
        workloads=[workload("shop-v1"), workload("other")],
        settings=settings(),
    )
    assert {(a.policy, a.dry_run) for a in plan.actions} == {("p", True), ("q", False)}


def test_reports_held_active_and_kept_running_by_whom():
    plan = make_plan(
        [policy("p", "shop-", ["v3"]), policy("q", "shop-", ["v1"])],
        namespaces=FAMILY,
        workloads=[],
        settings=settings(),
    )
    assert plan.policies["p"].held == ["shop-v2"]
    assert plan.policies["p"].active == ["shop-v3"]
    assert plan.policies["p"].kept_running_by == {"shop-v1": ["q"]}
    assert plan.held_by == {"shop-v2": ["p", "q"]}


def test_idempotent_after_apply_and_freeze_restore_is_identity():
    p = policy("p", "shop-", ["v3"])
    start = [
        workload("shop-v1", "a", 3),
        workload("shop-v2", "b", 1, kind=Kind.STATEFULSET),
        workload("shop-v3", "c", 2),
    ]
    frozen = apply_plan(make_plan([p], namespaces=FAMILY, workloads=start, settings=settings()), start)
    assert make_plan([p], namespaces=FAMILY, workloads=frozen, settings=settings()).actions == []
    restored = apply_plan(make_plan([], namespaces=FAMILY, workloads=frozen, settings=settings()), frozen)
    assert {w.key: (w.size, w.original) for w in restored} == {w.key: (w.size, None) for w in start}


def test_job_is_suspended_and_resumed():
    p = policy("p", "shop-", kinds=["Job"])
    (freeze,) = make_plan([p], namespaces=FAMILY, workloads=[workload("shop-v1", kind=Kind.JOB, size=1)],
                          settings=settings()).actions
    assert freeze.patch["spec"] == {"suspend": True}
    assert freeze.patch["metadata"]["annotations"][ANNOTATION_ORIGINAL_SUSPEND] == "false"
    (restore,) = make_plan([], namespaces=FAMILY, workloads=[
        workload("shop-v1", kind=Kind.JOB, size=0, original="false", scaled_by="p")], settings=settings()).actions
    assert restore.patch["spec"] == {"suspend": False} and restore.after == 1


def test_custom_kind_with_nested_replica_path_is_frozen_with_its_record_in_one_patch():
    workers = ReplicasHandler(Kind("Pool.test.nsscaler.io"), "test.nsscaler.io", "v1", "pools",
                              path=("spec", "workers", "count"))
    p = policy("p", "shop-", kinds=["Pool.test.nsscaler.io"])
    (freeze,) = make_plan([p], namespaces=FAMILY, workloads=[workload("shop-v1", size=4, handler=workers, rv="9")],
                          settings=settings()).actions
    assert freeze.patch == {
        "metadata": {"resourceVersion": "9", "labels": {LABEL_SCALED: "true"},
                     "annotations": {ANNOTATION_ORIGINAL_REPLICAS: "4", ANNOTATION_SCALED_BY: "p"}},
        "spec": {"workers": {"count": 0}},
    }
    (restore,) = make_plan([], namespaces=FAMILY, workloads=[
        workload("shop-v1", size=0, handler=workers, original="4", scaled_by="p")], settings=settings()).actions
    assert restore.patch["spec"] == {"workers": {"count": 4}}


def test_a_replan_of_one_job_after_a_409_still_sees_its_cronjob_excluded():
    p = policy("p", "shop-", kinds=["CronJob"])
    cron = workload("shop-v1", "nightly", 1, kind=Kind.CRONJOB, excluded=True)
    job = workload("shop-v1", "nightly-29", 1, kind=Kind.JOB, controller="CronJob", controller_name="nightly")
    plan = make_plan([p], namespaces=FAMILY, workloads=iter([cron, job]), settings=settings())
    assert plan.actions == [] and plan.policies["p"].excluded == 2
    assert plan.excluded_owners == {("CronJob", "shop-v1", "nightly")}
    # the re-read Job alone, as job.cluster.write re-plans it: the run's excluded owners come along
    again = make_plan([p], namespaces=FAMILY, workloads=[job], settings=settings(), selection=plan.selection,
                      excluded_owners=plan.excluded_owners)
    assert again.actions == [] and again.policies["p"].excluded == 1
    alone = make_plan([p], namespaces=FAMILY, workloads=[job], settings=settings(), selection=plan.selection)
    assert verbs(alone) == [("freeze", "shop-v1", "nightly-29")]  # what a re-plan without them would do
