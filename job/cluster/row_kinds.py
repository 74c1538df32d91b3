"""The kinds a release reads: every kind a policy names, and besides them every active row kind (the shipped
catalogue's, a platform team's NSScalerKinds and `--kind-rows`), whether a policy still names it or not. A record
left on an object of a kind no policy names any more (the kind was taken out of `spec.kinds`, or its policy
deleted) is still nsscaler's to give back before it is removed.

Costs one LIST of CRDs and one of NSScalerKinds, in a release only; a run reads the kinds its policies name
(`job.cluster.read.discover`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from job.cluster import read
from job.cluster.access import kinds_without_access, preflight, startup_error
from job.cluster.kube import Kube
from job.cluster.read import CRD_API_VERSION, CRD_PLURAL
from job.errors import ApiError
from job.model.custom import Resolution, crd_kind, resolve
from job.model.kinds import BUILTIN
from job.model.policy import InvalidPolicy, Policy
from job.model.settings import Settings

log = logging.getLogger(__name__)


def every_row(kube: Kube, settings: Settings, found: Sequence[Policy | InvalidPolicy]) -> Resolution:
    """Handlers for the kinds the policies name and for every row kind this cluster serves. A row kind no policy
    names that nsscaler may not read and write is one warning and left out (nsscaler cannot have frozen one);
    the policies' own kinds stay as `read.discover` treats them."""
    named = {k for p in found if isinstance(p, Policy) for k in p.kinds}
    try:
        crds = list(kube.list_all(version=CRD_API_VERSION, plural=CRD_PLURAL))
        rows = read.kind_rows(settings, team=read.team_rows(kube, crds))
        served = {crd_kind(c) for c in crds}
        extra = {k for k in rows if k in served} - named
        wanted = named | extra
        resolution = resolve(wanted, [c for c in crds if crd_kind(c) in wanted], rows)
    except ApiError as exc:
        if exc.status == 403:
            preflight(kube, settings)
        raise startup_error(kube, exc) from None
    custom = [h for k, h in resolution.handlers.items() if k not in BUILTIN]
    lacking = kinds_without_access(kube, settings, custom)
    for kind in sorted(k for k in lacking if k in extra):
        log.warning("the row kind %s is not read: %s", kind, lacking[kind], extra={"event": "kind-access"})
    mine = {k: m for k, m in lacking.items() if k not in extra}
    for message in mine.values():
        log.error("%s", message, extra={"event": "kind-access"})
    unknown = {k: why for k, why in resolution.unknown.items() if k not in extra}
    return Resolution({k: h for k, h in resolution.handlers.items() if k not in lacking}, {**unknown, **mine},
                      forbidden=tuple(sorted(mine)))
