"""The locks (tools/lock.py) and the SBOM generator (tools/sbom.py): a range changed without `make lock` is caught
in one line, a tampered lock is refused, .venv holds exactly the dev lock, the Dockerfile installs only from the
locks, and the SBOM lists every installed distribution in valid CycloneDX. The image itself: tests/node/test_image.py.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.utils import canonicalize_name

from job import __version__
from tests import sboms
from tools import lock, sbom

ROOT = Path(__file__).resolve().parents[2]
LOCKS = (lock.RUNTIME, lock.BUILD, lock.DEV)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of pyproject.toml and the three locks, to change at will."""
    for name in ("pyproject.toml", *LOCKS):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path.name}"
    path.write_text(text.replace(old, new, 1))


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.lock", "--check", "--root", str(root)], cwd=ROOT,
                          capture_output=True, text=True, check=False)


def test_the_committed_locks_match_pyproject() -> None:
    assert lock.problems() == []


@pytest.mark.parametrize(("old", "new"), [
    pytest.param('"pydantic>=2.7,<3"', '"pydantic>=2.7,<4"', id="runtime range widened"),
    pytest.param('"tenacity>=8.2,<10"', '"tenacity>=9,<10"', id="runtime range narrowed"),
    pytest.param('"tzdata>=2024.1",', '"tzdata>=2024.1",\n  "rich>=13",', id="runtime dependency added"),
    pytest.param('  "requests>=2.31,<3",\n', "", id="runtime dependency removed"),
    pytest.param('"pytest>=8,<10"', '"pytest>=8,<9"', id="test tool range"),
    pytest.param('"ruff>=0.8,<1"', '"ruff>=0.9,<1"', id="lint tool range"),
    pytest.param('"setuptools>=69"', '"setuptools>=70"', id="build backend range"),
    pytest.param('requires-python = ">=3.11"', 'requires-python = ">=3.12"', id="python range"),
])
def test_a_changed_range_makes_every_lock_stale_in_one_line(project: Path, old: str, new: str) -> None:
    _edit(project / "pyproject.toml", old, new)
    assert lock.problems(project) == [f"{', '.join(LOCKS)} are stale against pyproject.toml"]
    result = _check(project)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.rstrip().endswith("run `make lock`"), result.stderr


@pytest.mark.parametrize(("old", "new"), [
    pytest.param('"pykube-ng>=23.6,<24",\n  "pydantic>=2.7,<3",', '"pydantic>=2.7,<3",\n  "pykube-ng>=23.6,<24",',
                 id="dependencies reordered"),
    pytest.param('"pydantic>=2.7,<3"', '"pydantic >= 2.7, < 3"', id="spaces in a range"),
    pytest.param('"tenacity>=8.2,<10",', '"tenacity>=8.2,<10",  # retries', id="a comment"),
    pytest.param("line-length = 120", "line-length = 121", id="a tool's setting"),
])
def test_what_does_not_change_a_range_leaves_the_locks_fresh(project: Path, old: str, new: str) -> None:
    _edit(project / "pyproject.toml", old, new)
    assert lock.problems(project) == []
    assert _check(project).returncode == 0


def _pydantic_version() -> str:
    return lock.pins((ROOT / lock.RUNTIME).read_text())["pydantic"].version


def test_a_dev_pin_that_differs_from_the_image_is_refused(project: Path) -> None:
    version = _pydantic_version()
    _edit(project / lock.DEV, f"\npydantic=={version} ", "\npydantic==2.7.0 ")
    assert lock.problems(project) == [f"{lock.DEV} does not pin pydantic as {lock.RUNTIME} does ({version})"]


def test_an_entry_without_hashes_is_refused(project: Path) -> None:
    text = (project / lock.RUNTIME).read_text()
    entry = re.search(r"^urllib3==\S+ \\\n(    --hash=\S+( \\)?\n)+", text, re.MULTILINE)
    assert entry
    (project / lock.RUNTIME).write_text(text.replace(entry[0], entry[0].split(" \\")[0] + "\n"))
    found = lock.problems(project)
    assert f"{lock.RUNTIME}: urllib3 has no hash" in found
    assert f"{lock.DEV} does not pin urllib3 as {lock.RUNTIME} does" in " ".join(found)


@pytest.mark.parametrize("line", ["--index-url http://127.0.0.1:9/simple", "--extra-index-url http://127.0.0.1:9/",
                                  "--find-links ./wheels"])
def test_a_lock_naming_an_index_is_refused(project: Path, line: str) -> None:
    (project / lock.BUILD).write_text(line + "\n" + (project / lock.BUILD).read_text())
    assert lock.problems(project) == [f"{lock.BUILD} names a package index or a URL"]


def test_a_lock_compiled_from_other_inputs_is_named_alone(project: Path) -> None:
    _edit(project / lock.BUILD, "# inputs sha256: ", "# inputs sha256: 0")
    assert lock.problems(project) == [f"{lock.BUILD} is stale against pyproject.toml"]


