"""Who manages a workload and who last wrote its size field, read from its metadata (pure, no I/O).

The API server records, per field manager, which fields each client last wrote (`metadata.managedFields`).
That tells nsscaler whether its own freeze still stands (it owns the size field), who scaled a frozen
workload back up, and whether Argo CD or Flux manages it (their tracking marks or field managers)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ARGO_CD = "Argo CD"
FLUX = "Flux"

#: Field managers of the tools' controllers (Argo CD: its server-side apply manager and the
#: application controller's name; Flux: the Kustomization and HelmRelease controllers).
_MANAGERS = {
    "argocd-controller": ARGO_CD,
    "argocd-application-controller": ARGO_CD,
    "kustomize-controller": FLUX,
    "helm-controller": FLUX,
}
#: What the tools write on every object they manage. Argo CD's default label tracking uses
#: `app.kubernetes.io/instance`, which Helm charts set too: it proves nothing and is not used.
ARGO_CD_TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
_FLUX_LABELS = ("kustomize.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/name")

def size_path(frozen_body: Mapping[str, Any]) -> tuple[str, ...]:
    """The path of the field a freeze writes, from the body a kind's handler patches:
    {"spec": {"replicas": 0}} -> ("spec", "replicas"); nested bodies give nested paths."""
    path: list[str] = []
    node: Any = frozen_body
    while isinstance(node, Mapping) and node:
        key = next(iter(node))
        path.append(str(key))
        node = node[key]
    return tuple(path)


def size_owners(managed_fields: Sequence[Mapping[str, Any]] | None,
                path: Sequence[str]) -> list[tuple[str, str]]:
    """(time, manager) of every field manager that owns the field at `path` (e.g. ("spec", "replicas")).
    The API server moves a field to whoever changes its value, so an owner's value is still the one it
    wrote; server-side apply may leave several owners of one value."""
    owners: list[tuple[str, str]] = []
    for entry in managed_fields or ():
        node: Any = entry.get("fieldsV1") or {}
        for key in path:
            node = node.get(f"f:{key}") if isinstance(node, dict) else None
        manager = str(entry.get("manager") or "")
        if node is not None and manager:
            owners.append((str(entry.get("time") or ""), manager))  # RFC 3339 in UTC: sorts as text
    return owners


def size_manager(managed_fields: Sequence[Mapping[str, Any]] | None, path: Sequence[str], *,
                 ignore: str) -> str | None:
    """The field manager that last wrote the field at `path`, other than `ignore` (nsscaler itself); None
    when nobody else owns it. Several owners: the most recent entry wins."""
    owners = [owner for owner in size_owners(managed_fields, path) if owner[1] != ignore]
    return max(owners)[1] if owners else None


def written_at(managed_fields: Sequence[Mapping[str, Any]] | None, manager: str) -> str | None:
    """When `manager` last changed a field of the object itself (not its status), RFC 3339; None when it owns
    none. The API server moves that time on every write of the manager that changes a value it owns, so for
    nsscaler it is the time of its last freeze or restore, stamped by the write itself."""
    times = [str(e.get("time")) for e in managed_fields or ()
             if e.get("manager") == manager and not e.get("subresource") and e.get("time")]
    return max(times) if times else None


def tool(*, annotations: Mapping[str, str], labels: Mapping[str, str], managers: Iterable[str]) -> str | None:
    """Argo CD or Flux when the object carries their tracking marks or one of their field managers wrote it."""
    found = {_MANAGERS[m] for m in managers if m in _MANAGERS}
    if ARGO_CD_TRACKING_ANNOTATION in annotations:
        found.add(ARGO_CD)
    if any(label in labels for label in _FLUX_LABELS):
        found.add(FLUX)
    return ARGO_CD if ARGO_CD in found else (FLUX if FLUX in found else None)


def tool_of(manager: str | None, managed_by: str | None) -> str | None:
    """The GitOps tool behind a revert: the manager's own tool first, else the one managing the object."""
    return _MANAGERS.get(manager or "") or managed_by
