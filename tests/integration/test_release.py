"""`nsscaler release` against the real control plane: every workload nsscaler holds comes back exactly, across
all policies (one that holds, one suspended, one that says `restore: false`), restore tiers kept within a bounded
time; what it cannot give back is named with why, and the release fails."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import traefik
from devtools.cluster.controlplane import ControlPlane
from job.cli import main
from job.cluster.access import REINSTALL
from job.cluster.kube import Kube
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_ORIGINAL_RULES,
    ANNOTATION_RELEASED,
    DOMAIN,
    FINALIZER_ROUTES,
    OWN_CRONJOB,
)
from job.model.workloads import hold_mark
from job.waker import actions
from tests import crds
from tests.conftest import CRD, ROOT, WAKE_CRD, apply_manifest, kubectl, plane_of_its_own
from tests.gateway import backend, httproute, ready_pods
from tests.integration.test_restore_tiers_faults import restore_stamp

pytestmark = pytest.mark.usefixtures("crd")

#: every kind a policy can freeze here, each with what its freeze changes and its restore must put back
EVERY_KIND = ["Deployment", "StatefulSet", "CronJob", "DaemonSet", "ReplicaSet", "Job"]
KINDS_IN_FAMILY = ("Deployment", "StatefulSet", "CronJob", "DaemonSet", "ReplicaSet", "Job")


#: written by the API server itself on every change of a DaemonSet's template (its freeze and restore are two)
SYSTEM_ANNOTATIONS = ("deprecated.daemonset.template.generation",)



@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A release is cluster-wide by design: it gives back, and names, everything nsscaler holds. On the suite's
    shared plane it would give back what other tests froze and name what they left; on a plane of its own it
    answers for these tests' workloads only."""
    with plane_of_its_own(tmp_path_factory, "release-plane") as started:
        yield started


@pytest.fixture(scope="module")
def api(control_plane: ControlPlane) -> AdminApi:
    return AdminApi(control_plane)


@pytest.fixture(scope="module")
def crd(api: AdminApi, control_plane: ControlPlane) -> None:
    for manifest in (CRD, WAKE_CRD):
        apply_manifest(control_plane.admin_kubeconfig, manifest)
    wait_until(api.crd_established, timeout=30, what="the NSScaler CRD to be established")
    wait_until(lambda: api.crd_established("wakes.operators.wubw.fun"), timeout=30, what="the Wake CRD")


def make_every_kind(api: AdminApi, ns: str) -> None:
    """One workload of every kind, each in a state its freeze changes and its restore must give back exactly."""
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.statefulset_with_claims(ns, "db", 2, when_scaled="Delete"))
    api.create(builders.cronjob(ns, "nightly"))
    ds = builders.daemonset(ns, "agent")
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "ssd"}
    api.create(ds)
    api.create(builders.replicaset(ns, "rs", 2))
    api.create(builders.job(ns, "batch", parallelism=2))


