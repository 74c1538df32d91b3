"""A stolen token does only what a run does: the shipped admission policies (`kubectl apply -k` of the overlay with
the waker, as a user installs it) against requests sent with each account's real token, as whoever stole it would
send them. Each refused attempt is refused by the API server with a message that names the policy; each
legitimate action (the waker's run from the CronJob's template; a run's freeze and restore of every kind; the
route swap) still goes through, as the account itself."""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from devtools import admission, builders, row_admission
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from job.cluster.kube import Kube
from job.model.marks import (
    AGGREGATE_LABEL,
    ANNOTATION_HOLD,
    ANNOTATION_ORIGINAL_RULES,
    ANNOTATION_RELEASED,
    LABEL_HOLD,
    OWN_CRONJOB,
    WAKER_SERVICE,
)
from job.waker import actions
from job.waker.answer import Door, Request
from tests import crds
from tests.conftest import ROOT
from tests.e2e.test_install import kubectl_run
from tests.gateway import gateway_crds, httproute, ready_pods
from tests.integration.test_every_kind import KINDS, claims, family_of_every_kind, state
from tests.integration.test_restore_tiers import make_db_ready
from tests.integration.test_waker_routes import rules

__all__ = ["gateway_crds"]
pytestmark = pytest.mark.versions
OVERLAY = ROOT / "kustomize" / "overlays" / "prod-with-waker"
NAMESPACE = "nsscaler"
WAKER_POLICY = "nsscaler-waker-starts-only-the-run"
RUN_POLICY = admission.NAME
ROW_POLICY = row_admission.NAME
MERGE = {"Content-Type": "application/merge-patch+json"}


class Stolen:
    """Requests sent with an account's own token (what a Pod of it mounts), as a thief would send them."""

    def __init__(self, plane: controlplane.ControlPlane, account: str, folder: Path) -> None:
        self.server = plane.server
        self.kubeconfig = plane.service_account_kubeconfig(folder / f"{account}.kubeconfig", NAMESPACE, account)
        self.http = requests.Session()
        self.http.trust_env, self.http.verify = False, str(plane.ca_cert)
        token = yaml.safe_load(self.kubeconfig.read_text())["users"][0]["user"]["token"]
        self.http.headers["Authorization"] = f"Bearer {token}"

    def post(self, path: str, body: dict[str, Any], *, dry_run: bool = False) -> requests.Response:
        return self.http.post(f"{self.server}{path}", json=body, params={"dryRun": "All"} if dry_run else {},
                              timeout=30)

    def patch(self, path: str, body: dict[str, Any], *, dry_run: bool = False) -> requests.Response:
        return self.http.patch(f"{self.server}{path}", json=body, headers=MERGE,
                               params={"dryRun": "All"} if dry_run else {}, timeout=30)


def refused_by(response: requests.Response, *policies: str) -> str:
    """The refusal's message, once it is known to come from one of `policies` (the API server names the first
    that refuses, where two would)."""
    message = str(response.json().get("message", ""))
    assert response.status_code == 403 and any(f"ValidatingAdmissionPolicy '{policy}'" in message
                                               for policy in policies), (response.status_code, message)
    print(f"refused: {message}")
    return message


def allowed(response: requests.Response) -> None:
    assert response.status_code in (200, 201), (response.status_code, response.text[:2000])


@pytest.fixture(scope="module")
def shipped(control_plane: controlplane.ControlPlane, api: AdminApi) -> None:
    """The overlay with the waker applied, and both policies in force."""
    kubectl_run(control_plane.admin_kubeconfig, "apply", "--server-side", "-k", str(OVERLAY))
    wait_until(lambda: api.exists("ServiceAccount", "nsscaler-waker", NAMESPACE), what="the waker's account")


@pytest.fixture(scope="module")
def waker(control_plane: controlplane.ControlPlane, api: AdminApi, shipped: None,
          tmp_path_factory: pytest.TempPathFactory) -> Stolen:
    stolen = Stolen(control_plane, "nsscaler-waker", tmp_path_factory.mktemp("waker"))
    cron = api.get("CronJob", "nsscaler", NAMESPACE)
    other = _with_container(actions.run_body(cron, woken="probe"), image="busybox")

    def in_force() -> bool:
        return stolen.post(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", other, dry_run=True).status_code == 403
    wait_until(in_force, what=f"{WAKER_POLICY} to take effect")
    return stolen


@pytest.fixture(scope="module")
def nsscaler(control_plane: controlplane.ControlPlane, api: AdminApi, shipped: None,
             tmp_path_factory: pytest.TempPathFactory) -> Stolen:
    stolen = Stolen(control_plane, "nsscaler", tmp_path_factory.mktemp("nsscaler"))
    probe = "nsscaler-admission-probe"
    api.create(builders.deployment("default", probe, 1))
    path = f"/apis/apps/v1/namespaces/default/deployments/{probe}"
    try:
        wait_until(lambda: stolen.patch(path, _image("busybox"), dry_run=True).status_code == 403,
                   what=f"{RUN_POLICY} to take effect")
    finally:
        api.delete("Deployment", probe, "default")
    return stolen


def _with_container(job: dict[str, Any], **change: Any) -> dict[str, Any]:
    out = copy.deepcopy(job)
    out["spec"]["template"]["spec"]["containers"][0].update(change)
    return out


def _image(image: str, *, name: str = "app") -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [{"name": name, "image": image}]}}}}


