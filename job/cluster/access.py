"""What a run may do: the permissions it needs, the access review that names what is missing, and the one-line
message of a run that cannot start (what to do, exit 2).

The review is one request (a SelfSubjectRulesReview), sent only when it can matter: before the first write of a
run that writes (so a missing permission is named, exit 2, before anything is written), and to explain a
request refused with 403. A run that finds nothing to do sends it only if something is refused."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from job.cluster.kube import Kube
from job.decide import pods
from job.errors import ApiError, StartupError
from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.autoscalers import HPA_PLURAL, SCALED_OBJECTS
from job.model.kinds import BUILTIN, Kind, KindHandler, RecordedKind
from job.model.marks import AGGREGATE_LABEL
from job.model.settings import Settings
from job.model.workloads import Workload


@dataclass(frozen=True)
class Access:
    """One permission the job needs: `verb` on `resource` (optionally `resource/subresource`) in `group`."""

    group: str
    resource: str
    verb: str

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}"

CRD_PLURAL = "customresourcedefinitions"
#: what to do when something nsscaler installs is missing (its CRD, its ClusterRole): the same for either install,
#: so the advice names both, and the start cannot tell which one was used
REINSTALL = ("install nsscaler again the way it was installed (kustomize: kubectl apply -k "
             "kustomize/overlays/prod, or your overlay; Helm: helm upgrade with charts/nsscaler)")
#: what to do when the API server rejects the credentials (401), for either kind: a kubeconfig's, or the token a
#: Pod's ServiceAccount mounts
RENEW_CREDENTIALS = ("renew the credentials: with a kubeconfig, its token or certificate (or --kubeconfig/"
                     "--context for another); in a Pod, its ServiceAccount's token, which a new Pod mounts afresh "
                     "(check that the ServiceAccount still exists)")
_WORKLOAD_VERBS = ("list", "get", "patch")


def _kind_access(handler: RecordedKind) -> list[Access]:
    return [Access(handler.group, handler.plural, verb) for verb in _WORKLOAD_VERBS]


def required_access(settings: Settings, *, custom: Iterable[KindHandler] = ()) -> list[Access]:
    """Exactly what a run calls; the ClusterRole in kustomize/base grants this (for built-in kinds) and
    nothing more. A custom kind a policy names adds its own three verbs, granted by a small ClusterRole
    that the aggregation label folds into nsscaler's."""
    needed = [Access(policy_api.GROUP, policy_api.PLURAL, "list"), Access(policy_api.GROUP, wake_api.PLURAL, "list"),
              Access("", "namespaces", "list"),
              Access("", "pods", "list"), Access("apiextensions.k8s.io", CRD_PLURAL, "list"),
              Access("autoscaling", HPA_PLURAL, "list"), *_kind_access(SCALED_OBJECTS)]
    for handler in [*BUILTIN.values(), *custom]:
        needed += _kind_access(handler)
    # Why Pods still run: metadata-only LISTs of their owners (job/pods.py), only when some remain.
    needed += [Access(api_version.rpartition("/")[0], plural, "list")
               for api_version, plural in pods.LISTABLE.values()]
    if not settings.dry_run:
        needed.append(Access(policy_api.GROUP, f"{policy_api.PLURAL}/status", "patch"))
        needed.append(Access(policy_api.GROUP, f"{wake_api.PLURAL}/status", "patch"))
        # the hold mark (job/cluster/hold.py); the run's admission policy lets it change nothing else there
        needed.append(Access("", "namespaces", "patch"))
        if settings.events:
            needed.append(Access("", "events", "create"))
    return list(dict.fromkeys(needed))  # once each, however many reasons ask for it


def preflight(kube: Kube, settings: Settings, *, custom: Iterable[KindHandler] = ()) -> None:
    """One access review: names what is missing, per custom kind, and how to grant it (StartupError); returns
    when nothing is."""
    custom = list(custom)
    try:
        missing = missing_access(kube, required_access(settings, custom=custom),
                                      namespace=settings.own_namespace or "default")
    except ApiError as exc:
        raise startup_error(kube, exc) from None
    if not missing:
        return
    per_kind = {h.kind: [a for a in missing if a in _kind_access(h)] for h in custom}
    base = [a for a in missing if not any(a in found for found in per_kind.values())]
    parts = []
    if base:
        parts.append(f"missing RBAC permissions: {', '.join(map(str, base))}; nsscaler's ClusterRole grants "
                     f"them: {REINSTALL}, and check that its ClusterRoleBinding names this identity")
    for kind, lacking in sorted(per_kind.items()):
        if lacking:
            parts.append(f"kind {kind} (selected by a policy) needs {', '.join(map(str, lacking))}: apply a "
                         f"ClusterRole labelled {AGGREGATE_LABEL}=true that grants list, get and patch on it "
                         f"(docs/operating/custom-kinds.md)")
    raise StartupError("; ".join(parts))


