"""A `pause` row's writes in order (`job.decide.paused`) and a refused row's writes removed (`job.decide.trials`),
decided purely from a snapshot."""

from __future__ import annotations

import datetime as dt

from job.decide import trials
from job.decide.actions import Verb
from job.decide.decision import decide
from job.model.custom import resolve
from job.model.kinds import Kind
from job.model.kinds.catalogue import CATALOGUE
from job.model.kinds.rows import merged
from job.model.snapshot import Autoscalers, Snapshot
from tests.unit.factories import namespaces, policy, settings, workload
from tests.unit.test_rows import real_crd

NOW = dt.datetime(2026, 12, 4, 9, 30, tzinfo=dt.UTC)
RABBIT = Kind("RabbitmqCluster.rabbitmq.com")
HANDLERS = resolve([RABBIT], [real_crd(str(RABBIT))], merged([], CATALOGUE)).handlers


def _snapshot(*, frozen: bool) -> Snapshot:
    if frozen:  # as a run left them: the operator paused, its StatefulSet at 0, both with their records
        found = (workload("shop-v1", "mq", 0, handler=HANDLERS[RABBIT], original="null", scaled_by="p"),
                 workload("shop-v1", "mq-server", 0, handler=HANDLERS[Kind.STATEFULSET], original="3", scaled_by="p",
                          controller="RabbitmqCluster", controller_name="mq"))
    else:
        found = (workload("shop-v1", "mq", 1, handler=HANDLERS[RABBIT]),
                 workload("shop-v1", "mq-server", 3, handler=HANDLERS[Kind.STATEFULSET], controller="RabbitmqCluster",
                          controller_name="mq"),
                 workload("shop-v1", "alone", 2, handler=HANDLERS[Kind.STATEFULSET]))
    active = ["v1"] if frozen else []
    return Snapshot(policies=(policy("p", "shop-", active, kinds=[str(RABBIT)]),), namespaces=tuple(namespaces(
        "shop-v1")), workloads=found, autoscalers=Autoscalers())


def _steps(decision):
    return [[(w.action.verb, w.action.workload.name, w.after.workload.name if w.after else None) for w in step]
            for step in decision.steps]


def test_the_operator_is_paused_before_its_statefulset_and_resumed_after_it():
    freeze = decide(_snapshot(frozen=False), settings=settings(), now=NOW)
    assert _steps(freeze) == [[(Verb.FREEZE, "mq", None)], [(Verb.FREEZE, "mq-server", "mq")], []], \
        "a StatefulSet no paused operator controls is not selected by the operator's kind"
    restore = decide(_snapshot(frozen=True), settings=settings(), now=NOW)
    assert _steps(restore) == [[], [(Verb.RESTORE, "mq-server", None)], [(Verb.RESTORE, "mq", "mq-server")]]


def test_a_refused_row_takes_its_operators_statefulsets_with_it_and_is_told_once_per_policy():
    decision = decide(_snapshot(frozen=False), settings=settings(), now=NOW)
    [tried] = trials.trials(decision)
    assert tried.workload.name == "mq"
    left = trials.without(decision, {RABBIT: (tried, "refused")})
    assert not any(left.steps)
    assert [(p.policy, p.message) for p in left.problems] == [("p", "refused")]
    assert trials.without(decision, {}) is decision
