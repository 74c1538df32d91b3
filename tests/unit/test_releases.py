"""Every released version is kept, and a kept release is what that version shipped, unedited.

CHANGELOG.md dates a version when it is released (`## [0.1.0] - 2026-12-06`); `make keep-release` then keeps its
chart package, wheel and records under tests/fixtures/releases/<version>/ with a manifest of their SHA-256. The
integration tier installs the kept chart and runs the kept wheel (tests/integration/test_upgrade.py) and restores
the kept records (tests/integration/test_record_fixtures.py); this checks the files themselves.
"""

from __future__ import annotations

import io
import json
import tarfile
import tomllib
import zipfile

import pytest
import yaml

from devtools import release
from job import REPOSITORY, __version__
from tests.conftest import ROOT


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.split("."))


CHANGELOG = release.changelog_versions()
KEPT = release.kept()


def test_the_changelog_begins_with_the_working_version_and_lists_each_version_once():
    text = release.CHANGELOG.read_text()
    assert next(iter(CHANGELOG)) == __version__, "CHANGELOG.md's first section is job/__init__.py's __version__"
    assert len(release.HEADING.findall(text)) == len(CHANGELOG), "a version listed twice"
    assert list(CHANGELOG) == sorted(CHANGELOG, key=_key, reverse=True), "newest first"
    assert [v for v, when in CHANGELOG.items() if when == "Unreleased"] in ([], [__version__]), (
        "only the working version may be Unreleased")


def test_every_released_version_is_kept_and_nothing_else():
    released = sorted((v for v, when in CHANGELOG.items() if when != "Unreleased"), key=_key)
    assert released == KEPT, (f"CHANGELOG.md dates {released}, tests/fixtures/releases/ keeps {KEPT}: "
                              "`make keep-release` keeps a dated version")


def test_the_working_version_is_newer_than_every_kept_one():
    assert all(_key(v) < _key(__version__) or v == __version__ for v in KEPT), (KEPT, __version__)


@pytest.mark.parametrize("version", KEPT)
def test_a_kept_release_is_unedited_and_of_its_own_version(version):
    folder = release.RELEASES / version
    manifest = json.loads((folder / release.MANIFEST).read_text())
    assert manifest["version"] == version and len(manifest["commit"]) == 40
    files = {release.chart_package(version), release.wheel(version), release.RECORDS}
    assert set(manifest["files"]) == files
    assert {p.name for p in folder.iterdir()} == files | {release.MANIFEST}
    for name, digest in manifest["files"].items():
        assert release.sha256(folder / name) == digest, f"{folder.name}/{name} changed after it was kept"

    with tarfile.open(folder / release.chart_package(version)) as tgz:
        member = tgz.extractfile("nsscaler/Chart.yaml")
        assert member is not None
        chart = yaml.safe_load(io.TextIOWrapper(member))
    assert chart["version"] == chart["appVersion"] == version
    with zipfile.ZipFile(folder / release.wheel(version)) as whl:
        assert f'__version__ = "{version}"' in whl.read("job/__init__.py").decode()
    assert yaml.safe_load((folder / release.RECORDS).read_text())["version"] == version


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("## [0.2.0] - Unreleased\n\n## [0.1.0] - 2026-12-06\n", {"0.2.0": "Unreleased", "0.1.0": "2026-12-06"},
                 id="working-and-released"),
    pytest.param("## [Unreleased]\n## [0.1.0] - 2026-12-06\n", {"0.1.0": "2026-12-06"}, id="no-version-named"),
    pytest.param("## [0.1.0] 2026-12-06\n", {}, id="no-dash"),
])
def test_a_changelog_heading_is_read_as_version_and_date(text, expected):
    assert release.changelog_versions(text) == expected


@pytest.mark.parametrize(("version", "words"), [
    pytest.param(KEPT[0] if KEPT else "0.0.0", "never written again", id="kept-already"),
    pytest.param("9.9.9", "does not date 9.9.9", id="not-released"),
])
def test_keep_release_refuses_to_write_a_kept_release_again_or_an_undated_one(version, words):
    with pytest.raises(SystemExit, match=words):
        release.keep(version)


def test_the_repository_is_written_once_and_every_face_of_the_project_names_it():
    """job.REPOSITORY is the one place; pyproject's URLs, the README and the chart (generated from it) say the same."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["urls"]["Repository"] == REPOSITORY
    assert all(url.startswith(REPOSITORY + "/") for name, url in project["urls"].items() if name != "Repository")
    assert REPOSITORY in (ROOT / "README.md").read_text()
    chart_meta = yaml.safe_load((ROOT / "charts" / "nsscaler" / "Chart.yaml").read_text())
    assert chart_meta["home"] == REPOSITORY and chart_meta["sources"] == [REPOSITORY]
