"""The plugin as krew installs it (docs/using/plugin.md): real krew (v0.4.3, built from its Go module) adds a local
git repository holding the manifest `make plugin-archive` writes as a custom index, and installs `nsscaler` from it,
downloading the archive over HTTP (served on loopback, as from a release page) and checking its SHA-256. Then
`kubectl nsscaler` runs with nothing on PATH but krew's bin folder, kubectl, and Debian's python3, whose own
libraries (it has PyYAML) the plugin leaves aside: the one file brings every library the plugin uses. A user with
only `edit` in a held namespace wakes it."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools import builders, krew
from devtools.builders import AdminApi
from devtools.cluster import controlplane
from job import __version__
from tests.conftest import built_tool, kubectl, make_family
from tests.users import User, grant_edit

#: Debian's python3, the interpreter the project pins: without pydantic or requests, with PyYAML
SYSTEM_PYTHON = Path("/usr/bin/python3.11")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on loopback: (folder, its URL)."""
    folder = tmp_path_factory.mktemp("served")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join(timeout=10)


def user_path(folder: Path, *bins: Path) -> str:
    """PATH as a user's shell has it: `bins`, kubectl's folder, and a folder holding only python3."""
    python = folder / "python-only"
    python.mkdir(exist_ok=True)
    if not (python / "python3").exists():
        (python / "python3").symlink_to(SYSTEM_PYTHON)
    return os.pathsep.join(str(p) for p in (*bins, Path(kubectl()).parent, python))


def as_user(folder: Path, *args: str, bins: tuple[Path, ...], **env: str) -> subprocess.CompletedProcess[str]:
    """`kubectl ...` with the user's PATH and nothing else of this process's environment (no proxy for
    loopback: krew fetches the archive from the local server)."""
    base = {"PATH": user_path(folder, *bins), "HOME": str(folder / "home"), "KREW_ROOT": str(folder / "krew"),
            "KREW_NO_UPGRADE_CHECK": "1", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    return subprocess.run([kubectl(), *args], capture_output=True, text=True, env={**base, **env}, check=False,
                          timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, served: tuple[Path, str]) -> Path:
    """krew on PATH as `kubectl-krew`, with git (krew keeps its indexes as git clones); the archive and manifest
    written as `make plugin-archive` writes them, the manifest committed to a local git repository, which krew adds
    as the index `local`; then `kubectl krew install local/nsscaler`. Returns the user's folder (HOME, KREW_ROOT)."""
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"no {SYSTEM_PYTHON} (`make python` installs it)")
    folder = tmp_path_factory.mktemp("krew-user")
    tools = folder / "tools"
    tools.mkdir()
    (tools / "kubectl-krew").symlink_to(built_tool("krew"))
    (tools / "git").symlink_to(shutil.which("git") or "git")
    _, manifest = krew.build(served[0], served[1])
    index = folder / "index"
    (index / "plugins").mkdir(parents=True)
    shutil.copy(manifest, index / "plugins" / "nsscaler.yaml")
    git = ["git", "-C", str(index), "-c", "user.name=nsscaler", "-c", "user.email=nsscaler@localhost"]
    for args in (["init", "-q"], ["add", "plugins"], ["commit", "-q", "-m", "nsscaler"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    for args in (("krew", "index", "add", "local", str(index)), ("krew", "install", "local/nsscaler")):
        done = as_user(folder, *args, bins=(tools,))
        assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return folder


def test_krew_installs_the_plugin_from_a_local_index_and_it_runs_with_only_a_python(installed: Path):
    bins = (installed / "krew" / "bin",)
    listed = as_user(installed, "krew", "list", bins=(*bins, installed / "tools"))
    assert listed.stdout.split() == ["local/nsscaler"], listed.stdout + listed.stderr  # from the index `local`
    assert (installed / "krew" / "bin" / "kubectl-nsscaler").is_symlink()
    version = as_user(installed, "nsscaler", "--version", bins=bins)
    assert version.returncode == 0 and version.stdout.strip() == f"kubectl nsscaler {__version__}", version
    unpacked = list((installed / "home" / ".cache" / "kubectl-nsscaler").iterdir())
    assert [p.name.split("-")[0] for p in unpacked] == [__version__]  # unpacked once, into the user's cache
    assert as_user(installed, "nsscaler", "--help", bins=bins).returncode == 0


def test_a_manifest_whose_archive_differs_is_refused_by_krew(installed: Path, served: tuple[Path, str]):
    """krew checks the archive against the manifest's SHA-256: a changed archive is never installed."""
    folder, _ = served
    (archive,) = folder.glob("*.tar.gz")
    original = archive.read_bytes()
    try:
        archive.write_bytes(original + b"\0")
        tools = installed / "tools"
        done = as_user(installed, "krew", "install", "--manifest", str(folder / "nsscaler.yaml"), "--archive",
                       str(archive), bins=(tools,), KREW_ROOT=str(installed / "other-root"))
        assert done.returncode != 0 and "checksum does not match" in done.stderr.lower(), done.stderr
    finally:
        archive.write_bytes(original)


@pytest.mark.usefixtures("wake_admission")
def test_an_edit_only_user_wakes_a_held_namespace_with_the_plugin_krew_installed(
        installed: Path, api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str, tmp_path: Path,
        run_job: Any):
    ns = prefix + "v1"
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job().exit_code == 0
    alice = User(control_plane, f"{prefix}alice", tmp_path)
    grant_edit(api, ns, alice)
    woken = as_user(installed, "nsscaler", "wake", "-n", ns, "--for", "1h", bins=(installed / "krew" / "bin",),
                    KUBECONFIG=str(alice.kubeconfig))
    assert woken.returncode == 0, woken.stdout + woken.stderr
    (wake,) = api.list("Wake", namespace=ns)
    assert wake["spec"]["requestedBy"] == alice.name
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", ns, "d-web") == 2
