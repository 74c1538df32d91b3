"""Build Traefik (the Gateway API implementation of the wake-on-request tests) and fetch the Gateway API CRDs, once.

Traefik is built from its Go module at an exact version into `~/.cache/nsscaler/traefik-v3.6.12/`, like
kube-state-metrics and promtool (see tools.py, whose download and copy steps this reuses): `go mod download -json`
gives the module's folder, a writable copy of it is built with `go build ./cmd/traefik`. (`go install
module@version` refuses Traefik: its go.mod has replace directives.) Measured: about 10 minutes on 2 cores.
v3.6.12 is the newest release that builds here; the v3.7 line is refused.

The Gateway API CRDs come from the Go module `sigs.k8s.io/gateway-api` at the version Traefik's own go.mod pins
(its `config/crd/standard` files), copied into `~/.cache/nsscaler/gateway-api-<version>/`.

A flock per folder makes a second caller wait for the first build and then use it. `gateway` runs Traefik
against a control plane, for the wake-on-request test on the node and its benchmark.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from devtools.builders import AdminApi, end, wait_until
from devtools.cluster import tools
from devtools.cluster.controlplane import free_ports
from devtools.cluster.versions import cache_root

TRAEFIK = tools.Tool("traefik", "github.com/traefik/traefik/v3", "github.com/traefik/traefik/v3/cmd/traefik",
                     "v3.6.12", "3.6.12")
GATEWAY_API_MODULE = "sigs.k8s.io/gateway-api"
_MANIFEST = "build.json"


def traefik_dir() -> Path:
    return cache_root() / f"{TRAEFIK.name}-{TRAEFIK.version}"


def traefik_binary() -> Path:
    return traefik_dir() / "traefik"


def _progress(message: str) -> None:
    print(f"[gateway tools {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _build_traefik(out: Path, log: Path) -> dict[str, object]:
    src = out.parent / f"{out.name}-src"
    tools._remove(src)
    module_dir = tools._module_dir(TRAEFIK, out, log)
    if module_dir is None:
        raise tools.SourceUnavailable(f"the Go module proxy does not serve {TRAEFIK.module}@{TRAEFIK.version}")
    tools._writable_copy(module_dir, src)
    ldflags = f"-s -w -X github.com/traefik/traefik/v3/pkg/version.Version={TRAEFIK.version}"
    cmd = ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(out / "traefik"), "./cmd/traefik"]
    code = tools._run(cmd, cwd=src, log=log, env=tools._env())
    if code:
        raise tools._fail(cmd, code, log)
    gateway_version = _pinned_gateway_api(src / "go.mod")
    tools._remove(src)
    return {"source": f"{TRAEFIK.module}@{TRAEFIK.version} (module download)", "gateway_api": gateway_version}


def _pinned_gateway_api(go_mod: Path) -> str:
    found = re.search(r"^\s*sigs\.k8s\.io/gateway-api (v\S+)", go_mod.read_text(), re.M)
    if not found:
        raise RuntimeError(f"{go_mod} pins no {GATEWAY_API_MODULE}")
    return found[1]


def _locked_build(out: Path, build, ready) -> None:  # type: ignore[no-untyped-def]
    out.mkdir(parents=True, exist_ok=True)
    with (out.parent / f"{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return
        (out / _MANIFEST).unlink(missing_ok=True)
        log = out / "build.log"
        log.write_text("")
        _progress(f"building {out.name} (first use only; log: {log})")
        started = time.monotonic()
        manifest = build(out, log)
        manifest["build_seconds"] = round(time.monotonic() - started)
        (out / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _progress(f"{out.name} ready in {manifest['build_seconds']}s")


def ensure_traefik() -> Path:
    """The Traefik binary, built first if the cache lacks it."""
    out = traefik_dir()
    _locked_build(out, _build_traefik, lambda: (out / _MANIFEST).exists() and traefik_binary().exists())
    return traefik_binary()


def gateway_api_version() -> str:
    """The Gateway API version Traefik's go.mod pins (read from the module cache; no build needed)."""
    folder = cache_root()
    folder.mkdir(parents=True, exist_ok=True)
    module_dir = tools._module_dir(TRAEFIK, folder, folder / "traefik-module.log")
    if module_dir is None:
        raise tools.SourceUnavailable(f"the Go module proxy does not serve {TRAEFIK.module}@{TRAEFIK.version}")
    return _pinned_gateway_api(module_dir / "go.mod")


