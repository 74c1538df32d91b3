"""Who holds a namespace now (`job.decide.holding`): the one rule of the run's selection, the waker's door and the
plugin, checked as a table, against the run's selection, and through the waker's door (pure, `now` given)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from job.decide.holding import holder_of
from job.decide.selection import select_namespaces
from job.model.policy import Lifecycle
from job.model.workloads import Namespace
from job.plugin.status import holder_words
from job.waker.actions import door_of
from job.waker.answer import Door
from tests.unit.examples import examples
from tests.unit.factories import policy, settings

NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)  # a Friday noon
NIGHTS = {"hold_windows": ["19:00-07:00"]}  # outside them at NOW
DAYS = {"hold_windows": ["Mon-Fri 08:00-18:00"]}  # inside them at NOW, until 18:00
ON_REQUEST = {"on_request": True}


@pytest.mark.parametrize(("policies", "namespace", "holder", "until"), [
    pytest.param([policy("p", "shop-")], "shop-v1", "p", None, id="one-policy-always"),
    pytest.param([policy("p", "shop-", ["v1"])], "shop-v1", None, None, id="listed-active"),
    pytest.param([policy("p", "shop-")], "other-v1", None, None, id="out-of-scope"),
    pytest.param([policy("p", "shop-", suspend=True)], "shop-v1", None, None, id="suspended"),
    pytest.param([replace(policy("a", "shop-"), life=Lifecycle(deleting=True)), policy("b", "shop-v")], "shop-v1",
                 "b", None, id="being-deleted"),
    pytest.param([policy("p", "shop-", until="2026-12-01T00:00:00Z")], "shop-v1", None, None, id="expired"),
    pytest.param([policy("p", "shop-", **DAYS)], "shop-v1", "p", NOW.replace(hour=18), id="until-window-closes"),
    pytest.param([policy("a", "shop-"), policy("b", "shop-v")], "shop-v1", "a", None, id="two-hold-first-by-name"),
    pytest.param([policy("a", "shop-", **NIGHTS), policy("b", "shop-v")], "shop-v1", "b", None,
                 id="the-first-is-outside-its-windows"),
    pytest.param([policy("a", "shop-", suspend=True), policy("b", "shop-v", **DAYS)], "shop-v1", "b",
                 NOW.replace(hour=18), id="the-first-is-suspended"),
    pytest.param([policy("a", "shop-"), policy("b", "shop-", ["v1"])], "shop-v1", None, None, id="active-wins"),
    pytest.param([policy("a", "shop-"), policy("b", "shop-", ["v1"], **NIGHTS)], "shop-v1", "a", None,
                 id="a-keeper-outside-its-windows-keeps-nothing"),
])
def test_who_holds_a_namespace_now(policies, namespace, holder, until):
    found = holder_of(policies, namespace, now=NOW)
    assert (found.policy.name if found else None, found.until if found else None) == (holder, until)


def test_without_now_a_policy_with_windows_cannot_be_judged():
    assert holder_of([policy("p", "shop-")], "shop-v1", now=None) is not None
    with pytest.raises(ValueError, match="needs `now`"):
        holder_of([policy("p", "shop-", **DAYS)], "shop-v1", now=None)


@pytest.mark.parametrize(("policies", "door"), [
    pytest.param([policy("a", "shop-", wake={**ON_REQUEST, "max_duration": "1h"}, **NIGHTS),
                  policy("b", "shop-v", wake={**ON_REQUEST, "max_duration": "3h"})], Door("b", "3h", click=False),
                 id="not-the-first-in-scope-but-the-holder"),
    pytest.param([policy("a", "shop-", wake=ON_REQUEST, **NIGHTS), policy("b", "shop-v")], None,
                 id="the-holder-does-not-wake-on-request"),
    pytest.param([policy("a", "shop-"), policy("b", "shop-v", wake={**ON_REQUEST, "on_request_click": True})],
                 Door("b", "8h", click=True), id="the-first-holder-that-wakes-as-the-routes-say"),
    pytest.param([policy("a", "shop-", wake=ON_REQUEST), policy("b", "shop-", ["v1"])], None, id="kept-active"),
])
def test_the_waker_opens_the_door_of_the_policy_holding_the_namespace(policies, door):
    assert door_of(policies, "shop-v1", now=NOW) == door


SUFFIXES = ["v1", "v2", "v3"]
NAMES = [f"{p}{s}" for p in ("shop-", "shop-v", "other-") for s in SUFFIXES]
_policies = st.lists(st.builds(
    lambda name, prefix, active, suspend, windows: policy(name, prefix, active, suspend=suspend,
                                                          **({"hold_windows": windows} if windows else {})),
    st.sampled_from(["a", "b", "c"]), st.sampled_from(["shop-", "shop-v", "other-"]),
    st.lists(st.sampled_from([*SUFFIXES, "1", "2"]), unique=True, max_size=3), st.booleans(),
    st.sampled_from([[], ["19:00-07:00"], ["Mon-Fri 08:00-18:00"], ["Sat-Sun 00:00-24:00"]])),
    max_size=3, unique_by=lambda p: p.name)


@hyp_settings(max_examples=examples(300), deadline=None)
@given(_policies, st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2027, 12, 31),
                               timezones=st.just(dt.UTC)))
def test_the_rule_holds_exactly_what_the_run_s_selection_holds(policies, now):
    """Without keep_recent and Wakes (which only the run knows), the run holds a namespace by the policies
    `holder_of` names, and leaves running every namespace it says nobody holds."""
    result = select_namespaces(policies, namespaces=[Namespace(n) for n in NAMES], found={}, settings=settings(),
                               now=now)
    for name in NAMES:
        found = holder_of(policies, name, now=now)
        assert result.held_by.get(name) == ([p.name for p in found.holders] if found else None)


def cr(name: str, prefix: str, **spec) -> dict:
    return {"metadata": {"name": name, "generation": 1},
            "spec": {"scope_prefix": prefix, "active_namespace_suffixes": [], **spec}}


@pytest.mark.parametrize(("objs", "words"), [
    pytest.param([cr("a", "shop-", **NIGHTS), cr("b", "shop-v", **DAYS)],
                 "NSScaler b holds shop-v1 now until 2026-12-04 18:00Z", id="the-holder-not-the-first-in-scope"),
    pytest.param([cr("a", "shop-", hold_windows=["not a window"]), cr("b", "shop-")], "NSScaler b holds shop-v1 now",
                 id="an-invalid-policy-holds-nothing"),
    pytest.param([cr("a", "shop-", **NIGHTS)], "no NSScaler holds shop-v1 now", id="none-holds-now"),
])
def test_the_plugin_names_the_policy_holding_the_namespace(objs, words):
    assert holder_words(objs, "shop-v1", now=NOW).endswith(words)
