"""The release as a Kustomize user runs it, without a checkout: the documented `kubectl` lines, run as written, make
a Job from the installed CronJob's template that runs `nsscaler release` in the CronJob's own image, on the real
node, with the CronJob's ServiceAccount. Everything comes back running and nothing freezes it again."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from job.model.marks import ANNOTATION_RELEASED, DOMAIN
from tests.conftest import kubectl
from tests.node.conftest import NAMESPACE, job_result, run_cronjob_now, running_family, running_pods

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("installed")]
ROOT = Path(__file__).resolve().parents[2]
UNINSTALL = ROOT / "docs" / "operating" / "uninstall.md"


def documented_blocks(heading: str) -> list[str]:
    """The shell blocks under one heading of the uninstall page, as a reader copies them."""
    section = UNINSTALL.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    section = section.split("\n### ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def run_as_documented(plane: controlplane.ControlPlane, block: str) -> subprocess.CompletedProcess[str]:
    """A block of the page in bash, with `kubectl` (the control plane's own) first on PATH and the admin's
    credentials: what a platform admin's shell has."""
    bin_dir = Path(kubectl()).parent
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KUBECONFIG": str(plane.admin_kubeconfig)}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], capture_output=True, text=True, env=env,
                          check=False, timeout=660)


@pytest.fixture
def kept_installed(control_plane: controlplane.ControlPlane, api: AdminApi) -> Iterator[None]:
    """The other node tests need a CronJob that runs: afterwards, the page's "staying installed after all" lines,
    and a Job of the test's own removed. A line that fails fails the test."""
    suspended = api.get("CronJob", "nsscaler", NAMESPACE)["spec"].get("suspend", False)
    yield
    subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "-n", NAMESPACE, "delete", "job",
                    "nsscaler-release-manual", "--ignore-not-found", "--wait=false"], check=True, capture_output=True)
    (staying,) = re.findall(r"```sh\n(.*?)```", UNINSTALL.read_text().split("### Staying installed after all", 1)[1],
                            re.S)[:1]
    result = run_as_documented(control_plane, staying)
    assert result.returncode == 0, result.stdout + result.stderr
    api.patch("CronJob", "nsscaler", {"spec": {"suspend": suspended}}, NAMESPACE)


def test_the_documented_in_cluster_release_gives_everything_back_and_nothing_freezes_it_again(
        control_plane: controlplane.ControlPlane, api: AdminApi, prefix: str, kept_installed: None) -> None:
    running_family(api, prefix, {"a": {"d-web": 2, "s-db": 1}, "live": {"d-web": 1}})
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["live"]))
    frozen = run_cronjob_now(control_plane, api)
    assert frozen.exit_code == 0 and frozen.lines[-1]["frozen"] == 2, frozen.log
    wait_until(lambda: not api.pods(prefix + "a"), timeout=90, what=f"no Pods left in {prefix}a")

    create, wait_and_read = documented_blocks("In the cluster, without a checkout")
    made = run_as_documented(control_plane, create)
    assert made.returncode == 0, made.stdout + made.stderr
    released = job_result(control_plane, api, "nsscaler-release-manual", timeout=300)
    (pod,) = released.pods
    assert pod["spec"]["serviceAccountName"] == api.get("CronJob", "nsscaler", NAMESPACE)["spec"]["jobTemplate"][
        "spec"]["template"]["spec"]["serviceAccountName"]  # the CronJob's account, not an admin's
    assert pod["spec"]["containers"][0]["args"] == ["release"]
    assert released.exit_code == 0, released.log
    waited = run_as_documented(control_plane, wait_and_read)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "gave back" in waited.stdout, waited.stdout  # the page's "read what it says": the release's own summary

    assert api.replicas("Deployment", prefix + "a", "d-web") == 2
    assert api.replicas("StatefulSet", prefix + "a", "s-db") == 1
    for kind, name in (("Deployment", "d-web"), ("StatefulSet", "s-db")):
        marks = api.get(kind, name, prefix + "a")["metadata"].get("annotations") or {}
        assert not [key for key in marks if key.startswith(DOMAIN)], (kind, marks)  # the record went with it
    wait_until(lambda: running_pods(api, prefix + "a") == 3, timeout=120, what="3 Pods Running again")
    cronjob = api.get("CronJob", "nsscaler", NAMESPACE)
    assert cronjob["spec"]["suspend"] is True and ANNOTATION_RELEASED in cronjob["metadata"]["annotations"]

    # A run started from the released CronJob anyway (what a schedule would start) changes nothing.
    after = run_cronjob_now(control_plane, api)
    assert after.exit_code == 2 and "released" in after.log, after.log
    assert api.replicas("Deployment", prefix + "a", "d-web") == 2 and running_pods(api, prefix + "a") == 3
