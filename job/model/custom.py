"""Custom kinds: a policy names `<Kind>.<group>` (`Rollout.argoproj.io`), and its handler comes from the kind's
row (`job.model.kinds.rows`: a platform team's, else the shipped catalogue's, else the plain `/scale` row every
kind with a `/scale` subresource has) and its CRD, once per run. The CRD says where the kind is served and is the
only place that states `specReplicasPath` (the `/scale` endpoint hides it); one LIST of CRDs answers for every
custom kind of the run at once."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from job.model.kinds import BUILTIN, BUILTIN_NAMES, Kind, KindHandler, PausedBy, ReplicasHandler
from job.model.kinds.field import FieldHandler
from job.model.kinds.rows import Row, dotted

_PATH_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Resolution:
    """The kinds this run can serve, and why the others cannot be."""

    handlers: dict[Kind, KindHandler]
    unknown: dict[Kind, str]
    #: of `unknown`, the kinds this identity may not read and write (a release cannot give them back: it stops)
    forbidden: tuple[Kind, ...] = ()


def _replica_path(text: str) -> tuple[str, ...] | None:
    parts = tuple(text.removeprefix(".").split("."))
    return parts if text.startswith(".spec.") and all(_PATH_SEGMENT.fullmatch(p) for p in parts) else None


def _versions(kind: Kind, spec: dict[str, Any], row: Row | None) -> list[dict[str, Any]] | str:
    """The served versions to use, preferred first: the row's (in its order), else the storage version first."""
    served = [v for v in spec.get("versions") or [] if v.get("served")]
    if row is None:
        return sorted(served, key=lambda v: not v.get("storage"))
    by_name = {str(v.get("name")): v for v in served}
    chosen = [by_name[name] for name in row.versions if name in by_name]
    return chosen or (f"kind {kind} is served in {', '.join(sorted(by_name)) or 'no version'}, its row was checked "
                      f"against {', '.join(row.versions)}: not used until a row names a served version")


_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def refused(version: dict[str, Any], path: tuple[str, ...], value: Any) -> str | None:
    """Why the CRD's schema of `version` refuses `value` at `path` (no such field, another type, below its
    minimum), or None: what the server would say to the freeze, known from the CRD the run LISTed anyway. A part
    of the schema that keeps unknown fields, or a CRD without a schema, refuses nothing."""
    node = ((version.get("schema") or {}).get("openAPIV3Schema")) or {}
    for key in path:
        properties = node.get("properties") or {}
        if key not in properties:
            if node.get("x-kubernetes-preserve-unknown-fields") or not properties:
                return None
            return f"its schema ({version.get('name')}) has no field {'.'.join(path)}"
        node = properties[key]
    kind = _TYPES.get(type(value))
    if node.get("type") and node.get("type") != kind and not (kind == "integer" and node.get("type") == "number"):
        return f"its schema ({version.get('name')}) wants {'.'.join(path)} to be of type {node['type']}, not {value!r}"
    minimum = node.get("minimum")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and minimum is not None and value < minimum:
        return f"its schema ({version.get('name')}) refuses {'.'.join(path)}: {value} (its minimum is {minimum})"
    return None


def _scaled(kind: Kind, spec: dict[str, Any], versions: list[dict[str, Any]], row: Row | None) -> KindHandler | str:
    for version in versions:
        scale = (version.get("subresources") or {}).get("scale")
        if scale is None:
            continue
        path = (dotted(row.freeze.path) if row is not None and row.freeze.path
                else _replica_path(str(scale.get("specReplicasPath", ""))))
        if path is None:
            return f"kind {kind}: unsupported specReplicasPath {scale.get('specReplicasPath')!r}"
        problem = refused(version, path, 0)
        if problem is not None:
            return f"kind {kind} cannot be scaled to zero: {problem}"
        return ReplicasHandler(kind, spec["group"], version["name"], spec["names"]["plural"], path=path,
                               data_tier=row is not None and row.tier == "data")
    return f"kind {kind} has no /scale subresource, so nsscaler cannot tell how to scale it to zero"


def _from_crd(kind: Kind, crd: dict[str, Any], row: Row | None) -> KindHandler | str:
    spec = crd.get("spec") or {}
    if spec.get("scope") != "Namespaced":
        return f"kind {kind} is cluster-scoped; nsscaler freezes namespaced workloads only"
    versions = _versions(kind, spec, row)
    if isinstance(versions, str):
        return versions
    if row is None or row.freeze.method == "scale":
        return _scaled(kind, spec, versions, row)
    assert row.freeze.value is not None  # a row's validation
    problem = refused(versions[0], row.freeze.where, row.freeze.value) if row.freeze.method == "field" else None
    if problem is not None:
        return f"kind {kind}: its row cannot freeze it: {problem}"
    return FieldHandler(kind, spec["group"], versions[0]["name"], spec["names"]["plural"], where=row.freeze.where,
                        value=row.freeze.value, row=row, data_tier=row.tier == "data")


def crd_kind(crd: Mapping[str, Any]) -> Kind:
    """The kind a CRD serves, as `spec.kinds` names it (`<Kind>.<group>`)."""
    spec = crd.get("spec") or {}
    return Kind(f"{(spec.get('names') or {}).get('kind')}.{spec.get('group')}")


def resolve(kinds: Iterable[Kind], crds: Iterable[dict[str, Any]],
            rows: Mapping[Kind, Row] | None = None) -> Resolution:
    """Handlers for `kinds`: built-ins as they are, custom ones from their row (`rows`) and their CRD, or from
    their CRD's scale subresource where no row names them.

    The CRD is the only place that states `specReplicasPath` (the `/scale` endpoint hides it), and one
    LIST of CRDs answers for every custom kind of the run at once."""
    handlers: dict[Kind, KindHandler] = dict(BUILTIN)
    unknown: dict[Kind, str] = {}
    custom = {k for k in kinds if k not in BUILTIN}
    by_name: dict[Kind, dict[str, Any]] = {}
    for crd in crds:  # keep only the CRDs asked for: the others can be large
        name = crd_kind(crd)
        if name in custom:
            by_name[name] = crd
    for kind in sorted(custom):
        if kind.short in BUILTIN_NAMES and kind.group == BUILTIN[Kind(kind.short)].group:
            unknown[kind] = f"kind {kind} is built in: write it as {kind.short}"
            continue
        if kind not in by_name:
            unknown[kind] = (f"kind {kind} is not served by this cluster (no such built-in kind, and no "
                             f"CustomResourceDefinition for it)")
            continue
        found = _from_crd(kind, by_name[kind], (rows or {}).get(kind))
        if isinstance(found, str):
            unknown[kind] = found
        else:
            handlers[kind] = found
    return Resolution(_with_paused(handlers), unknown)


def _with_paused(handlers: dict[Kind, KindHandler]) -> dict[Kind, KindHandler]:
    """The StatefulSet handler extended with the operator kinds of this run's `pause` rows, whose objects are
    paused before the StatefulSets they control are scaled (`PausedBy`). Unchanged without such a row."""
    paused = frozenset(PausedBy(k, h.data_tier) for k, h in handlers.items()
                       if isinstance(h, FieldHandler) and h.row is not None and h.row.freeze.method == "pause")
    if paused:
        owned = handlers[Kind.STATEFULSET]
        handlers[Kind.STATEFULSET] = replace(owned, paused_by=owned.paused_by | paused)  # type: ignore[type-var]
    return handlers
