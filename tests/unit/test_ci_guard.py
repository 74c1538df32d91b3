"""Under CI=true no test may skip: the suite's own hook turns a skip into a failure that keeps its reason;
locally a skip stays a skip. (A pytest of its own, in a folder of its own, with the suite's conftest loaded.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("no tool here")

@pytest.mark.xfail(reason="known", strict=True)
def test_known_failure():
    assert False
"""


@pytest.mark.parametrize(("ci", "outcome"), [
    pytest.param("true", "1 failed, 1 xfailed", id="ci-a-skip-fails"),
    pytest.param("", "1 skipped, 1 xfailed", id="locally-a-skip-stays"),
])
def test_a_skip_fails_only_under_ci(tmp_path, ci, outcome):
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci else {})
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
                             "-rs", "--rootdir", str(tmp_path), str(tmp_path)],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert outcome in result.stdout, result.stdout + result.stderr
    if ci:
        assert "skipped, and CI=true allows no skip: " in result.stdout and "no tool here" in result.stdout