def aggregated(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A ClusterRole folded into nsscaler's (what a custom kind's rights are)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {AGGREGATE_LABEL: "true"}}, "rules": rules}


@pytest.fixture
def runs_cleaned(api: AdminApi) -> Iterator[None]:
    yield
    for job in api.list("Job", NAMESPACE):
        if job["metadata"]["name"].startswith("nsscaler-wake-"):
            api.delete("Job", job["metadata"]["name"], NAMESPACE)


@pytest.mark.usefixtures("runs_cleaned")
def test_a_stolen_waker_token_starts_the_cronjob_s_own_run_and_nothing_else(api: AdminApi, waker: Stolen) -> None:
    started = actions.start_run(Kube.as_user(kubeconfig=waker.kubeconfig, context=None), namespace=NAMESPACE,
                                cronjob="nsscaler", woken="shop-v1")  # the waker's own code, as the waker
    assert started is not None and api.exists("Job", started, NAMESPACE)

    cron = api.get("CronJob", "nsscaler", NAMESPACE)
    legitimate = actions.run_body(cron, woken="shop-v1")
    jobs = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    allowed(waker.post(jobs, legitimate, dry_run=True))
    other_account = copy.deepcopy(legitimate)
    other_account["spec"]["template"]["spec"]["serviceAccountName"] = "default"
    unowned = copy.deepcopy(legitimate)
    unowned["metadata"]["ownerReferences"][0]["uid"] = "00000000-0000-0000-0000-000000000000"
    longer = copy.deepcopy(legitimate)
    longer["spec"]["activeDeadlineSeconds"] = 86400
    attempts = {"another image": _with_container(legitimate, image="busybox"),
                "another command": _with_container(legitimate, command=["sh", "-c", "cat /var/run/secrets/*"]),
                "other args": _with_container(legitimate, args=["release"]),
                "another ServiceAccount": other_account, "not owned by the CronJob": unowned,
                "a field of the Job's template changed": longer}
    for what, body in attempts.items():
        message = refused_by(waker.post(jobs, body), WAKER_POLICY)
        assert "CronJob nsscaler/nsscaler" in message, what
    pod = builders.pod(NAMESPACE, "thief")
    assert waker.post(f"/api/v1/namespaces/{NAMESPACE}/pods", pod).status_code == 403  # RBAC: never any Pod
    assert [j["metadata"]["name"] for j in api.list("Job", NAMESPACE)
            if j["metadata"]["name"].startswith("nsscaler-wake-")] == [started]


def test_a_stolen_nsscaler_token_cannot_change_what_runs_nor_write_in_kube_system(
        api: AdminApi, nsscaler: Stolen, prefix: str) -> None:
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.daemonset(ns, "agent"))
    web = f"/apis/apps/v1/namespaces/{ns}/deployments/web"
    refused_by(nsscaler.patch(web, _image("busybox")), RUN_POLICY)
    command = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.invalid/app",
                                                              "command": ["sh"]}]}}}}
    refused_by(nsscaler.patch(web, command), RUN_POLICY)
    refused_by(nsscaler.patch(web, {"metadata": {"annotations": {"team": "thief"}}}), RUN_POLICY)
    refused_by(nsscaler.patch(web, {"spec": {"minReadySeconds": 30}}), RUN_POLICY)
    privileged = {"spec": {"template": {"spec": {"hostNetwork": True,
                                                 "nodeSelector": {"nsscaler.wubw.fun/frozen": "true"}}}}}
    refused_by(nsscaler.patch(f"/apis/apps/v1/namespaces/{ns}/daemonsets/agent", privileged), RUN_POLICY)
    # what a freeze writes passes: the count, the record, the label
    allowed(nsscaler.patch(web, {"metadata": {"annotations": {"nsscaler.wubw.fun/original-replicas": "2"},
                                              "labels": {"nsscaler.wubw.fun/scaled": "true"}},
                                 "spec": {"replicas": 0}}))
    assert api.replicas("Deployment", ns, "web") == 0

    api.create(builders.deployment("kube-system", f"{prefix}dns", 1))
    try:
        message = refused_by(nsscaler.patch(f"/apis/apps/v1/namespaces/kube-system/deployments/{prefix}dns",
                                            {"spec": {"replicas": 0}}), RUN_POLICY)
        assert "kube-system" in message
        assert api.replicas("Deployment", "kube-system", f"{prefix}dns") == 1
    finally:
        api.delete("Deployment", f"{prefix}dns", "kube-system")