def what_counts(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What a restore must give back exactly: the whole spec, the labels and annotations."""
    meta = obj["metadata"]
    spec = dict(obj["spec"])
    if kind == "Job":  # the API server writes these as a Job runs: not the freeze's, not the restore's
        spec.pop("selector", None)
        spec["template"] = {**spec["template"], "metadata": {}}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in SYSTEM_ANNOTATIONS}
    return {"spec": spec, "labels": meta.get("labels") or {}, "annotations": annotations}


def family(api: AdminApi, prefix: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(kind, o["metadata"]["namespace"], o["metadata"]["name"]): what_counts(kind, o)
            for kind in KINDS_IN_FAMILY for o in api.list(kind) if o["metadata"]["namespace"].startswith(prefix)
            and not (o["metadata"].get("ownerReferences"))}


def settled_family(api: AdminApi, prefix: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The family once the Deployment controller has written its revision annotation on every Deployment: part of
    what a restore gives back, which under load it may write after a test has taken its picture."""
    wait_until(lambda: all("deployment.kubernetes.io/revision" in seen["annotations"]
                           for (kind, _, _), seen in family(api, prefix).items() if kind == "Deployment"),
               what="the Deployment controller's own revision annotation, part of what comes back")
    return family(api, prefix)


def marks_left(api: AdminApi, prefix: str) -> list[str]:
    """Every nsscaler annotation or label still on a workload of the family (the user's exclude aside)."""
    found = []
    for (kind, ns, name), seen in family(api, prefix).items():
        keys = [k for k in (*seen["labels"], *seen["annotations"]) if k.startswith(DOMAIN) and k != ANNOTATION_EXCLUDE]
        found += [f"{kind} {ns}/{name}: {k}" for k in keys]
    return found


def holds(api: AdminApi, prefix: str) -> list[str]:
    """The family's Namespaces carrying any part of the hold mark (docs/operating/hold.md)."""
    return sorted(n["metadata"]["name"] for n in api.list("Namespace")
                  if n["metadata"]["name"].startswith(prefix) and hold_mark(n["metadata"]))


def release(kubeconfig: Path, *args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["release", "--kubeconfig", str(kubeconfig), *args])
    logging.getLogger().handlers.clear()
    return code, err.getvalue()


def freeze_three_policies(api: AdminApi, run_job: Any, prefix: str) -> tuple[dict[Any, Any], list[str]]:
    """Families a-, b- and c- of every kind, frozen; then b's policy is suspended and c's says `restore: false`,
    so a run keeps both frozen. Returns the workloads as they were before the freeze, and the policies."""
    names = [f"{prefix}{f}" for f in "abc"]
    for f in "abc":
        make_every_kind(api, f"{prefix}{f}-v1")
        api.create(builders.namespace(f"{prefix}{f}-v2"))
    before = settled_family(api, prefix)
    for name, f in zip(names, "abc", strict=True):
        api.create(builders.nsscaler(name, f"{prefix}{f}-", ["v2"], kinds=EVERY_KIND))
    assert run_job("--restore-wait-in-run", "0").exit_code == 0
    api.patch("NSScaler", names[1], {"spec": {"suspend": True}})
    api.patch("NSScaler", names[2], {"spec": {"restore": False, "active_namespace_suffixes": ["v1", "v2"]}})
    assert run_job("--restore-wait-in-run", "0").exit_code == 0
    frozen = family(api, prefix)
    assert all(frozen[key] != before[key] for key in before), "every workload of every kind is frozen"
    return before, names


def test_release_gives_back_every_workload_of_every_kind_across_all_policies(api: AdminApi, run_job, prefix,
                                                                          control_plane: ControlPlane):
    before, _ = freeze_three_policies(api, run_job, prefix)
    assert holds(api, prefix) == [f"{prefix}a-v1"]  # b's policy is suspended, c keeps both running

    code, err = release(control_plane.admin_kubeconfig)

    assert code == 0, err
    assert holds(api, prefix) == []  # no hold mark is left on any Namespace
    assert family(api, prefix) == before
    assert marks_left(api, prefix) == []
    assert "every workload nsscaler held is back, no record left" in err
    # a second release finds nothing to do, and says so
    code, err = release(control_plane.admin_kubeconfig)
    assert code == 0 and "gave back 0 workloads" in err, err


def test_release_gives_back_the_row_kinds_no_policy_names_any_more_statefulsets_before_their_operator(
        api: AdminApi, run_job, prefix, control_plane: ControlPlane):
    """Every active row kind is read by a release, named by a policy or not: a team's NSScalerKind kind (frozen by
    a field) and the catalogue's RabbitmqCluster (its operator paused by a label, then its StatefulSet scaled),
    frozen while a policy named them, come back after the policy stopped naming them; the StatefulSet before
    its operator's pause is lifted (the log's order of the restores)."""
    crds.install(api, [yaml.safe_load((ROOT / "kustomize/base/kind-crd.yaml").read_text()), crds.PAUSED,
                       *[c for c in crds.operators() if c["metadata"]["name"].endswith("rabbitmq.com")]])
    row = f"{prefix}paused"
    api.create({"apiVersion": "operators.wubw.fun/v1alpha1", "kind": "NSScalerKind", "metadata": {"name": row},
                "spec": {"kind": "Paused.test.nsscaler.io", "plural": "pauseds", "versions": ["v1"],
                         "freeze": {"method": "field", "path": "spec.paused", "value": True}}})
    ns = f"{prefix}v1"
    api.create(builders.namespace(ns))
    api.create(builders.custom("Paused", ns, "svc", {"paused": False}))
    api.create({"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster",
                "metadata": {"name": "mq", "namespace": ns}, "spec": {"replicas": 2}})
    owned = builders.statefulset(ns, "mq-server", 2)
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster",
                                             "name": "mq", "controller": True,
                                             "uid": api.get("RabbitmqCluster", "mq", ns)["metadata"]["uid"]}]
    api.create(owned)
    before = {kind: api.get(kind, name, ns) for kind, name in (("Paused", "svc"), ("RabbitmqCluster", "mq"))}
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["v2"], kinds=["Paused.test.nsscaler.io",
                                                              "RabbitmqCluster.rabbitmq.com"]))
    try:
        frozen = run_job()
        assert frozen.exit_code == 0, frozen.stderr
        assert api.get("Paused", "svc", ns)["spec"]["paused"] is True
        assert api.replicas("StatefulSet", ns, "mq-server") == 0
        api.patch("NSScaler", name, {"spec": {"kinds": ["Deployment"]}})

        code, err = release(control_plane.admin_kubeconfig)

        assert code == 0, err
        for (kind, obj_name), was in zip((("Paused", "svc"), ("RabbitmqCluster", "mq")), before.values(),
                                         strict=True):
            now = api.get(kind, obj_name, ns)
            assert (now["spec"], now["metadata"].get("annotations"), now["metadata"].get("labels")) == (
                was["spec"], was["metadata"].get("annotations"), was["metadata"].get("labels")), kind
        assert api.replicas("StatefulSet", ns, "mq-server") == 2
        assert err.index(f"restore statefulset/mq-server in {ns}") < err.index(f"restore rabbitmqcluster/mq in {ns}"), \
            err
    finally:
        api.delete("NSScaler", name)
        api.delete("NSScalerKind", row)


