"""Held means held between runs too: the admission policy `nsscaler-hold` as shipped
(`kustomize/base/hold-admission.yaml`), a real run that marks the held namespace, and a real user with only `edit`
there (a client certificate of the cluster's CA) sending what people send: `kubectl scale`, `kubectl apply`,
`kubectl create deployment`, `kubectl run`, `kubectl patch`. Each is refused by the API server with the words the
run left on the namespace; scale-downs, other changes and the namespace the policy keeps running are untouched; a
Wake lifts the hold at the run it starts; "warn" admits with a warning; a suspended policy's hold goes at its next
run. The run here is the one the waker starts for a person's Wake (`job.waker.follow`), started by the test."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders, hold_admission, team_hold
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from job.decide import hold as hold_api
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_HOLD,
    ANNOTATION_HOLD_ACCOUNT,
    ANNOTATION_HOLD_EXCLUDED,
    ANNOTATION_HOLD_KINDS,
    LABEL_HOLD,
)
from tests import crds
from tests.conftest import ROOT, apply_manifest, built_tool, kubectl
from tests.e2e.test_install import kubectl_run
from tests.integration.test_helm import template as helm_template
from tests.users import User, grant_edit

pytestmark = pytest.mark.versions
POLICY = f"ValidatingAdmissionPolicy '{hold_admission.NAME}'"
IMAGE = "registry.invalid/app:1"
OVERLAY = ROOT / "kustomize" / "overlays" / "prod"
NAMESPACE = "nsscaler"


@pytest.fixture(scope="module")
def nsscaler_kubeconfig(control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nsscaler's own ServiceAccount, installed by the prod overlay (with the run's admission policy)."""
    kubectl_run(control_plane.admin_kubeconfig, "apply", "--server-side", "-k", str(OVERLAY))
    return control_plane.service_account_kubeconfig(tmp_path_factory.mktemp("sa") / "kubeconfig", NAMESPACE,
                                                    "nsscaler")


@pytest.fixture
def as_nsscaler(run_job: Any, nsscaler_kubeconfig: Path) -> Any:
    """A run as the CronJob's Pod runs it, the waker's Job included: nsscaler's own ServiceAccount, not a cluster
    admin, whom every policy lets by."""
    def run(*args: str) -> Any:
        return run_job("--own-namespace", NAMESPACE, "--restore-wait-in-run", "0", *args,
                       kubeconfig=nsscaler_kubeconfig)
    return run


@pytest.fixture(scope="module")
def hold_policy(control_plane: controlplane.ControlPlane, crd: None, wake_admission: bool) -> Iterator[None]:
    """The policy and its bindings, as `kubectl apply -k` of any overlay installs them; removed after, as an
    uninstall removes them (none is left: asserted)."""
    apply_manifest(control_plane.admin_kubeconfig, hold_admission.OUTPUT)
    yield
    subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "delete", "-f",
                    str(hold_admission.OUTPUT)], check=True, capture_output=True)
    listed = subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "get",
                             "validatingadmissionpolicies,validatingadmissionpolicybindings", "-o", "name"],
                            check=True, capture_output=True, text=True).stdout
    assert hold_admission.NAME not in listed


class Editor(User):
    """A person with `edit` in the family's namespaces, and kubectl as them."""

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl(), "--kubeconfig", str(self.kubeconfig), *args], input=stdin,
                              capture_output=True, text=True, check=False)


@pytest.fixture
def editor(control_plane: controlplane.ControlPlane, tmp_path: Path) -> Editor:
    return Editor(control_plane, f"dev-{uuid.uuid4().hex[:6]}", tmp_path)


def family(api: AdminApi, prefix: str, editor: Editor) -> tuple[str, str]:
    """`live` (kept running) and `held`, each with a Deployment of 2 and a CronJob, the editor's in both."""
    for suffix in ("live", "held"):
        ns = prefix + suffix
        api.create(builders.namespace(ns))
        api.create(builders.deployment(ns, "web", 2))
        api.create(builders.cronjob(ns, "nightly"))
        grant_edit(api, ns, editor)
    return prefix + "live", prefix + "held"


def in_force(editor: Editor, ns: str) -> bool:
    """Whether the API server already refuses in `ns` (a policy and a namespace label reach admission a moment
    after they are written): a bare Pod, sent as a dry run."""
    probe = editor.kubectl("run", "probe", f"--image={IMAGE}", "-n", ns, "--dry-run=server")
    return probe.returncode != 0 and POLICY in probe.stderr


def refused(result: subprocess.CompletedProcess[str], *, ns: str, policy: str) -> str:
    assert result.returncode != 0 and POLICY in result.stderr, (result.returncode, result.stdout, result.stderr)
    assert f"namespace {ns} is held by NSScaler {policy}" in result.stderr, result.stderr
    assert f"kubectl nsscaler wake -n {ns} --for 1h" in result.stderr, result.stderr
    print(f"refused: {result.stderr.strip()}")
    return result.stderr


def passed(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, (result.stdout, result.stderr)


def refusals(plane: controlplane.ControlPlane, binding: str) -> float:
    """What the API server counts of the hold's refusals itself (its /metrics, cluster-wide, per binding): the one
    count of refused syncs there is, since a refused request leaves nothing on the object for a run to read."""
    text = plane.session().get(f"{plane.server}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_validating_admission_policy_check_total{")
               and f'policy="{hold_admission.NAME}"' in line and f'policy_binding="{binding}"' in line
               and 'enforcement_action="deny"' in line)


