"""The image is reproducible and says what is inside it: the same commit, built twice from scratch with
the offline `buildah bud` the node tier uses (`--layers=false`: every step runs again, every locked file is
fetched and its hash checked again), holds the same packages, exactly requirements.lock's plus nsscaler's wheel —
no pip, no setuptools — and the SBOM in the image lists each of them with its version, in valid CycloneDX.
Nothing here needs the node; it is in this tier because building images needs root and buildah.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from devtools.cluster import images
from job import __version__
from tests import sboms
from tests.conftest import ROOT
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
    built, seconds = [], []
    with images.build_lock():
        for tag in ("localhost/nsscaler-repro:first", "localhost/nsscaler-repro:second"):
            started = time.monotonic()
            images.build_project(log, tag)
            seconds.append(time.monotonic() - started)
            try:
                built.append(images.contents(tag, log=log))
            finally:
                images.remove_image(tag, log=log)
    first, second = built
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
                   f"{len(pinned)} locked packages + nsscaler {__version__}, SBOM {len(first.sbom)} bytes, identical")
