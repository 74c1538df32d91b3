"""The pinned versions of the local control plane, and where its binaries are cached.

Kubernetes v1.36.3 publishes its staging modules (k8s.io/api, k8s.io/apiserver, ...) as v0.36.3.
etcd v3.6.x is the release line Kubernetes 1.36 is tested with.
"""

from __future__ import annotations

import os
from pathlib import Path

KUBERNETES_VERSION = "v1.36.3"
STAGING_VERSION = "v0.36.3"
ETCD_VERSION = "v3.6.16"

#: binaries the test suite needs, with the Go package that builds each
KUBERNETES_COMMANDS = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
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


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nsscaler"


def bin_dir() -> Path:
    """Keyed by both pins, so bumping either one builds afresh instead of mixing versions."""
    return cache_root() / f"k8s-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}"