def test_release_names_what_it_cannot_give_back_and_fails(api: AdminApi, run_job, prefix,
                                                          control_plane: ControlPlane):
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.deployment(ns, "kept", 2))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job().exit_code == 0
    api.patch("Deployment", "kept", {"metadata": {"annotations": {ANNOTATION_EXCLUDE: "true"}}}, namespace=ns)

    code, err = release(control_plane.admin_kubeconfig)

    assert code == 1, err
    assert api.get("Deployment", "web", ns)["spec"]["replicas"] == 3
    assert api.get("Deployment", "kept", ns)["spec"]["replicas"] == 0
    assert f"left frozen: deployment/kept in {ns}: annotated {ANNOTATION_EXCLUDE}=true" in err
    assert "nsscaler is NOT released" in err
    api.delete("Deployment", "kept", ns)  # the release is cluster-wide: it would name it in the next tests too


def test_release_keeps_restore_tiers_within_a_bounded_wait(api: AdminApi, run_job, prefix,
                                                           control_plane: ControlPlane):
    """No kubelet runs here, so the StatefulSet never becomes available: the Deployment's tier waits for it, at most
    the release's bound (1 s here, though the policy says an hour), and then comes back, after it."""
    ns, name = f"{prefix}v1", f"{prefix}p"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.statefulset(ns, "db", 1))
    api.create(builders.deployment(ns, "app", 2))
    api.create(builders.nsscaler(name, prefix, ["v2"], restore_order=["StatefulSet"], restore_wait="1h"))
    assert run_job("--restore-wait-in-run", "0").exit_code == 0

    code, err = release(control_plane.admin_kubeconfig, "--restore-wait-in-run", "1")

    assert code == 0, err
    db, app = api.get("StatefulSet", "db", ns), api.get("Deployment", "app", ns)
    assert (db["spec"]["replicas"], app["spec"]["replicas"]) == (1, 2)
    assert (restore_stamp(app) - restore_stamp(db)).total_seconds() >= 1


def test_a_release_is_never_a_dry_run_and_asked_for_one_it_changes_nothing(api: AdminApi, run_job, prefix,
                                                                          control_plane: ControlPlane):
    """A dry run that gave nothing back and succeeded would let an uninstall remove nsscaler with workloads still
    frozen: asked for one, the release refuses (exit 2) before it reads or writes anything."""
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job().exit_code == 0
    frozen = family(api, prefix)

    code, err = release(control_plane.admin_kubeconfig, "--dry-run")

    assert code == 2, err
    assert "a release is never a dry run" in err
    assert family(api, prefix) == frozen
    release(control_plane.admin_kubeconfig)  # the release is cluster-wide: the next tests find nothing held


def own_cronjob(api: AdminApi, prefix: str) -> str:
    """nsscaler's own namespace for this test, with a CronJob named as the install names it, on a schedule."""
    own = f"{prefix}sys"
    api.create(builders.namespace(own))
    cron = builders.cronjob(own, OWN_CRONJOB)
    cron["spec"]["schedule"] = "*/10 * * * *"
    api.create(cron)
    return own


