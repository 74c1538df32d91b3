"""The waker against the real control plane: the real `nsscaler-waker` process, as its own ServiceAccount with
the component's RBAC (least privilege: a forbidden call fails the test), and the real Wake admission (the
requestedBy the API server accepts is the waker's own user). Requests carry the namespace header as the gateway
sets it; `tests/node/test_wake_on_request_on_node.py` sends them through a real gateway (Traefik), which sets it
itself, and asserts that the waker's `Retry-After` reaches the client through it."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from job.model.marks import ANNOTATION_ORIGINAL_RULES, ANNOTATION_WAKE_REQUEST, HEADER_NAMESPACE
from job.waker.actions import WAKE_NAME
from tests.gateway import backend, gateway_crds, httproute
from tests.waker_process import WakerProcess, waker

__all__ = ["gateway_crds"]

pytestmark = pytest.mark.usefixtures("crd", "wake_admission")
BROWSER = {"Accept": "text/html,application/xhtml+xml", "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/140"}


@pytest.fixture
def world(api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str,
          tmp_path: Path) -> Iterator[tuple[str, WakerProcess]]:
    """Namespaces `<prefix>a`..`e`, held by `<prefix>open` (wakes on any request); `<prefix>kclick` held by a
    policy that asks for a click (and by `open`); `<prefix>xno` held only by one that does not wake on request
    (`open` lists it as active). The waker runs in
    `<prefix>sys`."""
    for suffix in ("a", "b", "c", "d", "kclick", "xno", "sys"):
        api.create(builders.namespace(prefix + suffix))
    api.create(builders.nsscaler(f"{prefix}open", prefix, ["sys", "xno"],
                                 wake={"on_request": True, "max_duration": "2h"}))
    api.create(builders.nsscaler(f"{prefix}click", f"{prefix}k", [], wake={"on_request": True,
                                                                            "on_request_click": True}))
    api.create(builders.nsscaler(f"{prefix}no", f"{prefix}x", [], wake={"on_request": False}))
    with waker(api, control_plane, namespace=prefix + "sys", prefix=prefix, workdir=tmp_path) as process:
        yield prefix, process
        print(process.logs())


def ask(process: WakerProcess, ns: str, method: str = "GET", path: str = "/cart?id=7",
        headers: dict[str, str] | None = None) -> requests.Response:
    return requests.request(method, process.url + path, timeout=30,
                            headers={"Host": "shop.example", HEADER_NAMESPACE: ns, **(headers or {})})


def wakes(api: AdminApi, ns: str) -> list[dict[str, Any]]:
    return api.list("Wake", ns)


def runs(api: AdminApi, ns: str) -> list[dict[str, Any]]:
    return [j for j in api.list("Job", ns) if j["metadata"]["name"].startswith("nsscaler-wake-")]


def test_a_browser_gets_the_waiting_page_and_its_request_creates_one_bounded_audited_wake_and_starts_a_run(
        api: AdminApi, world: tuple[str, WakerProcess]) -> None:
    prefix, process = world
    ns, sys_ns = prefix + "a", prefix + "sys"
    answer = ask(process, ns, headers=BROWSER)

    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"
    assert answer.headers["Content-Type"].startswith("text/html")
    assert ns in answer.text and f"{prefix}open" in answer.text and "2h" in answer.text
    (wake,) = wakes(api, ns)
    assert wake["metadata"]["name"] == WAKE_NAME and wake["spec"]["duration"] == "2h"
    assert wake["spec"]["requestedBy"] == process.identity  # the waker's own user, as admission requires
    assert wake["spec"]["reason"] == "request to GET shop.example/cart?id=7"
    assert wake["metadata"]["annotations"][ANNOTATION_WAKE_REQUEST] == "GET shop.example/cart?id=7"
    (job,) = runs(api, sys_ns)  # a run at once, from the CronJob's template
    cron = api.get("CronJob", "nsscaler", sys_ns)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == \
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert job["metadata"]["ownerReferences"][0]["uid"] == cron["metadata"]["uid"]


def test_a_flood_of_requests_makes_one_wake_and_one_run(api: AdminApi, world: tuple[str, WakerProcess]) -> None:
    prefix, process = world
    ns = prefix + "b"
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda i: ask(process, ns, path=f"/item/{i}"), range(200)))
    assert {a.status_code for a in answers} == {503}
    assert {a.headers.get("Retry-After") for a in answers} == {"5"}  # every client is told when to ask again
    assert all(a.headers["Content-Type"].startswith("application/json") for a in answers)
    assert answers[0].json()["namespace"] == ns and answers[0].json()["retryAfterSeconds"] == 5
    assert len(wakes(api, ns)) == 1
    assert len(runs(api, prefix + "sys")) == 1


def test_head_and_health_checkers_do_not_wake(api: AdminApi, world: tuple[str, WakerProcess]) -> None:
    prefix, process = world
    ns = prefix + "c"
    head = ask(process, ns, "HEAD")
    assert head.status_code == 503 and head.headers.get("Retry-After") == "5"
    probes = ("kube-probe/1.36", "ELB-HealthChecker/2.0", "GoogleHC/1.0", "Mozilla/5.0+(compatible; UptimeRobot/2.0)")
    for agent in probes:
        assert ask(process, ns, headers={"User-Agent": agent}).status_code == 503
    assert wakes(api, ns) == []
    assert ask(process, ns).status_code == 503  # an ordinary request afterwards does wake
    assert len(wakes(api, ns)) == 1


def test_a_policy_that_asks_for_a_click_wakes_only_on_the_click(api: AdminApi,
                                                                world: tuple[str, WakerProcess]) -> None:
    prefix, process = world
    ns = prefix + "kclick"
    page = ask(process, ns, headers=BROWSER)
    assert page.status_code == 503 and 'id="wake"' in page.text
    assert wakes(api, ns) == []
    assert ask(process, ns, "POST", headers={"X-Nsscaler-Wake": "click"}).status_code == 503
    assert len(wakes(api, ns)) == 1


def test_a_namespace_no_policy_wakes_on_request_is_refused_and_nothing_is_created(
        api: AdminApi, world: tuple[str, WakerProcess]) -> None:
    prefix, process = world
    refused = ask(process, prefix + "xno")
    assert refused.status_code == 404 and refused.json()["state"] == "refused"
    assert "Retry-After" not in refused.headers  # asking again will not help
    assert wakes(api, prefix + "xno") == []
    assert requests.get(process.url + "/", timeout=10).status_code == 400  # no header: not sent by a held route


def ready_count(process: WakerProcess) -> int:
    text = requests.get(process.url + "/metrics", timeout=10).text
    return int(float(next(line.split()[-1] for line in text.splitlines()
                    if line.startswith("nsscaler_waker_request_to_ready_seconds_count"))))


def test_the_waker_counts_its_wakes_and_the_time_until_the_namespace_s_routes_are_back(
        api: AdminApi, world: tuple[str, WakerProcess], gateway_crds: None) -> None:
    """The histogram observes a wake once the namespace's routes carry no record any more (what the run does
    when it restores them; here by hand), not before: the time it observes is at least the time the route took."""
    prefix, process = world
    ns = prefix + "c"
    api.create(httproute(ns, "shop", hostname="c.shop.example", rules=[{"backendRefs": [backend("web", 80)]}]))
    api.patch("HTTPRoute", "shop", {"metadata": {"annotations": {ANNOTATION_ORIGINAL_RULES: "[]"}}}, ns)
    asked = time.monotonic()
    assert ask(process, ns).status_code == 503
    assert ready_count(process) == 0
    time.sleep(3)  # the route stays pointed at least this long: a lower bound for the time observed, not a wait
    api.patch("HTTPRoute", "shop", {"metadata": {"annotations": {ANNOTATION_ORIGINAL_RULES: None}}}, ns)
    back = time.monotonic() - asked
    wait_until(lambda: ready_count(process) == 1, timeout=30, what="the waker to see the routes back")
    text = requests.get(process.url + "/metrics", timeout=10).text
    observed = float(next(line.split()[-1] for line in text.splitlines()
                          if line.startswith("nsscaler_waker_request_to_ready_seconds_sum")))
    assert observed >= back - 0.1, (observed, back)
    assert 'nsscaler_waker_wakes_total{source="request"} 1.0' in text and 'nsscaler_waker_runs_started_total' in text
    assert "process_resident_memory_bytes " in text  # the client library's process figures come with it
    scrape = requests.get(process.url + "/metrics", timeout=10,
                          headers={"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"})
    assert scrape.headers["Content-Type"].startswith("application/openmetrics-text"), scrape.headers
    assert scrape.text.rstrip().endswith("# EOF")


def test_a_wake_a_person_writes_starts_a_run_at_once_one_job_for_both_replicas(
        api: AdminApi, control_plane: controlplane.ControlPlane, world: tuple[str, WakerProcess],
        tmp_path: Path) -> None:
    """A second waker process stands for the Deployment's second replica: both see the Wake (their watch), and
    the Job named after it starts once."""
    prefix, process = world
    ns, sys_ns = prefix + "d", prefix + "sys"
    with waker(api, control_plane, namespace=sys_ns, prefix=prefix + "2", workdir=tmp_path / "second",
               install_rbac=False) as second:
        created = api.create(builders.wake(ns, "1h", requestedBy="nsscaler-test-admin", reason="working on it"))
        uid = created["metadata"]["uid"]
        wait_until(lambda: any(j["metadata"]["name"] == f"nsscaler-wake-{uid[:13]}" for j in runs(api, sys_ns)),
                   timeout=30, what="the run a person's Wake starts")
        assert len(runs(api, sys_ns)) == 1
        person = [requests.get(p.url + "/metrics", timeout=10).text for p in (process, second)]
        assert sum('nsscaler_waker_wakes_total{source="person"} 1.0' in text for text in person) == 1, person
