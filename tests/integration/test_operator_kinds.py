"""Kinds as rows against the real thing: every row of the shipped catalogue against its operator's real CRD
(tests/fixtures/crds, the versions the rows were checked against; a CNPG Cluster against the real CloudNativePG
operator is test_cnpg_operator.py), and a kind a platform team adds as a row in data only (`--kind-rows`), a broken
row beside it reported once while the others act."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi, wait_until
from job.model.kinds.catalogue import CATALOGUE_DATA
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_ORIGINAL_VALUE, ANNOTATION_SCALED_BY
from tests import crds
from tests.conftest import built_tool
from tests.faults import FaultProxy
from tests.integration.test_helm import IMAGE, helm_env
from tests.integration.test_release import release

pytestmark = pytest.mark.usefixtures("crd")
#: one object per catalogue row frozen by a field or its replica count, as its CRD's schema accepts it, and where
#: the freeze writes: (kind, apiVersion, spec, path of the frozen field, its frozen value, the record)
ROWS = [
    pytest.param("Pooler.postgresql.cnpg.io", "postgresql.cnpg.io/v1",
                 {"cluster": {"name": "db"}, "instances": 2, "pgbouncer": {"poolMode": "session"}},
                 ("instances",), 0, (ANNOTATION_ORIGINAL_REPLICAS, "2"), id="cnpg-pooler"),
    pytest.param("postgresql.acid.zalan.do", "acid.zalan.do/v1",
                 {"teamId": "acid", "numberOfInstances": 2, "postgresql": {"version": "17"},
                  "volume": {"size": "1Gi"}}, ("numberOfInstances",), 0, (ANNOTATION_ORIGINAL_VALUE, "2"),
                 id="zalando-postgresql"),
    pytest.param("PerconaXtraDBCluster.pxc.percona.com", "pxc.percona.com/v1",
                 {"crVersion": "1.18.0", "pxc": {"size": 3}}, ("pause",), True, (ANNOTATION_ORIGINAL_VALUE, "null"),
                 id="percona-pxc-pause-absent"),
    pytest.param("KafkaConnect.kafka.strimzi.io", "kafka.strimzi.io/v1",
                 {"replicas": 2, "bootstrapServers": "kafka:9092", "groupId": "g", "configStorageTopic": "c",
                  "statusStorageTopic": "s", "offsetStorageTopic": "o"}, ("replicas",), 0,
                 (ANNOTATION_ORIGINAL_REPLICAS, "2"), id="strimzi-connect"),
    pytest.param("KafkaMirrorMaker2.kafka.strimzi.io", "kafka.strimzi.io/v1",
                 {"replicas": 3, "target": {"alias": "t", "bootstrapServers": "kafka:9092", "groupId": "g",
                                            "configStorageTopic": "c", "statusStorageTopic": "s",
                                            "offsetStorageTopic": "o"},
                  "mirrors": [{"source": {"alias": "s", "bootstrapServers": "other:9092"}}]},
                 ("replicas",), 0, (ANNOTATION_ORIGINAL_REPLICAS, "3"), id="strimzi-mirrormaker2"),
    pytest.param("KafkaBridge.kafka.strimzi.io", "kafka.strimzi.io/v1",
                 {"replicas": 1, "bootstrapServers": "kafka:9092"}, ("replicas",), 0,
                 (ANNOTATION_ORIGINAL_REPLICAS, "1"), id="strimzi-bridge"),
]


@pytest.fixture(scope="module")
def operator_crds(api: AdminApi) -> None:
    crds.install(api, crds.operators())


def ours(obj: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in (obj["metadata"].get("annotations") or {}).items() if k.startswith("nsscaler.wubw.fun/")}


def made(kind: str, api_version: str, ns: str, name: str, spec: dict[str, Any],
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind.partition(".")[0],
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}}, "spec": spec}


def give_back(api: AdminApi, policy: str) -> None:
    """The namespace becomes active: the next run restores what the policy froze there."""
    api.patch("NSScaler", policy, {"spec": {"active_namespace_suffixes": ["v1"]}})


@pytest.mark.parametrize(("kind", "api_version", "spec", "path", "frozen", "record"), ROWS)
def test_each_catalogue_row_freezes_its_kind_the_operators_way_and_gives_it_back_exactly(
        api, run_job, prefix, operator_crds, kind, api_version, spec, path, frozen, record):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    created = api.create(made(kind, api_version, ns, "x", copy.deepcopy(spec), {"team": "data"}))
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[kind]))
    result = run_job()
    assert result.exit_code == 0, result.stderr
    short = kind.partition(".")[0]
    obj = api.get(short, "x", ns)
    assert obj["spec"] == {**created["spec"], path[0]: frozen}, "only the row's field changed (CRD defaults kept)"
    assert ours(obj) == {record[0]: record[1], ANNOTATION_SCALED_BY: f"{prefix}p"}
    assert obj["metadata"]["annotations"]["team"] == "data"
    steady = run_job()
    assert steady.exit_code == 0 and api.get(short, "x", ns)["metadata"]["resourceVersion"] == \
        obj["metadata"]["resourceVersion"], "a frozen object is left alone"

    give_back(api, f"{prefix}p")
    assert run_job().exit_code == 0
    back = api.get(short, "x", ns)
    assert back["spec"] == created["spec"] and back["metadata"]["annotations"] == created["metadata"]["annotations"]
    assert not (back["metadata"].get("labels") or {})


def test_a_kind_added_as_a_row_in_data_only_is_frozen_and_given_back_and_a_broken_row_is_named_once(
        api, run_job, prefix, operator_crds, tmp_path: Path):
    crds.install(api, [crds.PAUSED])
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump([
        {"kind": "Paused.test.nsscaler.io", "versions": ["v1"],
         "freeze": {"method": "field", "path": "spec.paused", "value": True}},
        {"kind": "Broken.test.nsscaler.io", "versions": ["v1"], "freeze": {"method": "field", "path": "spec.x"}},
    ]))
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.custom("Paused", ns, "svc", {"paused": False, "size": 2}))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["Paused.test.nsscaler.io", "Deployment"]))
    result = run_job("--kind-rows", str(rows))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("Broken.test.nsscaler.io") == 1, result.stderr
    assert "row 2 (Broken.test.nsscaler.io) ignored: freeze: Value error, freeze by field needs path and value" \
        in result.stderr
    paused = api.get("Paused", "svc", ns)
    assert paused["spec"] == {"paused": True, "size": 2}
    assert ours(paused) == {ANNOTATION_ORIGINAL_VALUE: "false", ANNOTATION_SCALED_BY: f"{prefix}p"}
    assert api.replicas("Deployment", ns, "web") == 0

    give_back(api, f"{prefix}p")
    assert run_job("--kind-rows", str(rows)).exit_code == 0
    back = api.get("Paused", "svc", ns)
    assert back["spec"] == {"paused": False, "size": 2} and ours(back) == {}
    # without its row the kind has no /scale: the policy naming it says so, as for any kind nsscaler cannot freeze
    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": []}})
    assert run_job().exit_code == 1
    ready = {c["type"]: c for c in api.status(f"{prefix}p")["conditions"]}["Ready"]
    assert ready["reason"] == "InvalidSpec" and "has no /scale subresource" in ready["message"], ready


RABBIT = "RabbitmqCluster.rabbitmq.com"
PAUSE_LABEL = "rabbitmq.com/pauseReconciliation"


def rabbit_with_its_statefulset(api: AdminApi, ns: str, name: str, replicas: int,
                                labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A RabbitmqCluster and the StatefulSet its operator makes for it (`<name>-server`, the cluster its
    controller owner). The RabbitMQ cluster operator does not run here (a Go program this suite does not build):
    the StatefulSet is created as its operator creates it, which is all nsscaler reads of that contract."""
    cluster = made(RABBIT, "rabbitmq.com/v1beta1", ns, name, {"replicas": replicas})
    cluster["metadata"]["labels"] = dict(labels or {})
    created = api.create(cluster)
    owned = builders.statefulset(ns, f"{name}-server", replicas)
    owned["metadata"]["ownerReferences"] = [{
        "apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster", "name": name,
        "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    api.create(owned)
    return created


def patch_order(proxy_log: list[tuple[str, str, int]], ns: str) -> list[str]:
    """The resources PATCHed in `ns` for real (not the row's dry run), in the order the API server answered."""
    return [path.split(f"/namespaces/{ns}/")[1].split("?")[0] for method, path, status in proxy_log
            if method == "PATCH" and f"/namespaces/{ns}/" in path and status < 300 and "dryRun=" not in path]


@pytest.mark.parametrize("before", [None, "false"], ids=["no-label", "label-false"])
def test_a_rabbitmq_cluster_is_paused_before_its_statefulset_is_scaled_and_resumed_after_it_comes_back(
        api, run_job, prefix, operator_crds, control_plane, admin_token, tmp_path, before):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    created = rabbit_with_its_statefulset(api, ns, "mq", 3, {"team": "data", **({PAUSE_LABEL: before} if before
                                                                               else {})})
    api.create(builders.statefulset(ns, "alone", 2))  # not the operator's: left to StatefulSet's own policy
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[RABBIT]))
    seen: list[tuple[str, str, int]] = []
    with FaultProxy(control_plane, fraction=0.0, after_forward=lambda m, p, s: seen.append((m, p, s))) as proxy:
        config = proxy.kubeconfig(tmp_path / "proxied", admin_token)
        result = run_job(kubeconfig=config)
        assert result.exit_code == 0, result.stderr
        assert patch_order(seen, ns) == ["rabbitmqclusters/mq", "statefulsets/mq-server"], seen
        cluster = api.get("RabbitmqCluster", "mq", ns)
        assert cluster["metadata"]["labels"][PAUSE_LABEL] == "true"
        assert ours(cluster) == {ANNOTATION_ORIGINAL_VALUE: f'"{before}"' if before else "null",
                                 ANNOTATION_SCALED_BY: f"{prefix}p"}
        assert cluster["spec"] == created["spec"], "paused by its label, never through its spec"
        assert api.replicas("StatefulSet", ns, "mq-server") == 0
        owned = api.get("StatefulSet", "mq-server", ns)
        assert ours(owned).items() >= {ANNOTATION_ORIGINAL_REPLICAS: "3", ANNOTATION_SCALED_BY: f"{prefix}p"}.items()
        assert api.replicas("StatefulSet", ns, "alone") == 2, "a StatefulSet no paused operator owns is not selected"

        steady = run_job(kubeconfig=config)
        assert steady.exit_code == 0 and api.get("RabbitmqCluster", "mq", ns)["metadata"]["resourceVersion"] == \
            cluster["metadata"]["resourceVersion"], "a paused operator is left alone"

        give_back(api, f"{prefix}p")
        seen.clear()
        assert run_job(kubeconfig=config).exit_code == 0
        assert patch_order(seen, ns) == ["statefulsets/mq-server", "rabbitmqclusters/mq"], seen
    back = api.get("RabbitmqCluster", "mq", ns)
    assert back["metadata"]["labels"] == created["metadata"]["labels"], "its label given back exactly"
    assert not ours(back)
    assert api.replicas("StatefulSet", ns, "mq-server") == 3 and not ours(api.get("StatefulSet", "mq-server", ns))


