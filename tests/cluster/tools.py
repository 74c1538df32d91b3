"""Build kube-state-metrics and promtool from their Go modules, once, into a cache (for the metrics tests).

Each tool goes into its own folder keyed by name and version (`~/.cache/nsscaler/promtool-v0.316.0/`), with its
build log and a manifest written last, so a half-finished build is never taken for a finished one. A flock
makes a second caller wait for the first build and then use it.

kube-state-metrics is a plain Go module without replace directives, so `go install module@version` builds
it. Where the module proxy refuses to serve it, a git clone of its repository can be named with
`KUBE_STATE_METRICS_SOURCE`: the release tag is exported from it and built the same way, against the same
dependency versions (its go.sum pins them).

Standard library only, like build.py: it runs before the project's virtualenv may exist.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.versions import cache_root

_MANIFEST = "build.json"
SOURCE_ENV = "KUBE_STATE_METRICS_SOURCE"


@dataclass(frozen=True)
class Tool:
    name: str
    module: str
    package: str
    version: str
    #: what `--version` should print, stamped through prometheus/common/version like the upstream builds
    release: str


#: kube-state-metrics v2.20.0 is built with client-go v0.36.3, the same as the test control plane.
#: Prometheus publishes its Go module as v0.3xx.y for release 3.xx.y: v0.316.0 is Prometheus 3.16.0.
TOOLS = {
    "kube-state-metrics": Tool("kube-state-metrics", "k8s.io/kube-state-metrics/v2", "k8s.io/kube-state-metrics/v2",
                               "v2.20.0", "2.20.0"),
    "promtool": Tool("promtool", "github.com/prometheus/prometheus",
                     "github.com/prometheus/prometheus/cmd/promtool", "v0.316.0", "3.16.0"),
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
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-buildvcs=false")
    return env


def _progress(message: str) -> None:
    print(f"[metrics tools {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _run(cmd: list[str], *, cwd: Path, log: Path, env: dict[str, str]) -> int:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, check=False, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode


def _fail(cmd: list[str], code: int, log: Path) -> RuntimeError:
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    return RuntimeError(f"`{' '.join(cmd)}` failed (exit {code}); log {log}:\n{tail}")


def _ldflags(tool: Tool) -> str:
    return f"-s -w -X github.com/prometheus/common/version.Version={tool.release}"


def _from_proxy(tool: Tool, out: Path, log: Path) -> bool:
    """`go install module@version`; False when the proxy does not serve that module version."""
    env = _env() | {"GOBIN": str(out)}
    cmd = ["go", "install", "-trimpath", "-ldflags", _ldflags(tool), f"{tool.package}@{tool.version}"]
    code = _run(cmd, cwd=out, log=log, env=env)
    if code == 0:
        return True
    text = log.read_text(errors="replace")
    if "not available" in text or "404 Not Found" in text or "410 Gone" in text:
        return False
    raise _fail(cmd, code, log)


def _from_clone(tool: Tool, out: Path, log: Path) -> None:
    clone = os.environ.get(SOURCE_ENV)
    if not clone:
        raise SourceUnavailable(f"the Go module proxy does not serve {tool.module}@{tool.version} and "
                                f"{SOURCE_ENV} names no clone of its repository (log: {log})")
    src = out.parent / f"{out.name}-src"
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", clone, "archive", tool.version], capture_output=True, check=False)
    if archive.returncode:
        raise SourceUnavailable(f"{SOURCE_ENV}={clone}: no tag {tool.version}: {archive.stderr.decode()[:300]}")
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    if f"module {tool.module}\n" not in (src / "go.mod").read_text():
        raise SourceUnavailable(f"{SOURCE_ENV}={clone} is not the repository of {tool.module}")
    cmd = ["go", "build", "-trimpath", "-ldflags", _ldflags(tool), "-o", str(out / tool.name), "."]
    code = _run(cmd, cwd=src, log=log, env=_env())
    if code:
        raise _fail(cmd, code, log)


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
        source = "module proxy"
        if not _from_proxy(tool, out, log):
            _progress(f"the module proxy does not serve {tool.module}@{tool.version}; building from {SOURCE_ENV}")
            _from_clone(tool, out, log)
            source = os.environ[SOURCE_ENV]
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
        except SourceUnavailable as exc:  # the tests that need it skip, saying this
            print(f"warning: {name} not built: {exc}", file=sys.stderr)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