def test_a_release_suspends_the_cronjob_for_good_and_a_run_started_from_it_afterwards_freezes_nothing(
        api: AdminApi, run_job, prefix, control_plane: ControlPlane):
    """The uninstall stays done: the release suspends nsscaler's CronJob (the CronJob controller starts no
    scheduled run of a suspended CronJob) and marks it released; a run started from it anyway (by hand, or by the
    waker) while the policy still holds its namespace finds the mark under the run Lease and freezes nothing."""
    own = own_cronjob(api, prefix)
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job("--own-namespace", own).exit_code == 0
    assert api.replicas("Deployment", ns, "web") == 0

    code, err = release(control_plane.admin_kubeconfig, "--own-namespace", own)

    assert code == 0, err
    assert api.replicas("Deployment", ns, "web") == 3
    cron = api.get("CronJob", OWN_CRONJOB, own)
    assert cron["spec"]["suspend"] is True
    assert ANNOTATION_RELEASED in cron["metadata"]["annotations"]

    # the policy still holds v1: a run from the CronJob's namespace (what its Job runs as) would freeze it again
    after = run_job("--own-namespace", own)

    assert after.exit_code == 2, after.stderr
    assert "nsscaler was released" in after.stderr and "freezes nothing" in after.stderr
    assert api.replicas("Deployment", ns, "web") == 3
    assert marks_left(api, f"{prefix}v") == []  # the family's; the CronJob keeps its mark
    # a second release (an uninstall tried again) keeps the first instant and still gives back, nothing to do
    code, err = release(control_plane.admin_kubeconfig, "--own-namespace", own)
    assert code == 0, err
    assert api.get("CronJob", OWN_CRONJOB, own)["metadata"]["annotations"][ANNOTATION_RELEASED] == \
        cron["metadata"]["annotations"][ANNOTATION_RELEASED]
    api.delete("NSScaler", f"{prefix}p")  # the release is cluster-wide: the next tests find nothing held


def test_a_release_that_cannot_suspend_the_cronjob_gives_nothing_back(api: AdminApi, run_job, prefix,
                                                                       control_plane: ControlPlane):
    """Suspending comes first: refused by the API server (here an admission policy of the test's that refuses
    every update of that CronJob), the release gives nothing back and exits 2 saying why, since a scheduled run
    would freeze again what it gave back."""
    own = own_cronjob(api, prefix)
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job("--own-namespace", own).exit_code == 0
    name = f"{prefix}keep-cronjob"
    api.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name}, "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["*"],
                                                            "operations": ["UPDATE"], "resources": ["cronjobs"]}]},
                    "validations": [{"expression": f"object.metadata.namespace != '{own}'",
                                     "message": "this CronJob is kept as it is", "reason": "Forbidden"}]}})
    api.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})
    try:
        def in_force() -> bool:  # a suspension sent as a dry run: admission answers it, nothing changes
            answer = api.http.patch(api.url("CronJob", own, OWN_CRONJOB), json={"spec": {"suspend": True}},
                                    params={"dryRun": "All"}, timeout=30,
                                    headers={"Content-Type": "application/merge-patch+json"})
            return answer.status_code == 403
        wait_until(in_force, timeout=30, what=f"{name} to take effect")

        code, err = release(control_plane.admin_kubeconfig, "--own-namespace", own)

        assert code == 2, err
        assert "could not suspend the CronJob" in err and "nothing was given back" in err, err
        assert api.replicas("Deployment", ns, "web") == 0
        assert api.get("CronJob", OWN_CRONJOB, own)["spec"]["suspend"] is False
    finally:
        api.delete("ValidatingAdmissionPolicyBinding", name)
        api.delete("ValidatingAdmissionPolicy", name)
    api.delete("NSScaler", f"{prefix}p")
    wait_until(lambda: release(control_plane.admin_kubeconfig, "--own-namespace", own)[0] == 0, timeout=30,
               what="the release to go through once the policy is gone")
    assert api.replicas("Deployment", ns, "web") == 3


def test_release_cannot_start_without_the_crd_access(control_plane: ControlPlane, tmp_path: Path):
    """No credentials for the API server: exit 2, nothing tried."""
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    code, err = release(bad)
    assert code == 2, err