def test_a_statefulset_whose_operator_could_not_be_paused_is_left_running(
        api, run_job, prefix, operator_crds, control_plane, admin_token, tmp_path):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    rabbit_with_its_statefulset(api, ns, "mq", 2)
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[RABBIT]))

    def refuse_the_pause(method: str, path: str) -> str | None:
        return "503" if method == "PATCH" and "/rabbitmqclusters/mq" in path else None

    with FaultProxy(control_plane, fraction=0.0, faults=("503",), before_forward=refuse_the_pause) as proxy:
        result = run_job(kubeconfig=proxy.kubeconfig(tmp_path / "proxied", admin_token))
    assert result.exit_code == 1
    assert "its operator's rabbitmqcluster/mq could not be paused first" in result.stderr, result.stderr
    assert api.replicas("StatefulSet", ns, "mq-server") == 2 and not ours(api.get("StatefulSet", "mq-server", ns))


def test_a_row_the_api_server_refuses_is_tried_once_named_once_and_the_rest_of_the_run_goes_on(
        api, run_job, prefix, operator_crds, control_plane, admin_token, tmp_path: Path):
    """The row's value passes nsscaler's own reading of the CRD (a string where a string goes) but not the API
    server's (an enum): the dry run of its freeze on the first object says so before any real write."""
    crds.install(api, [crds.GATED])
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump([{"kind": "Gated.test.nsscaler.io", "versions": ["v1"],
                                     "freeze": {"method": "field", "path": "spec.mode", "value": "paused"}}]))
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    for name in ("a", "b"):
        api.create(builders.custom("Gated", ns, name, {"mode": "running"}))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["Gated.test.nsscaler.io", "Deployment"]))
    seen: list[tuple[str, str, int]] = []
    with FaultProxy(control_plane, fraction=0.0, after_forward=lambda m, p, s: seen.append((m, p, s))) as proxy:
        config = proxy.kubeconfig(tmp_path / "proxied", admin_token)
        result = run_job("--kind-rows", str(rows), kubeconfig=config)
        assert result.exit_code == 1, result.stderr
        assert result.stderr.count("Gated.test.nsscaler.io: its row cannot work here") == 1, result.stderr
        assert "Unsupported value: \"paused\"" in result.stderr, result.stderr
        tried = [(p, s) for m, p, s in seen if m == "PATCH" and "/gateds/" in p]
        assert len(tried) == 1 and "dryRun=All" in tried[0][0] and tried[0][1] == 422, tried
    for name in ("a", "b"):
        assert api.get("Gated", name, ns)["spec"] == {"mode": "running"} and not ours(api.get("Gated", name, ns))
    assert api.replicas("Deployment", ns, "web") == 0, "the rest of the run goes on"
    status = api.status(f"{prefix}p")
    assert any("its row cannot work here" in f for f in status["failures"]), status

    # no object of the kind left to freeze (the policy no longer names it): no try at all
    api.patch("NSScaler", f"{prefix}p", {"spec": {"kinds": ["Deployment"]}})
    seen.clear()
    with FaultProxy(control_plane, fraction=0.0, after_forward=lambda m, p, s: seen.append((m, p, s))) as proxy:
        steady = run_job("--kind-rows", str(rows), kubeconfig=proxy.kubeconfig(tmp_path / "again", admin_token))
        assert steady.exit_code == 0, steady.stderr
        assert not [p for m, p, _ in seen if m == "PATCH" and "dryRun" in p], "nothing to freeze: nothing tried"


