"""The waker's writes and reads, through the job's one API client (`job.cluster.kube`): the door of a namespace
(the run's own rules: `job.decide.holding`, `job.decide.routes`), its one Wake, and the Job that starts a run at
once.

The Wake has a fixed name (`WAKE_NAME`), so a thousand requests make one Wake: a second create gets 409, and the
Wake there is kept, unless it has ended (then it is replaced: deleted and created again). `requestedBy` is the
waker's own identity, as admission requires of a client that sets it; the request (`GET host/path`) is in
`reason` and in an annotation.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from job.cluster.kube import Kube
from job.decide import holding, routes
from job.decide import release as release_api
from job.errors import ApiError, Conflict
from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.kinds import Kind
from job.model.kinds import httproute as hr
from job.model.marks import ANNOTATION_WAKE_REQUEST
from job.waker.answer import Door, Request

log = logging.getLogger(__name__)

WAKE_NAME = "nsscaler-waker"


def policies(kube: Kube) -> Sequence[policy_api.Policy]:
    """The valid policies, every one: which of them holds a namespace does not depend on whether it wakes on
    request, and one that does not must not hand its namespaces to one that does."""
    found = [policy_api.parse(o, default_kinds=frozenset({Kind.DEPLOYMENT}))
             for o in kube.list_all(version=policy_api.API_VERSION, plural=policy_api.PLURAL)]
    return [p for p in found if isinstance(p, policy_api.Policy)]


def door_of(policies: Sequence[policy_api.Policy], namespace: str, *, now: dt.datetime) -> Door | None:
    """The door the run points `namespace`'s routes at: of the policies holding it at `now`, the first that wakes
    on request. None when no policy holds it or none of its holders wakes on request: a policy with it in scope
    that does not hold it now (outside its hold_windows, or keeping it active) opens no door."""
    held = holding.holder_of(policies, namespace, now=now)
    if held is None:
        return None
    door = routes.opted_in({namespace: [p.name for p in held.holders]}, held.holders).get(namespace)
    chosen = next((p for p in held.holders if p.name == door), None)
    if chosen is None:
        return None
    return Door(chosen.name, chosen.spec.wake.max_duration, chosen.spec.wake.on_request_click)


def _wake_body(namespace: str, door: Door, request: Request, identity: str) -> dict[str, Any]:
    return {"apiVersion": policy_api.API_VERSION, "kind": "Wake",
            "metadata": {"name": WAKE_NAME, "namespace": namespace,
                         "annotations": {ANNOTATION_WAKE_REQUEST: request.words}},
            "spec": {"duration": door.max_duration, "requestedBy": identity,
                     "reason": f"request to {request.words}"[:256]}}


def wake(kube: Kube, namespace: str, door: Door, request: Request, *, identity: str, now: dt.datetime) -> bool:
    """Create the namespace's Wake; True when this call created it (False: one that has not ended is there)."""
    body = _wake_body(namespace, door, request, identity)
    try:
        kube.create(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=namespace, body=body)
        return True
    except Conflict:
        pass
    there = kube.get(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=namespace, name=WAKE_NAME)
    parsed = wake_api.parse(there)
    if parsed.requested_end is not None and parsed.requested_end > now:
        return False
    try:  # two replicas that both replace it leave one Wake all the same: the last one created
        kube.delete(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=namespace, name=WAKE_NAME)
    except ApiError as exc:
        if exc.status != 404:
            raise
    try:
        kube.create(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=namespace, body=body)
    except Conflict:  # another replica replaced it first
        return False
    return True


def run_body(cron: dict[str, Any], *, woken: str, wake_uid: str | None = None) -> dict[str, Any]:
    """The Job of a run at once: the CronJob's jobTemplate as it is (admission refuses the waker any other Pod),
    owned by the CronJob, gone 10 minutes after it ends. Raises KeyError or TypeError for a CronJob without one."""
    name, template = cron["metadata"]["name"], cron["spec"]["jobTemplate"]
    meta = template.get("metadata") or {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        **({"name": f"{name}-wake-{wake_uid[:13]}"} if wake_uid else {"generateName": f"{name}-wake-"}),
        "namespace": cron["metadata"]["namespace"],
        "labels": {**(meta.get("labels") or {}), "app.kubernetes.io/component": "wake-run"},
        "annotations": {**(meta.get("annotations") or {}), "cronjob.kubernetes.io/instantiate": "manual",
                        ANNOTATION_WAKE_REQUEST: f"woken namespace {woken}"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": name,
                             "uid": cron["metadata"]["uid"], "controller": False}]},
        "spec": {**template["spec"], "ttlSecondsAfterFinished": 600}}


def start_run(kube: Kube, *, namespace: str, cronjob: str, woken: str, wake_uid: str | None = None) -> str | None:
    """A Job from the CronJob's template, at once (the run's Lease keeps it from writing beside another run); its
    name, or None when the CronJob cannot be read, was released (`job.decide.release`, rule 5: nsscaler is being
    removed) or the Job not created (the schedule then does it). For a
    Wake's `wake_uid`, the Job is named after it: both waker replicas see the Wake, and one Job starts."""
    try:
        cron = kube.get(version="batch/v1", plural="cronjobs", namespace=namespace, name=cronjob)
        if (at := release_api.released_at(cron)) is not None:  # uninstalling: the run would refuse, so none starts
            log.info("no run started: nsscaler was released at %s", at, extra={"event": "run-not-started",
                                                                             "namespace": woken})
            return None
        body = run_body(cron, woken=woken, wake_uid=wake_uid)
        job = kube.create(version="batch/v1", plural="jobs", namespace=namespace, body=body)
    except Conflict:  # the other replica started it
        return None
    except (ApiError, KeyError, TypeError) as exc:
        log.warning("could not start a run at once (the CronJob's schedule will): %s", exc,
                    extra={"event": "run-not-started", "namespace": woken})
        return None
    return str(job["metadata"]["name"])


def routes_back(kube: Kube, namespace: str) -> bool:
    """Whether no HTTPRoute of `namespace` still points at the waker (none keeps a record)."""
    found = kube.list_all(version=hr.API_VERSION, plural=hr.PLURAL, namespace=namespace)
    return not any(hr.record_of(r) is not None for r in found)