def test_a_stolen_nsscaler_token_creates_no_pod_and_no_job_even_where_rbac_grants_too_much(
        api: AdminApi, nsscaler: Stolen, prefix: str) -> None:
    """RBAC refuses it first; a ClusterRole aggregated into nsscaler's by mistake (one meant for a custom kind)
    that grants Pods and Jobs is still refused by admission."""
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    pods, jobs = f"/api/v1/namespaces/{ns}/pods", f"/apis/batch/v1/namespaces/{ns}/jobs"
    assert nsscaler.post(pods, builders.pod(ns, "thief")).status_code == 403  # RBAC
    api.create(aggregated(f"{prefix}too-much", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
                                                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}]))
    try:
        wait_until(lambda: any("pods" in r.get("resources", []) and "create" in r.get("verbs", [])
                               for r in api.get("ClusterRole", "nsscaler").get("rules") or []),
                   what="the mistaken ClusterRole folded into nsscaler's")
        wait_until(lambda: "ValidatingAdmissionPolicy" in nsscaler.post(pods, builders.pod(ns, "t"), dry_run=True).text,
                   what="RBAC to let the request through to admission")
        refused_by(nsscaler.post(pods, builders.pod(ns, "thief")), RUN_POLICY)
        refused_by(nsscaler.post(jobs, builders.job(ns, "thief")), RUN_POLICY)
        assert api.pods(ns) == [] and api.list("Job", ns) == []
    finally:
        api.delete("ClusterRole", f"{prefix}too-much")


def test_a_run_as_nsscaler_freezes_and_gives_back_every_kind_inside_the_policy(
        api: AdminApi, nsscaler: Stolen, run_job: Any, prefix: str) -> None:
    ns = family_of_every_kind(api, prefix)
    api.create(aggregated(f"{prefix}fleets", [{"apiGroups": ["test.nsscaler.io"], "resources": ["fleets"],
                                               "verbs": ["list", "get", "patch"]}]))
    name = f"{prefix}p"
    try:
        wait_until(lambda: any("fleets" in r.get("resources", []) for r in api.get("ClusterRole", "nsscaler")["rules"]),
                   what="the Fleet rule folded into nsscaler's ClusterRole")
        before = state(api, ns)
        api.create(builders.nsscaler(name, prefix, ["v2"], kinds=KINDS, restore_order=["StatefulSet"]))
        frozen = run_job("--own-namespace", NAMESPACE, kubeconfig=nsscaler.kubeconfig)
        assert frozen.exit_code == 0, frozen.stderr
        held = state(api, ns)
        assert [held[k][0] for k in ("Deployment", "StatefulSet", "ReplicaSet", "Fleet", "CronJob", "Job")] == \
            [0, 0, 0, 0, True, True]
        assert held["DaemonSet"][0] and held["StatefulSet"][1]["whenScaled"] == "Retain"
        assert held["ScaledObject"]["autoscaling.keda.sh/paused-replicas"] == "0"
        # the hold mark on its Namespace is a write of the run too, inside the policy (and its RBAC)
        assert api.get("Namespace", ns)["metadata"]["labels"][LABEL_HOLD] == "deny"
        api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})
        first = run_job("--own-namespace", NAMESPACE, "--restore-wait-in-run", "0", kubeconfig=nsscaler.kubeconfig)
        assert first.exit_code == 0, first.stderr
        make_db_ready(api, ns)
        last = run_job("--own-namespace", NAMESPACE, "--restore-wait-in-run", "0", kubeconfig=nsscaler.kubeconfig)
        assert last.exit_code == 0, last.stderr
        assert LABEL_HOLD not in (api.get("Namespace", ns)["metadata"].get("labels") or {})
        after = state(api, ns)
        assert after == before, json.dumps({k: (before[k], after[k]) for k in before if before[k] != after[k]})
        assert claims(api, ns) == ["data-db-0"]
    finally:
        api.delete("NSScaler", name)
        api.delete("ClusterRole", f"{prefix}fleets")