ROOT = Path(__file__).resolve().parents[2]
KIND_CRD = ROOT / "kustomize" / "base" / "kind-crd.yaml"
PAUSED_ROW = {"kind": "Paused.test.nsscaler.io", "plural": "pauseds", "versions": ["v1"],
              "freeze": {"method": "field", "path": "spec.paused", "value": True}}


def kind_row(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "operators.wubw.fun/v1alpha1", "kind": "NSScalerKind", "metadata": {"name": name},
            "spec": spec}


@pytest.fixture
def kind_crd(api: AdminApi, operator_crds: None) -> None:
    crds.install(api, [yaml.safe_load(KIND_CRD.read_text()), crds.PAUSED])


def test_a_platform_team_adds_a_kind_as_an_nsscalerkind_checked_at_admission(api, run_job, prefix, kind_crd):
    def dry_create(obj: dict[str, Any]) -> Any:
        return api.http.post(api.url("NSScalerKind", None), json=obj, params={"dryRun": "All"}, timeout=30)

    for i, row in enumerate(CATALOGUE_DATA):  # the CRD's schema takes every row the job takes
        answer = dry_create(kind_row(f"{prefix}c{i}", row))
        assert answer.status_code == 201, (row["kind"], answer.text)
    bad = dry_create(kind_row(f"{prefix}bad", {**PAUSED_ROW, "freeze": {"method": "field", "value": True}}))
    assert bad.status_code == 422 and "freeze by field needs path" in bad.text, bad.text
    bad = dry_create(kind_row(f"{prefix}bad", {**PAUSED_ROW, "tier": "later"}))
    assert bad.status_code == 422 and "spec.tier" in bad.text, bad.text
    bad = dry_create(kind_row(f"{prefix}bad", {k: v for k, v in PAUSED_ROW.items() if k != "plural"}))
    assert bad.status_code == 422 and "plural is required: give the kind's resource name" in bad.text, bad.text
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.custom("Paused", ns, "svc", {"paused": False, "size": 2}))
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["Paused.test.nsscaler.io"]))
    api.create(kind_row(f"{prefix}paused", PAUSED_ROW))
    try:
        result = run_job()
        assert result.exit_code == 0, result.stderr
        frozen = api.get("Paused", "svc", ns)
        assert frozen["spec"] == {"paused": True, "size": 2}
        assert ours(frozen) == {ANNOTATION_ORIGINAL_VALUE: "false", ANNOTATION_SCALED_BY: f"{prefix}p"}
        give_back(api, f"{prefix}p")
        assert run_job().exit_code == 0
        back = api.get("Paused", "svc", ns)
        assert back["spec"] == {"paused": False, "size": 2} and not ours(back)
    finally:
        api.delete("NSScalerKind", f"{prefix}paused")


