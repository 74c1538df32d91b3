"""The lock files: compiled from pyproject.toml's ranges by `make lock`, checked for staleness by `make lint`.

Three locks, each installable with `pip install --require-hashes --no-deps -r` and universal (any platform,
CPython >= requires-python), so the same file serves the image (Debian's python3.11 on Debian's slim
base, the node tier's image built from the same Dockerfile) and `.venv` (the same Debian python3.11, `make python`):

- `requirements.lock`: the runtime dependencies, exactly what the image's venv holds besides nsscaler itself;
- `requirements-build.lock`: pyproject's `[build-system] requires`, what the wheel is built with;
- `requirements-dev.lock`: what `make install` puts in `.venv`: the two above plus the test and lint extras, each
  package shared with them pinned to the same version (compiled with both as constraints).

Each lock starts with the digest of the inputs it was compiled from (the ranges, not their formatting). The check
recomputes it from pyproject.toml without any resolver or network, so a range changed without `make lock` fails
`make lint` in one line. The check also refuses a lock whose pins disagree between files, an entry without a hash
or a line naming a package index.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
RUNTIME, BUILD, DEV = "requirements.lock", "requirements-build.lock", "requirements-dev.lock"
EXTRAS = ("test", "lint")
_DIGEST = re.compile(r"^# inputs sha256: ([0-9a-f]{64})$", re.MULTILINE)


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: frozenset[str]
    marker: str = ""  # the environment marker, empty when the package applies everywhere


def inputs(pyproject: dict[str, object]) -> dict[str, list[str]]:
    """What the locks are compiled from, normalised: order, spacing and comments do not count; a range does."""
    project = pyproject["project"]
    build_system = pyproject["build-system"]
    assert isinstance(project, dict) and isinstance(build_system, dict)
    extras = project.get("optional-dependencies", {})

    def normal(specs: list[str]) -> list[str]:
        return sorted(str(Requirement(spec)) for spec in specs)

    found = {"requires-python": [str(project.get("requires-python", ""))],
             "dependencies": normal(project.get("dependencies", [])),
             "build-system": normal(build_system.get("requires", []))}
    found |= {f"extra:{name}": normal(extras.get(name, [])) for name in EXTRAS}
    return found


def digest(pyproject: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(inputs(pyproject), sort_keys=True).encode()).hexdigest()


def read_pyproject(root: Path = ROOT) -> dict[str, object]:
    return tomllib.loads((root / "pyproject.toml").read_text())


def pins(text: str) -> dict[str, Pin]:
    """A lock's entries: canonical name -> version, sha256 hashes and environment marker."""
    found: dict[str, Pin] = {}
    for line in re.sub(r"\\\n", " ", text).splitlines():
        entry = line.strip()
        if not entry or entry.startswith(("#", "-")):  # comments; options (an index: `problems` refuses those)
            continue
        match = re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)\s*(?:;\s*(.*?))?\s*(?:--hash|$)", entry)
        if not match:
            raise ValueError(f"not a pinned requirement: {entry[:80]!r}")
        hashes = frozenset(re.findall(r"--hash=sha256:([0-9a-f]{64})", entry))
        found[canonicalize_name(match[1])] = Pin(match[2], hashes, match[3] or "")
    return found


