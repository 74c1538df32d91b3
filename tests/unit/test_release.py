"""The release's decisions (pure): every policy released, every record restored by the planner's own rules, tiers
kept within a bounded wait, and what is left named with why."""

from __future__ import annotations

import datetime as dt

import pytest

from job.decide.actions import ActionResult, Problem, Verb
from job.decide.decision import decide
from job.decide.release import REASON, left, refusal, relabelled, release_mark, released, released_at
from job.decide.tiers import TierWait
from job.model import policy as policy_api
from job.model.kinds import Kind
from job.model.marks import ANNOTATION_RELEASED
from job.model.snapshot import Autoscalers, Snapshot
from tests.unit.factories import namespaces, policy, workload
from tests.unit.factories import settings as make_settings

NOW = dt.datetime(2026, 12, 4, 18, 0, tzinfo=dt.UTC)
WAIT = dt.timedelta(seconds=30)


@pytest.mark.parametrize("spec", [
    pytest.param({}, id="holding"),
    pytest.param({"suspend": True}, id="suspended"),
    pytest.param({"restore": False}, id="restore-false"),
    pytest.param({"dry_run": True}, id="dry-run"),
    pytest.param({"hold_windows": ["Mon-Fri 09:00-17:00"]}, id="hold-windows"),
])
def test_every_kind_of_policy_restores_what_it_froze_in_a_release(spec):
    holder = policy("p", "shop-", ["v2"], **spec)
    frozen = workload("shop-v1", "web", 0, original="3", scaled_by="p")
    snapshot = Snapshot(policies=released([holder], now=NOW, wait=WAIT), namespaces=tuple(namespaces("shop-v1")),
                        workloads=(frozen,), autoscalers=Autoscalers())

    decision = relabelled(decide(snapshot, settings=make_settings(), now=NOW))

    (write,) = [w for step in decision.steps for w in step]
    assert (write.action.verb, write.action.after, write.action.dry_run) == (Verb.RESTORE, 3, False)
    assert write.action.reason == REASON


def test_an_invalid_policys_records_are_restored_as_a_gone_policys():
    invalid = policy_api.InvalidPolicy("p", 1, "spec: broken")
    assert released([invalid], now=NOW, wait=WAIT) == ()


def test_a_release_waits_for_a_tier_at_most_its_bound():
    slow = policy("p", "shop-", ["v2"], restore_order=["StatefulSet"], restore_wait="1h")
    (fast,) = released([slow], now=NOW, wait=WAIT)
    assert fast.restore_wait == WAIT
    assert fast.spec.restore_order == (Kind.STATEFULSET,)
    (short,) = released([policy("p", "shop-", restore_wait="5s")], now=NOW, wait=WAIT)
    assert short.restore_wait == dt.timedelta(seconds=5)


def test_what_is_left_is_named_with_why():
    web = workload("shop-v1", "web", 0, original="3", scaled_by="p")
    kept = workload("shop-v1", "kept", 0, original="2", scaled_by="p", excluded=True)
    broken = workload("shop-v1", "broken", 0, original="many", scaled_by="p")
    later = workload("shop-v2", "app", 0, original="1", scaled_by="p")
    going = workload("shop-gone", "old", 0, original="1", scaled_by="p")
    back = workload("shop-v1", "fine", 2)
    restore = decide(Snapshot(policies=(), namespaces=(), workloads=(web,), autoscalers=Autoscalers()),
                     settings=make_settings(), now=NOW).steps[1][0].action
    wait = TierWait("shop-v2", "p", 1, ("statefulset/db",), 1, NOW, NOW + WAIT)

    found = left([web, kept, broken, later, going, back], namespaces=namespaces("shop-v1", "shop-v2", "shop-gone",
                                                                                 terminating=("shop-gone",)),
                 results=[ActionResult(restore, "failed", "403 forbidden")],
                 problems=[Problem("p", broken, "malformed record on broken")], waits=[wait])

    assert {item.workload.name: item.why for item in found} == {
        "web": "the restore failed: 403 forbidden",
        "kept": "annotated nsscaler.wubw.fun/exclude=true, so nsscaler never touches it: restore it by hand and remove "
                "its nsscaler.wubw.fun annotations and label",
        "broken": "malformed record on broken",
        "app": "restore tier 1 still waits for statefulset/db (until 2026-12-04T18:00:30Z); run the release again",
    }


def test_a_release_suspends_the_cronjob_and_marks_it_keeping_the_first_instant():
    cronjob = {"metadata": {"name": "nsscaler", "annotations": {"team": "platform"}}, "spec": {"suspend": False}}
    assert released_at(cronjob) is None and released_at(None) is None

    mark = release_mark(cronjob, now=NOW)

    assert mark == {"metadata": {"annotations": {ANNOTATION_RELEASED: "2026-12-04T18:00:00Z"}},
                    "spec": {"suspend": True}}
    marked = {"metadata": {"annotations": {"team": "platform", **mark["metadata"]["annotations"]}},
              "spec": {"suspend": True}}
    assert released_at(marked) == "2026-12-04T18:00:00Z"
    again = release_mark(marked, now=NOW + dt.timedelta(hours=1))
    assert again["metadata"]["annotations"][ANNOTATION_RELEASED] == "2026-12-04T18:00:00Z"


def test_a_run_from_a_released_cronjob_says_why_it_freezes_nothing_and_how_to_go_on():
    said = refusal(namespace="nsscaler", at="2026-12-04T18:00:00Z")
    assert "released at 2026-12-04T18:00:00Z" in said and "freezes nothing" in said
    assert f"kubectl -n nsscaler annotate cronjob nsscaler {ANNOTATION_RELEASED}-" in said
