"""Keep a release (`make keep-release`): the artifacts of the version in job/__init__.py, kept in the repository
so that every later version is tested against what that one really shipped.

Into `tests/fixtures/releases/<version>/` go:
- `nsscaler-<version>.tgz`: the chart package, `helm package` of charts/nsscaler at this commit;
- `nsscaler-<version>-py3-none-any.whl`: the wheel, built from this commit's files (`git archive HEAD`), which
  the upgrade test runs as that version's `nsscaler` (a pure wheel is importable as it is);
- `records.yaml`: one workload of every kind as this version's freeze leaves it, written by this version on a real
  control plane (tests/integration/test_record_fixtures.py, with `WRITE_RECORD_FIXTURES` naming the file);
- `release.json`: the version, the commit, and each file's SHA-256 (a unit test checks the files against it, so a
  kept release is never edited afterwards).

A release is kept once: an existing folder is refused, and so is a working tree with changes (what is kept must be
what the commit holds). CHANGELOG.md must date the version (`## [<version>] - <date>`): a version still
"Unreleased" is not kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from devtools import chart
from devtools.cluster import tools
from job import __version__

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ROOT / "tests" / "fixtures" / "releases"
CHANGELOG = ROOT / "CHANGELOG.md"
MANIFEST = "release.json"
RECORDS = "records.yaml"
#: the heading of one version in CHANGELOG.md: `## [0.1.0] - 2026-12-06` or `## [0.2.0] - Unreleased`
HEADING = re.compile(r"^## \[(?P<version>\d+\.\d+\.\d+)\] - (?P<when>\d{4}-\d{2}-\d{2}|Unreleased)$", re.MULTILINE)


def chart_package(version: str) -> str:
    return f"nsscaler-{version}.tgz"


def wheel(version: str) -> str:
    return f"nsscaler-{version}-py3-none-any.whl"


def changelog_versions(text: str | None = None) -> dict[str, str]:
    """version -> its date, or "Unreleased", in the order CHANGELOG.md lists them (newest first)."""
    text = CHANGELOG.read_text() if text is None else text
    return {m["version"]: m["when"] for m in HEADING.finditer(text)}


def kept() -> list[str]:
    """The versions kept under tests/fixtures/releases/, oldest first."""
    found = [p.name for p in RELEASES.iterdir() if (p / MANIFEST).exists()] if RELEASES.exists() else []
    return sorted(found, key=lambda v: tuple(int(n) for n in v.split(".")))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _say(message: str) -> None:
    print(f"[keep-release] {message}", file=sys.stderr, flush=True)


def _build_wheel(dest: Path) -> None:
    """The wheel of this commit's files, never of the working tree's leftovers (a stale build/ folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", str(dest), str(src)], check=True)


def _write_records(dest: Path) -> None:
    """This version's freeze of every kind, on a control plane of its own (the test's session plane)."""
    env = {**os.environ, "WRITE_RECORD_FIXTURES": str(dest / RECORDS)}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "tests/integration/test_record_fixtures.py", "-k", "this_version_writes_a_record_on_every_kind"],
                   cwd=ROOT, env=env, check=True)


def keep(version: str = __version__) -> Path:
    dest = RELEASES / version
    if dest.exists():
        raise SystemExit(f"{dest.relative_to(ROOT)} exists: a kept release is never written again")
    if changelog_versions().get(version, "Unreleased") == "Unreleased":
        raise SystemExit(f"CHANGELOG.md does not date {version} (`## [{version}] - <YYYY-MM-DD>`): not released")
    if _git("status", "--porcelain"):
        raise SystemExit("the working tree has changes: commit them first (a kept release is what a commit holds)")
    if chart.stale(chart.files()):
        raise SystemExit("charts/nsscaler is stale: run `make chart` and commit")
    dest.mkdir(parents=True)
    try:
        _say(f"chart package of {version}")
        subprocess.run([str(tools.ensure_tool("helm")), "package", str(ROOT / "charts" / "nsscaler"), "-d",
                        str(dest)], check=True, capture_output=True)
        _say(f"wheel of {version}")
        _build_wheel(dest)
        _say(f"records of {version} (a control plane, one run)")
        _write_records(dest)
        files = sorted(p.name for p in dest.iterdir())
        assert files == sorted([chart_package(version), wheel(version), RECORDS]), files
        manifest = {"version": version, "commit": _git("rev-parse", "HEAD"),
                    "files": {name: sha256(dest / name) for name in files}}
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(dest)
        raise
    _say(f"kept in {dest.relative_to(ROOT)}: {', '.join(files)}; commit it, then tag it: git tag v{version}")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    keep()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
