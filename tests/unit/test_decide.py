"""The run's one pure pass: a snapshot in, every write out; the same snapshot always gives the same writes."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from job.decide import contain
from job.decide import decision as decision_api
from job.decide import plan as plan_api
from job.decide import selection as selection_api
from job.decide.actions import Action, Verb
from job.decide.decision import again, decide
from job.model.kinds import Kind, ReplicasHandler
from job.model.kinds.field import FieldHandler
from job.model.marks import ANNOTATION_FREED, ANNOTATION_SCALED_BY, LABEL_SCALED
from job.model.snapshot import NEED_HPAS, NEED_SCALED_OBJECTS, Autoscalers, Snapshot
from tests.unit.factories import namespaces, policy, settings, workload

NOW = dt.datetime(2026, 12, 4, 9, 30, tzinfo=dt.UTC)
FAMILY = tuple(namespaces("shop-v1", "shop-v2", "shop-v3", "other"))


def _writes(decision):
    return [[(w.action.verb.value, w.action.workload.key, w.action.patch, w.action.reason) for w in step]
            for step in decision.steps]


def test_the_same_snapshot_gives_the_same_writes():
    snapshot = Snapshot(
        policies=(policy("p", "shop-", ["v3"]),), namespaces=FAMILY,
        workloads=(workload("shop-v1"), workload("shop-v2", "api", 3), workload("shop-v3"),
                   workload("other", original="2", scaled_by="p", size=0)),
        autoscalers=Autoscalers())
    first, second = (decide(snapshot, settings=settings(), now=NOW) for _ in range(2))
    assert _writes(first) == _writes(second)
    assert sorted(verb for step in _writes(first) for verb, *_ in step) == ["freeze", "freeze", "restore"]


def test_a_decision_that_changes_something_asks_for_the_autoscalers_first():
    snapshot = Snapshot(policies=(policy("p", "shop-", ["v3"]),), namespaces=FAMILY,
                        workloads=(workload("shop-v1"),))
    decision = decide(snapshot, settings=settings(), now=NOW)
    assert decision.needs == {NEED_SCALED_OBJECTS, NEED_HPAS} and not decision.steps
    steady = Snapshot(policies=snapshot.policies, namespaces=FAMILY,
                      workloads=(workload("shop-v1", size=0, original="2", scaled_by="p"),))
    assert not decide(steady, settings=settings(), now=NOW).needs


def test_a_new_kind_is_frozen_through_the_pure_path_from_its_registry_entry_alone():
    """A hypothetical kind, known only by its handler (where it lives, its size field): no other file knows it."""
    widgets = ReplicasHandler(Kind("Widget.example.com"), "example.com", "v1", "widgets", path=("spec", "workers"))
    held = workload("shop-v1", "w1", 4, handler=widgets)
    snapshot = Snapshot(policies=(policy("p", "shop-", ["v3"], kinds=["Widget.example.com"]),), namespaces=FAMILY,
                        workloads=(held, workload("shop-v3", "w3", 2, handler=widgets)), autoscalers=Autoscalers())
    [[freeze]] = [step for step in decide(snapshot, settings=settings(), now=NOW).steps if step]
    assert (freeze.action.verb, freeze.action.workload.name) == (Verb.FREEZE, "w1")
    assert freeze.action.patch == {
        "metadata": {"resourceVersion": "1", "labels": {LABEL_SCALED: "true"},
                     "annotations": {widgets.record_key: "4", ANNOTATION_SCALED_BY: "p"}},
        "spec": {"workers": 0}}


def test_a_freeze_decided_again_after_a_409_records_the_footprint_with_its_runtime_class_overhead():
    """The Deployment controller writes between the read and the freeze: the object read again names a
    RuntimeClass, whose overhead the run read once (`Snapshot.overheads`); its freeze records it whole."""
    fresh = {"metadata": {"name": "web", "namespace": "shop-v1", "resourceVersion": "9"},
             "spec": {"replicas": 2, "template": {"spec": {"runtimeClassName": "kata", "containers": [
                 {"name": "app", "resources": {"requests": {"cpu": "500m"}}}]}}}}
    read = dataclasses.replace(workload("shop-v1", size=2), footprint='{"pods":1,"requests":{"cpu":"750m"}}')
    snapshot = Snapshot(policies=(policy("p", "shop-", ["v3"]),), namespaces=FAMILY, workloads=(read,),
                        autoscalers=Autoscalers(), overheads={"kata": {"cpu": 250 * 10**6}})
    decision = decide(snapshot, settings=settings(), now=NOW)
    [freeze] = [w for step in decision.steps for w in step]
    action = again(freeze, fresh, decision=decision, snapshot=snapshot, settings=settings(), now=NOW)
    assert isinstance(action, Action) and action.workload.resource_version == "9"
    assert action.patch["metadata"]["annotations"][ANNOTATION_FREED] == '{"pods":1,"requests":{"cpu":"750m"}}'
    unknown = dataclasses.replace(snapshot, overheads=None)  # the overheads were never read: none recorded
    action = again(freeze, fresh, decision=decision, snapshot=unknown, settings=settings(), now=NOW)
    assert isinstance(action, Action) and ANNOTATION_FREED not in action.patch["metadata"]["annotations"]


def test_an_operator_objects_freeze_decided_again_after_a_409_keeps_the_footprint_counted_from_its_pods():
    """Its operator writes its status between the read and the freeze: the object read again has no template to
    count; the footprint counted from its Pods moments before is recorded, not dropped."""
    rows = FieldHandler(Kind("postgresql.acid.zalan.do"), "acid.zalan.do", "v1", "postgresqls",
                        where=("spec", "numberOfInstances"), value=0)
    counted = '{"pods":2,"requests":{"cpu":"4"}}'
    read = dataclasses.replace(workload("shop-v1", "db", 1, handler=rows), footprint=counted)
    snapshot = Snapshot(policies=(policy("p", "shop-", ["v3"], kinds=["postgresql.acid.zalan.do"]),),
                        namespaces=FAMILY, workloads=(read,), autoscalers=Autoscalers())
    decision = decide(snapshot, settings=settings(), now=NOW)
    [freeze] = [w for step in decision.steps for w in step]
    assert freeze.action.patch["metadata"]["annotations"][ANNOTATION_FREED] == counted
    fresh = {"metadata": {"name": "db", "namespace": "shop-v1", "resourceVersion": "9"},
             "spec": {"numberOfInstances": 2}, "status": {"PostgresClusterStatus": "Running"}}
    action = again(freeze, fresh, decision=decision, snapshot=snapshot, settings=settings(), now=NOW)
    assert isinstance(action, Action) and action.workload.resource_version == "9"
    assert action.patch["metadata"]["annotations"][ANNOTATION_FREED] == counted


def test_a_policy_whose_decision_raises_is_invalid_and_the_others_are_decided(monkeypatch):
    def decide_with(policies):
        return decide(dataclasses.replace(snapshot, policies=tuple(policies)), settings=settings(), now=NOW)
    real = selection_api._schedule_state

    def raises_for_b(p, now):
        if p.name == "b":
            raise OverflowError("date value out of range")
        return real(p, now)

    monkeypatch.setattr(selection_api, "_schedule_state", raises_for_b)
    snapshot = Snapshot(policies=(policy("a", "shop-", ["v3"]), policy("b", "other", [])), namespaces=FAMILY,
                        workloads=(workload("shop-v1"), workload("other")), autoscalers=Autoscalers())
    decision = decision_api.contained(snapshot, settings=settings(), now=NOW)
    assert [w.action.workload.namespace for step in decision.steps for w in step] == ["shop-v1"]
    assert list(decision.plan.policies) == ["a"]  # b is invalid now: the run's outcome says why
    monkeypatch.setattr(selection_api, "_schedule_state", real)
    quarantined = contain.failing_alone(snapshot.policies, decide_with)
    assert quarantined == {}
    monkeypatch.setattr(selection_api, "_schedule_state", raises_for_b)
    found = contain.failing_alone(snapshot.policies, decide_with)
    assert list(found) == ["b"] and found["b"].startswith("OverflowError: date value out of range")


def test_a_failure_no_single_policy_causes_is_raised(monkeypatch):
    def always(p, now):
        raise RuntimeError("everyone's")

    monkeypatch.setattr(selection_api, "_schedule_state", always)
    snapshot = Snapshot(policies=(), namespaces=FAMILY, workloads=(), autoscalers=Autoscalers())
    decision_api.contained(snapshot, settings=settings(), now=NOW)  # no policy: nothing raises
    monkeypatch.setattr(decision_api, "select_from_workloads",
                        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("everyone's")))
    with pytest.raises(RuntimeError, match="everyone's"):
        decision_api.contained(snapshot, settings=settings(), now=NOW)


def test_a_workload_whose_judgement_raises_is_a_problem_on_it_and_the_others_are_planned(monkeypatch):
    real = plan_api._Judge._hold

    def raises_for_api(self, w, holder):
        if w.name == "api":
            raise ValueError("odd")
        return real(self, w, holder)

    monkeypatch.setattr(plan_api._Judge, "_hold", raises_for_api)
    snapshot = Snapshot(policies=(policy("p", "shop-", ["v3"]),), namespaces=FAMILY,
                        workloads=(workload("shop-v1"), workload("shop-v1", "api", 3)), autoscalers=Autoscalers())
    decision = decide(snapshot, settings=settings(), now=NOW)
    assert [w.action.workload.name for step in decision.steps for w in step] == ["web"]
    [problem] = decision.problems
    assert problem.policy == "p" and "ValueError: odd" in problem.message and "left as it is" in problem.message
