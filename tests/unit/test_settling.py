"""A freeze that waits for its operator (`job.decide.settling`): in progress until the row's `within` after the freeze,
then FreezeIncomplete on the policy (condition, status list) and one Warning Event, not repeated."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pytest

from job.decide import events, settling
from job.decide.actions import Action, ActionResult, Verb
from job.decide.outcome import PolicyOutcome
from job.decide.plan import select_from_workloads, sizes_needed
from job.decide.status import build_status
from job.model.marks import FIELD_MANAGER
from job.model.workloads import freeze_patch, from_api
from tests.unit.factories import _merge, namespaces, policy, settings
from tests.unit.test_rows import cnpg_cluster, cnpg_handler

FROZE_AT = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)
DELETING = [{"type": "cnpg.io/hibernation", "status": "False", "reason": "DeletingPods",
             "message": "Hibernation is in progress"}]
HIBERNATED = [{"type": "cnpg.io/hibernation", "status": "True", "reason": "Hibernated",
               "message": "Cluster has been hibernated"}]


def frozen_cluster(conditions: list[dict[str, str]], *, recorded: bool = True) -> dict[str, Any]:
    """The Cluster after policy p froze it, its freeze recorded by the API server in nsscaler's managedFields entry."""
    handler = cnpg_handler()
    obj = _merge(cnpg_cluster(conditions=conditions), freeze_patch(from_api(handler, cnpg_cluster()), policy="p"))
    if recorded:
        obj["metadata"]["managedFields"] = [{"manager": FIELD_MANAGER, "operation": "Update", "time":
                                             FROZE_AT.strftime("%Y-%m-%dT%H:%M:%SZ"), "fieldsV1": {
                                                 "f:metadata": {"f:annotations": {"f:cnpg.io/hibernation": {}}}}}]
    return obj


def waiting(obj: dict[str, Any], *, after: float, results: list[ActionResult] | None = None) -> list[settling.Settling]:
    return settling.waiting([from_api(cnpg_handler(), obj)], policy="p", held=["a-1"], results=results or [],
                            now=FROZE_AT + dt.timedelta(seconds=after))


@pytest.mark.parametrize(("conditions", "after", "overdue"), [
    pytest.param([], 1, False, id="no-condition-yet-in-progress"),
    pytest.param(DELETING, 599, False, id="deleting-pods-in-progress"),
    pytest.param(DELETING, 600, True, id="deleting-pods-after-within-incomplete"),
])
def test_a_freeze_waits_for_its_operator_until_within_then_is_incomplete(conditions, after, overdue):
    (found,) = waiting(frozen_cluster(conditions), after=after)
    assert (found.namespace, found.workload, found.since, found.overdue) == ("a-1", "cluster/db", FROZE_AT, overdue)
    assert found.reports == ("no condition cnpg.io/hibernation yet" if not conditions else
                             "condition cnpg.io/hibernation is False (DeletingPods: Hibernation is in progress)")


def test_a_freeze_the_operator_reports_done_waits_for_nothing_and_others_are_not_this_policys():
    assert waiting(frozen_cluster(HIBERNATED), after=1) == []
    other = from_api(cnpg_handler(), frozen_cluster(DELETING))
    assert settling.waiting([other], policy="q", held=["a-1"], results=[], now=FROZE_AT) == []
    assert settling.waiting([other], policy="p", held=["a-2"], results=[], now=FROZE_AT) == [], "not held: restored"


def test_a_freeze_with_no_time_recorded_on_it_is_incomplete_at_once():
    (found,) = waiting(frozen_cluster(DELETING, recorded=False), after=0)
    assert found.since is None and found.overdue


