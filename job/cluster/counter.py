"""The count of requests a connection sent, by verb, and of those the API server throttled: what the run reports
and the benchmark reads."""

from __future__ import annotations

import threading
from collections import Counter


class RequestCounter:
    """Requests sent, by verb (every attempt counts, retries included); shared by the run's threads."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        #: answers 429 (API Priority and Fairness had no seat for the request), each retried after Retry-After
        self.throttled = 0

    def add_throttled(self) -> None:
        with self._lock:
            self.throttled += 1

    def add(self, verb: str) -> None:
        with self._lock:
            self._counts[verb] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.items()))