def test_a_release_brings_back_the_routes_pointed_at_the_waker_and_says_so_while_one_waits(
        api: AdminApi, control_plane: ControlPlane, run_job: Any, prefix: str) -> None:
    """A route pointed at the waker is part of what nsscaler holds: the release gives its workloads back, then its
    rules once they are available, and the routes finalizer goes with it. While the workloads are not available
    yet, the release fails naming the route, and a second release finishes."""
    traefik.install_gateway_crds(api, control_plane.admin_kubeconfig, Path(kubectl()))
    held, sys_ns = f"{prefix}v1", f"{prefix}sys"
    for ns in (held, sys_ns):
        api.create(builders.namespace(ns))
    api.create(builders.deployment(held, "web", 1))
    api.create(httproute(held, "shop", hostname="v1.shop.example", rules=[{"backendRefs": [backend("web", 80)]}]))
    before = api.get("HTTPRoute", "shop", held)["spec"]
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["sys"], wake={"on_request": True}))
    assert run_job("--own-namespace", sys_ns, "--restore-wait-in-run", "0").exit_code == 0
    assert ANNOTATION_ORIGINAL_RULES in api.get("HTTPRoute", "shop", held)["metadata"]["annotations"]

    code, said = release(control_plane.admin_kubeconfig, "--own-namespace", sys_ns, "--restore-wait-in-run", "0")
    assert code == 1 and f"the HTTPRoutes of {held} still point at the waker" in said, said
    assert api.replicas("Deployment", held, "web") == 1

    ready_pods(api, held, "app=web")
    wait_until(lambda: (api.get("Deployment", "web", held).get("status") or {}).get("availableReplicas") == 1,
               timeout=60, what="the Deployment controller to count web available")
    code, said = release(control_plane.admin_kubeconfig, "--own-namespace", sys_ns, "--restore-wait-in-run", "0")
    assert code == 0, said
    assert api.get("HTTPRoute", "shop", held)["spec"] == before
    assert FINALIZER_ROUTES not in (api.get("NSScaler", f"{prefix}p")["metadata"].get("finalizers") or [])


def test_a_release_names_a_missing_permission_before_its_first_write(api: AdminApi, run_job, prefix,
                                                                     control_plane: ControlPlane, tmp_path: Path):
    """The access review comes before a release's first write, as before a run's: without `patch deployments`
    nothing is given back, and one line names exactly that permission (exit 2)."""
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2", f"{prefix}sa"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job().exit_code == 0
    frozen = family(api, prefix)
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "job", "namespace": f"{prefix}sa"}})
    kubeconfig = control_plane.service_account_kubeconfig(tmp_path / "sa", f"{prefix}sa", "job")
    role = next(d for d in yaml.safe_load_all((ROOT / "kustomize/base/rbac.yaml").read_text())
                if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "nsscaler-base")
    role = {**role, "metadata": {"name": f"{prefix}partial"}}
    role["rules"] = [{**r, "resources": [x for x in r["resources"] if x != "deployments"]}
                     if "patch" in r["verbs"] and "apps" in r["apiGroups"] else r for r in role["rules"]]
    role["rules"].append({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "get"]})
    api.create(role)
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{prefix}partial"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{prefix}partial"},
                "subjects": [{"kind": "ServiceAccount", "name": "job", "namespace": f"{prefix}sa"}]})
    try:
        said: list[str] = []

        def refused() -> bool:
            code, err = release(kubeconfig)
            said[:] = [err]
            return code == 2 and err.rstrip().endswith(
                f"missing RBAC permissions: patch deployments.apps; nsscaler's ClusterRole grants them: "
                f"{REINSTALL}, and check that its ClusterRoleBinding names this identity")
        try:
            wait_until(refused, timeout=20, what="the release to name only patch deployments")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last release said: {said}") from None
        assert family(api, prefix) == frozen
    finally:
        api.delete("ClusterRoleBinding", f"{prefix}partial")
        api.delete("ClusterRole", f"{prefix}partial")


def test_the_waker_starts_no_run_from_a_released_cronjob(api: AdminApi, prefix, control_plane: ControlPlane):
    """The waker's own code (job/waker/actions.py) against a CronJob the release marked: no Job, so no run that
    would only refuse; before the mark, a request's Job starts as it always does."""
    own = own_cronjob(api, prefix)
    kube = Kube.as_user(kubeconfig=control_plane.admin_kubeconfig, context=None)

    before = actions.start_run(kube, namespace=own, cronjob=OWN_CRONJOB, woken=f"{prefix}v1")
    code, err = release(control_plane.admin_kubeconfig, "--own-namespace", own)
    after = actions.start_run(kube, namespace=own, cronjob=OWN_CRONJOB, woken=f"{prefix}v1")

    assert code == 0, err
    assert before is not None and after is None
    assert [j["metadata"]["name"] for j in api.list("Job", own)] == [before]