@pytest.mark.usefixtures("crd", "gateway_crds")
def test_the_route_swap_as_nsscaler_fits_inside_the_policy(api: AdminApi, nsscaler: Stolen, run_job: Any,
                                                          prefix: str) -> None:
    held = prefix + "v1"
    api.create(builders.namespace(held))
    api.create(builders.namespace(prefix + "v2"))
    api.create(builders.deployment(held, "web", 1))
    api.create(httproute(held, "shop", hostname="v1.shop.example", rules=rules()))
    before = api.get("HTTPRoute", "shop", held)["spec"]
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["v2"], wake={"on_request": True}))
    args = ("--own-namespace", NAMESPACE, "--restore-wait-in-run", "0")
    try:
        pointed = run_job(*args, kubeconfig=nsscaler.kubeconfig)
        assert pointed.exit_code == 0, pointed.stderr
        route = api.get("HTTPRoute", "shop", held)
        assert route["spec"]["rules"][0]["backendRefs"][0]["name"] == WAKER_SERVICE
        assert ANNOTATION_ORIGINAL_RULES in route["metadata"]["annotations"]
        # a thief cannot send the route anywhere else while it is pointed at the waker
        elsewhere = copy.deepcopy(route["spec"]["rules"])
        elsewhere[0]["backendRefs"] = [{"name": "thief", "port": 80}]
        refused_by(nsscaler.patch(f"/apis/gateway.networking.k8s.io/v1/namespaces/{held}/httproutes/shop",
                                  {"spec": {"rules": elsewhere}}), RUN_POLICY)
        api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})
        assert run_job(*args, kubeconfig=nsscaler.kubeconfig).exit_code == 0
        ready_pods(api, held, "app=web")
        wait_until(lambda: (api.get("Deployment", "web", held).get("status") or {}).get("availableReplicas") == 1,
                   what="web available")
        back = run_job(*args, kubeconfig=nsscaler.kubeconfig)
        assert back.exit_code == 0, back.stderr
        assert api.get("HTTPRoute", "shop", held)["spec"] == before
        assert not api.exists("ReferenceGrant", f"nsscaler-waker-from-{held}", NAMESPACE)
    finally:
        api.delete("NSScaler", name)



@pytest.mark.usefixtures("crd", "gateway_crds", "runs_cleaned")
def test_a_request_s_wake_of_a_held_namespace_as_the_waker_and_nsscaler_send_it_lifts_the_hold_first(
        api: AdminApi, nsscaler: Stolen, waker: Stolen, run_job: Any, prefix: str) -> None:
    """What the node tier's wake-on-request test does, on the API without a node: the policy wakes on request
    and holds the namespace (its mark names the route's host), the waker's own code writes the Wake with its
    token, and the run (as nsscaler's account, as the waker's Job runs it) lifts the mark before anything else,
    restores through the hold in force, and exits 0; the route comes back once the app is available."""
    held, other = prefix + "v1", prefix + "v3"
    for ns in (held, other, prefix + "v2"):
        api.create(builders.namespace(ns))
    api.create(builders.deployment(held, "web", 1))
    api.create(httproute(held, "shop", hostname="v1.shop.example", rules=rules()))
    before = api.get("HTTPRoute", "shop", held)["spec"]
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix + "v", ["2"], wake={"on_request": True, "max_duration": "1h"}))
    args = ("--own-namespace", NAMESPACE, "--restore-wait-in-run", "0")
    try:
        frozen = run_job(*args, kubeconfig=nsscaler.kubeconfig)
        assert frozen.exit_code == 0, frozen.stderr
        marked = api.get("Namespace", held)["metadata"]
        assert marked["labels"][LABEL_HOLD] == "deny"
        assert "open v1.shop.example in a browser: it wakes on request" in marked["annotations"][ANNOTATION_HOLD]
        assert api.get("Namespace", other)["metadata"]["labels"][LABEL_HOLD] == "deny"

        kube = Kube.as_user(kubeconfig=waker.kubeconfig, context=None)
        door = Door(name, "1h", click=False)  # what `actions.door_of` finds: its policy, its max_duration
        request = Request("GET", "v1.shop.example", "/", {"Host": "v1.shop.example"})
        assert actions.wake(kube, held, door, request, identity=f"system:serviceaccount:{NAMESPACE}:nsscaler-waker",
                            now=dt.datetime.now(dt.UTC))
        woken = run_job(*args, kubeconfig=nsscaler.kubeconfig)  # what the waker's Job runs
        assert woken.exit_code == 0, woken.stderr
        assert LABEL_HOLD not in (api.get("Namespace", held)["metadata"].get("labels") or {})
        assert api.get("Namespace", other)["metadata"]["labels"][LABEL_HOLD] == "deny"  # still held
        assert api.replicas("Deployment", held, "web") == 1
        ready_pods(api, held, "app=web")
        wait_until(lambda: (api.get("Deployment", "web", held).get("status") or {}).get("availableReplicas") == 1,
                   what="web available")
        back = run_job(*args, kubeconfig=nsscaler.kubeconfig)
        assert back.exit_code == 0, back.stderr
        assert api.get("HTTPRoute", "shop", held)["spec"] == before
    finally:
        api.delete("NSScaler", name)


