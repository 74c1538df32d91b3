"""What the waker answers and whether a request wakes its namespace (pure: the request's facts, the namespace's
policy, and `now` are parameters).

Rules, in order:
1. A request without the namespace header did not come through a route nsscaler pointed here: 400, no wake.
2. A namespace whose holding policy (`job.decide.holding`) does not wake on request, or that no policy holds
   now: 404, no wake.
3. HEAD never wakes (the waiting page polls with HEAD); neither does a known health checker or uptime robot
   (by its User-Agent). They get the same 503.
4. Where the policy asks for a click, only the page's button wakes (a POST with `X-Nsscaler-Wake: click`).
5. Otherwise the request wakes, unless its namespace was woken by this waker less than `RATE_SECONDS` ago (a
   flood makes one Wake, and one attempt at most every few seconds reaches the API).
A browser (Accept: text/html) gets the waiting page, anything else a short JSON body; both 503 + Retry-After.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from job.model.marks import HEADER_NAMESPACE

RETRY_AFTER_SECONDS = 5
RATE_SECONDS = 10.0
CLICK_HEADER = "X-Nsscaler-Wake"
#: health checkers and uptime robots: they must never keep a namespace awake
_PROBES = re.compile(r"kube-probe|ELB-HealthChecker|GoogleHC|Googlebot|bingbot|UptimeRobot|Pingdom|StatusCake|"
                     r"Site24x7|Better ?Uptime|Blackbox[- ]Exporter|Prometheus|Consul Health|HealthCheck|"
                     r"Datadog/Synthetics|NewRelicPinger|curl-health", re.I)


@dataclass(frozen=True)
class Request:
    method: str
    host: str
    path: str
    headers: Mapping[str, str]

    def header(self, name: str) -> str:
        lowered = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lowered), "")

    @property
    def namespace(self) -> str:
        return self.header(HEADER_NAMESPACE).strip()

    @property
    def browser(self) -> bool:
        return "text/html" in self.header("Accept")

    @property
    def words(self) -> str:
        """`GET host/path`, cut short: what the Wake records."""
        return f"{self.method} {self.host}{self.path}"[:200]


@dataclass(frozen=True)
class Door:
    """What the policy of a namespace says to the waker (None: no policy wakes it on request)."""

    policy: str
    max_duration: str
    click: bool


@dataclass(frozen=True)
class Answer:
    status: int
    wake: bool
    why: str
    body: Literal["page", "json"]


def decide(request: Request, door: Door | None, *, last_wake: dt.datetime | None, now: dt.datetime) -> Answer:
    body: Literal["page", "json"] = "page" if request.browser else "json"
    if not request.namespace:
        return Answer(400, False, f"no {HEADER_NAMESPACE} header: not a request a held route sent here", "json")
    if door is None:
        return Answer(404, False, f"no policy wakes {request.namespace} on request", "json")
    if request.method == "HEAD":
        return Answer(503, False, "HEAD does not wake", body)
    if _PROBES.search(request.header("User-Agent")):
        return Answer(503, False, "a health checker does not wake", body)
    if door.click and not (request.method == "POST" and request.header(CLICK_HEADER).lower() == "click"):
        return Answer(503, False, "waiting for a click on the page", body)
    if last_wake is not None and (now - last_wake).total_seconds() < RATE_SECONDS:
        return Answer(503, False, "woken moments ago", body)
    return Answer(503, True, "waking", body)