def ensure_gateway_crds() -> Path:
    """A folder of the standard-channel Gateway API CRDs at the version Traefik pins."""
    version = gateway_api_version()
    out = cache_root() / f"gateway-api-{version}"
    tool = tools.Tool("gateway-api", GATEWAY_API_MODULE, GATEWAY_API_MODULE, version, version)

    def build(folder: Path, log: Path) -> dict[str, object]:
        module_dir = tools._module_dir(tool, folder, log)
        if module_dir is None:
            raise tools.SourceUnavailable(f"the Go module proxy does not serve {GATEWAY_API_MODULE}@{version}")
        for crd in sorted((module_dir / "config" / "crd" / "standard").glob("*.yaml")):
            shutil.copyfile(crd, folder / crd.name)
        return {"source": f"{GATEWAY_API_MODULE}@{version} (module download)"}

    _locked_build(out, build, (out / _MANIFEST).exists)
    return out


def install_gateway_crds(api: AdminApi, kubeconfig: Path, kubectl: Path) -> None:
    """The Gateway API CRDs Traefik pins, applied server-side with `kubectl`; returns once each is established."""
    for crd in sorted(ensure_gateway_crds().glob("*.yaml")):
        subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfig), "apply", "--server-side", "--force-conflicts",
                        "-f", str(crd)], check=True, capture_output=True, text=True)
    for name in ("httproutes", "referencegrants", "gateways", "gatewayclasses"):
        wait_until(lambda n=name: api.crd_established(f"{n}.gateway.networking.k8s.io"), timeout=60,
                   what=f"the {name} CRD")


@contextlib.contextmanager
def gateway(api: AdminApi, kubeconfig: Path, *, namespace: str, class_name: str, log: Path) -> Iterator[int]:
    """Traefik on the host watching the plane (its Gateway API provider, with `kubeconfig`), and a Gateway
    `<namespace>/web` of GatewayClass `class_name` on its entry point; yields the entry point's port (loopback).
    Traefik and the GatewayClass go at the end; the namespace is the caller's."""
    binary = ensure_traefik()
    port, ping = free_ports(2)
    api.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                "metadata": {"name": class_name}, "spec": {"controllerName": "traefik.io/gateway-controller"}})
    api.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "web", "namespace": namespace},
                "spec": {"gatewayClassName": class_name, "listeners": [
                    {"name": "http", "protocol": "HTTP", "port": port,
                     "allowedRoutes": {"namespaces": {"from": "All"}}}]}})
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(binary), f"--entryPoints.web.address=127.0.0.1:{port}", f"--entryPoints.ping.address=127.0.0.1:{ping}",
             "--ping.entryPoint=ping", "--providers.kubernetesgateway=true", "--log.level=INFO",
             "--global.checkNewVersion=false", "--global.sendAnonymousUsage=false"],
            env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"}, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{ping}/ping", timeout=2).ok, timeout=60, what="Traefik")
        yield port
    finally:
        end(proc, grace=30)
        api.delete("GatewayClass", class_name)


def main(argv: list[str] | None = None) -> int:
    """`--crds`: the Gateway API CRDs only (a module download); else Traefik too."""
    crds_only = "--crds" in (sys.argv[1:] if argv is None else argv)
    try:
        print(ensure_gateway_crds())
        if not crds_only:
            print(ensure_traefik())
    except (RuntimeError, tools.SourceUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
