"""The plugin as docs/using/plugin.md installs it: its one line run by real pipx, then nothing else on PATH but
what pipx installed and kubectl; then a developer with `edit` in one held namespace, whose KUBECONFIG is two
files, wakes it, and the next run gives it back."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster import controlplane
from tests.conftest import ROOT, kubectl, make_family
from tests.users import User, grant_edit

PAGE = (ROOT / "docs/using/plugin.md").read_text()


def test_the_page_installs_the_wheel_in_one_line():
    line = one_line()
    assert re.fullmatch(r"pipx install \./nsscaler-[\d.]+-py3-none-any\.whl", line), line
    assert "python -m pip wheel --no-deps -w dist ." in PAGE


def one_line() -> str:
    (line,) = re.findall(r"```sh\n(.+)\n```", PAGE.split("## Install it in one line", 1)[1].split("\n## ", 1)[0])
    return line


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's line, run as written by real pipx (its venv and bin folder in a folder of the test's own) next
    to the wheel the page says to build: pipx resolves the wheel's dependencies from the package index, as it
    does for a developer. Returns the folder pipx puts `kubectl-nsscaler` in."""
    folder = tmp_path_factory.mktemp("plugin")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
                    "--wheel-dir", str(folder), str(ROOT)], check=True, capture_output=True)
    command, *args = shlex.split(one_line())
    assert command == "pipx"
    env = {**os.environ, "PIPX_HOME": str(folder / "pipx"), "PIPX_BIN_DIR": str(folder / "bin"),
           "PIPX_MAN_DIR": str(folder / "man")}
    done = subprocess.run([str(Path(sys.executable).parent / "pipx"), *args], cwd=folder, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "bin"


def as_developer(bin_dir: Path, kubeconfig: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl run as a developer would: PATH holds the plugin's environment and kubectl, nothing of .venv."""
    env = {"PATH": f"{bin_dir}{os.pathsep}{Path(kubectl()).parent}{os.pathsep}/usr/bin:/bin",
           "HOME": str(home), "KUBECONFIG": kubeconfig, "COLUMNS": "110"}  # the width the page shows
    return subprocess.run([kubectl(), *args], capture_output=True, text=True, env=env, check=False)


@pytest.mark.usefixtures("wake_admission")
def test_an_edit_only_user_with_a_two_file_kubeconfig_wakes_a_held_namespace_with_the_installed_plugin(
        installed: Path, api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str, tmp_path: Path,
        run_job: Any):
    ns = prefix + "v1"
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", ns, "d-web") == 0  # held
    alice = User(control_plane, f"{prefix}alice", tmp_path)
    grant_edit(api, ns, alice)
    own = yaml.safe_load(alice.kubeconfig.read_text())
    clusters, credentials = tmp_path / "clusters.yaml", tmp_path / "credentials.yaml"
    clusters.write_text(yaml.safe_dump({**own, "users": []}))
    credentials.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "users": own["users"]}))
    kubeconfig = f"{clusters}{os.pathsep}{credentials}"

    listed = as_developer(installed, kubeconfig, tmp_path, "plugin", "list")
    assert f"{installed}/kubectl-nsscaler" in listed.stdout, (listed.stdout, listed.stderr)
    helped = as_developer(installed, kubeconfig, tmp_path, "nsscaler", "--help")
    assert helped.returncode == 0 and f"$ kubectl nsscaler --help\n{helped.stdout}" in PAGE

    woken = as_developer(installed, kubeconfig, tmp_path, "nsscaler", "wake", "-n", ns, "--for", "1h",
                         "--reason", "customer demo")
    assert woken.returncode == 0, woken.stderr
    assert re.match(rf"Wake {ns}/\S+ created by {alice.name} for 1h ", woken.stdout), woken.stdout
    (wake,) = api.list("Wake", namespace=ns)
    assert wake["spec"]["requestedBy"] == alice.name and wake["spec"]["reason"] == "customer demo"
    assert run_job().exit_code == 0  # the next run
    assert api.replicas("Deployment", ns, "d-web") == 2  # back exactly
    assert api.replicas("Deployment", prefix + "v2", "d-web") == 1
