"""Who scaled a frozen workload back up, and whether a GitOps tool manages it (pure, no I/O).

The API server records, per field manager, which fields each client last wrote
(`metadata.managedFields`). When a workload carrying nsscaler's record is found running again, the manager
that owns its size field (`spec.replicas`, or `spec.suspend` for a CronJob) is the one that scaled it: an
Argo CD self-heal, a Flux reconcile, Helm, a person with kubectl, an autoscaler. nsscaler freezes it again
either way; what it says depends on who it was, because the fix lives in that tool's configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The field manager of every nsscaler write. Owned here because the GitOps recipes name it
#: (`managedFieldsManagers: [nsscaler]`); job.kube sends it.
FIELD_MANAGER = "nsscaler"

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

_EXCLUDE_HINT = 'annotate it nsscaler.wubw.fun/exclude="true" if it must run while its namespace is held'


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


def fix(*, tool_name: str | None, kind: str, group: str, pointer: str, manager: str | None) -> str:
    """The one configuration change that ends the fight, in the words of the tool that fights."""
    if tool_name == ARGO_CD:
        quoted = group or '""'
        return (f"in its Argo CD Application set ignoreDifferences [{{group: {quoted}, kind: {kind}, "
                f"managedFieldsManagers: [nsscaler]}}] and the sync option RespectIgnoreDifferences=true, so "
                f"self-heal leaves the fields nsscaler sets")
    if tool_name == FLUX:
        return (f"in its Flux Kustomization set driftIgnoreRules [{{paths: [{pointer}], target: {{kind: {kind}}}}}] "
                f"(HelmRelease: driftDetection.ignore with the same rule), or drop {pointer} from the manifests "
                f"in Git, so Flux stops correcting it")
    who = manager or "whoever scales it"
    return f"stop {who} from scaling it during the freeze, or {_EXCLUDE_HINT}"


@dataclass(frozen=True, slots=True)
class Revert:
    """A frozen workload found scaled up again: who did it, and what ends the fight."""

    policy: str
    namespace: str
    kind: str
    name: str
    manager: str | None
    tool: str | None
    fix: str

    @property
    def message(self) -> str:
        by = self.manager or "an unknown client"
        if self.tool:
            by += f" ({self.tool})"
        return (f"{self.kind} {self.name} in {self.namespace} was scaled up by {by} while NSScaler {self.policy} "
                f"held it; nsscaler froze it again and kept its recorded count. To stop the fight: {self.fix}")


def revert(*, policy: str, namespace: str, kind: str, api_version: str, name: str, size_path: Sequence[str],
           manager: str | None, managed_by: str | None) -> Revert:
    """Describe one revert; `managed_by` is the tool found from the object's tracking marks, if any. `kind`
    as a policy names it (`Rollout.argoproj.io`): the report keeps it, the fix says the object's own `kind:`
    (`Rollout`, with its group apart), the only form Argo CD and Flux match."""
    tool_name = tool_of(manager, managed_by)
    group = api_version.rpartition("/")[0]
    pointer = "/" + "/".join(size_path)
    return Revert(policy=policy, namespace=namespace, kind=kind, name=name, manager=manager, tool=tool_name,
                  fix=fix(tool_name=tool_name, kind=kind.partition(".")[0], group=group, pointer=pointer,
                          manager=manager))
