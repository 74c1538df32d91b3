"""The image is reproducible and says what is inside it: the same commit, built twice from scratch with
the offline `buildah bud` the node tier uses (`--layers=false`: every step runs again, every locked file is
fetched and its hash checked again), is the same image (the same ID: every layer and the configuration the same,
which `make publish` relies on), holds the same packages, exactly requirements.lock's plus nsscaler's wheel —
no pip, no setuptools — and the SBOM in the image lists each of them with its version, in valid CycloneDX.
Nothing here needs the node; it is in this tier because building images needs root and buildah.
"""

from __future__ import annotations

import json
import os
import re
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images
from job import __version__
from tests import sboms
from tests.conftest import ROOT
from tests.node.conftest import kubectl_out
from tools import lock

pytestmark = pytest.mark.node


def _frozen(freeze: list[str]) -> tuple[dict[str, str], str]:
    """`pip freeze` lines -> (name -> version of the pinned ones, the line that names nsscaler)."""
    pinned = dict(line.split("==", 1) for line in freeze if "==" in line)
    others = [line for line in freeze if "==" not in line]
    assert len(others) == 1 and others[0].startswith("nsscaler @ "), others
    return {canonicalize_name(name): version for name, version in pinned.items()}, others[0]


def test_two_builds_of_the_image_hold_the_lock_and_nothing_else(tmp_path: Path, figures: list[str]) -> None:
    if os.geteuid() != 0:
        pytest.fail("building images needs root (buildah): run `make test-node` as root")
    log = tmp_path / "build.log"
    built, seconds, ids = [], [], []
    with images.build_lock():
        for tag in ("localhost/nsscaler-repro:first", "localhost/nsscaler-repro:second"):
            started = time.monotonic()
            images.build_project(log, tag)
            seconds.append(time.monotonic() - started)
            try:
                built.append(images.contents(tag, log=log))
                ids.append(images.image_id(tag, log=log))
            finally:
                images.remove_image(tag, log=log)
    first, second = built
    assert ids[0] == ids[1], "two builds of the same commit differ: not one image to publish"
    assert first.freeze == second.freeze
    assert first.bytecode_checked == [], f"every run would compile these again: {first.bytecode_checked[:10]}"
    assert first.sbom == second.sbom, "the SBOM of the same commit changed between builds"
    assert images.sbom_file().read_bytes() == second.sbom, "the cache's SBOM is not the image's"

    locked = {name: pin.version for name, pin in lock.pins((ROOT / lock.RUNTIME).read_text()).items()}
    pinned, own = _frozen(first.freeze)
    assert pinned == locked
    assert re.fullmatch(rf"nsscaler @ file:///wheels/nsscaler-{re.escape(__version__)}-py3-none-any\.whl", own), own

    assert sboms.schema_error(first.sbom.decode()) is None
    bom = json.loads(first.sbom)
    assert sboms.packages(bom) == pinned
    assert (bom["metadata"]["component"]["name"], bom["metadata"]["component"]["version"]) == ("nsscaler", __version__)
    figures.append(f"image built twice from scratch in {seconds[0]:.0f} s and {seconds[1]:.0f} s: the same "
                   f"{len(pinned)} locked packages + nsscaler {__version__}, SBOM {len(first.sbom)} bytes, identical; "
                   f"the same image {ids[0][:19]}")


@pytest.mark.usefixtures("installed")
def test_the_image_on_the_node_runs_the_python_the_suite_runs_on(
        control_plane: controlplane.ControlPlane, api: AdminApi, figures: list[str]) -> None:
    """The image the node tier runs is the shipped Dockerfile's (Debian's slim base, Debian's python3.11 at the
    Dockerfile's pinned package version), and the unit and integration tiers run on that very interpreter: the
    version string Python prints (release, build date, compiler) is the same inside the container on the node and
    in `.venv`, which runs this test."""
    namespace = f"py-{time.monotonic_ns() % 10**9}"
    api.create(builders.namespace(namespace))
    probe = ("import json, sys, sysconfig; "
             "print(json.dumps({'version': sys.version, 'prefix': sys.base_prefix, "
             "'multiarch': sysconfig.get_config_var('MULTIARCH')}))")
    pod = builders.pod(namespace, "python")
    pod["spec"] = {"restartPolicy": "Never", "containers": [{
        "name": "python", "image": images.project_image(), "imagePullPolicy": "Never",
        "command": ["python", "-c", probe],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}}]}
    try:
        api.create(pod)
        wait_until(lambda: api.get("Pod", "python", namespace).get("status", {}).get("phase") == "Succeeded",
                   timeout=120, what="the image's Python to print its version on the node")
        inside = json.loads(kubectl_out(control_plane, "-n", namespace, "logs", "python"))
    finally:
        api.delete("Namespace", namespace)
    here = {"version": sys.version, "prefix": sys.base_prefix, "multiarch": sysconfig.get_config_var("MULTIARCH")}
    figures.append(f"Python in the image on the node: {inside['version']!r}; in .venv: {here['version']!r}")
    assert inside == here, f"the image runs {inside}, the suite {here}"
    assert here["prefix"] == "/usr", "`.venv` must be made from Debian's python3.11 (`make python`), not another build"
