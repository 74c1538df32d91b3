"""The pure rules of wake on request: whether a request wakes (job.waker.answer) and which routes follow a hold
(job.decide.routes, job.model.kinds.httproute). The run Lease's rules are in test_lease.py."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from job.decide.routes import RouteWorld, plan_routes
from job.model.kinds.httproute import Waker, frozen_rules, restored_rules
from job.model.marks import ANNOTATION_ORIGINAL_RULES, HEADER_NAMESPACE
from job.waker.answer import RATE_SECONDS, Door, Request, decide
from job.waker.metrics import WakerMetrics

NOW = dt.datetime(2026, 12, 4, 12, tzinfo=dt.UTC)
DOOR = Door("p", "2h", click=False)


def req(method: str = "GET", **headers: str) -> Request:
    return Request(method, "shop.example", "/", {HEADER_NAMESPACE: "shop-v1", **headers})


@pytest.mark.parametrize(("request_", "door", "last", "status", "wake"), [
    pytest.param(Request("GET", "h", "/", {}), DOOR, None, 400, False, id="no-header"),
    pytest.param(req(), None, None, 404, False, id="no-policy"),
    pytest.param(req("HEAD"), DOOR, None, 503, False, id="head"),
    pytest.param(req(**{"User-Agent": "kube-probe/1.36"}), DOOR, None, 503, False, id="kube-probe"),
    pytest.param(req(**{"User-Agent": "Mozilla/5.0 (compatible; UptimeRobot/2.0)"}), DOOR, None, 503, False,
                 id="uptime-robot"),
    pytest.param(req(), Door("p", "2h", click=True), None, 503, False, id="click-needed"),
    pytest.param(req("POST", **{"X-Nsscaler-Wake": "click"}), Door("p", "2h", click=True), None, 503, True,
                 id="clicked"),
    pytest.param(req(), DOOR, NOW - dt.timedelta(seconds=RATE_SECONDS / 2), 503, False, id="rate-limited"),
    pytest.param(req(), DOOR, NOW - dt.timedelta(seconds=RATE_SECONDS), 503, True, id="rate-passed"),
    pytest.param(req(), DOOR, None, 503, True, id="wakes"),
])
def test_whether_a_request_wakes(request_: Request, door: Door | None, last: dt.datetime | None, status: int,
                                 wake: bool) -> None:
    answer = decide(request_, door, last_wake=last, now=NOW)
    assert (answer.status, answer.wake) == (status, wake)


def world(*, opted: dict[str, str] | None = None, awake: bool) -> RouteWorld:
    """Nothing in the way of shop-v1 (`awake`), or its Deployment not available; a wait begun now."""
    return RouteWorld(opted=opted or {}, blocking={"shop-v1": () if awake else ("deployment/web",)}, waits={},
                      now=NOW)


def route(rules: list[dict], *, record: str | None = None, ns: str = "shop-v1") -> dict:
    notes = {ANNOTATION_ORIGINAL_RULES: record} if record is not None else {}
    return {"metadata": {"name": "r", "namespace": ns, "resourceVersion": "7", "annotations": notes},
            "spec": {"rules": rules}}


RULES = [{"backendRefs": [{"name": "web", "port": 80}],
          "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
              "set": [{"name": HEADER_NAMESPACE.lower(), "value": "forged"}]}}]},
         {"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 301}}]}]


def test_a_frozen_rule_sets_the_header_over_any_value_and_keeps_rules_without_backends() -> None:
    waker = Waker("nsscaler")
    pointed, redirect = frozen_rules(RULES, namespace="shop-v1", waker=waker)
    assert pointed["backendRefs"] == [waker.backend()]
    assert pointed["filters"][0]["requestHeaderModifier"]["set"] == [{"name": HEADER_NAMESPACE, "value": "shop-v1"}]
    assert redirect == RULES[1]
    assert RULES[0]["backendRefs"] == [{"name": "web", "port": 80}]  # the input is not changed


@pytest.mark.parametrize("record", ["", "{}", "[1]", "not json"])
def test_a_malformed_record_is_a_problem_and_the_route_is_left(record: str) -> None:
    with pytest.raises(ValueError, match="original-rules"):
        restored_rules(record)
    plan = plan_routes([route([], record=record)], world=world(awake=True), waker=Waker("n"))
    assert plan.steps == [] and len(plan.problems) == 1 and plan.ungrants == []


def test_routes_point_when_held_wait_until_awake_and_come_back_exactly() -> None:
    waker = Waker("nsscaler")
    held = plan_routes([route(RULES)], world=world(opted={"shop-v1": "p"}, awake=False), waker=waker)
    assert [s.verb for s in held.steps] == ["point"] and held.grants == ["shop-v1"]
    assert json.loads(held.steps[0].body["metadata"]["annotations"][ANNOTATION_ORIGINAL_RULES]) == RULES
    recorded = route([], record=json.dumps(RULES))
    waiting = plan_routes([recorded], world=world(awake=False), waker=waker)
    assert [s.verb for s in waiting.steps] == ["mark"]  # when the wait began: it is bounded
    assert waiting.waiting == ["shop-v1"] and waiting.ungrants == [] and waiting.late == []
    back = plan_routes([recorded], world=world(awake=True), waker=waker)
    assert back.steps[0].body["spec"] == {"rules": RULES} and back.ungrants == ["shop-v1"]
    assert plan_routes([recorded], world=world(opted={"shop-v1": "p"}, awake=False), waker=waker).steps == []


def test_the_waker_s_metrics_are_prometheus_text_with_a_cumulative_histogram():
    metrics = WakerMetrics()
    for code in (503, 503, 503, 404):
        metrics.answered(code)
    metrics.woke("request")
    for seconds in (4.0, 12.5, 700.0, 2000.0):
        metrics.ready_after(seconds)
    lines = metrics.text().splitlines()
    assert 'nsscaler_waker_requests_total{code="503"} 3.0' in lines
    assert 'nsscaler_waker_wakes_total{source="request"} 1.0' in lines
    assert 'nsscaler_waker_wakes_total{source="click"} 0.0' in lines  # every source is there from the start
    assert 'nsscaler_waker_request_to_ready_seconds_bucket{le="5.0"} 1.0' in lines
    assert 'nsscaler_waker_request_to_ready_seconds_bucket{le="20.0"} 2.0' in lines
    assert 'nsscaler_waker_request_to_ready_seconds_bucket{le="900.0"} 3.0' in lines
    assert 'nsscaler_waker_request_to_ready_seconds_bucket{le="+Inf"} 4.0' in lines
    assert "nsscaler_waker_request_to_ready_seconds_count 4.0" in lines
    assert "nsscaler_waker_request_to_ready_seconds_sum 2716.5" in lines
    assert metrics.totals() == {"wakes": 1, "runs": 0, "errors": 0}


def test_the_waker_serves_its_process_figures_and_openmetrics_to_a_scraper_that_asks():
    metrics = WakerMetrics()
    metrics.started_run()
    assert any(line.startswith("process_resident_memory_bytes ") for line in metrics.text().splitlines())
    body, content_type = metrics.exposition("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.decode().rstrip().endswith("# EOF") and "nsscaler_waker_runs_started_total 1.0" in body.decode()
    body, content_type = metrics.exposition(None)
    assert content_type.startswith("text/plain") and b"# EOF" not in body


def test_two_wakers_in_one_process_count_apart():
    first, second = WakerMetrics(), WakerMetrics()
    first.api_error()
    assert (first.totals()["errors"], second.totals()["errors"]) == (1, 0)
