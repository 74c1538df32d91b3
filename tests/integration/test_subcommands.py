"""The installed `nsscaler` command's subcommands against the real control plane: `nsscaler` with no argument at
all, its settings in the environment only, is the CronJob's run (the image's entrypoint, no args); `nsscaler run`
is the same run; `nsscaler release` gives back what they froze; each `--help` is its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devtools import builders
from devtools.builders import AdminApi
from job.cli import RELEASE, RUN
from tests.conftest import make_family

NSSCALER = Path(sys.executable).parent / "nsscaler"


def nsscaler(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    """The command as the CronJob's container runs it: its settings from the environment."""
    env = {**os.environ, "NSSCALER_KUBECONFIG": str(kubeconfig), "NSSCALER_LOG_FORMAT": "json"}
    return subprocess.run([str(NSSCALER), *args], capture_output=True, text=True, env=env, check=False, timeout=120)


@pytest.mark.usefixtures("crd")
def test_no_subcommand_is_the_run_and_release_gives_back_what_it_froze(api: AdminApi, control_plane, prefix):
    make_family(api, prefix, {"v1": {"d-web": 2}, "v2": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    as_the_cronjob = nsscaler(kubeconfig=control_plane.admin_kubeconfig)
    assert as_the_cronjob.returncode == 0, as_the_cronjob.stderr
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0
    assert api.replicas("Deployment", prefix + "v2", "d-web") == 1

    again = nsscaler("run", kubeconfig=control_plane.admin_kubeconfig)  # the same run, named
    assert again.returncode == 0, again.stderr
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 0

    released = nsscaler("release", "--restore-wait-in-run=5", kubeconfig=control_plane.admin_kubeconfig)
    assert released.returncode == 0, released.stderr
    assert api.replicas("Deployment", prefix + "v1", "d-web") == 2


def test_each_help_is_its_own(tmp_path):
    env = {**os.environ, "COLUMNS": "110"}
    top = subprocess.run([str(NSSCALER), "--help"], capture_output=True, text=True, env=env, check=False)
    assert top.returncode == 0 and RUN.summary in top.stdout and RELEASE.summary in top.stdout, top.stdout
    for command in (RUN, RELEASE):
        own = subprocess.run([str(NSSCALER), command.name, "--help"], capture_output=True, text=True, env=env,
                             check=False)
        assert own.returncode == 0, own.stderr
        assert own.stdout.startswith(f"usage: nsscaler {command.name} ")
        words = " ".join(own.stdout.split())
        assert " ".join(command.description.split()) in words
        others = [c for c in (RUN, RELEASE) if c is not command]
        assert all(" ".join(o.description.split()) not in words for o in others)