def kinds_without_access(kube: Kube, settings: Settings, custom: Iterable[KindHandler]) -> dict[Kind, str]:
    """The custom kinds this identity may not list, get and patch, each with what to grant: one access review,
    in a run whose policies name a custom kind. Such a kind is not served (the policies naming it say why), and
    the run goes on with the others."""
    custom = list(custom)
    if not custom:
        return {}
    try:
        missing = missing_access(kube, [a for h in custom for a in _kind_access(h)],
                                 namespace=settings.own_namespace or "default")
    except ApiError as exc:
        raise startup_error(kube, exc) from None
    out = {}
    for handler in custom:
        lacking = [a for a in _kind_access(handler) if a in missing]
        if lacking:
            out[handler.kind] = (f"kind {handler.kind}: nsscaler may not {', '.join(map(str, lacking))}; apply a "
                                 f"ClusterRole labelled {AGGREGATE_LABEL}=true that grants list, get and patch on "
                                 f"{handler.plural}.{handler.group} (docs/operating/custom-kinds.md)")
    return out


def explain_forbidden(kube: Kube, exc: ApiError, *, custom: Iterable[KindHandler] = ()) -> None:
    """A request refused with 403: the access review names every missing permission (StartupError, exit 2).
    Returns when it finds none missing (an admission policy may refuse with 403 too), and for any other error:
    the caller goes on with it."""
    if exc.status == 403:
        preflight(kube, kube.settings, custom=custom)


def cannot_start(kube: Kube, exc: ApiError, *, custom: Iterable[KindHandler] = ()) -> StartupError:
    """The StartupError of a read the run cannot go without: a 403 explained by the access review first."""
    explain_forbidden(kube, exc, custom=custom)
    return startup_error(kube, exc)


def custom_kinds(workloads: Iterable[Workload]) -> list[KindHandler]:
    """The custom kinds among `workloads`, whose permissions the review names per kind."""
    return list({w.kind: w.kind_handler for w in workloads if w.kind not in BUILTIN}.values())


#: answers that say "not now", not "never": throttled by API Priority and Fairness, or unavailable
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


def startup_error(kube: Kube, exc: ApiError) -> StartupError:
    if exc.status == 0:
        return StartupError(f"{exc.message}; check --kubeconfig/--context and that the cluster is up")
    if exc.status == 401:
        return StartupError(f"the API server at {kube.server} rejected the credentials (401): {RENEW_CREDENTIALS}")
    if exc.status in TRANSIENT_STATUSES:
        return StartupError(f"the API server at {kube.server} is overloaded or unavailable ({exc}); the Job "
                             f"retries the run (exit 1): if it lasts, see docs/operating/release-day.md",
                            retryable=True)
    return StartupError(f"the API server at {kube.server} refused the first request: {exc}")




_AUTHZ = "authorization.k8s.io/v1"


def missing_access(kube: Kube, needed: list[Access], *, namespace: str) -> list[Access]:
    """Which of `needed` this identity lacks. One SelfSubjectRulesReview answers most cases; where the authorizer
    says its list is incomplete, each doubtful permission gets an access review."""
    review = kube.create(version=_AUTHZ, plural="selfsubjectrulesreviews", body={
        "apiVersion": _AUTHZ, "kind": "SelfSubjectRulesReview", "spec": {"namespace": namespace}})
    status = review.get("status") or {}
    rules = status.get("resourceRules") or []
    missing = [a for a in needed if not any(_rule_allows(rule, a) for rule in rules)]
    if not status.get("incomplete"):
        return missing
    return [a for a in missing if not _allowed(kube, a, namespace=namespace)]


def _allowed(kube: Kube, access: Access, *, namespace: str) -> bool:
    resource, _, subresource = access.resource.partition("/")
    attrs = {"group": access.group, "resource": resource, "verb": access.verb, "namespace": namespace}
    if subresource:
        attrs["subresource"] = subresource
    review = kube.create(version=_AUTHZ, plural="selfsubjectaccessreviews", body={
        "apiVersion": _AUTHZ, "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": attrs}})
    return bool((review.get("status") or {}).get("allowed"))


def _rule_allows(rule: dict[str, Any], access: Access) -> bool:
    if rule.get("resourceNames"):
        return False  # a rule for named objects does not allow listing or patching any object
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or []
        return "*" in values or value in values
    return has("verbs", access.verb) and has("apiGroups", access.group) and has("resources", access.resource)
