"""Build kube-state-metrics, promtool, helm, krew, crane, cosign, the CloudNativePG operator and Flux's
kustomize-controller from their Go modules, once, into a cache
(metrics, chart, plugin and release tests).

Each tool goes into its own folder keyed by name and version (`~/.cache/nsscaler/promtool-v0.316.0/`), with its
build log and a manifest written last, so a half-finished build is never taken for a finished one. A flock
makes a second caller wait for the first build and then use it.

The source is the exact module version: `go mod download -json module@version` gives its folder in the module
cache. (Not `go install module@version`: it also reads the module's version list, for deprecation notices, and a
proxy may refuse that list while it serves the version.) A writable copy of that folder is built with its own
go.mod and go.sum, so the dependencies are the ones the release pins. Where the proxy does not serve the module
at all, a git clone of its repository can be named with `KUBE_STATE_METRICS_SOURCE` (the release tag is exported
from it and built the same way).

Standard library only, like build.py: it runs before the project's virtualenv may exist.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from devtools.cluster.versions import cache_root

_MANIFEST = "build.json"
SOURCE_ENV = "KUBE_STATE_METRICS_SOURCE"


@dataclass(frozen=True)
class Tool:
    name: str
    module: str
    package: str
    version: str
    #: what `--version` should print, stamped like the upstream builds (see `_ldflags`)
    release: str
    #: the Go variable that holds the version, set with -X
    version_var: str = "github.com/prometheus/common/version.Version"
    #: modules the release's go.mod replaces with a folder of its repository (`replace x/api => ./api`), which the
    #: module's own download leaves out: (folder, module), each fetched at `version` into that folder
    nested: tuple[tuple[str, str], ...] = ()


#: kube-state-metrics v2.20.0 is built with client-go v0.36.3, the same as the test control plane.
#: Prometheus publishes its Go module as v0.3xx.y for release 3.xx.y: v0.316.0 is Prometheus 3.16.0.
TOOLS = {
    "kube-state-metrics": Tool("kube-state-metrics", "k8s.io/kube-state-metrics/v2", "k8s.io/kube-state-metrics/v2",
                               "v2.20.0", "2.20.0"),
    "promtool": Tool("promtool", "github.com/prometheus/prometheus",
                     "github.com/prometheus/prometheus/cmd/promtool", "v0.316.0", "3.16.0"),
    # helm v4 is a Go module of its own (helm.sh/helm/v4); its Makefile stamps the version the same way
    "helm": Tool("helm", "helm.sh/helm/v4", "helm.sh/helm/v4/cmd/helm", "v4.3.2", "v4.3.2",
                 version_var="helm.sh/helm/v4/internal/version.version"),
    # krew installs the kubectl plugin from a local index in the plugin's install test
    "krew": Tool("krew", "sigs.k8s.io/krew", "sigs.k8s.io/krew/cmd/krew", "v0.4.3", "v0.4.3",
                 version_var="sigs.k8s.io/krew/internal/version.gitTag"),
    # the release tools (`make publish-tools`): crane serves a real OCI registry to the tests and reads digests;
    # cosign v2 signs and verifies with a key pair offline (v3 defaults to a signing config that wants the network)
    "crane": Tool("crane", "github.com/google/go-containerregistry",
                  "github.com/google/go-containerregistry/cmd/crane", "v0.22.1", "v0.22.1",
                  version_var="github.com/google/go-containerregistry/cmd/crane/cmd.Version"),
    "cosign": Tool("cosign", "github.com/sigstore/cosign/v2", "github.com/sigstore/cosign/v2/cmd/cosign",
                   "v2.6.5", "v2.6.5", version_var="sigs.k8s.io/release-utils/version.gitVersion"),
    # the CloudNativePG operator, run as a process against the test control plane: its hibernation is what
    # nsscaler's CNPG row drives and waits for (its module's version list is refused; the exact version is served)
    "cnpg": Tool("cnpg", "github.com/cloudnative-pg/cloudnative-pg",
                 "github.com/cloudnative-pg/cloudnative-pg/cmd/manager", "v1.28.0", "1.28.0",
                 version_var="github.com/cloudnative-pg/cloudnative-pg/pkg/versions.buildVersion"),
    # Flux's kustomize-controller, run as a process against the test control plane: a real GitOps apply that the
    # hold refuses (the tests serve its artifact as source-controller would)
    "kustomize-controller": Tool("kustomize-controller", "github.com/fluxcd/kustomize-controller",
                                 "github.com/fluxcd/kustomize-controller", "v1.7.3", "v1.7.3",
                                 version_var="main.VERSION",
                                 nested=(("api", "github.com/fluxcd/kustomize-controller/api"),)),
}


class SourceUnavailable(RuntimeError):
    """Neither the module proxy nor a local clone can provide the tool's source."""


def tool_dir(tool: Tool) -> Path:
    return cache_root() / f"{tool.name}-{tool.version}"


def binary(name: str) -> Path:
    tool = TOOLS[name]
    return tool_dir(tool) / tool.name


def is_built(tool: Tool) -> bool:
    out = tool_dir(tool)
    return (out / _MANIFEST).exists() and (out / tool.name).exists()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # the module's own go.mod and go.sum decide every dependency, as `go install module@version` would: not a
    # vendor folder (-mod=mod) nor a go.work the release ships for its own development (Prometheus has one)
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-buildvcs=false -mod=mod", GOWORK="off")
    return env