def test_a_freeze_of_this_run_is_in_progress_from_the_runs_instant():
    running = from_api(cnpg_handler(), cnpg_cluster())
    froze = ActionResult(Action(Verb.FREEZE, running, "p", None, 0, "held", False), "applied")
    (found,) = settling.waiting([running], policy="p", held=["a-1"], results=[froze], now=FROZE_AT)
    assert (found.reports, found.since, found.overdue) == (settling.JUST_FROZEN, FROZE_AT, False)
    assert settling.waiting([running], policy="p", held=["a-1"], results=[replace(froze, outcome="failed")],
                            now=FROZE_AT) == []


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_done_waits_for_the_operator_and_freeze_incomplete_is_said_once():
    in_progress = PolicyOutcome("p", 1, held=["a-1"], settling=waiting(frozen_cluster(DELETING), after=5))
    assert not in_progress.done
    status = build_status(in_progress, now=FROZE_AT, list_limit=20)
    assert status["done"] is False and status["freezeIncomplete"] == []
    drained, incomplete = conditions(status)["Drained"], conditions(status)["FreezeIncomplete"]
    assert (drained["status"], drained["reason"]) == ("False", "FreezeInProgress")
    assert "a-1 cluster/db: condition cnpg.io/hibernation is False (DeletingPods" in drained["message"]
    assert (incomplete["status"], incomplete["reason"]) == ("False", "NoneOverdue")
    assert not [e for e in events.of_policies([in_progress]) if e.reason == "FreezeIncomplete"]

    late = replace(in_progress, settling=waiting(frozen_cluster(DELETING), after=700))
    status = build_status(late, now=FROZE_AT, list_limit=20)
    incomplete = conditions(status)["FreezeIncomplete"]
    assert (incomplete["status"], incomplete["reason"]) == ("True", "OperatorNotFrozen")
    assert status["freezeIncomplete"] == [{
        "namespace": "a-1", "workload": "cluster/db", "since": "2026-12-06T09:00:00Z",
        "reports": "condition cnpg.io/hibernation is False (DeletingPods: Hibernation is in progress)"}]
    (said,) = [e for e in events.of_policies([late]) if e.reason == "FreezeIncomplete"]
    assert said.warning and "a-1 cluster/db: its operator does not report it frozen 600 s after" in said.message
    again = replace(late, previous_status=status)
    assert not [e for e in events.of_policies([again]) if e.reason == "FreezeIncomplete"], "said once"

    hibernated = replace(again, settling=waiting(frozen_cluster(HIBERNATED), after=800))
    assert hibernated.done and conditions(build_status(hibernated, now=FROZE_AT, list_limit=20))[
        "FreezeIncomplete"]["status"] == "False"


def test_a_frozen_object_read_from_metadata_alone_is_read_whole_to_see_its_operators_condition():
    meta_only = from_api(cnpg_handler(), {"metadata": frozen_cluster(DELETING)["metadata"]}, metadata_only=True)
    assert meta_only.unsettled is None
    chosen = select_from_workloads([policy("p", "a-", kinds=["Cluster.postgresql.cnpg.io"])],
                                   namespaces=namespaces("a-1"), workloads=[meta_only], settings=settings(), now=None)
    assert sizes_needed([meta_only], selection=chosen, excluded_owners=frozenset()) == [meta_only]


def test_freeze_incomplete_is_said_only_of_the_objects_the_status_lists_so_each_is_said_once():
    """More incomplete freezes than the status lists: the ones past its list limit, which the next status does
    not name either, are not said every run; each is said once, when the status lists it."""
    late = [settling.Settling("a-1", f"Cluster.postgresql.cnpg.io/db{i}", "hibernation not reported",
                              FROZE_AT, 300.0, True) for i in range(5)]
    first = PolicyOutcome("p", 1, held=["a-1"], settling=late)
    said = [e for e in events.of_policies([first], listed=2) if e.reason == "FreezeIncomplete"]
    assert [e.message.split(":")[0] for e in said] == ["a-1 Cluster.postgresql.cnpg.io/db0",
                                                       "a-1 Cluster.postgresql.cnpg.io/db1"]
    again = replace(first, previous_status=build_status(first, now=FROZE_AT, list_limit=2))
    assert not [e for e in events.of_policies([again], listed=2) if e.reason == "FreezeIncomplete"], "said once"
    # the first two settle: the next two are listed now, and said
    rest = replace(again, settling=late[2:])
    said = [e for e in events.of_policies([rest], listed=2) if e.reason == "FreezeIncomplete"]
    assert [e.message.split(":")[0] for e in said] == ["a-1 Cluster.postgresql.cnpg.io/db2",
                                                       "a-1 Cluster.postgresql.cnpg.io/db3"]
