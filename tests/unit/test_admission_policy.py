"""The policy that keeps nsscaler's own account to what a run writes is made from the kind registry
(devtools/admission.py): a kind added to the registry gets its row, with the fields its freeze sets."""

from __future__ import annotations

import pytest

from devtools import admission
from job.model.kinds import BUILTIN, Kind, ReplicasHandler


def test_the_shipped_policy_is_what_the_registry_makes() -> None:
    assert admission.OUTPUT.read_text() == admission.rendered(), "run `make admission`"
    assert admission.main(["--check"]) == 0


@pytest.mark.parametrize("kind", list(BUILTIN), ids=str)
def test_every_built_in_kind_has_a_row_naming_what_its_freeze_changes(kind: Kind) -> None:
    handler = BUILTIN[kind]
    (row,) = [r for r in admission.workload_rows() if r.resource == handler.plural]
    tree, _ = admission.changes(handler)
    assert row.group == handler.group and row.spec == tree
    assert all(field in row.says for field in admission._dotted(tree))


def test_the_fields_come_from_the_handlers() -> None:
    statefulset = admission.changes(BUILTIN[Kind.STATEFULSET])[0]
    assert statefulset == {"spec": {"replicas": None, "persistentVolumeClaimRetentionPolicy": {"whenScaled": None}}}
    assert admission.changes(BUILTIN[Kind.CRONJOB])[0] == {"spec": {"suspend": None}}
    assert admission.changes(BUILTIN[Kind.DAEMONSET])[0] == {
        "spec": {"template": {"spec": {"nodeSelector": {"nsscaler.wubw.fun/frozen": None}}}}}


def test_a_new_kind_in_the_registry_gets_its_row(monkeypatch: pytest.MonkeyPatch) -> None:
    scaled = ReplicasHandler(Kind("Widget.example.com"), "example.com", "v1", "widgets",
                             path=("spec", "size", "count"))
    monkeypatch.setattr(admission, "BUILTIN", {**BUILTIN, scaled.kind: scaled})
    (row,) = [r for r in admission.workload_rows() if r.resource == "widgets"]
    assert row.spec == {"spec": {"size": {"count": None}}} and "spec.size.count" in row.says
    expressions = [v["expression"] for v in admission.policy()[0]["spec"]["validations"]]
    assert any("request.resource.resource == 'widgets'" in e and "k != 'count'" in e for e in expressions)


def test_the_cel_of_a_tree_keeps_everything_but_its_leaves() -> None:
    cel = admission.same("a", "b", {"spec": {"replicas": None}})
    assert "k != 'spec'" in cel and "k != 'replicas'" in cel
    assert admission.same("a", "b", {}) == "a == b"


