"""The GitOps syncs the hold refused (`job.model.syncs`, `job.decide.syncs`): recognised in the controllers' own
objects by the hold's words, counted against the policy whose hold the namespace carries now, with an Event once per
object and revision.

The objects here are written the way each controller writes its status: Flux's `Ready` condition (as
kustomize-controller v1.7.3 words a failed server-side dry run: `<Kind>/<ns>/<name> dry-run failed (<reason>):
<the API server's error>`), Argo CD's `status.operationState` (`pkg/apis/application/v1alpha1/types.go`:
`phase`, `message`, `syncResult.revision`, `syncResult.resources[].message`, `startedAt`) and its `SyncError`
condition. The Flux words are checked against the real controller in tests/e2e/test_gitops_syncs.py."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from devtools import hold_admission
from job.decide import events, figures, hold, status, syncs
from job.decide.outcome import PolicyOutcome
from job.decide.selection import select_namespaces
from job.model import syncs as model
from tests.unit.factories import namespaces, policy, settings

NOW = dt.datetime(2026, 12, 5, 22, 0, tzinfo=dt.UTC)
FOUND = namespaces("shop-v1", "shop-v2", "other")


def select(*policies: Any) -> Any:
    return select_namespaces(list(policies), namespaces=FOUND, found={}, settings=settings(), now=NOW)


def refusal(ns: str, name: str = "p") -> str:
    """What the API server answers a scale-up the hold refuses, with the words the run marked `ns` with."""
    words = hold.words(policy(name, "shop-", ["v2"]), ns, now=NOW)
    return (f"deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy '{hold_admission.NAME}' with "
            f"binding 'nsscaler-hold-deny' denied request: scaling up deployments web is refused: {words}")


def kustomization(message: str, *, ready: str = "False", revision: str = "main@sha1:abc",
                  name: str = "apps") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "flux-system", "uid": "u-1"},
            "status": {"lastAttemptedRevision": revision, "conditions": [
                {"type": "Reconciling", "status": "False", "message": "ignored: not Ready"},
                {"type": "Ready", "status": ready, "reason": "ReconciliationFailed", "message": message,
                 "lastTransitionTime": "2026-12-05T21:50:00Z"}]}}


def application(*, phase: str, message: str = "", resource: str = "", condition: str = "",
                revision: str = "4f1e2d") -> dict[str, Any]:
    state = {"phase": phase, "message": message, "startedAt": "2026-12-05T21:40:00Z",
             "syncResult": {"revision": revision, "resources": [
                 {"group": "apps", "kind": "Deployment", "namespace": "shop-v1", "name": "web", "status": "SyncFailed",
                  "message": resource}]}}
    conditions = [{"type": "SyncError", "message": condition}] if condition else []
    return {"metadata": {"name": "shop", "namespace": "argocd", "uid": "u-2"},
            "status": {"operationState": state, "conditions": conditions}}


def flux(message: str, **kw: Any) -> model.SyncAttempt:
    return model.attempt(model.KUSTOMIZATION, kustomization(message, **kw))


def test_the_hold_s_name_is_the_one_its_admission_policy_has():
    assert hold.ADMISSION_POLICY == hold_admission.NAME


@pytest.mark.parametrize(("text", "found"), [
    pytest.param(f"Deployment/shop-v1/web dry-run failed (Forbidden): {refusal('shop-v1')}", ["shop-v1"],
                 id="flux-dry-run"),
    pytest.param(f"{refusal('shop-v1')}\n{refusal('shop-v2')}\n{refusal('shop-v1')}", ["shop-v1", "shop-v2"],
                 id="several-once-each"),
    pytest.param(f"ValidatingAdmissionPolicy '{hold_admission.NAME}' with binding 'x' denied request: scaling up "
                 f"deployments web is refused: namespace shop-v1 is held by nsscaler", ["shop-v1"],
                 id="the-policy-s-fallback-words"),
    pytest.param(refusal("shop-v1").replace(hold_admission.NAME, "someone-else"), [],
                 id="another-admission-policy-with-the-same-words"),
    pytest.param("namespace shop-v1 is held by NSScaler p", [], id="the-words-without-a-refusal"),
    pytest.param("Deployment/shop-v1/web dry-run failed (Invalid): spec.replicas: must be >= 0", [],
                 id="another-failure"),
])
def test_a_refusal_is_recognised_by_the_hold_s_own_words(text, found):
    assert hold.held_namespaces(text) == found


@pytest.mark.parametrize(("obj", "kind", "failed"), [
    pytest.param(kustomization(refusal("shop-v1")), model.KUSTOMIZATION, True, id="flux-not-ready"),
    pytest.param(kustomization(refusal("shop-v1"), ready="True"), model.KUSTOMIZATION, False,
                 id="flux-ready-again"),
    pytest.param({"metadata": {"name": "x", "namespace": "y"}}, model.HELM_RELEASE, False, id="no-status-yet"),
    pytest.param(application(phase="Failed", message="one or more objects failed to apply",
                             resource=refusal("shop-v1")), model.APPLICATION, True, id="argo-resource-failed"),
    pytest.param(application(phase="Error", message=refusal("shop-v1")), model.APPLICATION, True,
                 id="argo-operation-error"),
    pytest.param(application(phase="Running", condition=refusal("shop-v1")), model.APPLICATION, True,
                 id="argo-sync-error-condition"),
    pytest.param(application(phase="Succeeded", message="successfully synced", resource=refusal("shop-v1")),
                 model.APPLICATION, False, id="argo-synced-since"),
])
def test_only_a_last_attempt_that_failed_carries_words(obj, kind, failed):
    found = model.attempt(kind, obj)
    assert bool(found.failures) is failed
    assert (any(hold.held_namespaces(t) for t in found.failures)) is failed


@pytest.mark.parametrize(("holder", "counted"), [
    pytest.param(policy("p", "shop-", ["v2"]), {"p": 1}, id="held"),
    pytest.param(policy("p", "shop-", ["v2"], hold="warn"), {"p": 1}, id="warn-holds-too"),
    pytest.param(policy("p", "shop-", ["v2"], hold="off"), {}, id="hold-off"),
    pytest.param(policy("p", "shop-", ["v2"], dry_run=True), {}, id="dry-run-holds-nothing"),
    pytest.param(policy("p", "shop-", ["v1", "v2"]), {}, id="kept-running-since"),
])
def test_a_refusal_counts_against_the_policy_holding_the_namespace_now(holder, counted):
    """Whatever policy the words name (here one renamed since): the one whose hold the namespace carries now."""
    found = syncs.refused([flux(refusal("shop-v1", name="renamed"))], select(holder), now=NOW, previous={})
    assert {name: len(r) for name, r in found.items()} == counted
    if counted:
        [one] = found["p"]
        assert (one.namespace, one.attempt.ref, one.attempt.revision) == (
            "shop-v1", "Kustomization flux-system/apps", "main@sha1:abc")
        assert one.since == "2026-12-05T21:50:00Z"  # the object's own time


def test_an_argo_cd_application_counts_with_its_revision_and_start():
    attempt = model.attempt(model.APPLICATION, application(phase="Failed", resource=refusal("shop-v1")))
    [one] = syncs.refused([attempt], select(policy("p", "shop-", ["v2"])), now=NOW, previous={})["p"]
    assert syncs.entries([one]) == [{"object": "Application argocd/shop", "gitOps": "Argo CD",
                                     "namespace": "shop-v1", "revision": "4f1e2d",
                                     "since": "2026-12-05T21:40:00Z"}]


def test_an_object_syncing_into_two_held_namespaces_counts_once_per_policy():
    selection = select(policy("p", "shop-", ["v2"]), policy("q", "oth", []))
    text = f"{refusal('shop-v1')}\n{refusal('other')}"
    found = syncs.refused([flux(text)], selection, now=NOW, previous={})
    assert {n: [r.namespace for r in rs] for n, rs in found.items()} == {"p": ["shop-v1"], "q": ["other"]}


def test_since_is_kept_for_a_revision_and_starts_again_for_a_new_one():
    selection = select(policy("p", "shop-", ["v2"]))
    previous = {"p": {syncs.STATUS_KEY: [{"object": "Kustomization flux-system/apps", "revision": "main@sha1:abc",
                                          "since": "2026-12-05T20:00:00Z"}]}}
    [same] = syncs.refused([flux(refusal("shop-v1"))], selection, now=NOW, previous=previous)["p"]
    assert same.since == "2026-12-05T20:00:00Z"
    [new] = syncs.refused([flux(refusal("shop-v1"), revision="main@sha1:def")], selection, now=NOW,
                          previous=previous)["p"]
    assert new.since == "2026-12-05T21:50:00Z"
    bare = model.attempt(model.HELM_RELEASE, {"metadata": {"name": "web", "namespace": "shop-v1"}, "status": {
        "conditions": [{"type": "Ready", "status": "False", "message": refusal("shop-v1")}]}})
    [untimed] = syncs.refused([bare], selection, now=NOW, previous={})["p"]
    assert untimed.since == "2026-12-05T22:00:00Z"  # the object says no time: the run's


def _outcome(found: list[syncs.RefusedSync], previous: dict[str, Any] | None = None) -> PolicyOutcome:
    return PolicyOutcome("p", 1, held=["shop-v1"], syncs_refused=found, previous_status=previous or {})


def test_the_status_counts_lists_and_the_event_is_said_once_per_object_and_revision():
    selection = select(policy("p", "shop-", ["v2"]))
    found = syncs.refused([flux(refusal("shop-v1"))], selection, now=NOW, previous={})["p"]
    first = _outcome(found)
    body = status.build_status(first, now=NOW, list_limit=20)
    assert body["counts"]["syncsRefused"] == 1 and figures.counts(first)["syncsRefused"] == 1
    assert body["syncsRefused"] == [{"object": "Kustomization flux-system/apps", "gitOps": "Flux",
                                     "namespace": "shop-v1", "revision": "main@sha1:abc",
                                     "since": "2026-12-05T21:50:00Z"}]
    assert "1 GitOps syncs refused by the hold" in body["conditions"][0]["message"]
    [event] = [e for e in events.of_run([], [first], settings=settings()) if e.reason == events.REASON_SYNC_REFUSED]
    assert event.warning and event.namespace == "flux-system"
    assert event.involved == {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                              "name": "apps", "namespace": "flux-system", "uid": "u-1"}
    assert "could not sync at revision main@sha1:abc into shop-v1: NSScaler p holds it" in event.message
    # the next run, same revision: counted and listed again, said no more
    again = _outcome(found, previous=body)
    assert status.build_status(again, now=NOW, list_limit=20)["counts"]["syncsRefused"] == 1
    assert not events.refused_syncs([again])
    # a new revision refused: said again
    newer = syncs.refused([flux(refusal("shop-v1"), revision="main@sha1:def")], selection, now=NOW,
                          previous={"p": body})["p"]
    assert len(events.refused_syncs([_outcome(newer, previous=body)])) == 1


def test_a_status_without_refused_syncs_empties_the_list():
    body = status.build_status(_outcome([]), now=NOW, list_limit=20)
    assert body["syncsRefused"] == [] and body["counts"]["syncsRefused"] == 0


def test_every_kind_is_read_at_the_version_its_controller_serves():
    assert [(k.api_version, k.plural) for k in model.SYNC_KINDS] == [
        ("kustomize.toolkit.fluxcd.io/v1", "kustomizations"), ("helm.toolkit.fluxcd.io/v2", "helmreleases"),
        ("argoproj.io/v1alpha1", "applications")]


def test_an_event_is_said_only_for_what_the_status_lists_so_never_twice():
    selection = select(policy("p", "shop-", ["v2"]))
    attempts = [flux(refusal("shop-v1"), name=f"app-{i}") for i in range(3)]
    found = syncs.refused(attempts, selection, now=NOW, previous={})["p"]
    first = _outcome(found)
    body = status.build_status(first, now=NOW, list_limit=2)
    assert body["counts"]["syncsRefused"] == 3 and len(body["syncsRefused"]) == 2
    said = [e.involved["name"] for e in events.of_run([], [first], settings=settings(status_list_limit=2))
            if e.reason == events.REASON_SYNC_REFUSED]
    assert said == ["app-0", "app-1"]
    assert not events.refused_syncs([_outcome(found, previous=body)], listed=2)  # the third: when it is listed