def test_a_missing_lock_is_named(project: Path) -> None:
    (project / lock.BUILD).unlink()
    assert lock.problems(project) == [f"{lock.BUILD} is missing"]


def test_the_venv_holds_exactly_the_dev_lock() -> None:
    """What is tested is what ships: `make install` puts requirements-dev.lock in .venv, whose runtime pins are the
    image's (`lock.problems` compares them), plus nsscaler itself and the interpreter's own pip."""
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions(path=site)}
    assert installed.pop("nsscaler") == __version__
    installed.pop("pip")
    wanted = {name: pin.version for name, pin in lock.pins((ROOT / lock.DEV).read_text()).items()
              if not pin.marker or Marker(pin.marker).evaluate()}
    assert installed == wanted


def _run_instructions(dockerfile: str) -> list[str]:
    joined = re.sub(r"\\\n", " ", dockerfile)
    return [line for line in joined.splitlines() if line.startswith("RUN ")]


def test_the_dockerfile_installs_only_from_the_locks() -> None:
    """Every `pip install` in the image takes a lock with --require-hashes, or the project's own wheel, and never
    resolves (--no-deps); the wheel is built with the locked backend (--no-build-isolation)."""
    commands = [cmd.strip() for run in _run_instructions((ROOT / "Dockerfile").read_text()) for cmd in
                run.removeprefix("RUN ").split("&&")]
    installs = [cmd for cmd in commands if re.search(r"\bpip\b.*\binstall\b", cmd)]
    assert len(installs) == 3
    for cmd in installs:
        assert "--no-deps" in cmd.split()
        locked = re.search(r"--require-hashes .*-r (requirements(-build)?\.lock)$", cmd)
        assert locked or cmd.endswith("/wheels/*.whl"), cmd
    assert {name for cmd in installs for name in re.findall(r"-r (\S+)", cmd)} == {lock.RUNTIME, lock.BUILD}
    wheel = [cmd for cmd in commands if " wheel " in cmd]
    assert len(wheel) == 1 and {"--no-build-isolation", "--no-deps"} <= set(wheel[0].split())


def _sbom_of(*args: str) -> str:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "sbom.py"), *args], capture_output=True, text=True,
                          check=True).stdout


def test_the_sbom_lists_every_installed_distribution_in_valid_cyclonedx() -> None:
    text = _sbom_of()
    assert sboms.schema_error(text) is None
    bom = json.loads(text)
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions(path=site)}
    subject = bom["metadata"]["component"]
    assert (subject["name"], subject["version"], subject["type"]) == ("nsscaler", __version__, "application")
    assert sboms.packages(bom) | {"nsscaler": __version__} == installed
    assert all(c["purl"] == f"pkg:pypi/{c['name']}@{c['version']}" == c["bom-ref"] for c in bom["components"])


def test_the_sbom_is_reproducible_and_its_serial_follows_its_content() -> None:
    first, second = _sbom_of(), _sbom_of()
    assert first == second
    other = json.loads(_sbom_of("--subject", "pytest"))
    assert other["serialNumber"] != json.loads(first)["serialNumber"]
    assert sboms.schema_error(json.dumps(other)) is None


def _dist_info(site: Path, name: str, version: str, *headers: str) -> None:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text("\n".join(["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}",
                                                *headers]) + "\n")


def test_the_sbom_of_a_folder_names_versions_and_licences(tmp_path: Path) -> None:
    _dist_info(tmp_path, "nsscaler", "9.9.9")
    _dist_info(tmp_path, "Some_Lib", "1.0", "License-Expression: MIT OR Apache-2.0",
               "Classifier: License :: OSI Approved :: MIT License")
    _dist_info(tmp_path, "old-style", "2.0.post1", "Classifier: License :: OSI Approved :: BSD License",
               "Classifier: License :: OSI Approved :: MIT License", "Classifier: Programming Language :: Python")
    _dist_info(tmp_path, "unlicensed", "0.1", "Summary: no licence declared")
    bom = json.loads(_sbom_of("--path", str(tmp_path)))
    assert bom["metadata"]["component"]["version"] == "9.9.9"
    assert {c["name"]: (c["version"], c.get("licenses")) for c in bom["components"]} == {
        "some-lib": ("1.0", [{"expression": "MIT OR Apache-2.0"}]),
        "old-style": ("2.0.post1", [{"license": {"name": "BSD License"}}, {"license": {"name": "MIT License"}}]),
        "unlicensed": ("0.1", None),
    }
    assert sboms.schema_error(json.dumps(bom)) is None


def test_the_schema_check_catches_a_broken_sbom() -> None:
    bom = sbom.bom([], subject="nsscaler")
    bom["components"] = [{"type": "library", "version": "1.0"}]
    assert sboms.schema_error(json.dumps(bom)) == "'name' is a required property"
