"""What a run reads before it decides: policies, kinds (discovery), access, namespaces, workloads, autoscalers.

The reads cost the same however many workloads there are: the NSScalers, the CRDs (only when a policy
names a custom kind), the namespaces, the Wakes (one LIST), per kind one metadata-only LIST
(cluster-wide, or, when the family is a small part of the cluster, our records cluster-wide and the rest per
family namespace: `job.decide.listing`),
whole objects only for the workloads a decision needs and metadata cannot settle, and, only in a run
that freezes or restores something, the KEDA ScaledObjects and the HPAs."""

from __future__ import annotations

import functools
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from job.cluster.access import REINSTALL, preflight, startup_error
from job.cluster.kube import Kube
from job.decide import listing, reads
from job.errors import ApiError, StartupError
from job.model import kubernetes
from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.autoscalers import HPA_API_VERSION, HPA_PLURAL, SCALED_OBJECTS, ScaledObject, scaled_object
from job.model.custom import Resolution, resolve
from job.model.kinds import BUILTIN, Kind, KindHandler, listed_for
from job.model.kinds.catalogue import CATALOGUE
from job.model.kinds.rows import Row, merged, read_rows
from job.model.marks import SCALED_SELECTOR, UNSCALED_SELECTOR
from job.model.policy import InvalidPolicy, Policy
from job.model.resources import overheads
from job.model.settings import Settings
from job.model.snapshot import NEED_HPAS, NEED_SCALED_OBJECTS, Autoscalers
from job.model.workloads import Namespace, Workload, from_api, namespace_from_api, with_overhead

log = logging.getLogger(__name__)

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_PLURAL = "customresourcedefinitions"


def server_version(kube: Kube) -> kubernetes.Verdict:
    """The first request of a run: which Kubernetes it talks to. Below the supported range the run does not
    start (exit 2, one line); what the server lacks is said once, here."""
    try:
        verdict = kubernetes.judge(kubernetes.ServerVersion.parse(kube.server_version()))
    except ApiError as exc:
        raise startup_error(kube, exc) from None
    if verdict.refused:
        raise StartupError(verdict.refused)
    for note in verdict.notes:
        log.warning(note)
    return verdict


def policies(kube: Kube, settings: Settings) -> list[Policy | InvalidPolicy]:
    try:
        objs = list(kube.list_all(version=policy_api.API_VERSION, plural=policy_api.PLURAL))
    except ApiError as exc:
        if exc.status == 404:
            raise StartupError(f"the NSScaler CRD ({policy_api.CRD_NAME}) is not installed: {REINSTALL}") from None
        if exc.status == 403:
            preflight(kube, settings)  # names every missing permission, not only this one
        raise startup_error(kube, exc) from None
    default_kinds = frozenset(settings.default_kinds)
    return sorted((policy_api.parse(o, default_kinds=default_kinds) for o in objs), key=lambda p: p.name)


def discover(kube: Kube, settings: Settings, found: Sequence[Policy | InvalidPolicy]) -> Resolution:
    """Handlers for every kind a policy names (suspended ones too: their records must stay readable).
    Custom kinds cost one LIST of CRDs, only in runs where some policy names one."""
    named = {k for p in found if isinstance(p, Policy) for k in p.kinds}
    rows = kind_rows(settings)
    if not named - BUILTIN.keys():
        return resolve(named, [])
    try:
        crds = kube.list_all(version=CRD_API_VERSION, plural=CRD_PLURAL)
        return resolve(named, crds, rows)
    except ApiError as exc:
        if exc.status == 403:
            preflight(kube, settings)
        raise startup_error(kube, exc) from None


def kind_rows(settings: Settings) -> dict[Kind, Row]:
    """The rows of this run, by kind: a platform team's (`--kind-rows`), then the shipped catalogue's. A bad row
    is one warning naming it and why, and the others are served."""
    own: list[Row] = []
    if settings.kind_rows is not None:
        own, problems = read_rows(settings.kind_rows)
        for problem in problems:
            log.warning("%s", problem)
    return merged(own, CATALOGUE)