def strict() -> bool:
    """Under CI a tool that cannot be built is an error (its tests fail); locally its tests skip, saying why."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _progress(message: str) -> None:
    print(f"[tools {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _run(cmd: list[str], *, cwd: Path, log: Path, env: dict[str, str]) -> int:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, check=False, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode


def _fail(cmd: list[str], code: int, log: Path) -> RuntimeError:
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    return RuntimeError(f"`{' '.join(cmd)}` failed (exit {code}); log {log}:\n{tail}")


def _ldflags(tool: Tool) -> str:
    return f"-s -w -X {tool.version_var}={tool.release}"


def _module_dir(tool: Tool, out: Path, log: Path, module: str | None = None) -> Path | None:
    """The module's source folder at exactly `tool.version` (read-only, in Go's module cache), downloaded if
    needed; None when the module proxy does not serve that version. `module`: a nested module of the release."""
    cmd = ["go", "mod", "download", "-json", f"{module or tool.module}@{tool.version}"]
    result = subprocess.run(cmd, cwd=out, env=_env(), capture_output=True, text=True, check=False)
    with log.open("a") as out_log:
        out_log.write(f"\n$ {' '.join(cmd)}\n{result.stdout}{result.stderr}")
    try:
        info = json.loads(result.stdout or "{}")
    except json.JSONDecodeError:
        info = {}
    if result.returncode == 0 and info.get("Dir"):
        return Path(info["Dir"])
    text = f"{info.get('Error', '')}{result.stderr}"
    if any(word in text for word in ("not available", "404 Not Found", "410 Gone", "403 Forbidden")):
        return None
    raise _fail(cmd, result.returncode, log)


def _from_clone(tool: Tool, src: Path) -> None:
    """The release tag exported from the clone `KUBE_STATE_METRICS_SOURCE` names, into `src`."""
    clone = os.environ.get(SOURCE_ENV)
    if not clone:
        raise SourceUnavailable(f"the Go module proxy does not serve {tool.module}@{tool.version} and "
                                f"{SOURCE_ENV} names no clone of its repository")
    archive = subprocess.run(["git", "-C", clone, "archive", tool.version], capture_output=True, check=False)
    if archive.returncode:
        raise SourceUnavailable(f"{SOURCE_ENV}={clone}: no tag {tool.version}: {archive.stderr.decode()[:300]}")
    src.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    if f"module {tool.module}\n" not in (src / "go.mod").read_text():
        raise SourceUnavailable(f"{SOURCE_ENV}={clone} is not the repository of {tool.module}")


def _writable_copy(module_dir: Path, src: Path) -> None:
    """Go's module cache is read-only; the build may write go.sum, so it runs in a copy."""
    shutil.copytree(module_dir, src, symlinks=True)
    for folder, dirs, files in os.walk(src):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o200)
    src.chmod(src.stat().st_mode | 0o200)


def _build(tool: Tool, out: Path, log: Path) -> str:
    """Build the tool into `out`; returns where its source came from."""
    src = out.parent / f"{out.name}-src"
    _remove(src)
    module_dir = _module_dir(tool, out, log)
    if module_dir is not None:
        _writable_copy(module_dir, src)
        for folder, nested in tool.nested:
            nested_dir = _module_dir(tool, out, log, nested)
            if nested_dir is None:
                raise SourceUnavailable(f"the Go module proxy does not serve {nested}@{tool.version}, which "
                                        f"{tool.module} builds from its folder {folder}")
            _remove(src / folder)
            _writable_copy(nested_dir, src / folder)
        source = f"{tool.module}@{tool.version} (module download)"
    else:
        _progress(f"the module proxy does not serve {tool.module}@{tool.version}; building from {SOURCE_ENV}")
        _from_clone(tool, src)
        source = str(os.environ[SOURCE_ENV])
    package = "./" + tool.package.removeprefix(tool.module).lstrip("/")
    cmd = ["go", "build", "-trimpath", "-ldflags", _ldflags(tool), "-o", str(out / tool.name), package]
    code = _run(cmd, cwd=src, log=log, env=_env())
    if code:
        raise _fail(cmd, code, log)
    _remove(src)  # the module cache keeps the source; the copy only served the build
    return source


def _remove(folder: Path) -> None:
    if folder.exists():
        for sub, dirs, _ in os.walk(folder):  # a copy of the module cache may have read-only folders
            for name in dirs:
                Path(sub, name).chmod(0o755)
        shutil.rmtree(folder)


def ensure_tool(name: str, *, force: bool = False) -> Path:
    """The path of the tool's binary, building it first if the cache lacks it."""
    tool = TOOLS[name]
    out = tool_dir(tool)
    if is_built(tool) and not force:
        return out / tool.name
    out.mkdir(parents=True, exist_ok=True)
    with (out.parent / f"{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; a waiter then finds the finished cache
        if is_built(tool) and not force:
            return out / tool.name
        (out / _MANIFEST).unlink(missing_ok=True)
        log = out / "build.log"
        log.write_text("")
        _progress(f"building {tool.name} {tool.version} into {out} (first use only, minutes on 2 cores; log: {log})")
        started = time.monotonic()
        source = _build(tool, out, log)
        manifest = {"tool": tool.name, "module": tool.module, "version": tool.version, "source": source,
                    "build_seconds": round(time.monotonic() - started),
                    "size_bytes": (out / tool.name).stat().st_size}
        (out / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _progress(f"{tool.name} built in {manifest['build_seconds']}s")
    return out / tool.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"tools to build: {', '.join(TOOLS)} (default: all)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache has the binary")
    args = parser.parse_args(argv)
    unknown = set(args.names) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tools: {', '.join(sorted(unknown))}")
    status = 0
    for name in args.names or list(TOOLS):
        try:
            print(ensure_tool(name, force=args.force))
        except SourceUnavailable as exc:  # the tests that need it skip, saying this; under CI they fail
            print(f"{'error' if strict() else 'warning'}: {name} not built: {exc}", file=sys.stderr)
            status = 1 if strict() else status
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
