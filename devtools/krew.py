"""The kubectl plugin for krew: `kubectl-nsscaler` as one file that needs only a Python, its archive, and the
krew manifest that points at it (`make krew`).

The file is a zipapp: the `job` package of the working tree and every distribution the plugin imports, taken from
`.venv` as installed from the lock file. pydantic's core is a compiled module, which Python does not load from
inside a zip, so on its first start the file unpacks its libraries once into a folder of the user's cache named by
the build (`~/.cache/kubectl-nsscaler/<build>`), and runs from there afterwards. Being compiled, that module fixes
the platform and the Python: the build is for the Python and the machine it runs on (CPython 3.11, Linux x86-64
here), which the manifest's selector and the file's own check say.

Everything written is reproducible: sorted entries, fixed times and modes, so the same tree gives the same SHA-256.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import platform
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import yaml
from packaging.requirements import Requirement

from job import __version__

ROOT = Path(__file__).resolve().parent.parent
NAME = "kubectl-nsscaler"
#: the waker's libraries: the plugin never imports them
NOT_FOR_THE_PLUGIN = frozenset({"aiohttp", "prometheus-client"})
#: zip entries' time (the earliest a zip can hold) and the archive's
FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
FIXED_MTIME = 315532800
#: krew's names for this machine
KREW_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}

BOOTSTRAP = '''\
"""kubectl-nsscaler {version} as one file: unpacks its libraries once, then runs the plugin with them alone."""
import os
import sys
import zipfile

BUILD = "{build}"
PYTHON = {python!r}


def unpacked():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    target = os.path.join(cache, "kubectl-nsscaler", BUILD)
    if not os.path.isdir(target):
        partial = f"{{target}}.{{os.getpid()}}.partial"
        with zipfile.ZipFile(os.path.dirname(os.path.abspath(__file__))) as archive:
            archive.extractall(partial, [n for n in archive.namelist() if n.startswith("site/")])
        try:
            os.replace(os.path.join(partial, "site"), target)
        except OSError:  # another start unpacked it first
            pass
        os.rmdir(partial) if os.path.isdir(partial) and not os.listdir(partial) else None
    return target


if sys.version_info[:2] != PYTHON:
    sys.stderr.write(f"kubectl nsscaler: this build needs Python {{PYTHON[0]}}.{{PYTHON[1]}} as python3 on PATH, "
                     f"found {{sys.version.split()[0]}}: install the plugin with pipx instead\\n")
    sys.exit(2)
# only its own libraries: never those of the Python it runs on, whatever their versions
import site  # noqa: E402

others = {{*site.getsitepackages(), site.getusersitepackages()}}
sys.path[:] = [unpacked(), *(p for p in sys.path if p not in others)]
from job.plugin.cli import main  # noqa: E402

sys.exit(main())
'''


def plugin_distributions() -> list[metadata.Distribution]:
    """nsscaler's runtime dependencies as installed, with theirs, but the waker's."""
    wanted, found = list(metadata.requires("nsscaler") or []), {}
    while wanted:
        req = Requirement(wanted.pop())
        name = req.name.lower().replace("_", "-")
        if name in found or name in NOT_FOR_THE_PLUGIN or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue  # an extra's requirement (the tests', the linters') is not the plugin's
        found[name] = metadata.distribution(name)
        wanted += found[name].requires or []
    return [found[n] for n in sorted(found)]


def site_files() -> dict[str, Path]:
    """Every file the plugin's libraries and the `job` package are made of: name in the zip -> file."""
    files = {f"site/{p.relative_to(ROOT).as_posix()}": p for p in sorted((ROOT / "job").rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    for dist in plugin_distributions():
        for entry in dist.files or []:
            path = Path(str(dist.locate_file(entry)))
            if "__pycache__" in entry.parts or entry.suffix == ".pyc" or entry.parts[0].startswith(".."):
                continue
            files[f"site/{entry.as_posix()}"] = path
    return dict(sorted(files.items()))


def _zip_entry(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, FIXED_ZIP_TIME)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def zipapp() -> bytes:
    """The one file: a shebang, then the zip (Python runs a zip's `__main__.py`)."""
    files = site_files()
    build = hashlib.sha256()
    for name, path in files.items():
        build.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    main = BOOTSTRAP.format(version=__version__, build=f"{__version__}-{build.hexdigest()[:16]}",
                            python=tuple(sys.version_info[:2]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        _zip_entry(archive, "__main__.py", main.encode(), 0o644)
        for name, path in files.items():
            _zip_entry(archive, name, path.read_bytes(), 0o755 if path.suffix == ".so" else 0o644)
    return b"#!/usr/bin/env python3\n" + out.getvalue()


def archive_bytes(plugin: bytes) -> bytes:
    """The tar.gz krew unpacks: the plugin and the licence."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in ((NAME, plugin, 0o755), ("LICENSE", (ROOT / "LICENSE").read_bytes(), 0o644)):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, FIXED_MTIME
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def platform_labels() -> dict[str, str]:
    machine = platform.machine()
    return {"os": sys.platform, "arch": KREW_ARCH.get(machine, machine)}


def archive_name() -> str:
    labels = platform_labels()
    return f"{NAME}-{__version__}-{labels['os']}-{labels['arch']}.tar.gz"


def manifest(url: str, sha256: str) -> dict[str, object]:
    """krew's Plugin manifest for the archive at `url`."""
    major, minor = sys.version_info[:2]
    return {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2", "kind": "Plugin",
        "metadata": {"name": "nsscaler"},
        "spec": {
            "version": f"v{__version__}",
            "shortDescription": "Wake a namespace nsscaler holds, and see how a namespace or a policy stands",
            "description": "Wakes a namespace nsscaler holds for a while, on the record (a Wake), ends your wake, "
                           "and says how a namespace or an NSScaler policy stands, with your own permissions.",
            "caveats": f"Needs python3 {major}.{minor} on PATH. On its first start the plugin unpacks its "
                       "libraries into ~/.cache/kubectl-nsscaler.",
            "platforms": [{"selector": {"matchLabels": platform_labels()}, "uri": url, "sha256": sha256,
                           "bin": NAME, "files": [{"from": NAME, "to": "."}, {"from": "LICENSE", "to": "."}]}],
        },
    }


def build(out: Path, base_url: str) -> tuple[Path, Path]:
    """Write the archive and `nsscaler.yaml` (its URL: `base_url` + the archive's name) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    data = archive_bytes(zipapp())
    archive = out / archive_name()
    archive.write_bytes(data)
    plugin = out / "nsscaler.yaml"
    plugin.write_text(yaml.safe_dump(manifest(base_url.rstrip("/") + "/" + archive.name,
                                              hashlib.sha256(data).hexdigest()), sort_keys=False))
    return archive, plugin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.krew", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "krew", help="folder to write (dist/krew)")
    parser.add_argument("--url", default="", help="where the archive will be served from, without its name")
    args = parser.parse_args(argv)
    if not args.url.startswith(("https://", "http://")):
        print("krew: say where the archive will be served from: make plugin-archive KREW_URL=https://.../v"
              f"{__version__}/ (krew downloads it from there and checks its SHA-256)", file=sys.stderr)
        return 2
    archive, plugin = build(args.out, args.url)
    print(f"{archive}\n{plugin}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
