"""Restore in tiers, decided from workloads alone (`job.decide.tiers`): tables for the rules, properties for the
order (a later tier never goes before an earlier one is available or has waited `restore_wait`)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.decide.actions import Action, Verb
from job.decide.plan import select_from_workloads
from job.decide.tiers import in_tiers, namespaces_to_read, tier_of
from job.model import policy as policy_api
from job.model.kinds import Kind
from job.model.marks import ANNOTATION_RESTORE_TIER
from job.model.workloads import Workload
from tests.unit.examples import examples
from tests.unit.factories import namespaces, policy, workload
from tests.unit.factories import settings as make_settings

NOW = dt.datetime(2026, 12, 4, 10, 0, tzinfo=dt.UTC)
ORDERED = policy("p", "shop-", ["v3"], restore_order=["StatefulSet"], restore_wait="5m")
FLAT = policy("p", "shop-", ["v3"])


def stamp(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def frozen(name: str, kind: Kind = Kind.DEPLOYMENT, *, ns: str = "shop-v1", tier: str | None = None,
           original: str = "2") -> Workload:
    return dataclasses.replace(workload(ns, name, 0, kind=kind, original=original, scaled_by="p"), tier=tier)


def back(name: str, kind: Kind = Kind.STATEFULSET, *, ns: str = "shop-v1", available: bool | None = True,
         restored_ago: float | None = 60, tier: str | None = None) -> Workload:
    """Brought back `restored_ago` seconds before NOW (None: nsscaler never wrote it)."""
    return dataclasses.replace(workload(ns, name, 1, kind=kind), available=available, tier=tier,
                               written_by_nsscaler=None if restored_ago is None else stamp(restored_ago))


def restore(w: Workload) -> Action:
    return Action(Verb.RESTORE, w, "p", None, int(w.original or 1), "namespace is active for p", False)


def going(actions: list[Action], around: list[Workload], *, pol=ORDERED, now: dt.datetime = NOW) -> list[str]:
    found = in_tiers(actions, workloads=around, policies={"p": pol}, now=now)
    return sorted(a.workload.name for a in found.actions)


@pytest.mark.parametrize(("w", "order", "tier"), [
    pytest.param(frozen("app"), (), 0, id="no-order-no-annotation:0"),
    pytest.param(frozen("db", Kind.STATEFULSET), (Kind.STATEFULSET,), 0, id="listed-first:0"),
    pytest.param(frozen("app"), (Kind.STATEFULSET,), 1, id="not-listed:last"),
    pytest.param(frozen("app"), (Kind.STATEFULSET, Kind.DEPLOYMENT), 1, id="listed-second:1"),
    pytest.param(frozen("app", tier="0"), (Kind.STATEFULSET,), 0, id="annotation-wins"),
    pytest.param(frozen("app", tier=" 7 "), (), 7, id="annotation-spaces"),
    pytest.param(frozen("app", tier="10"), (), None, id="annotation-over-9:malformed"),
    pytest.param(frozen("app", tier="first"), (), None, id="annotation-word:malformed"),
    pytest.param(frozen("app", tier="-1"), (), None, id="annotation-negative:malformed"),
    pytest.param(frozen("app", tier="²"), (), None, id="annotation-superscript-digit:malformed"),
    pytest.param(frozen("app", tier="0" * 5000), (), None, id="annotation-5000-digits:malformed"),
])
def test_tier_of(w, order, tier):
    assert tier_of(w, order) == tier


def test_without_an_order_everything_comes_back_at_once():
    db, app = frozen("db", Kind.STATEFULSET), frozen("app")
    found = in_tiers([restore(db), restore(app)], workloads=[db, app], policies={"p": FLAT}, now=NOW)
    assert sorted(a.workload.name for a in found.actions) == ["app", "db"]
    assert (found.waits, found.late, found.problems) == ([], [], [])


def test_the_first_tier_goes_and_the_next_waits_for_it():
    db, app = frozen("db", Kind.STATEFULSET, original="1"), frozen("app")
    found = in_tiers([restore(db), restore(app)], workloads=[db, app], policies={"p": ORDERED}, now=NOW)
    assert [a.workload.name for a in found.actions] == ["db"]
    (wait,) = found.waits
    assert (wait.namespace, wait.tier, wait.waiting_for, wait.pending) == ("shop-v1", 1, ("statefulset/db",), 1)
    assert (wait.since, wait.until) == (NOW, NOW + dt.timedelta(minutes=5))


@pytest.mark.parametrize(("db", "goes", "late"), [
    pytest.param(back("db", available=True), ["app"], [], id="available:goes"),
    pytest.param(back("db", available=False, restored_ago=60), [], [], id="not-available-within-wait:waits"),
    pytest.param(back("db", available=None, restored_ago=60), [], [], id="unknown-is-not-available:waits"),
    pytest.param(back("db", available=False, restored_ago=300), ["app"], ["statefulset/db"], id="wait-passed:late"),
    pytest.param(back("db", available=False, restored_ago=None), [], [], id="never-restored-by-nsscaler:waits"),
    pytest.param(back("db", available=False, restored_ago=-30), [], [], id="stamp-ahead-of-our-clock:waits"),
])
def test_the_next_tier_goes_when_the_earlier_one_is_available_or_has_waited(db, goes, late):
    app = frozen("app")
    found = in_tiers([restore(app)], workloads=[db, app], policies={"p": ORDERED}, now=NOW)
    assert sorted(a.workload.name for a in found.actions) == goes
    assert [list(t.not_ready) for t in found.late] == ([late] if late else [])
    if not goes:
        (wait,) = found.waits
        assert wait.waiting_for == ("statefulset/db",)
        began = NOW if db.written_by_nsscaler is None else dt.datetime.strptime(
            db.written_by_nsscaler, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        assert wait.until == began + dt.timedelta(minutes=5)


#: a DaemonSet of tier 0 brought back: its restore left nsscaler owning no field, so it carries no stamp
AGENT = back("agent", Kind.DAEMONSET, available=False, restored_ago=None, tier="0")


def remembering(since: str) -> policy_api.Policy:
    """ORDERED, whose status (written by the run before) says shop-v1's tier 1 has waited since `since`."""
    return dataclasses.replace(ORDERED, status={"restoring": [{"namespace": "shop-v1", "tier": 1, "since": since}]})


