"""The node's container images, built here without any registry: nothing is ever pulled.

- Debian's slim base from Debian's packages (mmdebstrap, variant minbase: no Python in it), tagged as the
  Dockerfile's `FROM`, so the project's own Dockerfile builds unchanged with `buildah bud`: its `RUN apt-get` installs
  the same pinned python3.11 packages the shipped image gets, and its `RUN pip` fetches the locked files from the
  package index, as with Docker, and checks their hashes;
- nsscaler's image, from that Dockerfile, every file's time and its creation date set to the time of the last
  commit that changed its inputs (`--timestamp`, `source_date_epoch`): built twice, it is the same image
  (tests/node/test_image.py), which is what `make publish` pushes; its SBOM is copied out of the image next to
  its archive (`nsscaler-<version>-<digest>.cdx.json`);
- a workload image: Debian's static busybox, for Deployments and StatefulSets whose Pods really run;
- the sandbox (pause) image, compiled from `build/pause/linux/pause.c` of the k8s.io/kubernetes module.

Each image is saved as a docker-archive under `~/.cache/nsscaler/images/`, keyed by what it is built from, so a
second run rebuilds nothing; containerd imports the archives into its `k8s.io` namespace at every node start.
Buildah keeps its own storage there too (vfs driver: no mounts are left behind). Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devtools.cluster import build, versions

ROOT = Path(__file__).resolve().parents[2]
SUITE = "bookworm"
PAUSE_IMAGE = f"localhost/nsscaler/pause:{versions.PAUSE_VERSION}"
#: what the project image is built from: a change to any of these builds it again
_PROJECT_INPUTS = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "requirements.lock",
                   "requirements-build.lock", "tools/sbom.py", "job")
#: where the Dockerfile puts the image's SBOM (docs/contributing/dependencies.md documents it)
SBOM_PATH = "/usr/share/nsscaler/sbom.cdx.json"


def cache_dir() -> Path:
    return versions.cache_root() / "images"


def _buildah(*args: str, log: Path, cwd: Path | None = None) -> str:
    storage = cache_dir() / "storage"
    cmd = ["buildah", "--root", str(storage / "root"), "--runroot", str(storage / "run"),
           "--storage-driver", "vfs", *args]
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    with log.open("a") as out:
        out.write(result.stdout + result.stderr)
    if result.returncode:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {result.returncode}); log {log}:\n{result.stderr[-3000:]}")
    return result.stdout.strip()


def _progress(message: str) -> None:
    print(f"[images {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def dockerfile_base() -> str:
    """The Dockerfile's first `FROM` image: the name the Debian base is tagged as."""
    match = re.search(r"^FROM\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert match, "the Dockerfile has no FROM"
    return match[1]


def _from_scratch(name: str, *, files: dict[str, Path], config: list[str], log: Path) -> None:
    """An image of a few files: `files` maps a path in the image to a file here."""
    ctr = _buildah("from", "scratch", log=log)
    try:
        for dest, src in files.items():
            _buildah("add", "--chmod", "0755", ctr, str(src), dest, log=log)
        _buildah("config", *config, ctr, log=log)
        _buildah("commit", "--quiet", ctr, name, log=log)
    finally:
        _buildah("rm", ctr, log=log)


def _save(name: str, archive: Path, *, log: Path) -> None:
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    _buildah("push", "--quiet", name, f"docker-archive:{partial}:{name}", log=log)
    partial.replace(archive)


def _build_base(log: Path) -> None:
    name = dockerfile_base()
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        _progress(f"mmdebstrap {SUITE}, minbase (from this host's apt sources)")
        sources = [str(p) for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]
        sources += [p for p in ["/etc/apt/sources.list"] if Path(p).is_file() and Path(p).read_text().strip()]
        with log.open("a") as out:
            subprocess.run(["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
                            "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
                            "--dpkgopt=path-exclude=/usr/share/locale/*", *_trust_hooks(), SUITE, str(rootfs),
                            *sources],
                           stdout=out, stderr=subprocess.STDOUT, check=True)
        ctr = _buildah("from", "scratch", log=log)
        try:
            _buildah("add", ctr, str(rootfs), "/", log=log)
            _buildah("config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     "--env", "LANG=C.UTF-8", "--cmd", "bash", ctr, log=log)
            _buildah("commit", "--quiet", ctr, name, log=log)
        finally:
            _buildah("rm", ctr, log=log)


def _trust_hooks() -> list[str]:
    """The base image carries the certificate authorities this host added locally (as a company's base image
    would), where Debian's ca-certificates looks for them: when the Dockerfile installs that package, its own
    `update-ca-certificates` adds them, and `RUN pip` reaches the package index through whatever TLS inspection the
    host's network does. Nothing else differs from Debian's slim base."""
    local = Path("/usr/local/share/ca-certificates")
    if not any(local.glob("*.crt")):
        return []
    return [f'--customize-hook=mkdir -p "$1{local}"',
            f"--customize-hook=copy-in {' '.join(str(p) for p in sorted(local.glob('*.crt')))} {local}"]


def upstream_version(debian_version: str) -> str:
    """An image tag from a Debian package version: `1:1.35.0-4+b3` -> `1.35.0` (no epoch, no revision)."""
    return re.sub(r"^\d+:|[-+~].*$", "", debian_version)


def _debian_version(package: str) -> str:
    return upstream_version(subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                                           text=True, check=True).stdout)


def busybox_image() -> str:
    return f"localhost/nsscaler/busybox:{_debian_version('busybox-static')}"


def project_image() -> str:
    from_init = re.search(r'__version__ = "(.+)"', (ROOT / "job" / "__init__.py").read_text())
    assert from_init
    return f"localhost/nsscaler:{from_init[1]}"


def _project_digest() -> str:
    digest = hashlib.sha256()
    for name in _PROJECT_INPUTS:
        path = ROOT / name
        for file in sorted([path] if path.is_file() else path.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(ROOT)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:12]


def _build_pause(log: Path, work: Path) -> None:
    source = build.kubernetes_source() / "build" / "pause" / "linux" / "pause.c"
    binary = work / "pause"
    subprocess.run(["gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{versions.PAUSE_VERSION}",
                    "-o", str(binary), str(source)], check=True, capture_output=True)
    subprocess.run(["strip", str(binary)], check=True)
    _from_scratch(PAUSE_IMAGE, files={"/pause": binary},
                  config=["--entrypoint", '["/pause"]', "--user", "65535:65535"], log=log)


def _build_busybox(log: Path, _work: Path) -> None:
    _from_scratch(busybox_image(), files={"/bin/busybox": Path("/usr/bin/busybox")},
                  config=["--entrypoint", '["/bin/busybox"]', "--cmd", "sh", "--env", "PATH=/bin"], log=log)


def source_date_epoch() -> str:
    """The time every file and the image's creation date are set to (`buildah bud --timestamp`), so that the
    same inputs give the same image: `SOURCE_DATE_EPOCH` if set, else the time of the last commit that changed
    what the image is built from (a later commit elsewhere builds the same image)."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit():
        return os.environ["SOURCE_DATE_EPOCH"]
    result = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct", "--", *_PROJECT_INPUTS],
                            capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip().isdigit() else "0"


def build_project(log: Path, tag: str | None = None) -> None:
    """`buildah bud` of the Dockerfile as `tag` (default: the project image), every step run again (no layer
    cache); the image's SBOM is then copied next to the project's archive in the cache."""
    base = dockerfile_base()
    if not _buildah("images", "--quiet", "--filter", f"reference={base}", log=log):
        _build_base(log)
    _progress(f"buildah bud of the Dockerfile (FROM {base}, built here)")
    # chroot isolation and the host network: no CNI of buildah's own, and `RUN pip` reaches the index.
    _buildah("bud", "--pull-never", "--isolation", "chroot", "--network", "host", "--layers=false",
             "--timestamp", source_date_epoch(), "-t", tag or project_image(), "-f", "Dockerfile", ".", log=log,
             cwd=ROOT)
    sbom = sbom_file()
    sbom.write_bytes(contents(tag or project_image(), log=log).sbom)
    _progress(f"its SBOM: {sbom}")


@dataclass(frozen=True)
class Contents:
    """What an image's Python environment holds: `pip freeze --all` of its venv's site-packages (pip, setuptools
    and wheel included if there), its SBOM, and its modules whose bytecode a run would not use as it is
    (`bytecode_checked`)."""

    freeze: list[str]
    sbom: bytes
    bytecode_checked: list[str]


def bytecode_checked(site: Path) -> list[str]:
    """The modules under `site` (relative paths) that have no bytecode, or bytecode checked against the source when
    imported (a timestamp, or a checked hash): in an image whose files' modification times its layers round, and
    which sets PYTHONDONTWRITEBYTECODE, each such module may be compiled again by every run. Only bytecode with an
    unchecked hash (`compileall -f --invalidation-mode unchecked-hash`) is used as it is."""
    tag = "cpython-" + site.parent.name.removeprefix("python").replace(".", "")  # lib/python3.11: the image's own
    found = []
    for source in sorted(site.rglob("*.py")):
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        flags = int.from_bytes(compiled.read_bytes()[4:8], "little") if compiled.exists() else None
        if flags != 1:  # bit 0: hash-based; bit 1: check the source
            found.append(str(source.relative_to(site)))
    return found


def contents(image: str, *, log: Path) -> Contents:
    """Read an image's files without running it: its root filesystem mounted (vfs: a plain folder), `pip freeze
    --all --path` of the venv's site-packages by this interpreter's pip, and the SBOM file."""
    ctr = _buildah("from", "--pull=never", image, log=log)
    try:
        rootfs = Path(_buildah("mount", ctr, log=log))
        try:
            sites = sorted(rootfs.glob("opt/nsscaler/lib/python3*/site-packages"))
            assert len(sites) == 1, f"{image}: expected one site-packages in /opt/nsscaler, found {sites}"
            freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--path", str(sites[0])],
                                    capture_output=True, text=True, check=True).stdout.splitlines()
            return Contents(freeze=freeze, sbom=(rootfs / SBOM_PATH.lstrip("/")).read_bytes(),
                            bytecode_checked=bytecode_checked(sites[0]))
        finally:
            _buildah("umount", ctr, log=log)
    finally:
        _buildah("rm", ctr, log=log)


def image_id(image: str, *, log: Path) -> str:
    """The image's ID: the digest of its configuration, which names every layer's digest (and the creation time
    `--timestamp` sets): two builds with the same ID hold the same bytes."""
    return _buildah("images", "--quiet", "--no-trunc", image, log=log)


def remove_image(image: str, *, log: Path) -> None:
    _buildah("rmi", image, log=log)


def sbom_file() -> Path:
    """The project image's SBOM in the cache, beside its archive (same name, `.cdx.json`)."""
    return archives()[project_image()].with_suffix(".cdx.json")


def archives() -> dict[str, Path]:
    """Image name -> its docker-archive in the cache (which may not exist yet)."""
    folder = cache_dir()
    return {
        PAUSE_IMAGE: folder / f"pause-{versions.PAUSE_VERSION}.tar",
        busybox_image(): folder / f"busybox-{busybox_image().rsplit(':', 1)[1]}.tar",
        project_image(): folder / f"nsscaler-{project_image().rsplit(':', 1)[1]}-{_project_digest()}.tar",
    }


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Held while images are built into the shared cache (another checkout may build there too)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with (cache_dir() / "images.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build_one(name: str, archive: Path) -> None:
    """Build one of the images into its archive; the caller holds `build_lock`."""
    folder = cache_dir()
    log = folder / "build.log"
    builders = {PAUSE_IMAGE: _build_pause, busybox_image(): _build_busybox}
    started = time.monotonic()
    _progress(f"building {name} (log: {log})")
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        if name in builders:
            builders[name](log, Path(tmp))
        else:
            build_project(log)
            version = name.rsplit(':', 1)[1]
            for stale in {*folder.glob(f"nsscaler-{version}-*.tar"),
                          *folder.glob(f"nsscaler-{version}-*.cdx.json")} - {archive, sbom_file()}:
                stale.unlink()
    _save(name, archive, log=log)
    _progress(f"{name} saved to {archive} in {time.monotonic() - started:.0f}s")


def ensure_project_image(keep_in: Path) -> tuple[Path, Path]:
    """The project image's archive and its SBOM, built only if the cache lacks them, hard-linked into `keep_in`
    under the build lock: what `make publish` pushes. (Another checkout's build of the same version replaces the
    cache's archive; the links keep this one's.)"""
    archive = archives()[project_image()]
    cache_dir().mkdir(parents=True, exist_ok=True)
    keep_in.mkdir(parents=True, exist_ok=True)
    with build_lock():
        if not archive.exists():
            _build_one(project_image(), archive)
        kept = []
        for source in (archive, sbom_file()):
            link = keep_in / source.name
            link.unlink(missing_ok=True)
            try:
                os.link(source, link)
            except OSError:  # another file system: a copy
                shutil.copyfile(source, link)
            kept.append(link)
    return kept[0], kept[1]


def ensure_images() -> dict[str, Path]:
    """Build whichever of the three images the cache lacks; return name -> archive."""
    wanted = archives()
    if all(path.exists() for path in wanted.values()):
        return wanted
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with build_lock():
        for name, archive in wanted.items():
            if not archive.exists():
                _build_one(name, archive)
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="?", choices=["all", "project"], default="all")
    args = parser.parse_args(argv)
    try:
        if args.which == "project":
            with build_lock():
                build_project(cache_dir() / "build.log")
            print(project_image())
        else:
            for name, path in ensure_images().items():
                print(f"{name}\t{path}")
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