def labels(api: AdminApi, ns: str) -> dict[str, str]:
    return dict(api.get("Namespace", ns)["metadata"].get("labels") or {})


def applied(ns: str, replicas: int) -> str:
    """What a GitOps tool applies: the Deployment of its manifests."""
    obj: dict[str, Any] = builders.deployment(ns, "web", replicas)
    return yaml.safe_dump(obj)


@pytest.mark.usefixtures("hold_policy")
def test_an_editor_cannot_start_what_a_held_namespace_holds_and_a_wake_opens_it_at_once(
        api: AdminApi, control_plane: controlplane.ControlPlane, run_job: Any, prefix: str, editor: Editor) -> None:
    live, held = family(api, prefix, editor)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"], kinds=["Deployment", "CronJob"]))
    assert run_job().exit_code == 0
    assert labels(api, held)[LABEL_HOLD] == "deny" and LABEL_HOLD not in labels(api, live)
    assert api.replicas("Deployment", held, "web") == 0
    wait_until(lambda: in_force(editor, held), what="the hold to reach admission")
    before = refusals(control_plane, f"{hold_admission.NAME}-deny")

    refused(editor.kubectl("scale", "deployment/web", "--replicas=3", "-n", held), ns=held, policy=name)
    refused(editor.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=argocd-controller",
                           "-f", "-", stdin=applied(held, 3)), ns=held, policy=name)
    refused(editor.kubectl("create", "deployment", "new", f"--image={IMAGE}", "-n", held), ns=held, policy=name)
    refused(editor.kubectl("run", "bare", f"--image={IMAGE}", "-n", held), ns=held, policy=name)
    refused(editor.kubectl("patch", "cronjob/nightly", "-n", held, "-p", '{"spec":{"suspend":false}}'),
            ns=held, policy=name)
    refused(editor.kubectl("label", "deployment/web", "-n", held, "nsscaler.wubw.fun/scaled-"), ns=held, policy=name)
    assert api.replicas("Deployment", held, "web") == 0 and not api.list("Deployment", held)[1:]
    assert refusals(control_plane, f"{hold_admission.NAME}-deny") - before >= 6  # the GitOps-style apply among them

    # what starts no Pod passes: a new workload at 0, a label, a scale-down; the kept namespace is untouched
    passed(editor.kubectl("create", "deployment", "idle", f"--image={IMAGE}", "--replicas=0", "-n", held))
    passed(editor.kubectl("label", "deployment/web", "-n", held, "team=shop"))
    passed(editor.kubectl("scale", "deployment/web", "--replicas=0", "-n", held))
    passed(editor.kubectl("scale", "deployment/web", "--replicas=3", "-n", live))
    passed(editor.kubectl("run", "bare", f"--image={IMAGE}", "-n", live))

    # a Wake: the run it starts (the waker's, at once) lifts the hold before anything else
    passed(editor.plugin("wake", "-n", held, "--for", "1h", "--reason", "demo"))
    assert run_job().exit_code == 0
    assert LABEL_HOLD not in labels(api, held)
    assert ANNOTATION_HOLD not in (api.get("Namespace", held)["metadata"].get("annotations") or {})
    wait_until(lambda: editor.kubectl("scale", "deployment/web", "--replicas=3", "-n", held).returncode == 0,
               what="the editor's scale-up to pass once the hold is lifted")
    assert api.replicas("Deployment", held, "web") == 3

    # the hold comes back when the Wake ends and a run holds the namespace again
    for wake in api.list("Wake", held):
        api.delete("Wake", wake["metadata"]["name"], held)
    assert run_job().exit_code == 0
    assert labels(api, held)[LABEL_HOLD] == "deny"


@pytest.mark.usefixtures("hold_policy")
def test_warn_admits_with_a_warning_and_off_or_a_suspended_policy_holds_nothing(
        api: AdminApi, run_job: Any, prefix: str, editor: Editor) -> None:
    _, held = family(api, prefix, editor)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"], hold="warn"))
    assert run_job().exit_code == 0
    assert labels(api, held)[LABEL_HOLD] == "warn"

    def warned() -> bool:
        result = editor.kubectl("scale", "deployment/web", "--replicas=1", "-n", held)
        assert result.returncode == 0, result.stderr
        return "Warning:" in result.stderr and POLICY in result.stderr
    wait_until(warned, what="the warn binding to answer with a warning")
    assert api.replicas("Deployment", held, "web") == 1

    api.patch("NSScaler", name, {"spec": {"hold": "off"}})
    assert run_job().exit_code == 0
    assert LABEL_HOLD not in labels(api, held)

    api.patch("NSScaler", name, {"spec": {"hold": "deny"}})
    assert run_job().exit_code == 0
    assert labels(api, held)[LABEL_HOLD] == "deny"
    version = api.get("Namespace", held)["metadata"]["resourceVersion"]
    assert run_job().exit_code == 0
    assert api.get("Namespace", held)["metadata"]["resourceVersion"] == version  # a mark as it was: not written
    api.patch("NSScaler", name, {"spec": {"suspend": True}})
    assert run_job().exit_code == 0
    assert LABEL_HOLD not in labels(api, held)


def pod_owned_by_a_replicaset(ns: str) -> str:
    """A Pod as the ReplicaSet controller sends it: a controller ownerReference (its owner need not exist for
    admission; the server-side dry run creates nothing)."""
    pod = builders.pod(ns, "web-abcde")
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
                                           "uid": str(uuid.uuid4()), "controller": True}]
    return yaml.safe_dump(pod)