@pytest.mark.parametrize(("db", "pol", "goes"), [
    # a DaemonSet's restore leaves nsscaler owning no field: no stamp, the status remembers when the wait began
    pytest.param(AGENT, remembering(stamp(60)), [],
                 id="remembered-60s-ago:waits"),
    pytest.param(AGENT, remembering(stamp(301)), ["app"],
                 id="remembered-301s-ago:goes-late"),
    pytest.param(back("db", available=False, restored_ago=400), remembering(stamp(60)), [],
                 id="the-later-of-stamp-and-memory:waits"),
])
def test_the_status_remembers_when_a_wait_began(db, pol, goes):
    app = frozen("app", tier="1")
    assert going([restore(app)], [db, app], pol=pol) == goes


def test_a_gone_policys_restore_waits_for_nothing_it_cannot_remember():
    db, app = back("db", available=False, restored_ago=None), frozen("app", tier="1")
    found = in_tiers([restore(app)], workloads=[db, app], policies={}, now=NOW)
    assert [a.workload.name for a in found.actions] == ["app"] and not found.late


def test_only_earlier_tiers_of_the_same_namespace_are_waited_for():
    app = frozen("app")
    elsewhere = back("db", ns="shop-v2", available=False)
    same_tier = back("api", Kind.DEPLOYMENT, available=False)  # tier 1 like app: not earlier
    excluded = dataclasses.replace(back("cache", available=False), excluded=True)
    assert going([restore(app)], [app, elsewhere, same_tier, excluded]) == ["app"]


def test_three_tiers_go_one_at_a_time():
    db, app = frozen("db", Kind.STATEFULSET, original="1"), frozen("app")
    web = frozen("web", tier="2")
    assert going([restore(db), restore(app), restore(web)], [db, app, web]) == ["db"]
    db_back = back("db")
    assert going([restore(app), restore(web)], [db_back, app, web]) == ["app"]
    app_back = back("app", Kind.DEPLOYMENT, available=False, restored_ago=10)
    found = in_tiers([restore(web)], workloads=[db_back, app_back, web], policies={"p": ORDERED}, now=NOW)
    assert not found.actions and found.waits[0].waiting_for == ("deployment/app",)


def test_a_malformed_tier_stays_frozen_and_says_how_to_fix_it():
    db, odd = frozen("db", Kind.STATEFULSET), frozen("odd", tier="soon")
    found = in_tiers([restore(db), restore(odd)], workloads=[db, odd], policies={"p": ORDERED}, now=NOW)
    assert [a.workload.name for a in found.actions] == ["db"]
    (problem,) = found.problems
    assert ANNOTATION_RESTORE_TIER in problem.message and "'soon'" in problem.message
    assert "stays frozen with its record" in problem.message


def test_freezes_and_other_actions_pass_untouched():
    held = workload("shop-v2", "api", 3)
    freeze = Action(Verb.FREEZE, held, "p", None, 0, "held", False)
    db, app = frozen("db", Kind.STATEFULSET), frozen("app")
    found = in_tiers([freeze, restore(db), restore(app)], workloads=[held, db, app], policies={"p": ORDERED},
                     now=NOW)
    assert [(a.verb, a.workload.name) for a in found.actions] == [(Verb.FREEZE, "api"), (Verb.RESTORE, "db")]


def test_a_gone_policy_restores_with_the_default_wait_and_no_order():
    db, app = frozen("db", Kind.STATEFULSET), frozen("app", tier="1")
    found = in_tiers([restore(db), restore(app)], workloads=[db, app], policies={}, now=NOW)
    assert [a.workload.name for a in found.actions] == ["db"]
    assert found.waits[0].until - found.waits[0].since == dt.timedelta(minutes=5)


