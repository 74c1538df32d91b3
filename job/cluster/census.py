"""The Pod census, the run's second read: the live Pods of held namespaces and their owner chains, metadata only.

What to LIST next is `job.decide.pods.Census.lookups`'s decision; what the chains mean is `job.decide.pods`'s."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from job.cluster.access import explain_forbidden
from job.cluster.kube import Kube
from job.decide import listing, pods
from job.errors import ApiError

log = logging.getLogger(__name__)

#: Pods that still hold resources: the field selector keeps finished ones out of the `done` check.
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def census(kube: Kube, held: Iterable[str], found: pods.Census | None = None, *,
           all_namespaces: int = 0) -> pods.Census:
    """Live Pods of held namespaces grouped by owner, from one metadata-only LIST however many namespaces
    are held (or one per held namespace when they are a small part of a busy cluster: `job.decide.listing`);
    then their owner chains, from metadata-only LISTs sent only while some chain is incomplete (none when
    no Pod is left; a constant number per kind otherwise: see job/pods.py). `found` may come seeded with
    owners already known (`known_owners`)."""
    found = pods.Census() if found is None else found
    wanted = set(held)
    if not wanted:
        return found
    for pod in _live_pods(kube, wanted, all_namespaces=all_namespaces):
        meta = pod.get("metadata") or {}
        if meta.get("namespace", "") in wanted:
            found.add_pod(meta)
    while lookups := found.lookups():
        for kind, namespace in lookups:
            api_version, plural = pods.LISTABLE[kind]
            try:
                found.add_owners(kind, namespace, kube.list_all(version=api_version, plural=plural,
                                                                namespace=namespace, metadata_only=True))
            except ApiError as exc:  # the chain stops there; `explain` says why (a permission missing: exit 2)
                explain_forbidden(kube, exc)
                found.failed(kind, namespace, str(exc))
                log.warning("could not list %s to explain the Pods left: %s", plural, exc,
                            extra={"event": "owners-failed", "kind": kind})
    return found


def _live_pods(kube: Kube, held: set[str], *, all_namespaces: int) -> Iterator[dict[str, Any]]:
    """Live Pods, metadata only: cluster-wide, or per held namespace when that costs the API server less
    (learnt from the first page of an unfiltered LIST: a field selector hides the item count). The probe is
    a request of its own, so it is sent only for a held set that is a tiny part of a large cluster."""
    if len(held) * listing.REQUEST_COST < all_namespaces:
        probe, remaining, _ = kube.first_page(version="v1", plural="pods", limit=listing.PROBE_LIMIT,
                                              metadata_only=True)
        total = None if remaining is None else len(probe) + remaining
        if listing.per_namespace(total=total, namespaces=len(held), all_namespaces=all_namespaces,
                                 page_size=kube.settings.page_size):
            log.debug("reading pods per namespace: %d held, %s in the cluster", len(held), total,
                      extra={"event": "read", "kind": "Pod", "way": "per-namespace"})
            for namespace in sorted(held):
                yield from kube.list_all(version="v1", plural="pods", field_selector=LIVE_PODS, metadata_only=True,
                                         namespace=namespace)
            return
    yield from kube.list_all(version="v1", plural="pods", field_selector=LIVE_PODS, metadata_only=True)


