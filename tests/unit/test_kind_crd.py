"""The NSScalerKind CRD (kustomize/base/kind-crd.yaml) and the row model (job/model/kinds/rows.py) know the same
fields: a field added to one is named here until the other has it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from job.model.kinds.rows import Compare, Condition, Freeze, Frozen, Row

CRD = Path(__file__).resolve().parents[2] / "kustomize" / "base" / "kind-crd.yaml"


def _spec() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def _names(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


@pytest.mark.parametrize(("path", "model"), [
    pytest.param((), Row, id="row"),
    pytest.param(("freeze",), Freeze, id="freeze"),
    pytest.param(("frozen",), Frozen, id="frozen"),
    pytest.param(("frozen", "condition"), Condition, id="condition"),
    pytest.param(("precondition",), Compare, id="precondition"),
    pytest.param(("ready",), Compare, id="ready"),
])
def test_the_kind_crd_and_the_row_model_know_the_same_fields(path, model):
    node = _spec()
    for key in path:
        node = node["properties"][key]
    assert set(node["properties"]) == _names(model), (
        f"kustomize/base/kind-crd.yaml spec.{'.'.join(path) or '(row)'} and {model.__name__} differ")


def test_the_kind_crds_enums_are_the_models():
    spec = _spec()
    assert spec["properties"]["freeze"]["properties"]["method"]["enum"] == \
        list(Freeze.model_fields["method"].annotation.__args__)  # type: ignore[union-attr]
    assert spec["properties"]["tier"]["enum"] == list(Row.model_fields["tier"].annotation.__args__)  # type: ignore[union-attr]
