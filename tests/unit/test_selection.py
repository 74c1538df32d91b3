"""The held-namespace selection: allow list, keep_recent, windows, expiry, active wins (pure, `now` given)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from job.decide.actions import Verb
from job.decide.outcome import PolicyOutcome
from job.decide.plan import make_plan
from job.decide.selection import activity, select_namespaces
from job.decide.status import REASON_EXPIRED, build_status
from job.model.activity import Change, last_user_change
from job.model.workloads import Kind, Namespace, Workload
from tests.unit.examples import examples
from tests.unit.factories import apply_plan, policy, settings, workload

NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)  # a Friday noon


def day(n: int) -> dt.datetime:
    return dt.datetime(2026, 11, n, 9, 0, tzinfo=dt.UTC)


def family(**created: int) -> list[Namespace]:
    """Namespaces `shop-<suffix>` created on the given day of November 2026."""
    return [Namespace(f"shop-{s}", created=day(d)) for s, d in created.items()]


def changed(w: Workload, when: dt.datetime, by: str = "helm") -> Workload:
    return dataclasses.replace(w, last_user_change=Change(when, by))


def chosen(policies, namespaces, workloads=(), now=NOW, **overrides):
    return select_namespaces(policies, namespaces=namespaces, found=activity(workloads),
                             settings=settings(**overrides), now=now)


@pytest.mark.parametrize(
    ("created", "changes", "k", "listed", "recent"),
    [
        pytest.param({"v1": 1, "v2": 2, "v3": 3, "v4": 4, "v5": 5}, {}, 2, [], {"v4", "v5"}, id="newest-created"),
        pytest.param({"v1": 1, "v2": 2, "v3": 3, "v4": 4, "v5": 5}, {"v1": 20}, 2, [], {"v1", "v5"},
                     id="a-rollout-makes-the-oldest-recent"),
        pytest.param({"v1": 1, "v2": 1, "v3": 1}, {}, 2, [], {"v1", "v2"}, id="ties-by-name"),
        pytest.param({"v1": 1, "v2": 2, "v3": 3, "v4": 4}, {}, 2, ["v4"], {"v2", "v3"},
                     id="listed-ones-do-not-count"),
        pytest.param({"v1": 1, "v2": 2}, {}, 5, [], {"v1", "v2"}, id="fewer-than-k"),
        pytest.param({"v1": 1, "v2": 2, "v3": 3}, {}, 0, [], set(), id="zero-keeps-none"),
    ],
)
def test_keep_recent_ranks_by_activity_then_name(created, changes, k, listed, recent):
    workloads = [changed(workload(f"shop-{s}"), day(d)) for s, d in changes.items()]
    result = chosen([policy("p", "shop-", listed, keep_recent=k)], family(**created), workloads)
    assert set(result.policies["p"].recent) == {f"shop-{s}" for s in recent}
    held = {f"shop-{s}" for s in created} - {f"shop-{s}" for s in recent} - {f"shop-{s}" for s in listed}
    assert set(result.held_by) == held


def test_activity_counts_only_the_policys_kinds():
    workloads = [changed(workload("shop-v1", kind=Kind.CRONJOB, size=1), day(20))]
    result = chosen([policy("p", "shop-", keep_recent=1)], family(v1=1, v2=2), workloads)
    assert set(result.policies["p"].recent) == {"shop-v2"}  # CronJobs are not among the default kinds
    result = chosen([policy("p", "shop-", keep_recent=1, kinds=["CronJob"])], family(v1=1, v2=2), workloads)
    assert result.policies["p"].recent == {"shop-v1": Change(day(20), "helm")}


def test_a_hand_started_job_of_a_cronjob_is_activity_for_a_cronjob_policy():
    """A CronJob policy suspends the CronJob's Jobs too, so a Job started from it by hand counts."""
    started = changed(workload("shop-v1", "nightly-by-hand", size=1, kind=Kind.JOB, controller="CronJob"), day(20),
                      by="kubectl-create")
    result = chosen([policy("p", "shop-", keep_recent=1, kinds=["CronJob"])], family(v1=1, v2=2), [started])
    assert result.policies["p"].recent == {"shop-v1": Change(day(20), "kubectl-create")}
    result = chosen([policy("p", "shop-", keep_recent=1)], family(v1=1, v2=2), [started])
    assert set(result.policies["p"].recent) == {"shop-v2"}  # a Deployment policy does not see it

