"""The cache of kube-state-metrics and promtool: keyed by tool and version, complete only once its manifest
is written. (The builds themselves run in `make metrics-tools`; the tests that use the tools prove them.)"""

from __future__ import annotations

import pytest

from devtools.cluster import tools


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "nsscaler"


@pytest.mark.parametrize("name", list(tools.TOOLS))
def test_each_version_has_its_own_folder(cache, name):
    tool = tools.TOOLS[name]
    assert tools.tool_dir(tool) == cache / f"{name}-{tool.version}"
    assert tools.binary(name) == cache / f"{name}-{tool.version}" / name


@pytest.mark.parametrize(("files", "built"), [
    pytest.param([], False, id="empty"),
    pytest.param(["promtool"], False, id="binary-without-manifest-is-a-half-build"),
    pytest.param(["build.json"], False, id="manifest-without-binary"),
    pytest.param(["promtool", "build.json"], True, id="complete"),
])
def test_a_build_counts_only_once_its_manifest_is_written(cache, files, built):
    tool = tools.TOOLS["promtool"]
    folder = tools.tool_dir(tool)
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_text("x")
    assert tools.is_built(tool) is built
    if built:
        assert tools.ensure_tool("promtool") == folder / "promtool"  # no build is started


def test_unknown_tool_names_are_refused(capsys):
    with pytest.raises(SystemExit):
        tools.main(["kubectl"])
    assert "unknown tools: kubectl" in capsys.readouterr().err
