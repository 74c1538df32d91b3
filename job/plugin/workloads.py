"""What `kubectl nsscaler status` says about a namespace's workloads: what nsscaler froze there, of every kind
it can freeze, and what still runs.

The built-in kinds come from the registry (`job.model.kinds.BUILTIN`). Custom kinds come from the API's
discovery, not from the policies and their CRDs as in a run: the people who read a namespace's status usually
may read neither NSScalers nor CRDs (both cluster-scoped), while discovery is open to every authenticated user
and also names a kind no policy lists any more whose objects still carry a record. A custom kind nsscaler can
freeze has a `/scale` subresource or a row (`job.model.kinds.rows`): one of the shipped catalogue's, known here
without a request, or a platform team's NSScalerKind, read where the user may list them (else said, as any kind
the user may not read). Its frozen objects carry `LABEL_SCALED`, so one LIST by label per such kind finds them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from job.cluster.kube import Kube
from job.errors import ApiError
from job.model.kinds import BUILTIN, Kind
from job.model.kinds import rows as rows_api
from job.model.kinds.catalogue import CATALOGUE
from job.model.marks import ANNOTATION_SCALED_BY, LABEL_SCALED, SCALED_SELECTOR

#: the kind of an aggregated discovery document (`Kube.discovery`); an older server sends a plain group list
_AGGREGATED = "APIGroupDiscoveryList"


@dataclass(frozen=True)
class Served:
    """A kind as the plugin lists it: its name as a policy writes it (`Deployment`, `Pool.example.com`)."""

    name: str
    api_version: str
    plural: str


BUILTIN_SERVED = tuple(Served(str(kind), h.api_version, h.plural) for kind, h in BUILTIN.items())


#: the kinds of the shipped catalogue's rows, frozen with or without a `/scale` subresource
CATALOGUE_KINDS = frozenset(str(row.kind) for row in CATALOGUE)
#: what the listing says when the user may not list the NSScalerKinds
NO_TEAM_ROWS = "NSScalerKinds (so a team's row kind without /scale)"


def scalable_custom_kinds(discovery: Mapping[str, Any], rows: frozenset[str] = frozenset()) -> list[Served]:
    """The namespaced kinds that are not built in and have a `/scale` subresource or a row (`rows`: kinds as a
    policy names them), in their preferred version (the first that discovery lists), from an aggregated
    discovery document; none from an older server's."""
    if discovery.get("kind") != _AGGREGATED:
        return []
    builtin = {(h.group, h.plural) for h in BUILTIN.values()}
    found: dict[tuple[str, str], Served] = {}
    for group in discovery.get("items") or []:
        name = str((group.get("metadata") or {}).get("name") or "")
        for version in group.get("versions") or []:
            for r in version.get("resources") or []:
                key = (name, str(r.get("resource")))
                kind = f"{(r.get('responseKind') or {}).get('kind')}.{name}"
                scalable = any(s.get("subresource") == "scale" for s in r.get("subresources") or []) or kind in rows
                if (scalable and name and r.get("scope") == "Namespaced" and "list" in (r.get("verbs") or [])
                        and key not in builtin and key not in found):
                    found[key] = Served(kind, f"{name}/{version.get('version')}", key[1])
    return sorted(found.values(), key=lambda s: s.name)


@dataclass(frozen=True)
class Frozen:
    """A workload that carries nsscaler's record (its `LABEL_SCALED` label), and the NSScaler that froze it."""

    kind: str
    name: str
    by: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name} (by {self.by})"


@dataclass(frozen=True)
class Workloads:
    """A namespace's workloads: what nsscaler froze there, what runs ("Deployment/api: 2"), and the kinds the
    user may not read there (`readable` says whether any was read at all)."""

    frozen: list[Frozen]
    running: list[str]
    unreadable: list[str]
    readable: bool

    def frozen_by(self, policy: str) -> int:
        """How many workloads here the NSScaler `policy` froze: from the workloads' own records, complete."""
        return sum(1 for f in self.frozen if f.by == policy)


def _frozen(obj: Mapping[str, Any]) -> bool:
    return (obj["metadata"].get("labels") or {}).get(LABEL_SCALED) == "true"


def _scaled_by(obj: Mapping[str, Any]) -> str:
    return str((obj["metadata"].get("annotations") or {}).get(ANNOTATION_SCALED_BY))


def _runs(served: Served, obj: dict[str, Any]) -> bool:
    """Running, and not under a built-in controller: a Deployment's ReplicaSet or a CronJob's Job runs
    because its owner does, and is shown through it. Custom kinds are read only where frozen."""
    if served.name not in BUILTIN or _frozen(obj):
        return False
    under = any(o.get("controller") and o.get("kind") in BUILTIN for o in obj["metadata"].get("ownerReferences") or [])
    return not under and BUILTIN[Kind(served.name)].size_of(obj) > 0