@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        pytest.param([{"manager": "kubectl-create", "operation": "Update", "time": "2026-11-01T09:00:00Z"},
                      {"manager": "helm", "operation": "Update", "time": "2026-11-03T10:14:00Z"}],
                     Change(day(3).replace(hour=10, minute=14), "helm"), id="newest-user-change"),
        pytest.param([{"manager": "kubectl-create", "time": "2026-11-01T09:00:00Z"},
                      {"manager": "nsscaler", "time": "2026-11-05T09:00:00Z"},
                      {"manager": "kube-controller-manager", "subresource": "scale", "time": "2026-11-06T09:00:00Z"},
                      {"manager": "kube-controller-manager", "subresource": "status", "time": "2026-11-07T09:00:00Z"},
                      {"manager": "argo-rollouts", "subresource": "status", "time": "2026-11-08T09:00:00Z"}],
                     Change(day(1), "kubectl-create"), id="freezes-hpa-and-status-never-count"),
        pytest.param([{"manager": "nsscaler", "time": "2026-11-05T09:00:00Z"}], None, id="only-nsscaler"),
        pytest.param([{"manager": "helm", "time": "yesterday"}], None, id="unreadable-time"),
        pytest.param([], None, id="none"),
    ],
)
def test_last_user_change_from_managed_fields(entries, expected):
    assert last_user_change({"managedFields": entries}) == expected


@pytest.mark.parametrize(
    ("spec", "now", "holding", "held"),
    [
        pytest.param({"hold_windows": ["Fri 09:00-17:00"]}, NOW, True, {"shop-v1", "shop-v2"}, id="inside-window"),
        pytest.param({"hold_windows": ["Fri 19:00-07:00"]}, NOW, False, set(), id="outside-window"),
        pytest.param({"hold_windows": ["Fri 12:00-14:00"], "time_zone": "Asia/Tokyo"}, NOW, False, set(),
                     id="window-in-another-zone"),
        pytest.param({"until": "2026-12-04T11:59:59Z"}, NOW, False, set(), id="until-past"),
        pytest.param({"until": "2026-12-04T12:00:01Z"}, NOW, True, {"shop-v1", "shop-v2"}, id="until-future"),
        pytest.param({"suspend": True}, NOW, False, set(), id="suspended"),
    ],
)
def test_a_policy_holds_only_inside_its_windows_and_before_until(spec, now, holding, held):
    result = chosen([policy("p", "shop-", ["v3"], **spec)], family(v1=1, v2=2, v3=3), now=now)
    assert result.policies["p"].holding is holding
    assert set(result.held_by) == held


def test_a_policy_that_does_not_hold_does_not_win_active_wins():
    namespaces = family(v1=1, v2=2, v3=3)
    night = policy("night", "shop-", ["v1"], hold_windows=["19:00-07:00"])
    release = policy("release", "shop-", ["v3"])
    assert set(chosen([night, release], namespaces).held_by) == {"shop-v1", "shop-v2"}
    at_night = chosen([night, release], namespaces, now=NOW.replace(hour=22))
    assert set(at_night.held_by) == {"shop-v2"}
    assert at_night.policies["release"].kept_running_by == {"shop-v1": ["night"]}


def test_recent_wins_over_another_policys_hold():
    result = chosen([policy("a", "shop-", keep_recent=1), policy("b", "shop-")], family(v1=1, v2=2))
    assert result.held_by == {"shop-v1": ["a", "b"]}
    assert result.policies["b"].kept_running_by == {"shop-v2": ["a"]}


