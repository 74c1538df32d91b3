"""The Kubernetes versions nsscaler is proven against, the pinned etcd, and where their binaries are cached.

Each supported minor is pinned to the newest patch the Go module proxy serves; Kubernetes vX.Y.Z publishes its
staging modules (k8s.io/api, k8s.io/apiserver, ...) as v0.Y.Z. etcd v3.6.x is the release line Kubernetes 1.34
to 1.37 are tested with, so one etcd binary serves every version.

`DEVTOOLS_KUBERNETES` (a minor such as `1.34`) selects the version a control plane is built and started with;
without it, the default: the version the whole suite runs against.
"""

from __future__ import annotations

import os
from pathlib import Path

#: minor -> the patch every tier builds; the version tier runs each (the README's table is checked against it)
SUPPORTED = {
    "1.34": "v1.34.4",
    "1.35": "v1.35.4",
    "1.36": "v1.36.3",
    "1.37": "v1.37.2",
}
DEFAULT_MINOR = "1.36"
ETCD_VERSION = "v3.6.16"
VERSION_ENV = "DEVTOOLS_KUBERNETES"

#: binaries the test suite needs, with the Go package that builds each
KUBERNETES_COMMANDS = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    # kubectl supports one minor of skew either way: each server is driven by a kubectl of its own version
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
}
BINARIES = ("etcd", *KUBERNETES_COMMANDS)

#: a real node (`make test-node` only): built on demand into the same folder, never needed by `make test`
NODE_COMMANDS = {
    "kubelet": "k8s.io/kubernetes/cmd/kubelet",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy",
}
NODE_BINARIES = tuple(NODE_COMMANDS)
#: the sandbox image's tag: the one kubeadm of this Kubernetes version pins (build/pause/Makefile's TAG)
PAUSE_VERSION = "3.10.2"


def selected_minor() -> str:
    minor = os.environ.get(VERSION_ENV, "").strip() or DEFAULT_MINOR
    minor = ".".join(minor.lstrip("v").split(".")[:2])
    if minor not in SUPPORTED:
        raise SystemExit(f"{VERSION_ENV}={minor!r} is not a supported Kubernetes minor; choose one of "
                         f"{', '.join(SUPPORTED)}")
    return minor


def kubernetes_version(minor: str | None = None) -> str:
    return SUPPORTED[minor or selected_minor()]


def staging_version(version: str) -> str:
    """v1.36.3 -> v0.36.3: the tag Kubernetes gives its staging modules."""
    _, minor, patch = version.lstrip("v").split(".")
    return f"v0.{minor}.{patch}"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nsscaler"


def bin_dir(minor: str | None = None) -> Path:
    """Keyed by both pins, so bumping either one builds afresh instead of mixing versions."""
    return cache_root() / f"k8s-{kubernetes_version(minor)}-etcd-{ETCD_VERSION}"


def etcd_dir() -> Path:
    """One etcd for every Kubernetes version: built once, linked into each version's folder."""
    return cache_root() / f"etcd-{ETCD_VERSION}"
