"""The run's one pure pass: a snapshot in, every write out; the same snapshot always gives the same writes."""

from __future__ import annotations

import datetime as dt

from job.decide.actions import Verb
from job.decide.decision import decide
from job.model.kinds import Kind, ReplicasHandler
from job.model.marks import ANNOTATION_SCALED_BY, LABEL_SCALED
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
