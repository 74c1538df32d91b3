"""The waker's HTTP server (aiohttp): every path and method of a held namespace's routes lands here.

One `Waker` holds what the process remembers, per replica: when it last woke each namespace (the rate limit), and
the policies, read again at most every `POLICY_SECONDS`. The API calls run in worker
threads, through the job's synchronous client. `/healthz` (without the namespace header: the kubelet's probe)
answers 200; `/metrics` (without it too) answers what `job.waker.metrics` counts. After a Wake it created, the
replica looks at the namespace's routes every `READY_POLL_SECONDS` until they are back, for the histogram of
request-to-ready time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from job.cluster.kube import Kube
from job.errors import ApiError
from job.model.marks import HEADER_NAMESPACE
from job.model.policy import Policy, parse_duration
from job.waker import actions, follow
from job.waker.answer import RETRY_AFTER_SECONDS, Answer, Door, Request, decide
from job.waker.metrics import WakerMetrics
from job.waker.page import WAKER_HEADER, json_body, page

log = logging.getLogger(__name__)
POLICY_SECONDS = 10.0
READY_POLL_SECONDS = 2.0
#: a namespace not back by then is not waited for (its time is not observed)
READY_WAIT_SECONDS = 900.0


@dataclass
class Waker:
    kube: Kube
    #: the waker's own user (`system:serviceaccount:<namespace>:<name>`): what its Wakes say in requestedBy
    identity: str
    #: where the CronJob is whose template a run at once uses
    namespace: str
    cronjob: str = "nsscaler"
    last_wake: dict[str, dt.datetime] = field(default_factory=dict)
    policies: Sequence[Policy] = ()
    policies_read: float = float("-inf")
    metrics: WakerMetrics = field(default_factory=WakerMetrics)
    watching: set[asyncio.Task[None]] = field(default_factory=set)

    async def door(self, namespace: str, *, now: dt.datetime) -> Door | None:
        if time.monotonic() - self.policies_read > POLICY_SECONDS:
            self.policies = await asyncio.to_thread(actions.policies, self.kube)
            self.policies_read = time.monotonic()
        return actions.door_of(self.policies, namespace, now=now)

    async def handle(self, http: web.Request) -> web.StreamResponse:
        request = Request(http.method, http.host, http.path_qs, dict(http.headers))
        if not request.namespace and http.path == "/healthz":
            return web.json_response({"ok": True, **self.metrics.totals()})
        if not request.namespace and http.path == "/metrics":
            body, content_type = self.metrics.exposition(http.headers.get("Accept"))
            return web.Response(body=body, headers={"Content-Type": content_type})
        now = dt.datetime.now(dt.UTC)
        try:
            door = await self.door(request.namespace, now=now) if request.namespace else None
        except ApiError as exc:
            self.metrics.api_error()
            log.warning("could not read the policies: %s", exc, extra={"event": "waker-error"})
            door = None
        answer = decide(request, door, last_wake=self.last_wake.get(request.namespace), now=now)
        if answer.wake and door is not None:
            self.last_wake[request.namespace] = now  # claimed before the API calls: concurrent requests wait
            await self._wake(request, door, now)
        self.metrics.answered(answer.status)
        return self._respond(http, request, answer, door, now)

    async def _wake(self, request: Request, door: Door, now: dt.datetime) -> None:
        ns = request.namespace
        try:
            created = await asyncio.to_thread(actions.wake, self.kube, ns, door, request, identity=self.identity,
                                              now=now)
        except ApiError as exc:
            self.metrics.api_error()
            log.warning("could not wake %s: %s", ns, exc, extra={"event": "waker-error", "namespace": ns})
            return
        if not created:
            return
        self.metrics.woke("click" if door.click else "request")
        log.info("woke %s on %s", ns, request.words, extra={"event": "woken", "namespace": ns})
        task = asyncio.create_task(self._until_ready(ns, time.monotonic()))
        self.watching.add(task)
        task.add_done_callback(self.watching.discard)
        job = await asyncio.to_thread(actions.start_run, self.kube, namespace=self.namespace, cronjob=self.cronjob,
                                      woken=ns)
        if job:
            self.metrics.started_run()
            log.info("started run %s for %s", job, ns, extra={"event": "run-started", "namespace": ns, "job": job})

    async def following(self, _app: web.Application) -> AsyncIterator[None]:
        """While the server runs: a person's new Wake starts a run at once (`job.waker.follow`)."""
        stop = threading.Event()
        thread = threading.Thread(target=follow.new_wakes, name="wakes", daemon=True, kwargs={
            "kube": self.kube, "identity": self.identity, "on_new": self._person_woke, "stop": stop})
        thread.start()
        yield
        stop.set()

    def _person_woke(self, wake: dict[str, Any]) -> None:
        meta = wake.get("metadata") or {}
        job = actions.start_run(self.kube, namespace=self.namespace, cronjob=self.cronjob,
                                woken=str(meta.get("namespace")), wake_uid=str(meta.get("uid") or "") or None)
        if job:
            self.metrics.started_run()
            self.metrics.woke("person")
            log.info("started run %s for the Wake %s/%s", job, meta.get("namespace"), meta.get("name"),
                     extra={"event": "run-started", "namespace": meta.get("namespace"), "job": job})

    async def _until_ready(self, namespace: str, asked: float) -> None:
        """Observe the time from the waking request to the namespace's routes being back."""
        while time.monotonic() - asked < READY_WAIT_SECONDS:
            await asyncio.sleep(READY_POLL_SECONDS)
            try:
                back = await asyncio.to_thread(actions.routes_back, self.kube, namespace)
            except ApiError as exc:
                self.metrics.api_error()
                log.warning("could not read the routes of %s: %s", namespace, exc,
                            extra={"event": "waker-error", "namespace": namespace})
                continue
            if back:
                self.metrics.ready_after(time.monotonic() - asked)
                log.info("%s answers again after %.1fs", namespace, time.monotonic() - asked,
                         extra={"event": "ready", "namespace": namespace})
                return

    def _respond(self, http: web.Request, request: Request, answer: Answer, door: Door | None,
                 now: dt.datetime) -> web.Response:
        headers = {WAKER_HEADER: "waiting", "Cache-Control": "no-store"}
        if answer.status == 503:
            headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        until = now + parse_duration(door.max_duration) if door is not None else None
        if http.method == "HEAD":
            return web.Response(status=answer.status, headers=headers)
        if answer.body == "page" and until is not None:
            text = page(answer, namespace=request.namespace, door=door, now=now, until=until)
            return web.Response(status=answer.status, text=text, content_type="text/html", headers=headers)
        return web.Response(status=answer.status, content_type="application/json", headers=headers,
                            text=json_body(answer, namespace=request.namespace or "", door=door, until=until))


def app(waker: Waker) -> web.Application:
    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", waker.handle)
    application.cleanup_ctx.append(waker.following)
    return application


__all__ = ["HEADER_NAMESPACE", "Waker", "app"]
