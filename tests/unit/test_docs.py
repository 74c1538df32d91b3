"""The README and the CRD tell the truth about the settings and the spec fields."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from job.model.policy import PolicySpec
from job.model.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CRD = yaml.safe_load((ROOT / "kustomize/base/crd.yaml").read_text())
SPEC_SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_readme_documents_every_setting(field):
    assert f"`NSSCALER_{field.upper()}`" in README
    assert f"`--{field.replace('_', '-')}" in README


@pytest.mark.parametrize("field", list(PolicySpec.model_fields))
def test_every_spec_field_is_in_the_crd_with_a_description_and_in_the_readme(field):
    assert SPEC_SCHEMA[field]["description"]
    assert f"`spec.{field}`" in README


def test_the_crd_has_no_field_the_job_does_not_know():
    assert set(SPEC_SCHEMA) == set(PolicySpec.model_fields)
