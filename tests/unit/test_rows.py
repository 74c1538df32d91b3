"""Kinds as rows: a row's validation (one line per bad row, naming it), the generic handler's freeze and exact
restore, and every catalogue row against its operator's real CRD (tests/fixtures/crds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import rows as rows_devtool
from job.cluster import read
from job.cluster.access import required_access
from job.decide.plan import make_plan
from job.decide.tiers import has_data, tier_of
from job.model.custom import resolve
from job.model.kinds import Kind, ReplicasHandler
from job.model.kinds.catalogue import CATALOGUE, CATALOGUE_DATA
from job.model.kinds.field import FieldHandler
from job.model.kinds.rows import merged, parse_rows, read_rows, rows_of_objects
from job.model.marks import ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_ORIGINAL_VALUE, ANNOTATION_SCALED_BY
from job.model.workloads import freeze_patch, from_api, restore_patch
from tests.unit.factories import _merge, namespaces, policy, settings, workload

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "crds"
#: the CRD fixture of each catalogue row: every row is tested against its operator's own CRD
CRD_OF = {
    "Cluster.postgresql.cnpg.io": "cloudnative-pg-1.28.0/postgresql.cnpg.io_clusters.yaml",
    "Pooler.postgresql.cnpg.io": "cloudnative-pg-1.28.0/postgresql.cnpg.io_poolers.yaml",
    "postgresql.acid.zalan.do": "postgres-operator-1.15.1/postgresql.crd.yaml",
    "PerconaXtraDBCluster.pxc.percona.com": "percona-xtradb-cluster-operator-1.18.0/perconaxtradbclusters.yaml",
    "RabbitmqCluster.rabbitmq.com": "rabbitmq-cluster-operator-2.22.3/rabbitmq.com_rabbitmqclusters.yaml",
    "KafkaConnect.kafka.strimzi.io": "strimzi-1.2.0/041-Crd-kafkaconnect.yaml",
    "KafkaMirrorMaker2.kafka.strimzi.io": "strimzi-1.2.0/048-Crd-kafkamirrormaker2.yaml",
    "KafkaBridge.kafka.strimzi.io": "strimzi-1.2.0/046-Crd-kafkabridge.yaml",
}
PAUSED = {"kind": "Paused.test.nsscaler.io", "versions": ["v1"],
          "freeze": {"method": "field", "path": "spec.paused", "value": True}}


def real_crd(kind: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / CRD_OF[kind]).read_text())


def schema_at(crd: dict[str, Any], version: str, path: tuple[str, ...]) -> dict[str, Any] | None:
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    node = served["schema"]["openAPIV3Schema"]
    for key in path:
        node = (node.get("properties") or {}).get(key)
        if node is None:
            return None
    return node


@pytest.mark.parametrize(("item", "reason"), [
    pytest.param({**PAUSED, "kind": "Deployment"}, "is built in", id="built-in"),
    pytest.param({**PAUSED, "versions": []}, "versions", id="no-version"),
    pytest.param({**PAUSED, "versions": ["1"]}, "not API versions", id="bad-version"),
    pytest.param({**PAUSED, "freeze": {"method": "field", "path": "spec.paused"}}, "needs path and value",
                 id="field-without-value"),
    pytest.param({**PAUSED, "freeze": {"method": "field", "path": "status.x", "value": 1}}, "under spec",
                 id="field-outside-spec"),
    pytest.param({**PAUSED, "freeze": {"method": "annotation", "key": "nsscaler.wubw.fun/x", "value": "on"}},
                 "nsscaler's own", id="our-own-annotation"),
    pytest.param({**PAUSED, "freeze": {"method": "annotation", "key": "a/b", "value": 1}}, "value (a string)",
                 id="annotation-not-a-string"),
    pytest.param({**PAUSED, "freeze": {"method": "scale", "value": 0}}, "no value", id="scale-with-value"),
    pytest.param({**PAUSED, "freeze": {"method": "delete"}}, "freeze.method", id="unknown-method"),
    pytest.param({**PAUSED, "tier": "first"}, "tier", id="unknown-tier"),
    pytest.param({**PAUSED, "frozen": {"within": 0}}, "frozen.within", id="no-time-to-freeze"),
    pytest.param({**PAUSED, "ready": {"path": "status.ready"}}, "exactly one of", id="ready-without-test"),
    pytest.param({**PAUSED, "extra": 1}, "extra", id="unknown-field"),
    pytest.param("Paused.test.nsscaler.io", "row 2", id="not-a-mapping"),
])
def test_a_bad_row_is_one_line_naming_it_and_the_others_are_served(item, reason):
    good = {**PAUSED, "kind": "Good.test.nsscaler.io"}
    rows, problems = parse_rows([good, item], origin="rows.yaml")
    assert [r.kind for r in rows] == ["Good.test.nsscaler.io"]
    (line,) = problems
    assert line.startswith("rows.yaml: row 2") and "ignored" in line and reason in line, line
    assert "\n" not in line


def test_rows_come_from_a_file_or_a_mounted_configmap_and_a_platform_teams_row_wins(tmp_path):
    mounted = tmp_path / "rows"
    mounted.mkdir()
    (mounted / "a.yaml").write_text(yaml.safe_dump([PAUSED, {"kind": "Broken.x.io"}]))
    own = {"kind": "Pooler.postgresql.cnpg.io", "versions": ["v1"],
           "freeze": {"method": "field", "path": "spec.paused", "value": True}}
    (mounted / "b.json").write_text(json.dumps([own, PAUSED]))
    (mounted / "c.yaml").write_text("- [unclosed")
    (mounted / "..data").mkdir()  # how a ConfigMap volume looks inside: not a rows file
    rows, problems = read_rows(mounted)
    assert [r.kind for r in rows] == [PAUSED["kind"], own["kind"]]
    assert [p.split(":")[0] for p in problems] == [f"kind rows {mounted / n}" for n in ("a.yaml", "b.json", "c.yaml")]
    assert "row 2 (Broken.x.io) ignored" in problems[0] and "has a row already" in problems[1]
    assert "not read" in problems[2]
    assert merged(rows, CATALOGUE)[Kind("Pooler.postgresql.cnpg.io")].freeze.method == "field"
    assert read_rows(tmp_path / "missing.yaml")[1][0].startswith(f"kind rows {tmp_path / 'missing.yaml'}: not read")


def test_the_catalogue_is_valid_and_names_its_source_and_checked_versions():
    assert len(CATALOGUE) == len(CATALOGUE_DATA) == len(CRD_OF)
    for row in CATALOGUE:
        assert row.source and row.checked, row.kind
        assert str(row.kind) in CRD_OF, f"tests/unit/test_rows.py: add the CRD fixture of {row.kind} to CRD_OF"


def _crd_version(row_kind: str) -> tuple[dict[str, Any], str]:
    crd = real_crd(row_kind)
    (row,) = [r for r in CATALOGUE if r.kind == row_kind]
    return crd, row.versions[0]


@pytest.mark.parametrize("kind", sorted(CRD_OF))
def test_each_catalogue_row_resolves_against_its_operators_real_crd(kind):
    crd, version = _crd_version(kind)
    (row,) = [r for r in CATALOGUE if r.kind == kind]
    found = resolve([Kind(kind)], [crd], merged([], CATALOGUE))
    assert not found.unknown, found.unknown
    handler = found.handlers[Kind(kind)]
    assert (handler.group, handler.version, handler.plural) == (crd["spec"]["group"], version,
                                                                crd["spec"]["names"]["plural"])
    assert row.plural == handler.plural, f"job/model/kinds/catalogue.py: {kind}'s plural is {handler.plural}"
    if row.freeze.method == "scale":
        assert isinstance(handler, ReplicasHandler)
        field = schema_at(crd, version, handler.path)
        assert field is not None and field["type"] == "integer" and field.get("minimum", 0) <= 0, (
            f"{kind}: the CRD refuses 0 at {'.'.join(handler.path)}")
    elif row.freeze.method == "field":
        assert isinstance(handler, FieldHandler)
        field = schema_at(crd, version, handler.where)
        assert field is not None, f"{kind}: the CRD has no {'.'.join(handler.where)}"
        assert field["type"] == {bool: "boolean", int: "integer"}[type(row.freeze.value)]
        assert field.get("minimum", 0) <= (row.freeze.value if isinstance(row.freeze.value, int) else 0)
    elif row.freeze.method == "pause":
        assert isinstance(handler, FieldHandler) and handler.pauses_operator
        assert handler.where[:2] == ("metadata", f"{row.freeze.marker}s")
        owned = found.handlers[Kind.STATEFULSET]
        assert {p.kind for p in owned.paused_by} == {row.kind}, "its StatefulSets are frozen through it"
    else:
        assert isinstance(handler, FieldHandler) and handler.where[:2] == ("metadata", "annotations")
    # its RBAC: list, get and patch, as every custom kind's
    extra = {str(a) for a in required_access(settings(), custom=[handler])} - {str(a) for a in
                                                                               required_access(settings())}
    plural = f"{handler.plural}.{handler.group}"
    assert extra <= {f"{verb} {plural}" for verb in row.verbs}


def test_a_row_whose_versions_the_cluster_does_not_serve_is_inactive_and_says_why():
    crd = real_crd("Cluster.postgresql.cnpg.io")
    rows = merged(parse_rows([{"kind": "Cluster.postgresql.cnpg.io", "versions": ["v2"],
                               "freeze": {"method": "scale"}}], origin="t")[0], CATALOGUE)
    found = resolve([Kind("Cluster.postgresql.cnpg.io")], [crd], rows)
    assert "served in v1, its row was checked against v2" in found.unknown[Kind("Cluster.postgresql.cnpg.io")]


def cnpg_cluster(annotations: dict[str, str] | None = None, *, phase: str = "Cluster in healthy state",
                 conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "db", "namespace": "a-1", "resourceVersion": "7", "uid": "u",
                         "annotations": {"team": "x", **(annotations or {})}},
            "spec": {"instances": 3}, "status": {"phase": phase, "readyInstances": 3, "conditions": conditions or []}}


def cnpg_handler() -> FieldHandler:
    handler = resolve([Kind("Cluster.postgresql.cnpg.io")], [real_crd("Cluster.postgresql.cnpg.io")],
                      merged([], CATALOGUE)).handlers[Kind("Cluster.postgresql.cnpg.io")]
    assert isinstance(handler, FieldHandler)
    return handler


@pytest.mark.parametrize(("before", "record"), [
    pytest.param(None, "null", id="no-annotation-removed-again"),
    pytest.param("off", '"off"', id="off-given-back"),
])
def test_a_cnpg_cluster_is_hibernated_by_its_annotation_and_given_back_exactly(before, record):
    handler = cnpg_handler()
    obj = cnpg_cluster({"cnpg.io/hibernation": before} if before else None)
    running = from_api(handler, obj)
    assert running.size == 1 and running.blocked is None
    freeze = freeze_patch(running, policy="p")
    assert freeze["metadata"]["annotations"] == {"cnpg.io/hibernation": "on", ANNOTATION_ORIGINAL_VALUE: record,
                                                 ANNOTATION_SCALED_BY: "p"}
    assert set(freeze) == {"metadata"}, "nothing of the spec is touched"
    frozen_obj = _merge(obj, freeze)
    frozen = from_api(handler, frozen_obj)
    assert frozen.size == 0 and frozen.original == record
    back = _merge(frozen_obj, restore_patch(frozen))
    assert back["metadata"]["annotations"] == obj["metadata"]["annotations"]
    assert back["spec"] == obj["spec"]


def test_an_unhealthy_cnpg_cluster_is_left_running_and_reported_and_the_condition_says_when_it_is_frozen():
    handler = cnpg_handler()
    unhealthy = from_api(handler, cnpg_cluster(phase="Setting up primary"))
    plan = make_plan([policy("p", "a-", kinds=["Cluster.postgresql.cnpg.io"])], namespaces=namespaces("a-1"),
                     workloads=[unhealthy], settings=settings())
    assert not plan.actions
    (problem,) = plan.problems
    assert "status.phase to be 'Cluster in healthy state' first" in problem.message
    assert handler.settled(cnpg_cluster()) == "no condition cnpg.io/hibernation yet"
    going = [{"type": "cnpg.io/hibernation", "status": "False", "reason": "DeletingPods", "message": "m"}]
    assert "DeletingPods" in (handler.settled(cnpg_cluster(conditions=going)) or "")
    done = [{"type": "cnpg.io/hibernation", "status": "True", "reason": "Hibernated"}]
    assert handler.settled(cnpg_cluster(conditions=done)) is None


@pytest.mark.parametrize(("spec", "size", "record", "restored"), [
    pytest.param({"numberOfInstances": 2, "teamId": "t"}, 1, "2", {"numberOfInstances": 2, "teamId": "t"},
                 id="zalando-count-given-back"),
    pytest.param({"numberOfInstances": 0}, 0, None, None, id="zalando-already-at-zero-untouched"),
])
def test_a_field_row_records_the_value_it_replaces(spec, size, record, restored):
    handler = resolve([Kind("postgresql.acid.zalan.do")], [real_crd("postgresql.acid.zalan.do")],
                      merged([], CATALOGUE)).handlers[Kind("postgresql.acid.zalan.do")]
    obj = {"metadata": {"name": "pg", "namespace": "a-1", "resourceVersion": "1"}, "spec": spec}
    w = from_api(handler, obj)
    assert w.size == size
    if record is None:
        return
    frozen_obj = _merge(obj, freeze_patch(w, policy="p"))
    assert frozen_obj["spec"]["numberOfInstances"] == 0
    assert frozen_obj["metadata"]["annotations"][ANNOTATION_ORIGINAL_VALUE] == record
    assert _merge(frozen_obj, restore_patch(from_api(handler, frozen_obj)))["spec"] == restored


@pytest.mark.parametrize("record", ["{}", "[1]", "not json"])
def test_a_field_rows_record_edited_by_hand_is_malformed(record):
    handler = resolve([Kind("Paused.test.nsscaler.io")], [{"spec": {
        "group": "test.nsscaler.io", "scope": "Namespaced", "names": {"kind": "Paused", "plural": "pauseds"},
        "versions": [{"name": "v1", "served": True, "storage": True}]}}],
        merged(parse_rows([PAUSED], origin="t")[0], [])).handlers[Kind("Paused.test.nsscaler.io")]
    w = from_api(handler, {"metadata": {"name": "x", "namespace": "a-1", "resourceVersion": "1",
                                        "annotations": {ANNOTATION_ORIGINAL_VALUE: record}}, "spec": {"paused": True}})
    assert not w.record_is_valid()


def test_a_scale_row_keeps_the_replica_record_custom_kinds_always_had():
    handler = resolve([Kind("KafkaBridge.kafka.strimzi.io")], [real_crd("KafkaBridge.kafka.strimzi.io")],
                      merged([], CATALOGUE)).handlers[Kind("KafkaBridge.kafka.strimzi.io")]
    assert handler.record_key == ANNOTATION_ORIGINAL_REPLICAS and handler.frozen_body() == {"spec": {"replicas": 0}}


def test_a_data_tier_row_comes_back_first_only_where_no_order_or_annotation_says_otherwise():
    db = from_api(cnpg_handler(), cnpg_cluster({ANNOTATION_ORIGINAL_VALUE: "null", ANNOTATION_SCALED_BY: "p"}))
    web = workload("a-1", "web", 0, original="2", scaled_by="p")
    assert (tier_of(db, (), data_first=True), tier_of(web, (), data_first=True)) == (0, 1)
    assert (tier_of(db, ()), tier_of(web, ())) == (0, 0), "no data kind in the namespace: one step, as always"
    order = (Kind.DEPLOYMENT, Kind("Cluster.postgresql.cnpg.io"))
    assert (tier_of(db, order, data_first=True), tier_of(web, order, data_first=True)) == (1, 0), "the order wins"
    assert has_data([web, db]) and not has_data([web])


def test_the_catalogues_rbac_component_and_docs_table_follow_the_rows():
    """kustomize/components/operator-kinds and the table in docs/operating/custom-kinds.md are rendered from the
    catalogue: `make rows` renders them again."""
    assert not rows_devtool.stale(), f"stale: {rows_devtool.stale()}: run `make rows`"
    page = (ROOT / "docs/operating/custom-kinds.md").read_text()
    for row in CATALOGUE:
        assert f"| `{row.kind}` |" in page
    role = rows_devtool.cluster_role(CATALOGUE, name="r")
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == {(row.kind.group, row.plural, verb) for row in CATALOGUE for verb in row.verbs}


def test_a_platform_teams_rows_get_their_clusterrole_rendered(tmp_path, capsys):
    (tmp_path / "rows.yaml").write_text(yaml.safe_dump([{**PAUSED, "plural": "pauseds"}]))
    assert rows_devtool.main(["--rows", str(tmp_path / "rows.yaml")]) == 0
    role = yaml.safe_load(capsys.readouterr().out)
    assert role["rules"] == [{"apiGroups": ["test.nsscaler.io"], "resources": ["pauseds"],
                              "verbs": ["list", "get", "patch"]}]
    assert role["metadata"]["labels"]["nsscaler.wubw.fun/aggregate-to-nsscaler"] == "true"


def test_kind_rows_from_the_environment_join_the_catalogue_and_a_bad_row_is_one_warning(tmp_path, monkeypatch, caplog):
    (tmp_path / "rows.yaml").write_text(yaml.safe_dump([PAUSED, {"kind": "Broken.x.io", "versions": ["v1"]}]))
    monkeypatch.setenv("NSSCALER_KIND_ROWS", str(tmp_path / "rows.yaml"))
    with caplog.at_level("WARNING"):
        rows = read.kind_rows(settings())
    assert set(rows) == {Kind(PAUSED["kind"]), *(r.kind for r in CATALOGUE)}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "row 2 (Broken.x.io) ignored: freeze: Field required" in warning, warning


@pytest.mark.parametrize(("row", "says"), [
    pytest.param({"kind": "Cluster.postgresql.cnpg.io", "versions": ["v1"], "freeze": {"method": "scale"}},
                 "cannot be scaled to zero: its schema (v1) refuses spec.instances: 0 (its minimum is 1)",
                 id="cnpg-cluster-by-scale"),
    pytest.param({"kind": "Cluster.postgresql.cnpg.io", "versions": ["v1"],
                  "freeze": {"method": "field", "path": "spec.hibernate", "value": True}},
                 "its row cannot freeze it: its schema (v1) has no field spec.hibernate", id="no-such-field"),
    pytest.param({"kind": "Cluster.postgresql.cnpg.io", "versions": ["v1"],
                  "freeze": {"method": "field", "path": "spec.instances", "value": True}},
                 "wants spec.instances to be of type integer, not True", id="wrong-type"),
])
def test_a_row_the_crds_schema_refuses_is_named_with_the_reason_before_any_write(row, says):
    """What the API server would answer to the freeze, known from the CRD the run LISTs anyway: the real CNPG
    Cluster CRD refuses 0 instances, which is why its catalogue row hibernates it by annotation instead."""
    rows = merged(parse_rows([row], origin="t")[0], CATALOGUE)
    found = resolve([Kind("Cluster.postgresql.cnpg.io")], [real_crd("Cluster.postgresql.cnpg.io")], rows)
    assert says in found.unknown[Kind("Cluster.postgresql.cnpg.io")], found.unknown


def test_a_kind_named_twice_keeps_its_first_row_in_a_list_in_files_and_in_nsscalerkinds():
    """One rule wherever rows come from: the first row of a kind is served, each later one is named once."""
    second = {**PAUSED, "freeze": {"method": "field", "path": "spec.paused", "value": False}}
    rows, problems = parse_rows([PAUSED, second], origin="rows.yaml")
    assert [r.freeze.value for r in rows] == [True]
    assert problems == [f"rows.yaml: row 2 ({PAUSED['kind']}) ignored: {PAUSED['kind']} has a row already"]
    objects = [{"metadata": {"name": name}, "spec": spec} for name, spec in (("b", second), ("a", PAUSED))]
    rows, problems = rows_of_objects(objects)
    assert [r.freeze.value for r in rows] == [True]  # "a" comes first by name
    assert problems == [f"NSScalerKind b: ignored: {PAUSED['kind']} has a row already"]