def test_a_stolen_nsscaler_token_may_only_suspend_and_mark_its_own_cronjob(api: AdminApi, nsscaler: Stolen) -> None:
    """What a release writes (job/cluster/own_cronjob.py) and nothing more: its own CronJob suspended and marked
    released passes; the same CronJob resumed, its mark taken off, its image changed, or another CronJob of its
    namespace touched, are refused. The allowed write is sent as a dry run: the CronJob serves the other tests."""
    own = f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{OWN_CRONJOB}"
    mark = {"metadata": {"annotations": {ANNOTATION_RELEASED: "2026-12-05T12:00:00Z"}}, "spec": {"suspend": True}}
    allowed(nsscaler.patch(own, mark, dry_run=True))
    refused_by(nsscaler.patch(own, {"spec": {"suspend": True}}), RUN_POLICY)  # suspended without the mark
    refused_by(nsscaler.patch(own, {**mark, "spec": {"suspend": False}}), RUN_POLICY)
    refused_by(nsscaler.patch(own, {**mark, "spec": {"suspend": True, "schedule": "* * * * *"}}), RUN_POLICY)
    refused_by(nsscaler.patch(own, {**mark, "spec": {"suspend": True, "jobTemplate": {"spec": {"template": {
        "spec": {"containers": [{"name": "nsscaler", "image": "busybox"}]}}}}}}), RUN_POLICY)
    other = builders.cronjob(NAMESPACE, "not-nsscaler")
    api.create(other)
    try:
        refused_by(nsscaler.patch(f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/not-nsscaler", mark,
                                  dry_run=True), RUN_POLICY)
    finally:
        api.delete("CronJob", "not-nsscaler", NAMESPACE)
    assert ANNOTATION_RELEASED not in (api.get("CronJob", OWN_CRONJOB, NAMESPACE)["metadata"].get("annotations") or {})


def test_a_run_as_nsscaler_freezes_and_gives_back_the_catalogue_kinds_with_the_rendered_rbac_only(
        api: AdminApi, nsscaler: Stolen, run_job: Any, prefix: str) -> None:
    """The catalogue's operator kinds as nsscaler's own account: the ClusterRole `make rows` renders
    (kustomize/components/operator-kinds) is all it is granted for them, and the run admission policy lets it
    set exactly each row's field or annotation, and nothing else of the object."""
    crds.install(api, crds.operators())
    (role,) = yaml.safe_load_all((ROOT / "kustomize/components/operator-kinds/rbac.yaml").read_text())
    role["metadata"]["name"] = f"{prefix}operator-kinds"
    api.create(role)
    ns, name = prefix + "v1", f"{prefix}p"
    api.create(builders.namespace(ns))
    objects = {
        "Cluster": {"apiVersion": "postgresql.cnpg.io/v1", "spec": {"instances": 1},
                    "annotations": {"cnpg.io/hibernation": "off"}},
        "postgresql": {"apiVersion": "acid.zalan.do/v1", "spec": {"teamId": "acid", "numberOfInstances": 2,
                                                                  "postgresql": {"version": "17"},
                                                                  "volume": {"size": "1Gi"}}},
        "PerconaXtraDBCluster": {"apiVersion": "pxc.percona.com/v1", "spec": {"crVersion": "1.18.0"}},
        "RabbitmqCluster": {"apiVersion": "rabbitmq.com/v1beta1", "spec": {"replicas": 2}},
    }
    for kind, o in objects.items():
        api.create({"apiVersion": o["apiVersion"], "kind": kind, "spec": o["spec"],
                    "metadata": {"name": "x", "namespace": ns, "annotations": o.get("annotations", {})}})
    # the StatefulSet the RabbitMQ operator makes for its cluster (the operator does not run here)
    owned = builders.statefulset(ns, "x-server", 2)
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster",
                                             "name": "x", "uid": api.get("RabbitmqCluster", "x", ns)["metadata"]["uid"],
                                             "controller": True}]
    api.create(owned)
    api.patch("Cluster", "x", {"status": {"phase": "Cluster in healthy state"}}, ns, sub="status")
    before = {kind: api.get(kind, "x", ns) for kind in objects}
    kinds = ["Cluster.postgresql.cnpg.io", "postgresql.acid.zalan.do", "PerconaXtraDBCluster.pxc.percona.com",
             "RabbitmqCluster.rabbitmq.com"]
    try:
        wait_until(lambda: any("perconaxtradbclusters" in r.get("resources", [])
                               for r in api.get("ClusterRole", "nsscaler")["rules"]),
                   what="the catalogue's rules folded into nsscaler's ClusterRole")
        api.create(builders.nsscaler(name, prefix, [], kinds=kinds))
        frozen = run_job("--own-namespace", NAMESPACE, kubeconfig=nsscaler.kubeconfig)
        assert frozen.exit_code == 0, frozen.stderr
        assert api.get("Cluster", "x", ns)["metadata"]["annotations"]["cnpg.io/hibernation"] == "on"
        assert api.get("postgresql", "x", ns)["spec"]["numberOfInstances"] == 0
        assert api.get("PerconaXtraDBCluster", "x", ns)["spec"]["pause"] is True
        assert api.get("RabbitmqCluster", "x", ns)["metadata"]["labels"]["rabbitmq.com/pauseReconciliation"] == "true"
        assert api.replicas("StatefulSet", ns, "x-server") == 0
        refused_by(nsscaler.patch(f"/apis/rabbitmq.com/v1beta1/namespaces/{ns}/rabbitmqclusters/x",
                                  {"metadata": {"labels": {"team": "other"}}}), RUN_POLICY)
        path = f"/apis/postgresql.cnpg.io/v1/namespaces/{ns}/clusters/x"
        refused_by(nsscaler.patch(path, {"metadata": {"annotations": {"cnpg.io/reconciliationLoop": "disabled"}}}),
                   RUN_POLICY)
        refused_by(nsscaler.patch(path, {"spec": {"instances": 5}}), RUN_POLICY)
        api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1"]}})
        back = run_job("--own-namespace", NAMESPACE, kubeconfig=nsscaler.kubeconfig)
        assert back.exit_code == 0, back.stderr
        _given_back_exactly(api, ns, before)
        assert api.replicas("StatefulSet", ns, "x-server") == 2
    finally:
        api.delete("NSScaler", name)
        api.delete("ClusterRole", f"{prefix}operator-kinds")