def nsscalers_own_account(api: AdminApi, prefix: str, sa_ns: str, label: dict[str, str]) -> None:
    """The ServiceAccount `job` of `sa_ns` bound to an aggregated ClusterRole (rules from every ClusterRole carrying
    `label`) holding a copy of the shipped base rules, and the run Lease's Role in `sa_ns`."""
    base = next(d for d in yaml.safe_load_all((ROOT / "kustomize/base/rbac.yaml").read_text())
                if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "nsscaler-base")
    rbac = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": f"{prefix}nsscaler"},
             "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": label}]}, "rules": []},
            {**copy.deepcopy(base), "metadata": {"name": f"{prefix}base", "labels": label}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": f"{prefix}nsscaler"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{prefix}nsscaler"},
             "subjects": [{"kind": "ServiceAccount", "name": "job", "namespace": sa_ns}]}]
    for obj in rbac:
        api.create(obj)
    for obj in yaml.safe_load_all((ROOT / "kustomize/base/lease-rbac.yaml").read_text()):  # the run Lease's
        obj["metadata"]["namespace"] = sa_ns
        for subject in obj.get("subjects") or []:
            subject.update(name="job", namespace=sa_ns)
        api.create(obj)


def test_a_row_whose_kind_nsscaler_may_not_touch_is_named_and_the_other_policies_are_served(
        api, run_job, prefix, kind_crd, control_plane, tmp_path):
    """nsscaler's account as installed: an aggregated ClusterRole the control plane's aggregation controller fills
    (here from this test's own label, standing in for nsscaler.wubw.fun/aggregate-to-nsscaler so other tests'
    roles stay out; tests/e2e/test_install.py uses the real one with the shipped install). Without the
    team's labelled ClusterRole for its kind, the policy naming that kind says so and the others are served; with
    it, the kind is frozen."""
    sa_ns = prefix + "sa"
    api.create(builders.namespace(sa_ns))
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "job", "namespace": sa_ns}})
    kubeconfig = control_plane.service_account_kubeconfig(tmp_path / "sa", sa_ns, "job")
    label = {f"{prefix}aggregate": "true"}  # this test's own aggregation label: other tests' roles stay out
    nsscalers_own_account(api, prefix, sa_ns, label)
    team = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"{prefix}team", "labels": label},
            "rules": [{"apiGroups": ["test.nsscaler.io"], "resources": ["pauseds"], "verbs": ["list", "get", "patch"]}]}
    api.create(kind_row(f"{prefix}paused", PAUSED_ROW))
    try:
        for family in ("a", "b"):
            api.create(builders.namespace(f"{prefix}{family}1"))
        api.create(builders.custom("Paused", f"{prefix}a1", "svc", {"paused": False}))
        api.create(builders.deployment(f"{prefix}b1", "web", 2))
        api.create(builders.nsscaler(f"{prefix}pa", f"{prefix}a", [], kinds=["Paused.test.nsscaler.io"]))
        api.create(builders.nsscaler(f"{prefix}pb", f"{prefix}b", []))
        wanted = ("kind Paused.test.nsscaler.io: nsscaler may not list pauseds.test.nsscaler.io, get "
                  "pauseds.test.nsscaler.io, patch pauseds.test.nsscaler.io; apply a ClusterRole labelled "
                  "nsscaler.wubw.fun/aggregate-to-nsscaler=true")
        last: list[Any] = []

        def named_once() -> bool:  # until the aggregation controller has filled the role from the base copy
            last[:] = [run_job("--own-namespace", sa_ns, kubeconfig=kubeconfig)]
            return last[0].exit_code == 1 and last[0].stderr.count(wanted) == 1

        try:
            wait_until(named_once, timeout=30, what="the kind named, the rest served")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the last run: {last[0].exit_code} {last[0].stderr}") from None
        assert api.replicas("Deployment", f"{prefix}b1", "web") == 0, "the other policy is served"
        assert api.get("Paused", "svc", f"{prefix}a1")["spec"] == {"paused": False}
        ready = {c["type"]: c for c in api.status(f"{prefix}pa")["conditions"]}["Ready"]
        assert ready["reason"] == "InvalidSpec" and wanted in ready["message"], ready
        # a release must give everything back: what it may not read, it names and stops (exit 2)
        code, err = release(kubeconfig, "--own-namespace", sa_ns)
        assert code == 2 and wanted in err, err

        api.create(team)
        wait_until(lambda: run_job("--own-namespace", sa_ns, kubeconfig=kubeconfig).exit_code == 0, timeout=30,
                   what="the team's grant aggregated")
        assert api.get("Paused", "svc", f"{prefix}a1")["spec"] == {"paused": True}
    finally:
        api.delete("NSScalerKind", f"{prefix}paused")
        for kind, name in (("ClusterRoleBinding", "nsscaler"), ("ClusterRole", "nsscaler"), ("ClusterRole", "base"),
                           ("ClusterRole", "team")):
            api.delete(kind, f"{prefix}{name}")


