"""Reading the CycloneDX SBOMs that tools/sbom.py writes, in the unit and node tiers. Validity is judged by
cyclonedx-python-lib's strict JSON validator, i.e. the CycloneDX JSON schema itself, not by a copy of its rules."""

from __future__ import annotations

from typing import Any

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packaging.utils import canonicalize_name

from tools import sbom


def schema_error(text: str) -> str | None:
    """Why `text` is not a valid CycloneDX document of the version tools/sbom.py writes; None when it is."""
    version = SchemaVersion.from_version(sbom.SPEC_VERSION)
    error = JsonStrictValidator(version).validate_str(text)
    if error is None:
        return None
    return str(getattr(getattr(error, "data", None), "message", error))[:500]


def packages(bom: dict[str, Any]) -> dict[str, str]:
    """The SBOM's components (not its subject): canonical name -> version."""
    return {canonicalize_name(c["name"]): c["version"] for c in bom.get("components", [])}
