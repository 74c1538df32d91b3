"""The waker starts a run at once for every Wake a person creates (`kubectl nsscaler wake`, or one written by hand):
it watches Wakes cluster-wide, and a new one it did not create itself starts a Job from the CronJob's template,
named after the Wake (both replicas see it; one Job starts). Its own Wakes start their run where they are created.

A thread with the job's synchronous client: list once for where to start, then watch; an expired version (410)
lists again; any other failure waits `RETRY_SECONDS` and starts over. Nothing is lost while it is down: the
scheduled run honours every Wake anyway, only later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from job.cluster.kube import Kube
from job.errors import ApiError
from job.model import policy as policy_api
from job.model import wake as wake_api

log = logging.getLogger(__name__)
RETRY_SECONDS = 5.0


def new_wakes(kube: Kube, *, identity: str, on_new: Callable[[dict[str, Any]], None],
              stop: threading.Event) -> None:
    """Call `on_new` with each Wake created from now on by someone other than `identity`, until `stop`."""
    while not stop.is_set():
        try:
            since = kube.collection_version(version=policy_api.API_VERSION, plural=wake_api.PLURAL)
            log.info("watching Wakes from resourceVersion %s", since, extra={"event": "watching"})
            for event in kube.watch(version=policy_api.API_VERSION, plural=wake_api.PLURAL, resource_version=since):
                if stop.is_set():
                    return
                wake = event.get("object") or {}
                if event.get("type") == "ADDED" and (wake.get("spec") or {}).get("requestedBy") != identity:
                    on_new(wake)
        except ApiError as exc:
            if exc.status != 410:
                log.warning("could not watch Wakes (a person's Wake waits for the schedule meanwhile): %s", exc,
                            extra={"event": "waker-error"})
                stop.wait(RETRY_SECONDS)
        except Exception as exc:  # a broken connection: watch again, never die
            log.warning("the watch of Wakes ended: %s", exc, extra={"event": "waker-error"})
            stop.wait(RETRY_SECONDS)