def test_the_charts_kind_rows_render_nsscalerkinds_and_their_access_that_the_api_server_takes(
        api, prefix, kind_crd, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"kindRows": [{"name": f"{prefix}paused", "spec": PAUSED_ROW}],
                                      "image": {"repository": IMAGE}, "commonLabels": {"team": "platform"}}))
    rendered = subprocess.run([str(built_tool("helm")), "template", "x", str(ROOT / "charts" / "nsscaler"), "-f",
                               str(values), "--show-only", "templates/kind-rows.yaml"], capture_output=True,
                              text=True, env=helm_env(), check=True, timeout=120).stdout
    docs = {d["kind"]: d for d in yaml.safe_load_all(rendered) if d}
    row, role = docs.pop("NSScalerKind"), docs.pop("ClusterRole")
    assert not docs and row["metadata"]["name"] == f"{prefix}paused"
    assert role["metadata"]["name"] == f"nsscaler-kind-{prefix}paused"
    assert row["metadata"]["labels"]["team"] == role["metadata"]["labels"]["team"] == "platform"
    assert row["spec"] == PAUSED_ROW
    assert role["metadata"]["labels"]["nsscaler.wubw.fun/aggregate-to-nsscaler"] == "true"
    assert role["rules"] == [{"apiGroups": ["test.nsscaler.io"], "resources": ["pauseds"],
                              "verbs": ["list", "get", "patch"]}]
    for doc in (row, role):  # both as the API server takes them
        answer = api.http.post(api.url(doc["kind"], None), json=doc, params={"dryRun": "All"}, timeout=30)
        assert answer.status_code == 201, answer.text