def test_protected_and_terminating_namespaces_are_not_ranked():
    namespaces = [*family(v1=1, v2=2), Namespace("shop-v3", terminating=True, created=day(9)),
                  Namespace("shop-sys", created=day(9))]
    result = chosen([policy("p", "shop-", keep_recent=1)], namespaces, protected_namespaces=["shop-sys"])
    assert set(result.policies["p"].recent) == {"shop-v2"}
    assert result.held_by == {"shop-v1": ["p"]}


def test_a_schedule_without_now_is_refused():
    with pytest.raises(ValueError, match="needs `now`"):
        chosen([policy("p", "shop-", hold_windows=["Fri 09:00-17:00"])], family(v1=1), now=None)


# -- the planner on top of the selection ------------------------------------------------------------------

def test_windows_and_until_freeze_then_restore_exactly():
    namespaces = family(v1=1, v2=2)
    start = [workload("shop-v1", size=3), workload("shop-v2", size=2)]
    windowed = [policy("p", "shop-", ["v2"], hold_windows=["Fri 09:00-17:00"])]
    frozen = apply_plan(make_plan(windowed, namespaces=namespaces, workloads=start, settings=settings(), now=NOW),
                        start)
    assert {w.namespace: w.size for w in frozen} == {"shop-v1": 0, "shop-v2": 2}
    evening = make_plan(windowed, namespaces=namespaces, workloads=frozen, settings=settings(),
                        now=NOW.replace(hour=18))
    assert [(a.verb, a.after) for a in evening.actions] == [(Verb.RESTORE, 3)]
    assert "outside hold_windows" in evening.actions[0].reason
    expired = [policy("p", "shop-", ["v2"], until="2026-12-01T00:00:00Z")]
    plan = make_plan(expired, namespaces=namespaces, workloads=frozen, settings=settings(), now=NOW)
    assert [(a.verb, a.after) for a in plan.actions] == [(Verb.RESTORE, 3)]
    assert "expired at 2026-12-01T00:00:00Z" in plan.actions[0].reason
    restored = apply_plan(plan, frozen)
    assert {w.key: (w.size, w.original, w.scaled_by) for w in restored} == {w.key: (w.size, None, None) for w in start}


def test_the_freeze_reason_names_the_recent_ones():
    namespaces = family(v1=1, v2=2, v3=3)
    workloads = [workload("shop-v1"), changed(workload("shop-v2", size=0, original="2", scaled_by="p"), day(20))]
    plan = make_plan([policy("p", "shop-", keep_recent=1)], namespaces=namespaces, workloads=workloads,
                     settings=settings(), now=NOW)
    reasons = {a.workload.namespace: (a.verb, a.reason) for a in plan.actions}
    assert reasons["shop-v1"] == (Verb.FREEZE, "held by p: not listed in active_namespace_suffixes and not the "
                                               "most recently active")
    assert reasons["shop-v2"] == (Verb.RESTORE, "kept: the most recently active (last change 2026-11-20T09:00Z "
                                                "by helm)")


def test_status_says_expired_holding_next_change_and_recent():
    namespaces = family(v1=1, v2=2)
    plan = make_plan([policy("p", "shop-", until="2026-12-01T00:00:00Z")], namespaces=namespaces, workloads=[],
                     settings=settings(), now=NOW)
    assert plan.selection is not None
    status = build_status(PolicyOutcome(name="p", generation=1, selection=plan.selection.policies["p"]),
                          now=NOW, list_limit=20)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", REASON_EXPIRED)
    assert status["holding"] is False
    assert status["nextChange"] is None

    plan = make_plan([policy("p", "shop-", keep_recent=1, hold_windows=["Fri 09:00-17:00"])],
                     namespaces=namespaces, workloads=[], settings=settings(), now=NOW)
    assert plan.selection is not None
    status = build_status(PolicyOutcome(name="p", generation=1, selection=plan.selection.policies["p"]),
                          now=NOW, list_limit=20)
    assert status["holding"] is True
    assert status["nextChange"] == "2026-12-04T17:00:00Z"
    assert status["recentNamespaces"] == [{"namespace": "shop-v2", "lastActivity": "2026-11-02T09:00:00Z",
                                           "by": "creation"}]
    assert status["counts"]["recentNamespaces"] == 1


