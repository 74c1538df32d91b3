"""The bench's objects on the control plane: families of namespaces with their Deployments, and the policies."""

from __future__ import annotations

import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from devtools import builders
from devtools.builders import AdminApi, wait_until

ROOT = Path(__file__).resolve().parent.parent
PER_NAMESPACE = 5


def suffix(i: int) -> str:
    return f"n{i:05d}"


def allowed(n: int, shift: int) -> list[str]:
    """The 20 % of a family of n that a policy keeps running; `shift` picks which fifth."""
    return [suffix(i) for i in range(n) if i % 5 == shift]


def populate(api: AdminApi, *, prefix: str, start: int, stop: int) -> None:
    """Namespaces start..stop-1 of a family, 5 Deployments each with 1-3 replicas (a family grows from one
    size to the next)."""
    rng = random.Random(f"{prefix}{stop}")
    replicas = {i: [rng.randint(1, 3) for _ in range(PER_NAMESPACE)] for i in range(start, stop)}

    def make(i: int) -> None:
        ns = prefix + suffix(i)
        api.create(builders.namespace(ns))
        for j, count in enumerate(replicas[i]):
            api.create(builders.deployment(ns, f"d{j}", count))

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(make, range(start, stop)))


def delete_family(api: AdminApi, *, prefix: str, count: int) -> list[str]:
    """Start deleting a family's namespaces (the namespace controller empties them); returns their names."""
    names = [prefix + suffix(i) for i in range(count)]
    for ns in names:
        api.delete("Namespace", ns)
    return names


def wait_gone(api: AdminApi, names: list[str]) -> None:
    wait_until(lambda: not any(api.exists("Namespace", ns) for ns in names), what="the namespaces to go",
               timeout=600)


def set_policy(api: AdminApi, name: str, *, prefix: str, active: list[str] | None) -> None:
    """Create or update the policy `name` (prefix, allowed suffixes); `active=None` deletes it."""
    if active is None:
        api.delete("NSScaler", name)
        wait_until(lambda: not api.exists("NSScaler", name), what="the policy to go")
    elif api.exists("NSScaler", name):
        api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": active}})
    else:
        api.create(builders.nsscaler(name, prefix, active))


def ensure_crd(kubeconfig: Path, api: AdminApi) -> None:
    subprocess.run([str(Path(sys.executable).parent / "kubectl"), "--kubeconfig", str(kubeconfig), "apply",
                    "--server-side", "--force-conflicts", "-f", str(ROOT / "kustomize/base/crd.yaml")],
                   check=True, capture_output=True)
    wait_until(api.crd_established, what="the CRD")