def test_the_read_stage_reads_whole_only_namespaces_whose_lowest_pending_tier_is_not_zero():
    pending_zero = [frozen("db", Kind.STATEFULSET, ns="shop-v1"), frozen("app", ns="shop-v1")]
    pending_later = [frozen("app", ns="shop-v2")]
    flat = [frozen("app", ns="shop-v4")]
    still_held = [frozen("app", ns="shop-v5")]
    workloads = [*pending_zero, *pending_later, *flat, *still_held]
    chosen = policy("p", "shop-", ["v1", "v2", "v4"], restore_order=["StatefulSet"])
    selection = select_from_workloads([chosen], namespaces=namespaces("shop-v1", "shop-v2", "shop-v4", "shop-v5"),
                       workloads=workloads, settings=make_settings(), now=NOW)
    assert namespaces_to_read(workloads, selection=selection, policies={"p": chosen}) == ["shop-v2", "shop-v4"]


# -- properties ----------------------------------------------------------------------------------------------

_KINDS = [Kind.STATEFULSET, Kind.DEPLOYMENT, Kind.CRONJOB]


@st.composite
def namespaces_restoring(draw: st.DrawFn) -> tuple[list[Workload], list[Workload]]:
    """One namespace: workloads still frozen (pending) and workloads back, each with a kind, maybe a tier
    annotation, availability and a restore time."""
    pending, around = [], []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(_KINDS))
        tier = draw(st.one_of(st.none(), st.integers(0, 3).map(str)))
        pending.append(frozen(f"f{i}", kind, tier=tier))
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(_KINDS))
        tier = draw(st.one_of(st.none(), st.integers(0, 3).map(str)))
        around.append(back(f"b{i}", kind, available=draw(st.sampled_from([True, False, None])),
                           restored_ago=draw(st.one_of(st.none(), st.integers(0, 900))), tier=tier))
    return pending, around


@settings(max_examples=examples(200), deadline=None)
@given(namespaces_restoring(), st.sampled_from([(), (Kind.STATEFULSET,), (Kind.STATEFULSET, Kind.DEPLOYMENT)]))
def test_restores_go_one_tier_at_a_time_and_never_before_the_earlier_ones(case, order):
    pending, around = case
    chosen = policy("p", "shop-", ["v3"], restore_order=list(order), restore_wait="5m")
    found = in_tiers([restore(w) for w in pending], workloads=[*pending, *around], policies={"p": chosen}, now=NOW)
    tiers_going = {tier_of(a.workload, order) for a in found.actions}
    lowest = min(tier_of(w, order) for w in pending)
    # at most one tier goes, and it is the lowest pending one
    assert tiers_going in (set(), {lowest})
    # every pending workload goes now or is counted as waiting: none is dropped
    waiting = sum(w.pending for w in found.waits)
    assert len(found.actions) + waiting == len(pending)
    if found.actions:
        earlier = [w for w in around if tier_of(w, order) < lowest]
        unready = [w for w in earlier if w.available is not True]
        stamps = [w.written_by_nsscaler for w in earlier if w.written_by_nsscaler]
        # it goes only when the earlier tiers are available or the wait passed since nsscaler brought them back
        assert not unready or (stamps and max(stamps) <= stamp(300))
    else:
        (wait,) = found.waits
        assert wait.tier == lowest and wait.waiting_for and wait.until > NOW


@settings(max_examples=examples(100), deadline=None)
@given(namespaces_restoring())
def test_without_an_order_or_annotations_a_restore_is_one_step(case):
    pending, around = case
    plain = [dataclasses.replace(w, tier=None) for w in pending]
    found = in_tiers([restore(w) for w in plain], workloads=[*plain, *around], policies={"p": FLAT}, now=NOW)
    assert len(found.actions) == len(plain) and not found.waits


@pytest.mark.parametrize(("restoring", "read"), [
    pytest.param([{"namespace": "shop-v1", "tier": 1, "since": stamp(30)}], ["shop-v1"], id="a-wait-remembered"),
    pytest.param([{"namespace": "shop-v9", "tier": 1, "since": stamp(30)}], [], id="another-namespace-waits"),
    pytest.param([], [], id="no-wait"),
])
def test_a_namespace_whose_wait_the_status_remembers_is_read_whole_though_no_record_shows_its_data_tier(
        restoring, read):
    """The data-tier object came back at the run before and carries no record now: only the policy's status says
    that the namespace's apps wait for it, and reading the namespace whole finds it again."""
    app = frozen("app", ns="shop-v1")
    chosen = dataclasses.replace(policy("p", "shop-", ["v1"]), status={"restoring": restoring})
    selection = select_from_workloads([chosen], namespaces=namespaces("shop-v1"), workloads=[app],
                                      settings=make_settings(), now=NOW)
    assert namespaces_to_read([app], selection=selection, policies={"p": chosen}) == read