# -- properties ------------------------------------------------------------------------------------------

SUFFIXES = ["v1", "v2", "v3", "v4", "v5", "v6"]
NAMES = [f"shop-{s}" for s in SUFFIXES] + ["kube-system", "other-a", "other-v1"]

namespaces_st = st.lists(
    st.builds(lambda name, d, terminating: Namespace(name, terminating=terminating, created=day(d)),
              st.sampled_from(NAMES), st.integers(1, 30), st.booleans()),
    min_size=1, max_size=len(NAMES), unique_by=lambda n: n.name)
workloads_st = st.lists(
    st.builds(lambda ns, i, d, by: changed(workload(ns, f"w{i}"), day(d), by) if d else workload(ns, f"w{i}"),
              st.sampled_from(NAMES), st.integers(0, 5), st.integers(0, 30), st.sampled_from(["helm", "kubectl"])),
    max_size=15, unique_by=lambda w: w.key)


@hyp_settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.builds(lambda name, prefix, active, k: policy(name, prefix, active, keep_recent=k),
                          st.sampled_from(["a", "b", "c"]), st.sampled_from(["shop-", "other-"]),
                          st.lists(st.sampled_from(SUFFIXES), unique=True, max_size=3), st.integers(0, 4)),
                max_size=3, unique_by=lambda p: p.name),
       namespaces_st, workloads_st)
def test_keep_recent_never_keeps_more_than_k_plus_the_active_list(policies, namespaces, workloads):
    result = chosen(policies, namespaces, workloads)
    for p in policies:
        state = result.policies[p.name]
        assert len(state.recent) <= p.spec.keep_recent
        assert len({*state.listed, *state.recent}) <= p.spec.keep_recent + len(p.spec.active_namespace_suffixes)
        assert all(p.in_scope(ns) for ns in state.recent)
    # and the same observation selects the same again: no flapping without new activity
    assert chosen(policies, namespaces, workloads).held_by == result.held_by


def _original_verdicts(policies, namespaces, protected):
    """The Go operator's rules as nsscaler applied them before time and activity: the reference."""
    serving = sorted((p for p in policies if not p.spec.suspend), key=lambda p: p.name)
    verdicts = {}
    for ns in namespaces:
        if ns.name in protected or ns.terminating:
            verdicts[ns.name] = ((), (), True)
            continue
        holders = tuple(p.name for p in serving if p.in_scope(ns.name) and not p.lists_active(ns.name))
        keepers = tuple(p.name for p in serving if p.lists_active(ns.name))
        if holders or keepers:
            verdicts[ns.name] = (holders, keepers, False)
    return verdicts


@hyp_settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.builds(lambda name, prefix, active, suspend: policy(name, prefix, active, suspend=suspend),
                          st.sampled_from(["a", "b", "c"]), st.sampled_from(["shop-", "other-", "kube-"]),
                          st.lists(st.sampled_from([*SUFFIXES, "system", "a"]), unique=True, max_size=3),
                          st.booleans()),
                max_size=3, unique_by=lambda p: p.name),
       st.lists(st.builds(lambda name, t: Namespace(name, terminating=t), st.sampled_from(NAMES), st.booleans()),
                max_size=len(NAMES), unique_by=lambda n: n.name),
       workloads_st, st.none() | st.datetimes(timezones=st.just(dt.UTC)))
def test_an_original_operator_policy_selects_exactly_as_before(policies, namespaces, workloads, now):
    """Only scope_prefix and active_namespace_suffixes: whatever the time and the activity, as before."""
    result = select_namespaces(policies, namespaces=namespaces, found=activity(workloads), settings=settings(), now=now)
    got = {ns: (tuple(p.name for p in v.holders), v.keepers, v.untouchable) for ns, v in result.verdicts.items()}
    assert got == _original_verdicts(policies, namespaces, {"kube-system"})
