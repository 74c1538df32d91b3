"""Reading the GitOps controllers' objects (`job.model.syncs`) where `--gitops-syncs` is on: one LIST of each kind,
cluster-wide, each only where its CRD is served. Off (the default): no request at all.

A kind that is not served (404) is no error: that controller is not installed. One nsscaler may not list (403) is
one warning naming the permission, and one that cannot be read otherwise (the API server failing after the client's
retries) one warning saying why; the run goes on without it either way: counting refused syncs is a report, never
a reason for a run to fail."""

from __future__ import annotations

import logging

from job.cluster.kube import Kube
from job.errors import ApiError
from job.model.settings import Settings
from job.model.syncs import SYNC_KINDS, SyncAttempt, attempt

log = logging.getLogger(__name__)


def attempts(kube: Kube, settings: Settings) -> tuple[SyncAttempt, ...]:
    """Every Kustomization, HelmRelease and Application, as views; none when `--gitops-syncs` is off."""
    if not settings.gitops_syncs:
        return ()
    found: list[SyncAttempt] = []
    for kind in SYNC_KINDS:
        try:
            found += [attempt(kind, o) for o in kube.list_all(version=kind.api_version, plural=kind.plural)]
        except ApiError as exc:
            if exc.status == 404:
                log.debug("%s is not served: no %s to read", kind.resource, kind.kind)
                continue
            if exc.status != 403:
                log.warning("the %ss were not read (%s): their refused syncs are not counted by this run", kind.kind,
                            exc, extra={"event": "gitops-syncs"})
                continue
            log.warning("the %ss were not read (%s): their refused syncs are not counted; grant nsscaler list on %s "
                        "(the gitops-syncs component, the chart's gitopsSyncs.enabled)", kind.kind, exc,
                        kind.resource, extra={"event": "gitops-syncs"})
    return tuple(found)