@pytest.mark.usefixtures("hold_policy")
def test_the_run_a_wake_starts_lifts_the_hold_first_and_restores_through_it_as_nsscaler_s_own_account(
        api: AdminApi, control_plane: controlplane.ControlPlane, as_nsscaler: Any, prefix: str,
        editor: Editor) -> None:
    """The waker's Job runs as nsscaler's ServiceAccount, which the hold lets by only by name (a match condition):
    the freeze, the mark, the lift and the restore (a scale-up, an unsuspend) are all sent by it here, with the
    hold in force. The controllers' own identities (a real cluster runs each controller as its ServiceAccount in
    kube-system; this plane's controller manager is a cluster admin) are sent by impersonation."""
    live, held = family(api, prefix, editor)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"], kinds=["Deployment", "CronJob"]))
    frozen = as_nsscaler()
    assert frozen.exit_code == 0, frozen.stderr
    assert labels(api, held)[LABEL_HOLD] == "deny"
    assert api.replicas("Deployment", held, "web") == 0 and api.get("CronJob", "nightly", held)["spec"]["suspend"]
    wait_until(lambda: in_force(editor, held), what="the hold to reach admission")
    refused(editor.kubectl("scale", "deployment/web", "--replicas=3", "-n", held), ns=held, policy=name)

    # a controller making what a controller makes passes; the same Pod from a person does not
    replicaset_controller = "system:serviceaccount:kube-system:replicaset-controller"
    passed(subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig),
                           f"--as={replicaset_controller}", "create", "-f", "-", "--dry-run=server"],
                          input=pod_owned_by_a_replicaset(held), capture_output=True, text=True, check=False))
    refused(editor.kubectl("create", "-f", "-", "--dry-run=server", stdin=pod_owned_by_a_replicaset(held)),
            ns=held, policy=name)

    passed(editor.plugin("wake", "-n", held, "--for", "1h", "--reason", "demo"))
    woken = as_nsscaler()  # what the waker's Job runs, at once
    assert woken.exit_code == 0, woken.stderr
    assert LABEL_HOLD not in labels(api, held)
    assert api.replicas("Deployment", held, "web") == 2
    assert api.get("CronJob", "nightly", held)["spec"].get("suspend") is not True
    wait_until(lambda: editor.kubectl("scale", "deployment/web", "--replicas=3", "-n", held).returncode == 0,
               what="the editor's scale-up to pass once the hold is lifted")
    assert api.replicas("Deployment", live, "web") == 2  # the kept namespace: untouched throughout


@pytest.mark.usefixtures("hold_policy")
def test_a_service_account_named_nsscaler_elsewhere_is_held_like_anyone(
        api: AdminApi, control_plane: controlplane.ControlPlane, as_nsscaler: Any, prefix: str,
        editor: Editor) -> None:
    """The hold lets by the one account its mark names (`hold-account`: nsscaler's, in its own namespace), not a
    name: a namespace admin could make a ServiceAccount called nsscaler in a namespace of theirs and bind it."""
    _, held = family(api, prefix, editor)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"], kinds=["Deployment", "CronJob"]))
    frozen = as_nsscaler()
    assert frozen.exit_code == 0, frozen.stderr
    marked = api.get("Namespace", held)["metadata"]["annotations"]
    assert marked[ANNOTATION_HOLD_ACCOUNT] == f"system:serviceaccount:{NAMESPACE}:nsscaler"
    wait_until(lambda: in_force(editor, held), what="the hold to reach admission")
    impostor = f"system:serviceaccount:{prefix}live:nsscaler"
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nsscaler",
                                                                           "namespace": prefix + "live"}})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "impostor", "namespace": held},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"kind": "ServiceAccount", "name": "nsscaler", "namespace": prefix + "live"}]})
    # the count alone, on the object: what the run's own policy allows an account of that name, so only the hold
    # can refuse it
    scaled = subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), f"--as={impostor}",
                             "patch", "deployment/web", "-n", held, "-p", '{"spec":{"replicas":3}}'],
                            capture_output=True, text=True, check=False)
    refused(scaled, ns=held, policy=name)
    assert api.replicas("Deployment", held, "web") == 0