def test_a_held_namespace_with_a_kind_the_hold_does_not_cover_is_said_once_when_its_mark_is_written(
        api, run_job, prefix, kind_crd, tmp_path):
    """A row given only in a `--kind-rows` file cannot be read by the API server, so the hold between runs does not
    cover its kind: the run that marks the namespace held says so once, naming the kind; the next run, which writes
    no mark, says nothing; the same row as an NSScalerKind is held, and nothing is said."""
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump([PAUSED_ROW]))
    ns, other = prefix + "v1", prefix + "v2"
    for n in (ns, other):
        api.create(builders.namespace(n))
        api.create(builders.custom("Paused", n, "svc", {"paused": False}))
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, f"{prefix}v1", [], kinds=["Paused.test.nsscaler.io"]))
    words = "Paused.test.nsscaler.io are not held between runs"
    first = run_job("--kind-rows", str(rows))
    assert first.exit_code == 0, first.stderr
    assert api.get("Paused", "svc", ns)["spec"]["paused"] is True
    assert first.stderr.count(words) == 1 and f"{ns}: held, but its" in first.stderr, first.stderr
    again = run_job("--kind-rows", str(rows))
    assert again.exit_code == 0 and words not in again.stderr, again.stderr

    api.create(kind_row(f"{prefix}paused", PAUSED_ROW))
    try:
        api.create(builders.nsscaler(f"{prefix}q", f"{prefix}v2", [], kinds=["Paused.test.nsscaler.io"]))
        held = run_job()
        assert held.exit_code == 0, held.stderr
        assert api.get("Paused", "svc", other)["spec"]["paused"] is True
        assert words not in held.stderr, held.stderr
    finally:
        api.delete("NSScaler", f"{prefix}q")
        api.delete("NSScalerKind", f"{prefix}paused")