def problems(root: Path = ROOT) -> list[str]:
    """Why the locks cannot be used as they are; empty when they match pyproject.toml and each other."""
    expected = digest(read_pyproject(root))
    texts: dict[str, str] = {}
    found: list[str] = []
    stale: list[str] = []
    for name in (RUNTIME, BUILD, DEV):
        path = root / name
        if not path.is_file():
            found.append(f"{name} is missing")
            continue
        texts[name] = path.read_text()
        stamped = _DIGEST.search(texts[name])
        if not stamped or stamped[1] != expected:
            stale.append(name)
        if re.search(r"^\s*(-i|--index-url|--extra-index-url|-f|--find-links)\b|://", texts[name], re.MULTILINE):
            found.append(f"{name} names a package index or a URL")
    if stale:
        found.insert(0, f"{', '.join(stale)} {'is' if len(stale) == 1 else 'are'} stale against pyproject.toml")
    parsed: dict[str, dict[str, Pin]] = {}
    for name, text in texts.items():
        try:
            parsed[name] = pins(text)
        except ValueError as exc:
            found.append(f"{name}: {exc}")
            continue
        found += [f"{name}: {package} has no hash" for package, pin in parsed[name].items() if not pin.hashes]
    dev = parsed.get(DEV, {})
    for name in (RUNTIME, BUILD):
        for package, pin in parsed.get(name, {}).items():
            if dev.get(package) != pin:
                found.append(f"{DEV} does not pin {package} as {name} does ({pin.version})")
    return found


def verdict(root: Path = ROOT) -> str | None:
    """`make lint`'s one line when the locks cannot be used as they are, else None."""
    found = problems(root)
    return f"{'; '.join(found)}: run `make lock`" if found else None


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.exists() else shutil.which("uv")
    if not found:
        raise SystemExit("uv is not installed: run `make install`")
    return found


def _compile(root: Path, output: str, sources: list[str], *, stdin: str = "", upgrade: bool, title: str,
             stamp: str) -> None:
    python = re.search(r"(\d+\.\d+)", inputs(read_pyproject(root))["requires-python"][0])
    path, draft = root / output, root / f".{output}.new"
    # uv keeps the pins of the file it writes to where the ranges allow: it writes to a copy of the lock, and the
    # lock is replaced only if it changes (an unchanged lock keeps its mtime, so .venv is not rebuilt for nothing).
    draft.write_text(path.read_text() if path.exists() else "")
    try:
        cmd = [_uv(), "pip", "compile", *sources, "--universal", "--generate-hashes", "--no-header", "--quiet",
               "--python-version", python[1] if python else "3.11", "-o", draft.name,
               *(["--upgrade"] if upgrade else [])]
        subprocess.run(cmd, cwd=root, input=stdin, text=True, check=True)
        header = (f"# {title}\n# Written by `make lock` (uv pip compile --universal --generate-hashes) from"
                  f" pyproject.toml; do not edit.\n# inputs sha256: {stamp}\n")
        text = header + draft.read_text()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    finally:
        draft.unlink(missing_ok=True)


def compile_locks(root: Path = ROOT, *, upgrade: bool = False) -> None:
    """Write the three locks. An existing lock's pins are kept where the ranges still allow them, unless
    `upgrade`: then every package moves to the newest version its range allows."""
    pyproject = read_pyproject(root)
    stamp = digest(pyproject)
    build_requires = "\n".join(inputs(pyproject)["build-system"]) + "\n"
    _compile(root, RUNTIME, ["pyproject.toml"], upgrade=upgrade, stamp=stamp,
             title="nsscaler's runtime dependencies: exactly what the image installs besides nsscaler's wheel.")
    _compile(root, BUILD, ["-"], stdin=build_requires, upgrade=upgrade, stamp=stamp,
             title="The build backend the wheel is built with (pyproject.toml's [build-system] requires).")
    extras = [arg for name in EXTRAS for arg in ("--extra", name)]
    _compile(root, DEV, ["pyproject.toml", "-", *extras, "-c", RUNTIME, "-c", BUILD], stdin=build_requires,
             upgrade=upgrade, stamp=stamp,
             title=f".venv's packages (make install): {RUNTIME} and {BUILD} at the same pins, plus the test and"
                   " lint tools.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the locks against pyproject.toml")
    parser.add_argument("--upgrade", action="store_true", help="move every pin to the newest its range allows")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project's folder (default: this checkout)")
    args = parser.parse_args(argv)
    if not args.check:
        compile_locks(args.root, upgrade=args.upgrade)
    line = verdict(args.root)
    if line:
        print(line, file=sys.stderr)
    return 1 if line else 0


if __name__ == "__main__":
    raise SystemExit(main())
