"""A wake budget against the real control plane: Wakes re-created one after another under the waker's name (what a
crawler hitting a held namespace's URL after every wake amounts to) share one budget, counted from the record in
the policy's status, which outlives every Wake deleted.

Time is the run's `now`, injected; a Wake's creation is the API server's own stamp. Nothing sleeps."""

from __future__ import annotations

import datetime as dt
import signal
import sys
from pathlib import Path

import pytest

from devtools import builders
from devtools.builders import AdminApi
from tests.faults import FaultProxy, KillAt
from tests.integration.test_wake import created, frozen, only_wake, run_at, shop, sizes
from tests.users import plugin

NSSCALER = str(Path(sys.executable).parent / "nsscaler")
MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)


def stamp(at: dt.datetime, precision: str = "seconds") -> str:
    return at.strftime("%Y-%m-%dT%H:%MZ" if precision == "minutes" else "%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.usefixtures("wake_admission")
def test_three_wakes_in_a_row_past_the_budget_the_third_ignored_saying_until_when(api: AdminApi, control_plane,
                                                                                   prefix):
    ns, policy = shop(api, prefix, max_duration="8h", budget={"hours": 2, "per": "day"})
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    run_at(control_plane, now)
    assert sizes(api, ns) == frozen(policy)

    # 1: an hour, honoured whole
    first = api.create(builders.wake(ns, "1h", name="nsscaler-waker", reason="GET shop/"))
    run_at(control_plane, now)
    assert only_wake(api, ns)["status"]["state"] == "Active" and sizes(api, ns)["Deployment"][0] == 3
    ended = created(first) + HOUR + MINUTE
    run_at(control_plane, ended)
    assert only_wake(api, ns)["status"]["state"] == "Expired" and sizes(api, ns) == frozen(policy)
    api.delete("Wake", "nsscaler-waker", namespace=ns)

    # 2: re-created under the same name, 8h asked: the hour left of the budget, cut there and saying so
    api.create(builders.wake(ns, "8h", name="nsscaler-waker", reason="GET shop/"))
    run_at(control_plane, ended)
    status = only_wake(api, ns)["status"]
    cut_at = ended + HOUR
    assert (status["state"], status["capped"], status["appliedUntil"]) == ("Active", True, stamp(cut_at))
    assert (f"cut at {stamp(cut_at, 'minutes')} by the wake budget of NSScaler {policy} (2h per day, counted "
            f"across all Wakes of the namespace)") in status["message"]
    assert sizes(api, ns)["Deployment"][0] == 3
    run_at(control_plane, cut_at)
    assert only_wake(api, ns)["status"]["state"] == "Expired" and sizes(api, ns) == frozen(policy)
    api.delete("Wake", "nsscaler-waker", namespace=ns)

    # 3: re-created again: nothing left; ignored with the budget and when it frees up, the namespace held
    third = api.create(builders.wake(ns, "8h", name="nsscaler-waker", reason="GET shop/"))
    later = cut_at + MINUTE
    report = run_at(control_plane, later)
    assert report.count("applied") == 0 and sizes(api, ns) == frozen(policy)
    status = only_wake(api, ns)["status"]
    frees = created(first) + dt.timedelta(days=1)  # the first hour starts to leave the rolling day
    assert status["state"] == "Ignored", status
    assert status["message"] == (f"ignored: the wake budget of NSScaler {policy} (2h per day) is used up in "
                                 f"namespace {ns}; the namespace stays held; the budget "
                                 f"frees up at {stamp(frees, 'minutes')}")
    shown = plugin(control_plane.admin_kubeconfig, "status", "-n", ns)
    assert "Wake nsscaler-waker: Ignored, by " in shown.stdout and "budget frees up at" in shown.stdout, shown
    events = [e for e in api.list("Event", ns) if e["involvedObject"].get("name") == ns]
    assert "WakeIgnored" in [e["reason"] for e in events]
    seen = only_wake(api, ns)["metadata"]["resourceVersion"]
    run_at(control_plane, later + 10 * MINUTE)  # judged the same: nothing sent, still held
    assert only_wake(api, ns)["metadata"]["resourceVersion"] == seen and sizes(api, ns) == frozen(policy)

    # the policy's status: the budget and the record, two entries for two uids under one name
    budget_row = {"namespace": ns, "budget": "2h per day", "woken": "2h", "freesAt": stamp(frees)}
    assert_recorded(api, policy, budget_row, [(created(first), created(first) + HOUR), (ended, cut_at)],
                    not_there=third["metadata"]["uid"])


def assert_recorded(api: AdminApi, policy: str, budget_row: dict[str, str],
                    spans: list[tuple[dt.datetime, dt.datetime]], *, not_there: str) -> None:
    """The policy's `wakeBudget` is that one row; its record, the Wake named nsscaler-waker over `spans`, each
    another uid, none of them `not_there`."""
    found = api.status(policy)
    assert found["wakeBudget"] == [budget_row]
    history = found["wakeHistory"]
    assert [(e["wake"], e["from"], e["until"]) for e in history] == [
        ("nsscaler-waker", stamp(start), stamp(end)) for start, end in spans]
    uids = {e["uid"] for e in history}
    assert len(uids) == len(spans) and not_there not in uids


@pytest.mark.usefixtures("wake_admission")
def test_the_record_is_written_before_the_namespace_comes_back(api: AdminApi, control_plane, run_job, prefix,
                                                              admin_token, tmp_path):
    """Every request of the run that honours a Wake, as the proxy in front of the API server sees it: the policy's
    record goes first, so a run killed after any of its workload writes has left the wake on the record."""
    ns, policy = shop(api, prefix, budget={"hours": 2, "per": "week"})
    assert run_job().exit_code == 0
    wake = api.create(builders.wake(ns, "1h"))
    seen: list[tuple[str, str]] = []
    with FaultProxy(control_plane, fraction=0.0, before_forward=lambda m, p: seen.append((m, p))) as proxy:
        result = run_job(kubeconfig=proxy.kubeconfig(tmp_path / "order", admin_token))
    after = dt.datetime.now(dt.UTC)
    assert result.exit_code == 0, result.stderr
    writes = [p.split("?")[0] for m, p in seen if m in ("PATCH", "PUT", "POST")]
    record = writes.index(f"/apis/{builders.NSSCALER_VERSION}/nsscalers/{policy}/status")
    restores = [i for i, p in enumerate(writes) if f"/namespaces/{ns}/deployments/" in p
                or f"/namespaces/{ns}/statefulsets/" in p]
    assert restores and record < min(restores), writes
    [entry] = api.status(policy)["wakeHistory"]
    assert entry["uid"] == wake["metadata"]["uid"]  # from the run that honoured it: its creation or a moment later
    assert created(wake) <= dt.datetime.fromisoformat(entry["from"]) <= after


@pytest.mark.usefixtures("wake_admission")
def test_a_run_killed_while_it_wakes_leaves_the_wake_on_the_record_and_it_counts_once(api: AdminApi, control_plane,
                                                                                      prefix, admin_token, tmp_path):
    """The run that honours a Wake is SIGKILLed at its first workload write (the fault proxy counts the requests:
    the same point on an idle or a busy machine), after the record and before its own status. The record is
    there; the next runs keep that one entry, and a Wake re-created after the first was deleted gets what is left
    of the budget counted from it."""
    ns, policy = shop(api, prefix, budget={"hours": 2, "per": "day"})
    run_at(control_plane, dt.datetime.now(dt.UTC))
    first = api.create(builders.wake(ns, "1h", name="nsscaler-waker"))
    with FaultProxy(control_plane, fraction=0.0) as proxy:
        kill = KillAt(method="PATCH", path_part=f"/namespaces/{ns}/", n=1).on(proxy)
        kill.start([NSSCALER, "--kubeconfig", str(proxy.kubeconfig(tmp_path / "kill", admin_token)),
                    "--concurrency", "1", "--log-level", "error"])
        assert kill.wait() == -signal.SIGKILL and kill.killed.is_set(), "the run ended before its first write"
        proxy.wait_idle()
    assert only_wake(api, ns).get("status", {}).get("state", "Pending") == "Pending"  # its status never written
    [entry] = api.status(policy)["wakeHistory"]
    assert entry["uid"] == first["metadata"]["uid"]
    started = dt.datetime.fromisoformat(entry["from"])

    run_at(control_plane, created(first) + 30 * MINUTE)  # the next run finishes the restore
    assert sizes(api, ns)["StatefulSet"][0] == 2 and api.status(policy)["wakeHistory"] == [entry]
    api.delete("Wake", "nsscaler-waker", namespace=ns)
    api.create(builders.wake(ns, "8h", name="nsscaler-waker"))
    run_at(control_plane, created(first) + 31 * MINUTE)
    status = only_wake(api, ns)["status"]
    assert (status["state"], status["capped"]) == ("Active", True)
    assert status["appliedUntil"] == stamp(started + 2 * HOUR)  # two hours in all, the killed run's included
    assert [e["until"] for e in api.status(policy)["wakeHistory"]] == [
        stamp(created(first) + 31 * MINUTE), stamp(started + 2 * HOUR)]


@pytest.mark.parametrize(("budget", "limit"), [
    pytest.param({"hours": 24, "per": "day"}, "hours must be shorter than the window (at most 23 per day, 167 per "
                                               "week)", id="a whole day"),
    pytest.param({"hours": 168, "per": "week"}, "should be less than or equal to 167", id="a whole week"),
    pytest.param({"hours": 0}, "should be greater than or equal to 1", id="zero"),
    pytest.param({"hours": 2, "per": "month"}, 'Unsupported value: \\"month\\"', id="a month"),
    pytest.param({"per": "day"}, "spec.wake.budget.hours: Required value", id="no hours"),
    pytest.param({"hours": "8"}, 'must be of type integer', id="hours as text"),
])
@pytest.mark.usefixtures("crd")
def test_an_absurd_budget_is_refused_at_admission_with_the_limit(api: AdminApi, prefix, budget, limit):
    refused = api.http.post(api.url("NSScaler"), timeout=30, json=builders.nsscaler(
        f"{prefix}p", prefix, [], wake={"budget": budget}))
    assert refused.status_code == 422 and limit in refused.text, refused.text
    assert not api.exists("NSScaler", f"{prefix}p")