def _running_line(served: Served, obj: Mapping[str, Any]) -> str:
    spec = obj.get("spec") or {}
    return f"{served.name}/{obj['metadata']['name']}" + (f": {spec['replicas']}" if "replicas" in spec else "")


#: answers that mean "not for you" (403) or "not served here" (404): said as unreadable. Any other failure (the
#: API server unreachable, too busy, failing) goes up to the command, which says it in one line rather than pass
#: it off as a matter of permissions
UNREADABLE_STATUSES = frozenset({403, 404})


def raise_unless_unreadable(exc: ApiError) -> None:
    if exc.status not in UNREADABLE_STATUSES:
        raise exc


def _serves_team_rows(discovery: Mapping[str, Any]) -> bool:
    group: Mapping[str, Any] = next((g for g in discovery.get("items") or []
                                     if (g.get("metadata") or {}).get("name") == rows_api.KIND_GROUP), {})
    return any(r.get("resource") == rows_api.KIND_PLURAL for v in group.get("versions") or []
               if v.get("version") == rows_api.KIND_VERSION for r in v.get("resources") or [])


def team_row_kinds(kube: Kube, discovery: Mapping[str, Any]) -> tuple[frozenset[str], list[str]]:
    """The kinds of the NSScalerKinds (none where their CRD is not served), and what could not be read."""
    if not _serves_team_rows(discovery):
        return frozenset(), []
    try:
        objs = list(kube.list_all(version=rows_api.KIND_API_VERSION, plural=rows_api.KIND_PLURAL))
    except ApiError as exc:
        raise_unless_unreadable(exc)
        return frozenset(), [NO_TEAM_ROWS]
    return frozenset(str(row.kind) for row in rows_api.rows_of_objects(objs)[0]), []


def _kinds(kube: Kube) -> tuple[list[tuple[Served, str | None]], list[str]]:
    """Every built-in kind (whole: what runs is read too), every custom kind nsscaler can freeze (by label); and
    what of discovery and the team's rows, which name the custom kinds, was refused."""
    try:
        discovery = kube.discovery()
        team, unreadable = team_row_kinds(kube, discovery)
        custom = scalable_custom_kinds(discovery, CATALOGUE_KINDS | team)
    except ApiError as exc:
        raise_unless_unreadable(exc)
        custom, unreadable = [], ["API discovery (so no custom kind)"]
    return [*((s, None) for s in BUILTIN_SERVED), *((s, SCALED_SELECTOR) for s in custom)], unreadable


def _read(kube: Kube, ns: str) -> tuple[list[tuple[Served, list[dict[str, Any]]]], list[str]]:
    """Every kind's objects in `ns` as far as the user may read them; and what they may not read."""
    kinds, unreadable = _kinds(kube)
    found = []
    for served, selector in kinds:
        try:
            found.append((served, list(kube.list_all(version=served.api_version, plural=served.plural,
                                                     namespace=ns, label_selector=selector))))
        except ApiError as exc:
            raise_unless_unreadable(exc)
            unreadable.append(served.name)
    return found, unreadable


def in_namespace(kube: Kube, ns: str) -> Workloads:
    """What nsscaler froze in `ns`, of every kind, and what still runs there, as far as the user may read it."""
    found, unreadable = _read(kube, ns)
    return Workloads(frozen=[Frozen(s.name, o["metadata"]["name"], _scaled_by(o))
                             for s, items in found for o in items if _frozen(o)],
                     running=[_running_line(s, o) for s, items in found for o in items if _runs(s, o)],
                     unreadable=unreadable, readable=bool(found))


def held_namespaces(kube: Kube, policy: str) -> dict[str, int] | None:
    """Each namespace where the NSScaler `policy` froze workloads, with how many: from the records on the
    workloads of every kind, cluster-wide (one LIST by label per kind, metadata only), so complete where a
    status list is cut at `status_list_limit`. None when the user may not list some kind cluster-wide."""
    kinds, unreadable = _kinds(kube)
    if unreadable:
        return None
    held: Counter[str] = Counter()
    for served, _ in kinds:
        try:
            items = kube.list_all(version=served.api_version, plural=served.plural, label_selector=SCALED_SELECTOR,
                                  metadata_only=True)
            held.update(obj["metadata"]["namespace"] for obj in items if _scaled_by(obj) == policy)
        except ApiError as exc:
            raise_unless_unreadable(exc)
            return None
    return dict(sorted(held.items()))
