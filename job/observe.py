"""What a run reads before it decides: policies, kinds (discovery), access, namespaces, workloads, autoscalers.

Every read is one paginated LIST, cluster-wide, so the count of requests never grows with the number of
namespaces: the NSScalers, the CRDs (only when a policy names a custom kind), one SelfSubjectRulesReview,
the namespaces, one LIST per kind, and, only in a run that freezes or restores something, the KEDA
ScaledObjects and the HPAs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from job import pods
from job import policy as policy_api
from job.autoscalers import HPA_API_VERSION, HPA_PLURAL, SCALED_OBJECTS, ScaledObject, scaled_object
from job.errors import ApiError, StartupError
from job.kinds import BUILTIN, Kind, KindHandler, Resolution, listed_for, resolve
from job.kube import Access, Kube
from job.policy import InvalidPolicy, Policy
from job.settings import Settings
from job.workloads import SCALED_SELECTOR, Namespace, Workload, from_api, namespace_from_api

log = logging.getLogger(__name__)

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_PLURAL = "customresourcedefinitions"
AGGREGATE_LABEL = "nsscaler.wubw.fun/aggregate-to-nsscaler"
_WORKLOAD_VERBS = ("list", "get", "patch")


def _kind_access(handler: KindHandler) -> list[Access]:
    return [Access(handler.group, handler.plural, verb) for verb in _WORKLOAD_VERBS]


def required_access(settings: Settings, *, custom: Iterable[KindHandler] = ()) -> list[Access]:
    """Exactly what a run calls; the ClusterRole in kustomize/base grants this (for built-in kinds) and
    nothing more. A custom kind a policy names adds its own three verbs, granted by a small ClusterRole
    that the aggregation label folds into nsscaler's."""
    needed = [Access(policy_api.GROUP, policy_api.PLURAL, "list"), Access("", "namespaces", "list"),
              Access("", "pods", "list"), Access("apiextensions.k8s.io", CRD_PLURAL, "list"),
              Access("autoscaling", HPA_PLURAL, "list"), *_kind_access(SCALED_OBJECTS)]
    for handler in [*BUILTIN.values(), *custom]:
        needed += _kind_access(handler)
    # Why Pods still run: metadata-only LISTs of their owners (job/pods.py), only when some remain.
    needed += [Access(api_version.rpartition("/")[0], plural, "list")
               for api_version, plural in pods.LISTABLE.values()]
    if not settings.dry_run:
        needed.append(Access(policy_api.GROUP, f"{policy_api.PLURAL}/status", "patch"))
        if settings.events:
            needed.append(Access("", "events", "create"))
    return list(dict.fromkeys(needed))  # once each, however many reasons ask for it


def preflight(kube: Kube, settings: Settings, *, custom: Iterable[KindHandler] = ()) -> None:
    """One access review: names what is missing, per custom kind, and how to grant it."""
    custom = list(custom)
    try:
        missing = kube.missing_access(required_access(settings, custom=custom),
                                      namespace=settings.own_namespace or "default")
    except ApiError as exc:
        raise startup_error(kube, exc) from None
    if not missing:
        return
    per_kind = {h.kind: [a for a in missing if a in _kind_access(h)] for h in custom}
    base = [a for a in missing if not any(a in found for found in per_kind.values())]
    parts = []
    if base:
        parts.append(f"missing RBAC permissions: {', '.join(map(str, base))}; apply the ClusterRole from "
                     f"kustomize/base (kubectl apply -k kustomize/overlays/prod)")
    for kind, lacking in sorted(per_kind.items()):
        if lacking:
            parts.append(f"kind {kind} (selected by a policy) needs {', '.join(map(str, lacking))}: apply a "
                         f"ClusterRole labelled {AGGREGATE_LABEL}=true that grants list, get and patch on it "
                         f"(README: Custom kinds)")
    raise StartupError("; ".join(parts))


def startup_error(kube: Kube, exc: ApiError) -> StartupError:
    if exc.status == 0:
        return StartupError(f"{exc.message}; check --kubeconfig/--context and that the cluster is up")
    if exc.status == 401:
        return StartupError(f"the API server at {kube.server} rejected the credentials (401): renew the "
                            f"token or certificate in the kubeconfig")
    return StartupError(f"the API server at {kube.server} refused the first request: {exc}")


def policies(kube: Kube, settings: Settings) -> list[Policy | InvalidPolicy]:
    try:
        objs = list(kube.list_all(version=policy_api.API_VERSION, plural=policy_api.PLURAL))
    except ApiError as exc:
        if exc.status == 404:
            raise StartupError(f"the NSScaler CRD ({policy_api.CRD_NAME}) is not installed: run "
                               f"kubectl apply -k kustomize/overlays/prod") from None
        if exc.status == 403:
            preflight(kube, settings)  # names every missing permission, not only this one
        raise startup_error(kube, exc) from None
    default_kinds = frozenset(settings.default_kinds)
    return sorted((policy_api.parse(o, default_kinds=default_kinds) for o in objs), key=lambda p: p.name)


@dataclass(frozen=True)
class Kinds:
    """This run's kinds: every handler to LIST, and the kinds some serving policy freezes."""

    handlers: list[KindHandler]
    selected: frozenset[Kind]


def discover(kube: Kube, settings: Settings, found: list[Policy | InvalidPolicy]) -> Resolution:
    """Handlers for every kind a policy names (suspended ones too: their records must stay readable).
    Custom kinds cost one LIST of CRDs, only in runs where some policy names one."""
    named = {k for p in found if isinstance(p, Policy) for k in p.kinds}
    if not named - BUILTIN.keys():
        return resolve(named, [])
    try:
        crds = kube.list_all(version=CRD_API_VERSION, plural=CRD_PLURAL)
        return resolve(named, crds)
    except ApiError as exc:
        if exc.status == 403:
            preflight(kube, settings)
        raise startup_error(kube, exc) from None


def namespaces(kube: Kube) -> list[Namespace]:
    return [namespace_from_api(o) for o in kube.list_all(version="v1", plural="namespaces", metadata_only=True)]


def workloads(kube: Kube, kinds: Kinds) -> list[Workload]:
    """Kinds a policy freezes are LISTed whole; the others only where they carry our record (a restore
    sweep, selected server-side by label). Either way, one paginated LIST per kind, cluster-wide."""
    out: list[Workload] = []
    for handler in kinds.handlers:
        selector = None if listed_for(handler, kinds.selected) else SCALED_SELECTOR
        out += (from_api(handler, o) for o in kube.list_all(version=handler.api_version, plural=handler.plural,
                                                            label_selector=selector))
    return out


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
