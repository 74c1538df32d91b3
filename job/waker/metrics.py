"""What the waker counts, served on `GET /metrics` by the Prometheus client library.

Per replica, since its start: requests by the status answered, wakes by source (`request`: any request woke it;
`click`: the page's button; `person`: a Wake someone created, which the waker started a run for), runs started
at once, errors of its API calls, and the histogram of the time from the request that woke a namespace to the
moment its routes were back (the app answers from then on). The library adds the process' own figures (CPU, memory,
open files, start time) and answers OpenMetrics to a scraper that asks for it.

Each waker has a registry of its own (never the library's global one): a test may run several wakers in one
process, and each must count only what it answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder

#: seconds: a namespace of small Deployments is back in tens of seconds; one with tiers or big images in minutes
READY_BUCKETS = (5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0)
#: every source is served from the start (at 0), so a rate over it exists before the first wake of each kind
WAKE_SOURCES = ("request", "click", "person")

# A `_created` series per counter doubles what is scraped and no alert or panel reads it.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


@dataclass
class WakerMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self._requests = Counter("nsscaler_waker_requests", "Requests the waker answered, by status code.",
                                 ["code"], registry=self.registry)
        self._wakes = Counter("nsscaler_waker_wakes", "Wakes, by what woke the namespace (person: someone wrote it).",
                              ["source"], registry=self.registry)
        for source in WAKE_SOURCES:
            self._wakes.labels(source=source)
        self._runs = Counter("nsscaler_waker_runs_started", "Runs started at once (Jobs from the CronJob).",
                             registry=self.registry)
        self._errors = Counter("nsscaler_waker_api_errors", "API calls of the waker that failed.",
                               registry=self.registry)
        self._ready = Histogram("nsscaler_waker_request_to_ready_seconds",
                                "From the request that woke a namespace to its routes being back.",
                                buckets=READY_BUCKETS, registry=self.registry)
        prometheus_client.ProcessCollector(registry=self.registry)

    def answered(self, code: int) -> None:
        self._requests.labels(code=str(code)).inc()

    def woke(self, source: str) -> None:
        self._wakes.labels(source=source).inc()

    def started_run(self) -> None:
        self._runs.inc()

    def api_error(self) -> None:
        self._errors.inc()

    def ready_after(self, seconds: float) -> None:
        self._ready.observe(seconds)

    def _value(self, name: str, labels: dict[str, str] | None = None) -> int:
        return int(self.registry.get_sample_value(name, labels) or 0)

    def totals(self) -> dict[str, int]:
        """What `/healthz` reports: wakes of every source, runs started, API errors."""
        return {"wakes": sum(self._value("nsscaler_waker_wakes_total", {"source": s}) for s in self.sources()),
                "runs": self._value("nsscaler_waker_runs_started_total"),
                "errors": self._value("nsscaler_waker_api_errors_total")}

    def sources(self) -> list[str]:
        return sorted({sample.labels["source"] for metric in self.registry.collect()
                       if metric.name == "nsscaler_waker_wakes" for sample in metric.samples})

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The scrape's body and content type: OpenMetrics when the scraper asks for it, else the text format."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type

    def text(self) -> str:
        """The text format (version 0.0.4), as a scraper that asks for nothing in particular gets it."""
        return prometheus_client.generate_latest(self.registry).decode()