#: a team's rows for kinds made up for the test, one per way a row freezes without a count, and a field maps deep
TEAM_ROWS = {
    "Paused": {"kind": "Paused.test.nsscaler.io", "plural": "pauseds", "versions": ["v1"],
               "freeze": {"method": "field", "path": "spec.paused", "value": True}},
    "Keeper": {"kind": "Keeper.test.nsscaler.io", "plural": "keepers", "versions": ["v1"],
               "freeze": {"method": "field", "path": "spec.db.paused", "value": True}},
    "Sleeper": {"kind": "Sleeper.test.nsscaler.io", "plural": "sleepers", "versions": ["v1"],
                "freeze": {"method": "annotation", "key": "example.com/hibernation", "value": "on"}},
    "Broker": {"kind": "Broker.test.nsscaler.io", "plural": "brokers", "versions": ["v1"],
               "freeze": {"method": "pause", "marker": "label", "key": "example.com/paused", "value": "true"}},
}


def _team_kinds(api: AdminApi, prefix: str) -> None:
    crds.install(api, [crds.PAUSED, crds.made_up("Sleeper", "sleepers"), crds.made_up("Broker", "brokers"),
                       crds.made_up("Plain", "plains"), crds.made_up("Keeper", "keepers")])
    api.create(aggregated(f"{prefix}team-kinds", [{"apiGroups": ["test.nsscaler.io"],
                                                   "resources": ["pauseds", "sleepers", "brokers", "plains",
                                                                 "keepers"],
                                                   "verbs": ["list", "get", "patch"]}]))
    for kind, row in TEAM_ROWS.items():
        api.create({"apiVersion": "operators.wubw.fun/v1alpha1", "kind": "NSScalerKind",
                    "metadata": {"name": f"{prefix}{kind.lower()}"}, "spec": row})


def _nothing_else(nsscaler: Stolen, ns: str) -> None:
    """Anything else nsscaler's account writes on the team's objects is refused, whatever nsscaler's own marks
    come with it; on a custom kind nobody has a row for, anything more than a row could write. A string of a
    spec is refused by both (the run policy lets none change)."""
    paused = f"/apis/test.nsscaler.io/v1/namespaces/{ns}/pauseds/x"
    own = {"nsscaler.wubw.fun/original-value": "false"}
    refused_by(nsscaler.patch(paused, {"spec": {"replicas": 9}, "metadata": {"annotations": own}}), ROW_POLICY)
    refused_by(nsscaler.patch(paused, {"spec": {"image": "evil:1"}, "metadata": {"annotations": own}}),
               ROW_POLICY, RUN_POLICY)
    refused_by(nsscaler.patch(paused, {"metadata": {"annotations": {"example.com/hibernation": "on"}}}),
               ROW_POLICY)
    refused_by(nsscaler.patch(paused, {"spec": {"template": {"spec": {"serviceAccountName": "admin"}}}}),
               ROW_POLICY, RUN_POLICY)
    keeper = f"/apis/test.nsscaler.io/v1/namespaces/{ns}/keepers/x"
    refused_by(nsscaler.patch(keeper, {"spec": {"db": {"port": 9}}}), ROW_POLICY)
    refused_by(nsscaler.patch(keeper, {"spec": {"db": {"host": "evil"}}}), ROW_POLICY, RUN_POLICY)
    sleeper = f"/apis/test.nsscaler.io/v1/namespaces/{ns}/sleepers/x"
    refused_by(nsscaler.patch(sleeper, {"metadata": {"annotations": {"example.com/other": "x"}}}), ROW_POLICY)
    refused_by(nsscaler.patch(sleeper, {"spec": {"size": "huge"}}), ROW_POLICY, RUN_POLICY)
    broker = f"/apis/test.nsscaler.io/v1/namespaces/{ns}/brokers/x"
    refused_by(nsscaler.patch(broker, {"metadata": {"labels": {"team": "other"}}}), ROW_POLICY)
    refused_by(nsscaler.patch(broker, {"spec": {"replicas": 9}}), ROW_POLICY)
    # a custom kind nobody has a row for: at most what any row could change
    plain = f"/apis/test.nsscaler.io/v1/namespaces/{ns}/plains/x"
    refused_by(nsscaler.patch(plain, {"spec": {"template": {"spec": {"serviceAccountName": "admin"}}}}),
               RUN_POLICY)
    refused_by(nsscaler.patch(plain, {"metadata": {"labels": {"a": "1", "b": "2"}}}), RUN_POLICY)
    refused_by(nsscaler.patch(plain, {"spec": {"ports": [1]}}), RUN_POLICY)
    refused_by(nsscaler.patch(plain, {"spec": {"image": "evil:1"}}), RUN_POLICY)