def _create(editor: Editor, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return editor.kubectl("create", "-f", "-", stdin=yaml.safe_dump(obj))


def _held_by_default_kinds(api: AdminApi, run_job: Any, prefix: str, editor: Editor) -> tuple[str, str]:
    """A family held by a policy of the default kinds (Deployment, StatefulSet); the hold in force."""
    _, held = family(api, prefix, editor)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"]))
    assert run_job().exit_code == 0
    assert labels(api, held)[LABEL_HOLD] == "deny" and api.replicas("Deployment", held, "web") == 0
    wait_until(lambda: in_force(editor, held), what="the hold to reach admission")
    return held, name


@pytest.mark.usefixtures("hold_policy")
def test_the_exclude_annotation_sent_while_held_starts_nothing(
        api: AdminApi, run_job: Any, prefix: str, editor: Editor) -> None:
    """The opt-out counts as it was before the request: added in the same PATCH as a scale-up, added alone to a
    workload of a frozen kind, or carried by a new workload that runs, it is refused while the namespace is held."""
    held, name = _held_by_default_kinds(api, run_job, prefix, editor)
    both = {"metadata": {"annotations": {ANNOTATION_EXCLUDE: "true"}}, "spec": {"replicas": 3}}
    refused(editor.kubectl("patch", "deployment/web", "-n", held, "--type=merge", "-p", json.dumps(both)),
            ns=held, policy=name)
    refused(editor.kubectl("annotate", "deployment/web", "-n", held, f"{ANNOTATION_EXCLUDE}=true"),
            ns=held, policy=name)
    refused(_create(editor, builders.deployment(held, "opted-out", 3, annotations={ANNOTATION_EXCLUDE: "true"})),
            ns=held, policy=name)
    # nor created at 0 to be raised after: the opt-out would be on the stored object by then
    refused(_create(editor, builders.deployment(held, "opted-out", 0, annotations={ANNOTATION_EXCLUDE: "true"})),
            ns=held, policy=name)
    web = api.get("Deployment", "web", held)
    assert web["spec"]["replicas"] == 0 and ANNOTATION_EXCLUDE not in web["metadata"]["annotations"]
    assert [d["metadata"]["name"] for d in api.list("Deployment", held)] == ["web"]


@pytest.mark.usefixtures("hold_policy")
def test_a_new_workload_of_any_kind_that_starts_pods_is_refused_whatever_kinds_the_policy_freezes(
        api: AdminApi, run_job: Any, prefix: str, editor: Editor) -> None:
    """Creating is refused for every built-in kind that starts Pods, not only those the holders freeze: a Job
    (also one made from a CronJob), an unsuspended CronJob, a ReplicaSet, a ReplicationController, a DaemonSet."""
    held, name = _held_by_default_kinds(api, run_job, prefix, editor)
    kinds = api.get("Namespace", held)["metadata"]["annotations"][ANNOTATION_HOLD_KINDS]
    assert " jobs.batch " not in kinds and " cronjobs.batch " not in kinds, kinds
    refused(editor.kubectl("create", "job", "once", f"--image={IMAGE}", "-n", held), ns=held, policy=name)
    refused(editor.kubectl("create", "job", "now", "--from=cronjob/nightly", "-n", held), ns=held, policy=name)
    refused(editor.kubectl("create", "cronjob", "hourly", f"--image={IMAGE}", "--schedule=0 * * * *", "-n", held),
            ns=held, policy=name)
    refused(_create(editor, builders.replicaset(held, "rs", 2)), ns=held, policy=name)
    refused(_create(editor, builders.replicaset(held, "rc", 2, kind="ReplicationController")), ns=held, policy=name)
    refused(_create(editor, builders.daemonset(held, "agent")), ns=held, policy=name)
    assert not [j for j in api.list("Job", held) if j["metadata"]["name"] in ("once", "now")]
    assert [c["metadata"]["name"] for c in api.list("CronJob", held)] == ["nightly"]
    assert "rs" not in [r["metadata"]["name"] for r in api.list("ReplicaSet", held)]  # only web's own
    assert not api.list("ReplicationController", held)
    assert not api.list("DaemonSet", held)
    # what starts nothing still passes: a suspended Job
    passed(_create(editor, builders.job(held, "later", suspend=True)))


@pytest.mark.usefixtures("hold_policy")
def test_another_namespace_s_account_with_a_made_up_owner_is_held_and_the_controllers_are_not(
        api: AdminApi, control_plane: controlplane.ControlPlane, run_job: Any, prefix: str, editor: Editor) -> None:
    """A ServiceAccount of another namespace (a GitOps tool's) with `edit` in the held namespace gives the
    Deployment a controller ownerReference to a ConfigMap and raises its count: refused, as is a Pod it sends
    owned by a ReplicaSet. The ReplicaSet controller's own account sending that Pod passes (impersonated: this
    plane's controller manager is a cluster admin)."""
    held, name = _held_by_default_kinds(api, run_job, prefix, editor)
    other = prefix + "live"
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gitops", "namespace": other}})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "gitops", "namespace": held},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"kind": "ServiceAccount", "name": "gitops", "namespace": other}]})
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": held}})
    owner = api.get("ConfigMap", "owner", held)["metadata"]["uid"]
    body = {"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                              "uid": owner, "controller": True}]},
            "spec": {"replicas": 3}}

    def as_user(user: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """kubectl as `user` (impersonated by the cluster admin; `--as-group=...` among `args` adds groups)."""
        return subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), f"--as={user}",
                               *args], input=stdin, capture_output=True, text=True, check=False)

    gitops = f"system:serviceaccount:{other}:gitops"
    wait_until(lambda: as_user(gitops, "auth", "can-i", "patch", "deployments", "-n", held).returncode == 0,
               what="the RoleBinding to reach authorization")
    refused(as_user(gitops, "patch", "deployment/web", "-n", held, "--type=merge", "-p", json.dumps(body)),
            ns=held, policy=name)
    web = api.get("Deployment", "web", held)
    assert web["spec"]["replicas"] == 0 and not web["metadata"].get("ownerReferences")
    refused(as_user(gitops, "create", "-f", "-", "--dry-run=server", stdin=pod_owned_by_a_replicaset(held)),
            ns=held, policy=name)
    passed(as_user("system:serviceaccount:kube-system:replicaset-controller", "create", "-f", "-",
                   "--dry-run=server", stdin=pod_owned_by_a_replicaset(held)))
    # a node is trusted for its mirror Pods only (a static Pod's copy), not for what a ReplicaSet would own
    node = ("system:node:n1", "--as-group=system:nodes", "--as-group=system:authenticated")
    refused(as_user(*node, "create", "-f", "-", "--dry-run=server", stdin=pod_owned_by_a_replicaset(held)),
            ns=held, policy=name)
    mirror = builders.pod(held, "static-n1", annotations={"kubernetes.io/config.mirror": "0123456789abcdef"})
    mirror["spec"]["nodeName"] = "n1"
    passed(as_user(*node, "create", "-f", "-", "--dry-run=server", stdin=yaml.safe_dump(mirror)))


