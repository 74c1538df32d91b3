"""Who scaled a frozen workload back up, and the fix nsscaler suggests (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from job.decide import drain, gitops
from job.decide.actions import Action, ActionResult, Verb
from job.decide.plan import make_plan
from job.model import managed
from job.model.custom import resolve
from job.model.workloads import Kind, Workload, from_api
from tests.unit.factories import namespaces, policy, settings


def entry(manager: str, time: str, *fields: str, subresource: str | None = None) -> dict[str, Any]:
    """One managedFields entry owning `fields` (dotted paths such as "spec.replicas")."""
    root: dict[str, Any] = {}
    for dotted in fields:
        node = root
        for key in dotted.split("."):
            node = node.setdefault(f"f:{key}", {})
    out = {"manager": manager, "operation": "Update", "time": time, "fieldsV1": root}
    if subresource:
        out["subresource"] = subresource
    return out


CREATED = entry("kubectl-client-side-apply", "2026-01-01T00:00:00Z", "spec.replicas", "spec.template")
FROZEN = entry("nsscaler", "2026-01-02T00:00:00Z", "spec.replicas", "metadata.annotations")


@pytest.mark.parametrize(("fields", "path", "manager"), [
    pytest.param([], ("spec", "replicas"), None, id="no-managed-fields"),
    pytest.param([CREATED], ("spec", "replicas"), "kubectl-client-side-apply", id="creator"),
    pytest.param([entry("kubectl-client-side-apply", "2026-01-01T00:00:00Z", "spec.template"), FROZEN],
                 ("spec", "replicas"), None, id="only-nsscaler"),
    pytest.param([FROZEN, entry("argocd-controller", "2026-01-03T00:00:00Z", "spec.replicas")],
                 ("spec", "replicas"), "argocd-controller", id="argo-self-heal"),
    pytest.param([entry("kubectl", "2026-01-03T00:00:00Z", "spec.replicas", subresource="scale")],
                 ("spec", "replicas"), "kubectl", id="kubectl-scale"),
    pytest.param([entry("helm", "2026-01-03T00:00:00Z", "spec.replicas"),
                  entry("kustomize-controller", "2026-01-04T00:00:00Z", "spec.replicas")],
                 ("spec", "replicas"), "kustomize-controller", id="shared-latest-wins"),
    pytest.param([entry("kubectl-edit", "2026-01-03T00:00:00Z", "spec.suspend")], ("spec", "suspend"),
                 "kubectl-edit", id="cronjob-suspend"),
    pytest.param([entry("kubectl-edit", "2026-01-03T00:00:00Z", "spec.suspend")], ("spec", "replicas"), None,
                 id="other-field"),
])
def test_size_manager(fields, path, manager):
    assert managed.size_manager(fields, path, ignore="nsscaler") == manager


@pytest.mark.parametrize(("annotations", "labels", "managers", "tool"), [
    pytest.param({}, {}, ["kubectl"], None, id="plain"),
    pytest.param({"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:shop-v1/web"}, {}, [], managed.ARGO_CD,
                 id="argo-tracking-annotation"),
    pytest.param({}, {}, ["argocd-controller"], managed.ARGO_CD, id="argo-manager"),
    pytest.param({}, {"app.kubernetes.io/instance": "shop"}, ["helm"], None, id="instance-label-proves-nothing"),
    pytest.param({}, {"kustomize.toolkit.fluxcd.io/name": "apps"}, [], managed.FLUX, id="flux-kustomization"),
    pytest.param({}, {"helm.toolkit.fluxcd.io/name": "shop"}, [], managed.FLUX, id="flux-helmrelease"),
    pytest.param({}, {}, ["kustomize-controller"], managed.FLUX, id="flux-manager"),
])
def test_tool(annotations, labels, managers, tool):
    assert managed.tool(annotations=annotations, labels=labels, managers=managers) == tool


@pytest.mark.parametrize(("manager", "managed_by", "kind", "api_version", "says"), [
    pytest.param("argocd-controller", None, "Deployment", "apps/v1",
                 ["ignoreDifferences", "group: apps, kind: Deployment", "managedFieldsManagers: [nsscaler]",
                  "RespectIgnoreDifferences=true"], id="argo"),
    pytest.param("kubectl", managed.ARGO_CD, "StatefulSet", "apps/v1", ["ignoreDifferences", "kind: StatefulSet"],
                 id="argo-tracked-object"),
    pytest.param("kustomize-controller", None, "Deployment", "apps/v1",
                 ["driftIgnoreRules", "paths: [/spec/replicas]", "driftDetection.ignore"], id="flux"),
    pytest.param("helm-controller", None, "CronJob", "batch/v1", ["/spec/suspend", "kind: CronJob"],
                 id="flux-cronjob"),
    pytest.param("kubectl", None, "Deployment", "apps/v1", ["stop kubectl", "nsscaler.wubw.fun/exclude"],
                 id="someone"),
    pytest.param(None, None, "Deployment", "apps/v1", ["whoever scales it"], id="unknown"),
    # a custom kind: the tools match the object's own `kind:`, its group apart, never `Rollout.argoproj.io`
    pytest.param("argocd-controller", None, "Rollout.argoproj.io", "argoproj.io/v1alpha1",
                 ["group: argoproj.io, kind: Rollout, managedFieldsManagers"], id="argo-custom-kind"),
    pytest.param("kustomize-controller", None, "Rollout.argoproj.io", "argoproj.io/v1alpha1",
                 ["target: {kind: Rollout}}"], id="flux-custom-kind"),
])
def test_revert_names_the_fix(manager, managed_by, kind, api_version, says):
    body = {"spec": {"suspend": True} if kind == "CronJob" else {"replicas": 0}}
    revert = gitops.revert(policy="release", namespace="shop-v1", kind=kind, api_version=api_version, name="web",
                           size_path=managed.size_path(body), manager=manager, managed_by=managed_by)
    for text in says:
        assert text in revert.fix
    assert revert.kind == kind  # the report and the status keep the kind as the policy names it
    assert revert.fix in revert.message and (manager or "an unknown client") in revert.message


def test_size_path_follows_nested_specs():
    assert managed.size_path({"spec": {"workers": {"count": 0}}}) == ("spec", "workers", "count")


def test_from_api_reads_who_scaled_it_and_who_manages_it():
    obj = {"metadata": {"name": "web", "namespace": "shop-v1", "resourceVersion": "7",
                        "annotations": {"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:shop-v1/web"},
                        "managedFields": [CREATED, FROZEN,
                                          entry("argocd-controller", "2026-01-03T00:00:00Z", "spec.replicas")]},
           "spec": {"replicas": 3}}
    w = from_api(Kind.DEPLOYMENT, obj)
    assert (w.replicas_manager, w.gitops) == ("argocd-controller", managed.ARGO_CD)


def test_the_warning_event_names_a_custom_kind_as_its_object_says():
    """`kubectl describe rollout web` finds the Event only when involvedObject.kind is `Rollout`."""
    rollout = resolve([Kind("Rollout.argoproj.io")], [{"spec": {
        "group": "argoproj.io", "scope": "Namespaced", "names": {"kind": "Rollout", "plural": "rollouts"},
        "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}}]}}])
    handler = rollout.handlers[Kind("Rollout.argoproj.io")]
    w = Workload(kind=handler.kind, namespace="shop-v1", name="web", resource_version="7", size=3, original="3",
                 handler=handler, replicas_manager="argocd-controller", gitops=managed.ARGO_CD)
    action = Action(Verb.FREEZE, w, "release", {}, 0, "held", False)
    [(involved, message)] = drain.report_reverts([ActionResult(action, "applied")])
    assert (involved["apiVersion"], involved["kind"]) == ("argoproj.io/v1alpha1", "Rollout")
    assert "kind: Rollout," in message
    assert drain.reverts([ActionResult(action, "applied")])[0].kind == "Rollout.argoproj.io"


def _tracked(kind: str, name: str, *, owner: tuple[str, str] | None = None, exclude: bool = False) -> Workload:
    """A workload of shop-v1 that Argo CD tracks, as the API returns it."""
    meta: dict[str, Any] = {"name": name, "namespace": "shop-v1", "resourceVersion": "1",
                            "annotations": {"argocd.argoproj.io/tracking-id": f"shop:apps/{kind}:shop-v1/{name}"}}
    if exclude:
        meta["annotations"]["nsscaler.wubw.fun/exclude"] = "true"
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return from_api(Kind(kind), {"metadata": meta, "spec": {"replicas": 1}})


@pytest.mark.parametrize(("workloads", "kinds", "counted"), [
    pytest.param([_tracked("Deployment", "web")], ["Deployment"], 1, id="a-tracked-deployment"),
    pytest.param([_tracked("Deployment", "web"), _tracked("ReplicaSet", "web-1", owner=("Deployment", "web"))],
                 ["Deployment", "ReplicaSet"], 1, id="its-replicaset-copies-the-marks-but-is-not-counted"),
    pytest.param([_tracked("Deployment", "web", exclude=True)], ["Deployment"], 0, id="excluded-is-not-counted"),
    pytest.param([_tracked("StatefulSet", "db")], ["Deployment"], 0, id="a-kind-the-policy-does-not-select"),
])
def test_gitops_managed_counts_what_the_policy_would_freeze(workloads, kinds, counted):
    policies = [policy("p", "shop-", kinds=kinds)]
    plan = make_plan(policies, namespaces=namespaces("shop-v1"), workloads=workloads, settings=settings())
    assert drain.gitops_managed(policies, plan=plan, workloads=workloads)["p"] == counted
