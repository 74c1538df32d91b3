"""Build etcd, kube-apiserver and kube-controller-manager (and, for a real node, kubelet, kube-scheduler and
kube-proxy) from their Go modules, once, into a cache.

Neither `k8s.io/kubernetes` nor etcd's server can be `go install`ed directly: their go.mod files replace
sibling modules with local paths, and `go install` refuses modules with replace directives. So each is
built from a throwaway wrapper module that requires the real module and pins its siblings to their
published versions. For Kubernetes the list of staging modules is read from the go.mod the module proxy
serves, so a version bump needs no edit here.

Standard library only: this runs before the project's virtualenv exists.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from devtools.cluster import versions

_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.MULTILINE)
_MANIFEST = "versions.json"
_NODE_MANIFEST = "node-versions.json"


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    # A toolchain download is not possible here; a static binary runs anywhere.
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-buildvcs=false")
    return env


def _run(cmd: list[str], *, cwd: Path, log: Path) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        result = subprocess.run(cmd, check=False, cwd=cwd, env=_go_env(), stdout=out, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {result.returncode}); log {log}:\n{tail}")


def _go_output(cmd: list[str], *, cwd: Path) -> str:
    return subprocess.run(cmd, cwd=cwd, env=_go_env(), check=True, capture_output=True, text=True).stdout


def staging_modules(served_go_mod: str) -> list[str]:
    """The `k8s.io/...` modules that k8s.io/kubernetes replaces with its own staging folders."""
    return sorted(set(_STAGING_REPLACE.findall(served_go_mod)))


def _write_module(workdir: Path, *, name: str, requires: dict[str, str], replaces: dict[str, str],
                  main_go: str | None) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("go.mod", "go.sum", "main.go", "tools.go"):
        (workdir / stale).unlink(missing_ok=True)
    lines = [f"module {name}", "", "go 1.24", ""]
    lines += [f"require {mod} {ver}" for mod, ver in requires.items()]
    lines += [f"replace {mod} => {mod} {ver}" for mod, ver in replaces.items()]
    (workdir / "go.mod").write_text("\n".join(lines) + "\n")
    if main_go:
        (workdir / "main.go").write_text(main_go)


def _ldflags_kubernetes(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    stamp = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.{key}={value}" for key, value in stamp.items()]
    return "-s -w " + " ".join(flags)


def _build_kubernetes(work: Path, out: Path, log: Path, *, version: str, commands: dict[str, str]) -> None:
    """Build `commands` (name -> Go package) from one wrapper module that imports exactly them."""
    mod = work / "kubernetes"
    mod.mkdir(parents=True, exist_ok=True)
    info = json.loads(_go_output(["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"], cwd=mod))
    served = Path(info["GoMod"]).read_text()
    staging = staging_modules(served)
    staging_version = versions.staging_version(version)
    _progress(f"k8s.io/kubernetes {version}: pinning {len(staging)} staging modules to {staging_version}")
    imports = "\n".join(f'\t_ "{pkg}"' for pkg in commands.values())
    tools = f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"
    _write_module(mod, name="nsscaler.local/k8s-build",
                  requires={"k8s.io/kubernetes": version},
                  replaces={m: staging_version for m in staging}, main_go=None)
    (mod / "tools.go").write_text(tools)
    _progress("resolving Kubernetes dependencies (go mod tidy)")
    _run(["go", "mod", "tidy"], cwd=mod, log=log)
    for name, pkg in commands.items():
        _progress(f"compiling {name} (the slow part: several minutes on 2 cores)")
        started = time.monotonic()
        # Written under a temporary name and renamed: a killed build never leaves a binary that looks done.
        partial = out / f".{name}.partial"
        _run(["go", "build", "-trimpath", "-tags", "tools", "-ldflags", _ldflags_kubernetes(version),
              "-o", str(partial), pkg], cwd=mod, log=log)
        partial.replace(out / name)
        _progress(f"{name} built in {time.monotonic() - started:.0f}s")


def kubernetes_source() -> Path:
    """The k8s.io/kubernetes module's files (from the Go module cache; downloaded if missing)."""
    module = f"k8s.io/kubernetes@{versions.kubernetes_version()}"
    info = json.loads(_go_output(["go", "mod", "download", "-json", module], cwd=Path.home()))
    return Path(info["Dir"])