@pytest.mark.usefixtures("hold_policy")
def test_kube_system_is_never_held_whatever_its_labels(api: AdminApi, prefix: str, editor: Editor) -> None:
    """The cluster's own controllers live in kube-system: the policy's namespace selector leaves it out, even
    where it carries the hold label (a mistake, or a hand's). A namespace labelled after it shows the label has
    reached admission, so kube-system's pass is the selector's doing, not a stale cache."""
    control = prefix + "control"
    api.create(builders.namespace(control))
    grant_edit(api, control, editor)
    grant_edit(api, "kube-system", editor)
    try:
        api.patch("Namespace", "kube-system", {"metadata": {"labels": {LABEL_HOLD: "deny"}}})
        api.patch("Namespace", control, {"metadata": {"labels": {LABEL_HOLD: "deny"}}})
        wait_until(lambda: in_force(editor, control), what="the label to reach admission")
        passed(editor.kubectl("run", "probe", f"--image={IMAGE}", "-n", "kube-system", "--dry-run=server"))
    finally:
        api.patch("Namespace", "kube-system", {"metadata": {"labels": {LABEL_HOLD: None}}})
        api.delete("RoleBinding", f"edit-{editor.name}", "kube-system")
    assert LABEL_HOLD not in labels(api, "kube-system")


@pytest.mark.usefixtures("hold_policy")
def test_a_workload_nsscaler_did_not_freeze_is_not_started_while_held_whatever_its_kind(
        api: AdminApi, run_job: Any, prefix: str, editor: Editor) -> None:
    """What the editor makes at rest while the namespace is held (a Deployment at 0, a suspended Job, a ReplicaSet
    at 0), and a workload of a kind the holders leave that rests (the CronJob the editor suspends), may not be
    started after: not by raising its count (on the object or through /scale), not by unsuspending it, not by
    opting it out first. A workload of a kind the holders leave that runs already may still grow (an HPA's
    scale-up), and a person may still stop one."""
    held, name = _held_by_default_kinds(api, run_job, prefix, editor)
    api.create(builders.replicaset(held, "running", 1))  # of a kind the holders leave, by a cluster admin
    kinds = api.get("Namespace", held)["metadata"]["annotations"][ANNOTATION_HOLD_KINDS]
    assert " deployments.apps " in kinds and " jobs.batch " not in kinds and " replicasets.apps " not in kinds

    # a frozen kind, never frozen by a run (no record): raised from 0 neither on the object nor through /scale
    passed(editor.kubectl("create", "deployment", "idle", f"--image={IMAGE}", "--replicas=0", "-n", held))
    refused(editor.kubectl("scale", "deployment/idle", "--replicas=2", "-n", held), ns=held, policy=name)
    refused(editor.kubectl("patch", "deployment/idle", "-n", held, "-p", '{"spec":{"replicas":2}}'),
            ns=held, policy=name)
    # kinds the holders leave, made or put at rest while held
    passed(_create(editor, builders.job(held, "later", suspend=True)))
    refused(editor.kubectl("patch", "job/later", "-n", held, "-p", '{"spec":{"suspend":false}}'), ns=held, policy=name)
    refused(editor.kubectl("annotate", "job/later", "-n", held, f"{ANNOTATION_EXCLUDE}=true"), ns=held, policy=name)
    passed(editor.kubectl("patch", "cronjob/nightly", "-n", held, "-p", '{"spec":{"suspend":true}}'))
    refused(editor.kubectl("patch", "cronjob/nightly", "-n", held, "-p", '{"spec":{"suspend":false}}'),
            ns=held, policy=name)
    passed(_create(editor, builders.replicaset(held, "rs", 0)))
    refused(editor.kubectl("scale", "replicaset/rs", "--replicas=2", "-n", held), ns=held, policy=name)
    refused(editor.kubectl("patch", "replicaset/rs", "-n", held, "-p", '{"spec":{"replicas":2}}'), ns=held, policy=name)
    assert api.replicas("Deployment", held, "idle") == 0 and api.replicas("ReplicaSet", held, "rs") == 0
    assert api.get("Job", "later", held)["spec"]["suspend"] and api.get("CronJob", "nightly", held)["spec"]["suspend"]
    assert ANNOTATION_EXCLUDE not in (api.get("Job", "later", held)["metadata"].get("annotations") or {})

    # what the holders leave and runs already: it may grow (through /scale, as an HPA sends it) and be opted out
    passed(editor.kubectl("scale", "replicaset/running", "--replicas=2", "-n", held))
    passed(editor.kubectl("annotate", "replicaset/running", "-n", held, f"{ANNOTATION_EXCLUDE}=true"))
    assert api.replicas("ReplicaSet", held, "running") == 2