#: Namespaces come in pages this many times the page size: they are small objects, and every page of a
#: consistent LIST costs the API server a read of etcd (3,050 namespaces: 70 ms of its CPU in pages of 500,
#: 35 in pages of 2,000).
NAMESPACE_PAGES = 4
#: The rest of a kind's metadata-only LIST comes in pages this many times the page size too, while the kind has
#: at most `BIG_PAGES_UP_TO` pages of objects in all: a steady state over 5,000 Deployments reads them in 4
#: requests instead of 10. A page is held whole while it is decoded (2,000 Deployments' metadata: ~27 MB more
#: peak RSS than 500), which a run over a few thousand workloads affords; a larger one keeps pages of the page
#: size, so a run over 50,000 workloads fits the memory it always did.
METADATA_PAGES = NAMESPACE_PAGES
BIG_PAGES_UP_TO = 40


def namespaces(kube: Kube) -> list[Namespace]:
    return [namespace_from_api(o) for o in kube.list_all(version="v1", plural="namespaces", metadata_only=True,
                                                         page_size=NAMESPACE_PAGES * kube.settings.page_size)]


def wakes(kube: Kube) -> list[wake_api.Wake]:
    """Every Wake, whole, in one LIST (they are few and small); none when the Wake CRD is not installed
    (404: an install from before Wakes existed keeps working, without them)."""
    try:
        found = kube.list_all(version=policy_api.API_VERSION, plural=wake_api.PLURAL)
        return sorted((wake_api.parse(o) for o in found), key=lambda w: w.key)
    except ApiError as exc:
        if exc.status == 404:
            log.debug("the Wake CRD (%s) is not installed: no wakes", wake_api.CRD_NAME)
            return []
        raise


def workloads(kube: Kube, kinds: reads.Kinds) -> list[Workload]:
    """Every workload a decision may need, metadata only (a frozen workload's size is known from it: see
    `job.model.workloads.size_from_metadata`; `complete` reads the others whole once the run knows which).

    Kinds a policy freezes are LISTed over their family: one cluster-wide LIST, or, when the family is a
    small part of a large cluster, a cluster-wide LIST of our records plus one LIST per family namespace of
    the objects without them (`job.decide.listing` decides from the item count the first page reports). Kinds no
    policy freezes are LISTed only where they carry our record (the restore sweep, selected by label).

    Every request that starts a kind's reading goes one after another on the run's connection: the restore
    sweeps (one small request each, which almost always finds nothing), then the first page of each kind a
    policy freezes (all there is of a kind in a cluster of a few hundred objects). Only what is left after
    those pages is read side by side, `concurrency` at a time, and only when two kinds have something left:
    a request sent beside another costs a thread, a new connection and a TLS handshake on both sides (measured
    here: 4.4 to 6.8 ms of client CPU for a request on a new connection, 1.0 to 1.5 ms on a warm one), which
    only a read long enough to overlap with another pays back."""
    found = {h.kind: list(_records(kube, h)) for h in kinds.handlers if not listed_for(h, kinds.selected)}
    left: dict[Kind, Callable[[], list[Workload]]] = {}
    for handler in kinds.handlers:
        if listed_for(handler, kinds.selected):
            found[handler.kind], rest = _start(kube, handler, kinds)
            if rest is not None:
                left[handler.kind] = rest
    for kind, more in _side_by_side(left, workers=kube.settings.concurrency).items():
        found[kind] += more
    return [w for h in kinds.handlers for w in found[h.kind]]  # in the kinds' order, however they were read


def _side_by_side(reads_left: dict[Kind, Callable[[], list[Workload]]], *,
                  workers: int) -> dict[Kind, list[Workload]]:
    if len(reads_left) <= 1:  # nothing to overlap with: on the run's connection
        return {kind: read() for kind, read in reads_left.items()}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(reads_left, pool.map(lambda read: read(), reads_left.values()), strict=True))