def _build_etcd(work: Path, out: Path, log: Path) -> None:
    mod = work / "etcd"
    main_go = ('package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\n'
               "func main() { etcdmain.Main(os.Args) }\n")
    _write_module(mod, name="nsscaler.local/etcd-build",
                  requires={"go.etcd.io/etcd/server/v3": versions.ETCD_VERSION}, replaces={}, main_go=main_go)
    _progress(f"resolving etcd {versions.ETCD_VERSION} dependencies")
    _run(["go", "mod", "tidy"], cwd=mod, log=log)
    _progress("compiling etcd")
    started = time.monotonic()
    _run(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"), "."], cwd=mod, log=log)
    _progress(f"etcd built in {time.monotonic() - started:.0f}s")


def _progress(message: str) -> None:
    print(f"[cluster build {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def is_built(out: Path | None = None, *, node: bool = False) -> bool:
    """A build is complete only once its manifest exists: it is written last. The control plane's
    manifest and binaries are exactly those of earlier versions of this file, which share the cache."""
    out = out or versions.bin_dir()
    done = (out / _MANIFEST).exists() and all((out / b).exists() for b in versions.BINARIES)
    if node:
        done = done and (out / _NODE_MANIFEST).exists() and all((out / b).exists() for b in versions.NODE_BINARIES)
    return done


def _missing(out: Path, names: tuple[str, ...], *, force: bool) -> list[str]:
    return [name for name in names if force or not (out / name).exists()]


def _shared_etcd(out: Path, work: Path, log: Path, *, force: bool) -> None:
    """etcd is the same for every Kubernetes version: built once into its own folder (under its own lock, so two
    versions building at once never race for it) and linked into `out`."""
    shared = versions.etcd_dir()
    shared.mkdir(parents=True, exist_ok=True)
    with (shared.parent / f"{shared.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if force or not (shared / "etcd").exists():
            _build_etcd(work, shared, log)
    (out / "etcd").unlink(missing_ok=True)
    try:
        os.link(shared / "etcd", out / "etcd")
    except OSError:  # another file system: a copy is as good
        shutil.copy2(shared / "etcd", out / "etcd")


def _build_control_plane(out: Path, work: Path, log: Path, *, version: str, force: bool) -> None:
    """Only the missing binaries: an interrupted build resumes instead of starting over."""
    started = time.monotonic()
    (out / _MANIFEST).unlink(missing_ok=True)
    if _missing(out, ("etcd",), force=force):
        _shared_etcd(out, work, log, force=force)
    wanted = _missing(out, tuple(versions.KUBERNETES_COMMANDS), force=force)
    if wanted:
        _build_kubernetes(work, out, log, version=version,
                          commands={n: versions.KUBERNETES_COMMANDS[n] for n in wanted})
    manifest = {
        "kubernetes": version,
        "etcd": versions.ETCD_VERSION,
        "build_seconds": round(time.monotonic() - started),
        "sizes_bytes": {b: (out / b).stat().st_size for b in versions.BINARIES},
    }
    (out / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    _progress(f"control plane {version} done in {manifest['build_seconds']}s")


def _build_node(out: Path, work: Path, log: Path, *, version: str, force: bool) -> None:
    started = time.monotonic()
    (out / _NODE_MANIFEST).unlink(missing_ok=True)
    wanted = _missing(out, versions.NODE_BINARIES, force=force)
    if wanted:
        _build_kubernetes(work, out, log, version=version, commands={n: versions.NODE_COMMANDS[n] for n in wanted})
    manifest = {
        "kubernetes": version,
        "build_seconds": round(time.monotonic() - started),
        "sizes_bytes": {b: (out / b).stat().st_size for b in versions.NODE_BINARIES},
    }
    (out / _NODE_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    _progress(f"node binaries done in {manifest['build_seconds']}s")


def ensure_built(*, force: bool = False, node: bool = False, minor: str | None = None) -> Path:
    """Return the folder with the control plane's binaries of `minor` (default: the selected version) and the
    node's with `node=True`, building whatever the cache lacks first."""
    minor = minor or versions.selected_minor()
    version = versions.kubernetes_version(minor)
    out = versions.bin_dir(minor)
    if is_built(out, node=node) and not force:
        return out
    out.mkdir(parents=True, exist_ok=True)
    # One build per version at a time: a second caller waits, then finds the finished cache.
    with (out.parent / f"{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        work = out.parent / f"{out.name}-src"
        log = out / "build.log"
        if force or not is_built(out):
            log.write_text("")
            _progress(f"building the local control plane {version} into {out} (first run only; log: {log})")
            _build_control_plane(out, work, log, version=version, force=force)
        if node and (force or not is_built(out, node=True)):
            _progress(f"building kubelet, kube-scheduler, kube-proxy {version} into {out} (first run only; log: {log})")
            _build_node(out, work, log, version=version, force=force)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache has the binaries")
    parser.add_argument("--node", action="store_true", help="also kubelet, kube-scheduler and kube-proxy")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--minor", choices=list(versions.SUPPORTED),
                       help=f"the Kubernetes minor to build (default: ${versions.VERSION_ENV} or "
                            f"{versions.DEFAULT_MINOR})")
    which.add_argument("--all", action="store_true", help="every supported minor, one after another")
    args = parser.parse_args(argv)
    minors = list(versions.SUPPORTED) if args.all else [args.minor or versions.selected_minor()]
    try:
        for minor in minors:
            started = time.monotonic()
            print(ensure_built(force=args.force, node=args.node, minor=minor))
            _progress(f"Kubernetes {versions.kubernetes_version(minor)} ready ({time.monotonic() - started:.0f}s)")
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