@pytest.mark.usefixtures("hold_policy")
def test_an_excluded_workload_scales_through_its_scale_subresource_and_only_nsscaler_names_it(
        api: AdminApi, as_nsscaler: Any, prefix: str, editor: Editor) -> None:
    """A Scale carries no annotation: the run names the namespace's excluded workloads in the mark
    (`hold-excluded`, written by nsscaler's own account, which its run-admission policy lets write that key), and
    `kubectl scale` (or an HPA) of one of them passes while the frozen ones are refused. The editor cannot write
    the name of a frozen workload there: `edit` writes no Namespace. A run that finds them as it left them writes
    nothing."""
    _, held = family(api, prefix, editor)
    api.create(builders.deployment(held, "keep", 1, annotations={ANNOTATION_EXCLUDE: "true"}))
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"]))
    frozen = as_nsscaler()
    assert frozen.exit_code == 0, frozen.stderr
    marked = api.get("Namespace", held)["metadata"]
    assert marked["labels"][LABEL_HOLD] == "deny"
    assert marked["annotations"][ANNOTATION_HOLD_EXCLUDED] == " deployments.apps/keep "
    assert api.replicas("Deployment", held, "web") == 0 and api.replicas("Deployment", held, "keep") == 1
    wait_until(lambda: in_force(editor, held), what="the hold to reach admission")

    passed(editor.kubectl("scale", "deployment/keep", "--replicas=3", "-n", held))
    assert api.replicas("Deployment", held, "keep") == 3
    refused(editor.kubectl("scale", "deployment/web", "--replicas=3", "-n", held), ns=held, policy=name)
    forged = editor.kubectl("annotate", "--overwrite", "namespace", held,
                            f"{ANNOTATION_HOLD_EXCLUDED}= deployments.apps/web ")
    assert forged.returncode != 0 and "forbidden" in forged.stderr.lower(), forged.stderr
    assert api.get("Namespace", held)["metadata"]["annotations"][ANNOTATION_HOLD_EXCLUDED] == " deployments.apps/keep "

    version = api.get("Namespace", held)["metadata"]["resourceVersion"]
    steady = as_nsscaler()
    assert steady.exit_code == 0, steady.stderr
    assert api.get("Namespace", held)["metadata"]["resourceVersion"] == version  # as it was: not written


#: catalogue objects as their operators' CRDs accept them, at rest or running (tests/fixtures/crds)
BRIDGE = {"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaBridge",
          "spec": {"replicas": 1, "bootstrapServers": "kafka:9092"}}
PXC = {"apiVersion": "pxc.percona.com/v1", "kind": "PerconaXtraDBCluster", "spec": {"crVersion": "1.18.0",
                                                                                   "pxc": {"size": 3}}}
ZALANDO = {"apiVersion": "acid.zalan.do/v1", "kind": "postgresql",
           "spec": {"teamId": "acid", "numberOfInstances": 2, "postgresql": {"version": "17"},
                    "volume": {"size": "1Gi"}}}
CNPG = {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster", "spec": {"instances": 1, "storage": {"size": "1Gi"}}}


def _object(template: dict[str, Any], ns: str, name: str, **annotations: str) -> dict[str, Any]:
    return {**template, "metadata": {"name": name, "namespace": ns, "annotations": annotations}}


@pytest.mark.usefixtures("hold_policy")
def test_the_catalogue_kinds_are_held_between_runs_by_their_own_freeze(
        api: AdminApi, run_job: Any, prefix: str, editor: Editor) -> None:
    """A shipped row's kind is held as it is frozen: a Strimzi KafkaBridge's count (on the object and through its
    /scale), a Percona cluster's `spec.pause`, a Zalando cluster's `numberOfInstances`, a CloudNativePG cluster's
    hibernation annotation (a new one without it, or removing it, is refused). The editor has `edit` and a Role on
    the operators' kinds in the held namespace."""
    _, held = family(api, prefix, editor)
    crds.install(api, crds.operators())
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "operators", "namespace": held},
                "rules": [{"apiGroups": ["kafka.strimzi.io", "pxc.percona.com", "acid.zalan.do", "postgresql.cnpg.io"],
                           "resources": ["*"], "verbs": ["*"]}]})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "operators", "namespace": held},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "operators"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": editor.name}]})
    for template, name in ((BRIDGE, "bridge"), (PXC, "pxc"), (ZALANDO, "acid-db")):
        api.create(_object(template, held, name))
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"], kinds=[
        "Deployment", "KafkaBridge.kafka.strimzi.io", "PerconaXtraDBCluster.pxc.percona.com",
        "postgresql.acid.zalan.do"]))
    result = run_job()
    assert result.exit_code == 0, result.stderr
    kinds = api.get("Namespace", held)["metadata"]["annotations"][ANNOTATION_HOLD_KINDS]
    assert " kafkabridges.kafka.strimzi.io " in kinds and " perconaxtradbclusters.pxc.percona.com " in kinds, kinds
    assert api.get("KafkaBridge", "bridge", held)["spec"]["replicas"] == 0
    assert api.get("PerconaXtraDBCluster", "pxc", held)["spec"]["pause"] is True
    assert api.get("postgresql", "acid-db", held)["spec"]["numberOfInstances"] == 0
    wait_until(lambda: in_force(editor, held), what="the hold to reach admission")

    refused(editor.kubectl("scale", "kafkabridge/bridge", "--replicas=2", "-n", held), ns=held, policy=name)
    refused(editor.kubectl("patch", "kafkabridge/bridge", "-n", held, "--type=merge", "-p",
                           '{"spec":{"replicas":2}}'), ns=held, policy=name)
    refused(editor.kubectl("patch", "perconaxtradbcluster/pxc", "-n", held, "--type=merge", "-p",
                           '{"spec":{"pause":false}}'), ns=held, policy=name)
    refused(editor.kubectl("patch", "postgresql.acid.zalan.do/acid-db", "-n", held, "--type=merge", "-p",
                           '{"spec":{"numberOfInstances":2}}'), ns=held, policy=name)
    refused(_create(editor, _object(CNPG, held, "db")), ns=held, policy=name)
    passed(_create(editor, _object(CNPG, held, "db", **{"cnpg.io/hibernation": "on"})))
    refused(editor.kubectl("annotate", "cluster.postgresql.cnpg.io/db", "-n", held, "cnpg.io/hibernation-"),
            ns=held, policy=name)
    assert api.get("KafkaBridge", "bridge", held)["spec"]["replicas"] == 0
    assert api.get("PerconaXtraDBCluster", "pxc", held)["spec"]["pause"] is True
    assert api.get("postgresql", "acid-db", held)["spec"]["numberOfInstances"] == 0
    assert api.get("Cluster", "db", held)["metadata"]["annotations"]["cnpg.io/hibernation"] == "on"
    # what starts nothing passes: a change elsewhere in the spec
    passed(editor.kubectl("patch", "kafkabridge/bridge", "-n", held, "--type=merge", "-p",
                          '{"spec":{"bootstrapServers":"kafka:9093"}}'))