def _start(kube: Kube, handler: KindHandler,
           kinds: reads.Kinds) -> tuple[list[Workload], Callable[[], list[Workload]] | None]:
    """The first page of a kind a policy freezes: what it holds that the run keeps, and the rest of the
    reading still to do (None when the page was all of the kind; `workloads` decides whether it is done beside
    another kind's)."""
    family = kinds.family.get(handler.kind)
    # The first page's item count decides the way for the rest. It is a whole page, so that a run that
    # reads cluster-wide sends no request more than a plain paginated LIST, unless the family is a tiny
    # part of the cluster: then it is one object.
    limit = kube.settings.page_size if family is None else listing.first_page_limit(
        namespaces=len(family), all_namespaces=kinds.all_namespaces, page_size=kube.settings.page_size)
    probe, remaining, token = kube.first_page(version=handler.api_version, plural=handler.plural,
                                              limit=limit, metadata_only=True)
    total = None if remaining is None else len(probe) + remaining
    if family is not None and listing.per_namespace(total=total, namespaces=len(family),
                                                    all_namespaces=kinds.all_namespaces,
                                                    page_size=kube.settings.page_size):
        log.debug("reading %s per namespace: %d in the family, %s in the cluster", handler.plural, len(family),
                  total, extra={"event": "read", "kind": str(handler.kind), "way": "per-namespace"})
        return [], functools.partial(_family_in_namespaces, kube, handler, sorted(family))
    log.debug("reading %s cluster-wide: %s in the cluster", handler.plural, total,
              extra={"event": "read", "kind": str(handler.kind), "way": "cluster-wide"})
    first = [from_api(handler, o, metadata_only=True) for o in probe]
    if reads.mostly_to_freeze(first, kinds.guess):  # a first run: read whole objects at once
        return [], lambda: [from_api(handler, o) for o in kube.list_all(version=handler.api_version,
                                                                        plural=handler.plural)]
    if not token:
        return first, None
    return first, lambda: [from_api(handler, o, metadata_only=True) for o in kube.list_all(
        version=handler.api_version, plural=handler.plural, metadata_only=True, resume=token,
        page_size=_rest_page(total, kube.settings.page_size))]


def _rest_page(total: int | None, page_size: int) -> int:
    """The page size of a metadata-only LIST's rest, from the item count its first page reported."""
    return METADATA_PAGES * page_size if total is not None and total <= BIG_PAGES_UP_TO * page_size else page_size


def _records(kube: Kube, handler: KindHandler) -> Iterator[Workload]:
    """Objects of a kind carrying our record anywhere in the cluster (selected by the API server, by label)."""
    for o in kube.list_all(version=handler.api_version, plural=handler.plural, label_selector=SCALED_SELECTOR,
                           metadata_only=True):
        yield from_api(handler, o, metadata_only=True)


def _family_in_namespaces(kube: Kube, handler: KindHandler, namespaces: Sequence[str]) -> list[Workload]:
    """Every object of a kind in `namespaces`, and every one carrying our record anywhere: the records in one
    cluster-wide LIST, then per namespace only the objects without our label. A steady state's family is
    all records, so its per-namespace LISTs come back empty and each frozen object is sent once, in the one
    response the API server compresses (a small response goes out as it is).

    The records are read first: an object whose label goes between the two reads (a concurrent restore) is
    seen twice, and the view from the namespace's LIST is kept. Every decision on what these views say is
    sent with their resourceVersion, so a view a moment old costs a 409 and a fresh read, never a record."""
    found = {w.key: w for w in _records(kube, handler)}

    def read(namespace: str) -> list[Workload]:  # many small reads: from the cache (`Kube.list_cached`)
        return [from_api(handler, o, metadata_only=True)
                for o in kube.list_cached(version=handler.api_version, plural=handler.plural, namespace=namespace,
                                          label_selector=UNSCALED_SELECTOR, metadata_only=True)]
    with ThreadPoolExecutor(max_workers=kube.settings.concurrency) as pool:
        for listed in pool.map(read, namespaces):
            found.update((w.key, w) for w in listed)
    return sorted(found.values(), key=lambda w: (w.namespace, w.name))  # as a cluster-wide LIST orders them


def complete(kube: Kube, found: list[Workload], needed: Sequence[Workload]) -> list[Workload]:
    """`found`, with each of `needed` (read from metadata alone) replaced in place by its whole object, read
    the cheapest way per kind (`job.decide.listing.fetch`); one that is gone by now is dropped. Only the needed
    objects of a LIST are kept, so reading whole objects never holds two views of the cluster."""
    if not needed:
        return found
    wanted = {w.key for w in needed}
    at = {w.key: i for i, w in enumerate(found) if w.key in wanted}
    by_kind: dict[Kind, list[Workload]] = {}
    for w in needed:
        by_kind.setdefault(w.kind, []).append(w)
    for kind, missing in by_kind.items():
        handler = missing[0].kind_handler
        way = listing.fetch(missing=Counter(w.namespace for w in missing),
                            objects=Counter(w.namespace for w in found if w.kind == kind),
                            page_size=kube.settings.page_size)
        log.debug("reading %d %s whole: %s", len(missing), handler.plural, way.value)
        for obj in _whole(kube, handler, missing, way):
            meta = obj.get("metadata") or {}
            key = (kind.value, meta.get("namespace", ""), meta.get("name", ""))
            if key in wanted:
                found[at[key]] = from_api(handler, obj)
                wanted.discard(key)
    return [w for w in found if w.key not in wanted] if wanted else found