def test_a_run_as_nsscaler_freezes_and_gives_back_a_team_s_rows_and_a_stolen_token_changes_nothing_else(
        api: AdminApi, nsscaler: Stolen, run_job: Any, prefix: str) -> None:
    """A platform team's rows as NSScalerKind objects, one freezing by an annotation, one by pausing its operator
    with a label (then scaling the StatefulSet it owns), one by a boolean field, one by a boolean field two maps
    deep (`spec.db.paused`, a key at each depth the policies read): nsscaler's own account freezes
    and gives each back exactly under the run policies. The same account's write of anything else on those
    objects (another field, annotation or label, a Pod template) is refused: the row policy holds each kind to
    exactly what its row changes, the run policy every custom kind to what any row could."""
    _team_kinds(api, prefix)
    ns, name = prefix + "v1", f"{prefix}p"
    api.create(builders.namespace(ns))
    api.create(builders.custom("Paused", ns, "x", {"paused": False, "image": "db:1"}))
    api.create(builders.custom("Sleeper", ns, "x", {"size": "small"}))
    api.create(builders.custom("Broker", ns, "x", {"replicas": 2}))
    api.create(builders.custom("Keeper", ns, "x", {"db": {"paused": False, "host": "db"}}))
    api.create(builders.custom("Plain", ns, "x", {"ports": [80]}))
    owned = builders.statefulset(ns, "x-server", 2)
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "test.nsscaler.io/v1", "kind": "Broker", "name": "x",
                                             "uid": api.get("Broker", "x", ns)["metadata"]["uid"],
                                             "controller": True}]
    api.create(owned)
    before = {kind: api.get(kind, "x", ns) for kind in TEAM_ROWS}
    try:
        wait_until(lambda: any("brokers" in r.get("resources", [])
                               for r in api.get("ClusterRole", "nsscaler")["rules"]),
                   what="the team's rules folded into nsscaler's ClusterRole")
        paused = f"/apis/test.nsscaler.io/v1/namespaces/{ns}/pauseds/x"
        wait_until(lambda: nsscaler.patch(paused, {"spec": {"replicas": 9}}, dry_run=True).status_code == 403,
                   what=f"{ROW_POLICY} to take effect with the team's rows")
        api.create(builders.nsscaler(name, prefix, [], kinds=[row["kind"] for row in TEAM_ROWS.values()]))
        frozen = run_job("--own-namespace", NAMESPACE, kubeconfig=nsscaler.kubeconfig)
        assert frozen.exit_code == 0, frozen.stderr
        assert api.get("Paused", "x", ns)["spec"]["paused"] is True
        assert api.get("Keeper", "x", ns)["spec"]["db"] == {"paused": True, "host": "db"}
        assert api.get("Sleeper", "x", ns)["metadata"]["annotations"]["example.com/hibernation"] == "on"
        assert api.get("Broker", "x", ns)["metadata"]["labels"]["example.com/paused"] == "true"
        assert api.replicas("StatefulSet", ns, "x-server") == 0
        _nothing_else(nsscaler, ns)
        api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1"]}})
        back = run_job("--own-namespace", NAMESPACE, kubeconfig=nsscaler.kubeconfig)
        assert back.exit_code == 0, back.stderr
        _given_back_exactly(api, ns, before)
        assert api.replicas("StatefulSet", ns, "x-server") == 2
    finally:
        api.delete("NSScaler", name)
        api.delete("ClusterRole", f"{prefix}team-kinds")
        for kind in TEAM_ROWS:
            api.delete("NSScalerKind", f"{prefix}{kind.lower()}")


