"""Which modules of an image a run would compile again: only bytecode with an unchecked hash is used as it is
(the node tier checks the image with it; here, the check itself)."""

from __future__ import annotations

import py_compile
import sys

import pytest

from devtools.cluster import images


@pytest.mark.parametrize(("mode", "checked"), [
    pytest.param(py_compile.PycInvalidationMode.UNCHECKED_HASH, False, id="unchecked hash: used as it is"),
    pytest.param(py_compile.PycInvalidationMode.TIMESTAMP, True, id="timestamp: checked against the source"),
    pytest.param(py_compile.PycInvalidationMode.CHECKED_HASH, True, id="checked hash: the source read each time"),
    pytest.param(None, True, id="no bytecode"),
])
def test_only_bytecode_with_an_unchecked_hash_counts_as_compiled(tmp_path, mode, checked):
    site = tmp_path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    source = site / "pkg" / "mod.py"
    source.write_text("VALUE = 1\n")
    if mode is not None:
        py_compile.compile(str(source), doraise=True, invalidation_mode=mode)
    assert images.bytecode_checked(site) == (["pkg/mod.py"] if checked else [])