#: a platform team's rows as the chart's `kindRows` gives them: a switch, an annotation, a count behind /scale
TEAM_KIND_ROWS = [
    {"kind": "Paused.test.nsscaler.io", "plural": "pauseds", "versions": ["v1"],
     "freeze": {"method": "field", "path": "spec.paused", "value": True}},
    {"kind": "Sleeper.test.nsscaler.io", "plural": "sleepers", "versions": ["v1"],
     "freeze": {"method": "annotation", "key": "example.com/hibernation", "value": "on"}},
    {"kind": "Fleet.test.nsscaler.io", "plural": "fleets", "versions": ["v1"],
     "freeze": {"method": "scale", "path": "spec.replicas"}},
]
TEAM_POLICY = f"ValidatingAdmissionPolicy '{team_hold.NAME}'"


def _team_refused(result: subprocess.CompletedProcess[str], *, ns: str, policy: str) -> None:
    assert result.returncode != 0 and TEAM_POLICY in result.stderr, (result.returncode, result.stdout, result.stderr)
    assert f"namespace {ns} is held by NSScaler {policy}" in result.stderr, result.stderr
    print(f"refused: {result.stderr.strip()}")


def _team_kinds_editable(api: AdminApi, prefix: str, editor: Editor) -> str:
    """A family whose held namespace the editor may change every test kind in; the held namespace."""
    _, held = family(api, prefix, editor)
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "team-kinds", "namespace": held},
                "rules": [{"apiGroups": ["test.nsscaler.io"], "resources": ["*"], "verbs": ["*"]}]})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "team-kinds", "namespace": held},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team-kinds"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": editor.name}]})
    return held


@pytest.mark.usefixtures("hold_policy")
def test_a_team_s_rows_given_as_chart_values_are_held_between_runs(
        api: AdminApi, run_job: Any, prefix: str, editor: Editor, tmp_path: Path) -> None:
    """The chart's `kindRows` (as `helm template` renders them: NSScalerKinds) are held between runs by the policy
    that reads the NSScalerKinds: in a held namespace, an editor's `kubectl scale` and patch of the count, turning
    the switch off, removing the annotation, and a new object without the freeze are refused, naming the policy
    that holds it; what starts nothing passes."""
    helm = str(built_tool("helm"))
    values = {"kindRows": [{"name": f"{prefix}{row['plural']}", "spec": row} for row in TEAM_KIND_ROWS]}
    rows = [d for d in helm_template(helm, tmp_path, values) if d["kind"] == "NSScalerKind"]
    assert len(rows) == len(TEAM_KIND_ROWS)
    crds.install(api, [yaml.safe_load((ROOT / "kustomize/base/kind-crd.yaml").read_text()), *crds.TEST_KINDS,
                       crds.PAUSED, crds.made_up("Sleeper", "sleepers")])
    held = _team_kinds_editable(api, prefix, editor)
    api.create(builders.custom("Paused", held, "x", {"paused": False}))
    api.create(builders.custom("Sleeper", held, "x", {}))
    api.create(builders.custom("Fleet", held, "x", {"replicas": 2}))
    name = f"{prefix}p"
    try:
        for row in rows:
            api.create({**row, "metadata": {"name": row["metadata"]["name"]}})
        api.create(builders.nsscaler(name, prefix, ["live"], kinds=[r["kind"] for r in TEAM_KIND_ROWS]))
        result = run_job()
        assert result.exit_code == 0, result.stderr
        assert api.get("Paused", "x", held)["spec"]["paused"] is True
        assert api.get("Fleet", "x", held)["spec"]["replicas"] == 0
        switch_off = ("patch", "paused.test.nsscaler.io/x", "-n", held, "--type=merge", "-p",
                      '{"spec":{"paused":false}}')
        wait_until(lambda: TEAM_POLICY in editor.kubectl(*switch_off, "--dry-run=server").stderr,
                   what="the team rows' hold to reach admission")

        _team_refused(editor.kubectl(*switch_off), ns=held, policy=name)
        _team_refused(editor.kubectl("annotate", "sleeper.test.nsscaler.io/x", "-n", held,
                                     "example.com/hibernation-"), ns=held, policy=name)
        _team_refused(editor.kubectl("scale", "fleet.test.nsscaler.io/x", "--replicas=3", "-n", held),
                      ns=held, policy=name)
        _team_refused(editor.kubectl("patch", "fleet.test.nsscaler.io/x", "-n", held, "--type=merge", "-p",
                                     '{"spec":{"replicas":3}}'), ns=held, policy=name)
        _team_refused(_create(editor, builders.custom("Paused", held, "new", {"paused": False})), ns=held,
                      policy=name)
        passed(_create(editor, builders.custom("Paused", held, "new", {"paused": True})))
        passed(editor.kubectl("patch", "paused.test.nsscaler.io/x", "-n", held, "--type=merge", "-p",
                              '{"spec":{"note":"starts nothing"}}'))
        assert api.get("Paused", "x", held)["spec"]["paused"] is True
        assert api.get("Fleet", "x", held)["spec"]["replicas"] == 0
        assert api.get("Sleeper", "x", held)["metadata"]["annotations"]["example.com/hibernation"] == "on"
    finally:
        api.delete("NSScaler", name)
        for row in rows:
            api.delete("NSScalerKind", row["metadata"]["name"])


