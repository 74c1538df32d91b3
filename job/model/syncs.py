"""The GitOps controllers' own objects that nsscaler reads to count the syncs its hold refused (pure, no I/O).

A request the hold refuses is never stored, but the controller that sent it keeps the refusal: Flux's
Kustomization and HelmRelease in their `Ready` condition's message, Argo CD's Application in
`status.operationState` (its message and each resource's) and `status.conditions`. Each kind is named once here
(its coordinates and the tool), and each object is reduced to the one view the decision needs (`SyncAttempt`):
which object, the revision it tried, since when, and the words of its last failed attempt (none when it is
healthy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from job.model.managed import ARGO_CD, FLUX


@dataclass(frozen=True, slots=True)
class SyncKind:
    """A GitOps controller's kind whose status keeps a refused apply."""

    kind: str
    group: str
    version: str
    plural: str
    tool: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> str:
        """`plural.group`, as RBAC and `kubectl` name it."""
        return f"{self.plural}.{self.group}"


KUSTOMIZATION = SyncKind("Kustomization", "kustomize.toolkit.fluxcd.io", "v1", "kustomizations", FLUX)
HELM_RELEASE = SyncKind("HelmRelease", "helm.toolkit.fluxcd.io", "v2", "helmreleases", FLUX)
APPLICATION = SyncKind("Application", "argoproj.io", "v1alpha1", "applications", ARGO_CD)
#: every kind read where `--gitops-syncs` is on, each only where its CRD is served
SYNC_KINDS: tuple[SyncKind, ...] = (KUSTOMIZATION, HELM_RELEASE, APPLICATION)


@dataclass(frozen=True, slots=True)
class SyncAttempt:
    """One GitOps object as the decision sees it: its last attempt, and the words of its failure if it failed."""

    kind: SyncKind
    namespace: str
    name: str
    uid: str
    #: the revision it tried to apply ("" when it does not say)
    revision: str
    #: when its last attempt started or failed, as the object says it (RFC 3339; "" when it does not say)
    since: str
    #: the texts that carry its failure (empty when its last attempt did not fail)
    failures: tuple[str, ...]

    @property
    def ref(self) -> str:
        """`Kind namespace/name`, as the status and the logs name it."""
        return f"{self.kind.kind} {self.namespace}/{self.name}"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _flux(obj: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """A Flux object: its `Ready` condition, False when its last reconcile failed (the apply error is its
    message); the revision it last attempted."""
    status = _dict(obj.get("status"))
    ready = next((_dict(c) for c in _list(status.get("conditions")) if _dict(c).get("type") == "Ready"), {})
    failed = ready.get("status") == "False"
    return (_text(status.get("lastAttemptedRevision")), _text(ready.get("lastTransitionTime")),
            (_text(ready.get("message")),) if failed else ())


#: the phases of an Argo CD operation that ended without applying everything
_ARGO_FAILED = ("Failed", "Error")


def _argo(obj: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """An Argo CD Application: its last operation (`status.operationState`), failed or errored, with its message
    and each resource's; and its conditions (a `SyncError` carries the same words when the sync is retried)."""
    status = _dict(obj.get("status"))
    state = _dict(status.get("operationState"))
    result = _dict(state.get("syncResult"))
    revision = (_text(result.get("revision")) or _text(_dict(_dict(state.get("operation")).get("sync")).get("revision"))
                or _text(_dict(status.get("sync")).get("revision")))
    texts: list[str] = []
    if state.get("phase") in _ARGO_FAILED:
        texts += [_text(state.get("message"))]
        texts += [_text(_dict(r).get("message")) for r in _list(result.get("resources"))]
    texts += [_text(_dict(c).get("message")) for c in _list(status.get("conditions"))
              if _text(_dict(c).get("type")).endswith("Error")]
    return revision, _text(state.get("startedAt")), tuple(t for t in texts if t)


def attempt(kind: SyncKind, obj: Mapping[str, Any]) -> SyncAttempt:
    """The view of one object of `kind`, as a LIST returns it."""
    meta = _dict(obj.get("metadata"))
    revision, since, failures = _argo(obj) if kind is APPLICATION else _flux(obj)
    return SyncAttempt(kind=kind, namespace=_text(meta.get("namespace")), name=_text(meta.get("name")),
                       uid=_text(meta.get("uid")), revision=revision, since=since, failures=failures)