def test_a_stolen_nsscaler_token_changes_no_string_of_a_custom_kind_and_no_nsscalerkind(
        api: AdminApi, nsscaler: Stolen, prefix: str) -> None:
    """What a stolen token of nsscaler's own account may write on a custom kind is whole numbers and booleans of
    its spec: an image, a URL, a selector's value (strings) are refused, at any depth, on a kind of the
    catalogue frozen by its replica count (KafkaConnect, whose only other change is nsscaler's own metadata)
    and on one nobody has a row for; an NSScalerKind is refused however far its RBAC is widened."""
    crds.install(api, [*(c for c in crds.operators() if c["spec"]["names"]["kind"] == "KafkaConnect"),
                       crds.made_up("Plain", "plains")])
    api.create(aggregated(f"{prefix}widened", [
        {"apiGroups": ["test.nsscaler.io"], "resources": ["plains"], "verbs": ["get", "patch"]},
        {"apiGroups": ["kafka.strimzi.io"], "resources": ["kafkaconnects"], "verbs": ["get", "patch"]},
        {"apiGroups": ["operators.wubw.fun"], "resources": ["nsscalerkinds"], "verbs": ["get", "patch"]}]))
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.custom("Plain", ns, "x", {"image": "good:1", "replicas": 1, "paused": False,
                                                  "source": {"repoURL": "https://good", "depth": 1}}))
    api.create({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
                "metadata": {"name": "x", "namespace": ns},
                "spec": {"replicas": 1, "image": "good:1", "bootstrapServers": "kafka:9092", "groupId": "x",
                         "configStorageTopic": "c", "statusStorageTopic": "s", "offsetStorageTopic": "o"}})
    row = f"{prefix}plain"
    api.create({"apiVersion": "operators.wubw.fun/v1alpha1", "kind": "NSScalerKind", "metadata": {"name": row},
                "spec": {"kind": "Other.test.nsscaler.io", "plural": "others", "versions": ["v1"],
                         "freeze": {"method": "scale"}}})
    plain = f"/apis/test.nsscaler.io/v1/namespaces/{ns}/plains/x"
    connect = f"/apis/kafka.strimzi.io/v1/namespaces/{ns}/kafkaconnects/x"
    kind_row = f"/apis/operators.wubw.fun/v1alpha1/nsscalerkinds/{row}"
    try:
        for path in (plain, connect, kind_row):
            wait_until(lambda path=path: nsscaler.http.get(f"{nsscaler.server}{path}", timeout=10).status_code == 200,
                       what=f"the widened rules folded into nsscaler's ClusterRole ({path})")
        refused_by(nsscaler.patch(connect, {"spec": {"image": "evil:1"}}, dry_run=True), RUN_POLICY)
        refused_by(nsscaler.patch(connect, {"metadata": {"annotations": {"example.com/sync": "off"}}},
                                  dry_run=True), RUN_POLICY)
        allowed(nsscaler.patch(connect, {"spec": {"replicas": 0},
                                         "metadata": {"annotations": {"nsscaler.wubw.fun/replicas": "1"}}},
                               dry_run=True))
        refused_by(nsscaler.patch(plain, {"spec": {"image": "evil:1"}}, dry_run=True), RUN_POLICY)
        refused_by(nsscaler.patch(plain, {"spec": {"source": {"repoURL": "https://evil"}}}, dry_run=True),
                   RUN_POLICY)
        refused_by(nsscaler.patch(plain, {"spec": {"note": "new"}}, dry_run=True), RUN_POLICY)
        refused_by(nsscaler.patch(plain, {"metadata": {"finalizers": ["example.com/x"]}}, dry_run=True), RUN_POLICY)
        allowed(nsscaler.patch(plain, {"spec": {"replicas": 0, "paused": True, "source": {"depth": 0}}},
                               dry_run=True))
        refused_by(nsscaler.patch(kind_row, {"spec": {"plural": "pods"}}, dry_run=True), RUN_POLICY)
        refused_by(nsscaler.patch(kind_row, {"metadata": {"labels": {"nsscaler.wubw.fun/x": "y"}}}, dry_run=True),
                   RUN_POLICY)
        assert api.get("Plain", "x", ns)["spec"]["image"] == "good:1"
    finally:
        api.delete("NSScalerKind", row)
        api.delete("ClusterRole", f"{prefix}widened")


def _given_back_exactly(api: AdminApi, ns: str, before: dict[str, dict[str, Any]]) -> None:
    """Each object `x` of `before`'s kinds has its spec, annotations and labels as they were before the freeze."""
    for kind, was in before.items():
        now = api.get(kind, "x", ns)
        assert (now["spec"], now["metadata"].get("annotations"), now["metadata"].get("labels")) == (
            was["spec"], was["metadata"].get("annotations"), was["metadata"].get("labels")), kind
