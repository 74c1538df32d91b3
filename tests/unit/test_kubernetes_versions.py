"""The supported Kubernetes versions: what a server's version means for a run (pure), and one list of versions
kept in step across the product, the version tier and the README."""

from __future__ import annotations

import re

import pytest

from devtools.cluster import versions
from job.model import kubernetes
from job.model.kubernetes import ServerVersion, judge
from tests.conftest import ROOT


@pytest.mark.parametrize(("info", "expected"), [
    pytest.param({"major": "1", "minor": "36", "gitVersion": "v1.36.3"}, (1, 36), id="plain"),
    pytest.param({"major": "1", "minor": "34+", "gitVersion": "v1.34.2-eks-1"}, (1, 34), id="provider-plus"),
    pytest.param({"major": "", "minor": ""}, None, id="hidden"),
    pytest.param({}, None, id="empty"),
])
def test_server_version_is_read_from_major_and_minor(info, expected):
    found = ServerVersion.parse(info)
    assert (found.pair if found else None) == expected


@pytest.mark.parametrize(("minor", "refused", "notes"), [
    pytest.param(33, True, 0, id="older-refused"),
    pytest.param(34, False, 1, id="oldest-without-mutating-policy"),
    pytest.param(35, False, 1, id="without-mutating-policy"),
    pytest.param(36, False, 0, id="mutating-policy-ga"),
    pytest.param(37, False, 0, id="newest"),
    pytest.param(38, False, 1, id="newer-than-proven"),
])
def test_each_version_is_judged(minor, refused, notes):
    verdict = judge(ServerVersion(major=1, minor=minor, git_version=f"v1.{minor}.0"))
    assert bool(verdict.refused) is refused and len(verdict.notes) == notes
    if refused:
        assert verdict.refused and kubernetes.SUPPORTED_RANGE in verdict.refused and "\n" not in verdict.refused


def test_a_server_that_hides_its_version_is_served_and_said_so():
    verdict = judge(None)
    assert verdict.refused is None and "does not say its version" in verdict.notes[0]


def _minors(low: tuple[int, int], high: tuple[int, int]) -> list[str]:
    return [f"{low[0]}.{m}" for m in range(low[1], high[1] + 1)]


def test_the_version_tier_proves_every_supported_minor_and_nothing_else():
    """devtools/cluster/versions.py builds one server per minor of job/model/kubernetes.py's range."""
    assert list(versions.SUPPORTED) == _minors(kubernetes.OLDEST, kubernetes.NEWEST)
    for minor, patch in versions.SUPPORTED.items():
        assert patch.startswith(f"v{minor}."), (minor, patch)


def test_the_readme_table_names_each_proven_version():
    """README's "Supported Kubernetes versions" table: one row per version the tier runs, at the patch it runs."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Supported Kubernetes versions", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*(v?\d+\.\d+(?:\.\d+)?)\s*\|", section, flags=re.MULTILINE)
    assert rows == list(versions.SUPPORTED.values()), (
        f"README.md's table lists {rows}; devtools/cluster/versions.py proves {list(versions.SUPPORTED.values())}")