@pytest.mark.usefixtures("hold_policy")
def test_a_team_s_row_names_its_plural_and_a_field_row_frozen_to_a_count_is_held_through_its_scale_subresource(
        api: AdminApi, run_job: Any, prefix: str, editor: Editor) -> None:
    """An NSScalerKind without `plural` is refused with what to give (the hold matches a `/scale` request, whose
    kind is Scale, by it). A `field` row frozen to a count on a kind with a `/scale` subresource: in a held
    namespace an editor's `kubectl scale` is refused as the patch of the field is, and the count stays 0."""
    crds.install(api, [yaml.safe_load((ROOT / "kustomize/base/kind-crd.yaml").read_text()), *crds.TEST_KINDS])
    row = {"kind": "Fleet.test.nsscaler.io", "versions": ["v1"],
           "freeze": {"method": "field", "path": "spec.replicas", "value": 0}}
    name = f"{prefix}p"
    try:
        refused = api.http.post(api.url("NSScalerKind"), json={
            "apiVersion": "operators.wubw.fun/v1alpha1", "kind": "NSScalerKind",
            "metadata": {"name": f"{prefix}fleets"}, "spec": row}, timeout=30)
        assert refused.status_code == 422 and "plural is required: give the kind's resource name" in refused.text, \
            refused.text
        held = _team_kinds_editable(api, prefix, editor)
        api.create(builders.custom("Fleet", held, "x", {"replicas": 2}))
        api.create({"apiVersion": "operators.wubw.fun/v1alpha1", "kind": "NSScalerKind",
                    "metadata": {"name": f"{prefix}fleets"}, "spec": {**row, "plural": "fleets"}})
        api.create(builders.nsscaler(name, prefix, ["live"], kinds=[row["kind"]]))
        result = run_job()
        assert result.exit_code == 0, result.stderr
        assert api.get("Fleet", "x", held)["spec"]["replicas"] == 0
        patch = ("patch", "fleet.test.nsscaler.io/x", "-n", held, "--type=merge", "-p", '{"spec":{"replicas":3}}')
        wait_until(lambda: TEAM_POLICY in editor.kubectl(*patch, "--dry-run=server").stderr,
                   what="the team rows' hold to reach admission")
        _team_refused(editor.kubectl("scale", "fleet.test.nsscaler.io/x", "--replicas=3", "-n", held),
                      ns=held, policy=name)
        _team_refused(editor.kubectl(*patch), ns=held, policy=name)
        assert api.get("Fleet", "x", held)["spec"]["replicas"] == 0
    finally:
        api.delete("NSScaler", name)
        api.delete("NSScalerKind", f"{prefix}fleets")


@pytest.mark.usefixtures("hold_policy")
def test_past_the_bound_of_the_opt_out_s_names_the_run_says_so_and_the_hold_opens_for_no_more(
        api: AdminApi, as_nsscaler: Any, prefix: str, editor: Editor) -> None:
    """More opted-out workloads than the mark may name (`hold.MAX_EXCLUDED_CHARS` of names): the mark keeps the
    first in order and stays inside the Namespace's annotation budget; the run says, once (when it writes the
    mark), how many it left out. A named one scales through /scale; one past the bound is refused there (the hold
    never opens for what it does not name) and still scales on the object (its own annotation)."""
    _, held = family(api, prefix, editor)
    long = "k" * 230
    count = hold_api.MAX_EXCLUDED_CHARS // (len("deployments.apps/") + len(long) + 5) + 2
    names = [f"{long}-{i:03}" for i in range(count)]
    for n in names:  # a label value is at most 63 characters: the long name stays out of the labels
        made = builders.deployment(held, n, 0, annotations={ANNOTATION_EXCLUDE: "true"})
        made["spec"]["selector"] = {"matchLabels": {"app": "many"}}
        made["spec"]["template"]["metadata"]["labels"] = {"app": "many"}
        api.create(made)
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"]))
    frozen = as_nsscaler()
    assert frozen.exit_code == 0, frozen.stderr
    carried = api.get("Namespace", held)["metadata"]["annotations"][ANNOTATION_HOLD_EXCLUDED]
    assert 0 < len(carried) <= hold_api.MAX_EXCLUDED_CHARS
    named = [n.removeprefix("deployments.apps/") for n in carried.split()]
    assert named == names[:len(named)] and len(named) < count
    assert frozen.stderr.count(f"{count - len(named)} workloads annotated {ANNOTATION_EXCLUDE} are past the bound") \
        == 1, frozen.stderr
    wait_until(lambda: in_force(editor, held), what="the hold to reach admission")

    passed(editor.kubectl("scale", f"deployment/{names[0]}", "--replicas=1", "-n", held))
    refused(editor.kubectl("scale", f"deployment/{names[-1]}", "--replicas=1", "-n", held), ns=held, policy=name)
    passed(editor.kubectl("patch", f"deployment/{names[-1]}", "-n", held, "--type=merge", "-p",
                          '{"spec":{"replicas":1}}'))
    steady = as_nsscaler()
    assert steady.exit_code == 0 and "past the bound" not in steady.stderr, steady.stderr
