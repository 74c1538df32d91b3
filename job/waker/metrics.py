"""What the waker counts, in the Prometheus text format on `GET /metrics` (pure: no client library, no I/O).

Per replica, since its start: requests by the status answered, wakes by source (`request`: any request woke it;
`click`: the page's button; `person`: a Wake someone created, which the waker started a run for), runs started
at once, errors of its API calls, and the histogram of the
time from the request that woke a namespace to the moment its routes were back (the app answers from then on).
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

#: seconds: a namespace of small Deployments is back in tens of seconds; one with tiers or big images in minutes
READY_BUCKETS = (5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...] = READY_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(READY_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value

    def lines(self, name: str) -> list[str]:
        out, running = [], 0
        for bound, count in zip((*self.buckets, float("inf")), self.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            out.append(f'{name}_bucket{{le="{le}"}} {running}')
        return [*out, f"{name}_sum {self.total:.3f}", f"{name}_count {running}"]


@dataclass
class WakerMetrics:
    requests: Counter[int] = field(default_factory=Counter)
    wakes: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    errors: int = 0
    ready: Histogram = field(default_factory=Histogram)

    def text(self) -> str:
        lines = ["# HELP nsscaler_waker_requests_total Requests the waker answered, by status code.",
                 "# TYPE nsscaler_waker_requests_total counter"]
        lines += [f'nsscaler_waker_requests_total{{code="{code}"}} {n}' for code, n in sorted(self.requests.items())]
        lines += ["# HELP nsscaler_waker_wakes_total Wakes, by what woke the namespace (person: someone wrote it).",
                  "# TYPE nsscaler_waker_wakes_total counter"]
        lines += [f'nsscaler_waker_wakes_total{{source="{source}"}} {self.wakes[source]}'
                  for source in sorted({"request", "click", "person", *self.wakes})]
        lines += ["# HELP nsscaler_waker_runs_started_total Runs started at once (Jobs from the CronJob).",
                  "# TYPE nsscaler_waker_runs_started_total counter", f"nsscaler_waker_runs_started_total {self.runs}",
                  "# HELP nsscaler_waker_api_errors_total API calls of the waker that failed.",
                  "# TYPE nsscaler_waker_api_errors_total counter", f"nsscaler_waker_api_errors_total {self.errors}",
                  "# HELP nsscaler_waker_request_to_ready_seconds From the request that woke a namespace to its "
                  "routes being back.",
                  "# TYPE nsscaler_waker_request_to_ready_seconds histogram",
                  *self.ready.lines("nsscaler_waker_request_to_ready_seconds")]
        return "\n".join(lines) + "\n"