def _whole(kube: Kube, handler: KindHandler, missing: Sequence[Workload],
           way: listing.Fetch) -> Iterable[dict[str, Any]]:
    if way is listing.Fetch.CLUSTER:
        return kube.list_all(version=handler.api_version, plural=handler.plural)
    if way is listing.Fetch.NAMESPACES:
        namespaces = sorted({w.namespace for w in missing})
        return itertools.chain.from_iterable(
            kube.list_all(version=handler.api_version, plural=handler.plural, namespace=ns) for ns in namespaces)

    def get(w: Workload) -> dict[str, Any] | None:
        try:
            return kube.get(version=handler.api_version, plural=handler.plural, namespace=w.namespace, name=w.name)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
    with ThreadPoolExecutor(max_workers=kube.settings.concurrency) as pool:
        return [obj for obj in pool.map(get, missing) if obj is not None]


def whole_namespaces(kube: Kube, found: Sequence[Workload], handlers: Sequence[KindHandler],
                     namespaces: Sequence[str]) -> list[Workload]:
    """`found`, with every workload of `namespaces` read again whole: one LIST per kind and namespace. A restore
    in tiers needs it there (are the earlier tiers available?), and only there."""
    if not namespaces:
        return list(found)
    wanted = set(namespaces)

    def read_one(job: tuple[KindHandler, str]) -> list[Workload]:
        handler, namespace = job
        return [from_api(handler, o) for o in kube.list_all(version=handler.api_version, plural=handler.plural,
                                                             namespace=namespace)]
    with ThreadPoolExecutor(max_workers=kube.settings.concurrency) as pool:
        fresh = [w for listed in pool.map(read_one, itertools.product(handlers, sorted(wanted))) for w in listed]
    kinds = {h.kind for h in handlers}
    return [*(w for w in found if w.namespace not in wanted or w.kind not in kinds), *fresh]


RUNTIME_CLASS_API_VERSION = "node.k8s.io/v1"


def with_overheads(kube: Kube, found: list[Workload]) -> tuple[list[Workload], dict[str, dict[str, int]] | None]:
    """`found`, the footprints of whole objects that name a RuntimeClass completed with its Pod overhead, and the
    overheads read (for a workload read again after a 409): one LIST of RuntimeClasses, only in a run that read
    such an object. When it cannot be read, their footprints are unknown (a freeze then records none) rather
    than wrong."""
    if not any(w.runtime_class is not None for w in found):
        return found, None
    try:
        known = overheads(kube.list_all(version=RUNTIME_CLASS_API_VERSION, plural="runtimeclasses"))
    except ApiError as exc:
        log.warning("could not read RuntimeClasses, so what the freezes of their workloads free is unknown: %s", exc,
                    extra={"event": "read", "kind": "RuntimeClass"})
        return [with_overhead(w, None) for w in found], None
    return [with_overhead(w, known) for w in found], known


def scaled_objects(kube: Kube) -> list[ScaledObject]:
    """Every KEDA ScaledObject; none when KEDA is not installed (its CRD is absent: 404)."""
    try:
        return [scaled_object(o) for o in kube.list_all(version=SCALED_OBJECTS.api_version,
                                                        plural=SCALED_OBJECTS.plural)]
    except ApiError as exc:
        if exc.status == 404:
            return []
        raise


def hpas(kube: Kube) -> list[dict[str, object]]:
    return [{"metadata": o.get("metadata"), "spec": o.get("spec")}
            for o in kube.list_all(version=HPA_API_VERSION, plural=HPA_PLURAL)]


def autoscalers(kube: Kube, wanted: frozenset[str]) -> Autoscalers:
    """The autoscalers a decision asked for (`job.model.snapshot.NEED_SCALED_OBJECTS`, `NEED_HPAS`); a failed read is
    kept as its error, for the decision to weigh (a restore is never sent while KEDA might hold it at 0)."""
    found: dict[str, Any] = {}
    if NEED_HPAS in wanted:
        try:
            found["hpas"] = tuple(hpas(kube))
        except ApiError as exc:
            found["hpas_error"] = str(exc)
    if NEED_SCALED_OBJECTS in wanted:
        try:
            found["scaled_objects"] = tuple(scaled_objects(kube))
        except ApiError as exc:
            found["scaled_objects_error"] = str(exc)
    return Autoscalers(**found)
