"""nsscaler's own CronJob on the API: suspended and marked by a release, read back by a run before its first write.

What the mark is and what it means is `job.decide.release`'s (rule 5); this module only reads and writes it. The
write is one merge PATCH of `spec.suspend` and the release's annotation, which the run admission policy allows
nsscaler's own account on that CronJob alone (devtools/admission.py).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from job.cluster.kube import Kube
from job.decide import release as release_api
from job.errors import ApiError, StartupError
from job.model.marks import OWN_CRONJOB

log = logging.getLogger(__name__)

_VERSION, _PLURAL = "batch/v1", "cronjobs"


def _read(kube: Kube, namespace: str) -> dict[str, Any] | None:
    try:
        return kube.get(version=_VERSION, plural=_PLURAL, namespace=namespace, name=OWN_CRONJOB)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def suspend_for_release(kube: Kube, namespace: str, *, now: dt.datetime) -> bool:
    """Suspend the CronJob and mark it released (kept if an earlier release marked it); False when there is no
    such CronJob (nsscaler runs from elsewhere). A CronJob that cannot be suspended stops the release before
    anything is given back (exit 2): the next scheduled run would freeze again what it gives back."""
    try:
        found = _read(kube, namespace)
        if found is None:
            return False
        kube.patch(version=_VERSION, plural=_PLURAL, namespace=namespace, name=OWN_CRONJOB,
                   body=release_api.release_mark(found, now=now), dry_run=False)
    except ApiError as exc:
        suspend = f"kubectl -n {namespace} patch cronjob {OWN_CRONJOB} -p '{{\"spec\":{{\"suspend\":true}}}}'"
        raise StartupError(f"the release could not suspend the CronJob {namespace}/{OWN_CRONJOB} ({exc}), so a "
                           f"scheduled run could freeze again what it gives back; nothing was given back. Suspend "
                           f"it by hand ({suspend}) or fix the access, and run the release again") from None
    log.info("suspended the CronJob %s/%s and marked it released: no run freezes anything from now on", namespace,
             OWN_CRONJOB, extra={"event": "release-suspended", "namespace": namespace})
    return True


def refuse_if_released(kube: Kube, namespace: str | None) -> None:
    """Raise StartupError (exit 2, nothing written) when a release marked the CronJob this run belongs to."""
    if namespace is None:
        return
    try:
        at = release_api.released_at(_read(kube, namespace))
    except ApiError as exc:  # not readable: a run from elsewhere, or an older install's access; the run goes on
        log.debug("could not read the CronJob %s/%s: %s", namespace, OWN_CRONJOB, exc)
        return
    if at is not None:
        raise StartupError(release_api.refusal(namespace=namespace, at=at))
