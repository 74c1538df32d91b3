"""The supported versions' table is written from the version tier's own record: pytest's counts from its JUnit
XML, one entry per minor, a run of one minor replacing only its own, and a selection never recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools import version_tier, versions_table
from devtools.cluster import versions

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="2"
skipped="3" tests="40" time="12.0"></testsuite></testsuites>"""


def test_pytests_own_counts_are_read_from_its_junit_xml(tmp_path: Path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    assert version_tier.counts(path) == {"passed": 34, "failed": 2, "errors": 1, "skipped": 3}
    assert version_tier.counts(tmp_path / "none.xml") == {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}


def test_a_run_of_one_minor_replaces_only_its_own_entry(tmp_path: Path):
    path = tmp_path / "versions.json"
    one = {"minor": "1.35", "kubernetes": "v1.35.4", "exit": 0, "passed": 30, "failed": 0, "errors": 0, "skipped": 0,
           "build_seconds": 1, "test_seconds": 2}
    version_tier.record([one, {**one, "minor": "1.34", "kubernetes": "v1.34.4"}], commit="aaa", date="2026-12-05",
                        path=path)
    version_tier.record([{**one, "passed": 31}], commit="bbb", date="2026-12-06", path=path)
    kept = json.loads(path.read_text())["versions"]
    assert list(kept) == ["1.34", "1.35"]
    assert (kept["1.34"]["commit"], kept["1.34"]["passed"]) == ("aaa", 30)
    assert (kept["1.35"]["commit"], kept["1.35"]["passed"], kept["1.35"]["date"]) == ("bbb", 31, "2026-12-06")


@pytest.mark.parametrize(("args", "selection"), [
    pytest.param([], False, id="the-suite"),
    pytest.param(["-rs", "-v"], False, id="reporting-only"),
    pytest.param(["-k", "helm"], True, id="keyword"),
    pytest.param(["-x"], True, id="first-failure"),
    pytest.param(["tests/e2e"], True, id="a-path"),
])
def test_only_the_whole_suite_is_recorded(args, selection):
    assert version_tier.selects(args) is selection


@pytest.mark.parametrize(("entry", "cell"), [
    pytest.param({"kubernetes": "v1.35.4", "exit": 0, "passed": 41, "failed": 0, "errors": 0, "skipped": 0,
                  "date": "2026-12-06", "commit": "abc1234"}, "2026-12-06, abc1234 (41 passed)", id="passed"),
    pytest.param({"kubernetes": "v1.35.4", "exit": 1, "passed": 39, "failed": 2, "errors": 0, "skipped": 0,
                  "date": "2026-12-06", "commit": "abc1234"}, "FAILED: 2026-12-06, abc1234 (39 passed, 2 failed)",
                 id="failed"),
    pytest.param({"kubernetes": "v1.35.3", "exit": 0, "passed": 41, "date": "2026-12-01", "commit": "abc1234"},
                 "not proven at this patch", id="an-older-patch"),
    pytest.param(None, "not proven at this patch", id="never"),
])
def test_each_cell_says_what_the_record_says(entry, cell):
    assert versions_table.proven(entry, "v1.35.4") == cell


def test_the_table_has_one_row_per_supported_minor_at_its_patch():
    rows = versions_table.table({"versions": {}}).splitlines()[2:]
    assert [r.split(" | ")[0].strip("| ") for r in rows] == list(versions.SUPPORTED.values())
    assert set(versions_table.DIFFERS) == set(versions.SUPPORTED)
