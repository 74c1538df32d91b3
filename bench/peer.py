"""The peer, kube-downscaler (caas-team/py-kube-downscaler), run from a checkout in a venv of its own, doing
nsscaler's job in its cheapest mode.

The command line, from its README (flags) and kube_downscaler/cmd.py, main.py, scaler.py:
- `--once`: one loop, then exit, as a CronJob runs;
- `--include-resources=deployments`: only Deployments (the bench's only kind);
- `--default-downtime=always`: everything not excluded is down (the default uptime `always` loses to it);
- `--grace-period=0`: by default it spares workloads created in the last 15 minutes, and the bench's are new;
- `--exclude-namespaces`: a comma-separated list of regexes, each `fullmatch`ed against the namespace name;
  a matching namespace is skipped entirely. Two patterns: `(?!bench-).*` (every namespace outside the family)
  and one alternation of the allowed namespaces (the 20 % that stay up).
It picks its credentials with pykube's `KubeConfig.from_env()`: the in-cluster ServiceAccount when there is
one, else the file named by KUBECONFIG; the bench gives it the admin kubeconfig.

Cluster-wide (no `--namespace`) a run sends 3 LISTs (namespaces, Pods for its force-uptime annotation,
Deployments), unpaginated, then one PATCH of the whole object per Deployment it scales, one by one.
It cannot do the restore run: a namespace matched by `--exclude-namespaces` is skipped before any of its
Deployments is looked at (scaler.py, autoscale_resources), so Deployments it froze stay at 0 when their
namespace becomes allowed (the bench checks this on its smallest size, see `restores_excluded`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pykube

from bench import runs

#: where the peer keeps a workload's replicas while it is down
ANNOTATION_ORIGINAL = "downscaler/original-replicas"
FLAGS = ("--once", "--include-resources=deployments", "--default-downtime=always", "--grace-period=0")


def python(checkout: Path) -> Path:
    return checkout / ".venv" / "bin" / "python"


def requirements(pyproject: str) -> list[str]:
    """pip requirements from [tool.poetry.dependencies], without python. Poetry's `*` is any version and
    `^X.Y` at least X.Y (pip has no caret; the upper bound does not matter for a bench)."""
    deps = tomllib.loads(pyproject)["tool"]["poetry"]["dependencies"]
    out = []
    for name, spec in deps.items():
        if name == "python":
            continue
        version = spec if isinstance(spec, str) else spec.get("version", "*")
        if version == "*":
            out.append(name)
        elif version[0] in "^~":
            out.append(f"{name}>={version.lstrip('^~')}")
        elif version[0].isdigit():
            out.append(f"{name}=={version}")
        else:
            out.append(f"{name}{version}")
    return out


def ensure_venv(checkout: Path) -> None:
    """The peer's dependencies in <checkout>/.venv, created when missing."""
    if python(checkout).exists():
        return
    reqs = requirements((checkout / "pyproject.toml").read_text())
    print(f"creating {checkout / '.venv'} for the peer: pip install {' '.join(reqs)}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(checkout / ".venv")], check=True)
    subprocess.run([str(python(checkout)), "-m", "pip", "install", "--quiet", *reqs], check=True)


def commit(checkout: Path) -> str:
    found = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                           check=False)
    return found.stdout.strip() if found.returncode == 0 else "unknown (not a git checkout)"


def exclude_pattern(prefix: str, allowed_namespaces: list[str]) -> str:
    """The value of --exclude-namespaces that keeps up what nsscaler's policy keeps up."""
    outside = f"(?!{re.escape(prefix)}).*"
    if not allowed_namespaces:
        return outside
    alternation = "|".join(re.escape(ns) for ns in allowed_namespaces)
    if "," in alternation:
        raise ValueError("the peer splits --exclude-namespaces on commas")
    return f"{outside},(?:{alternation})"


def command(checkout: Path, *, prefix: str, allowed_namespaces: list[str]) -> list[str]:
    return [str(python(checkout)), "-m", "kube_downscaler", *FLAGS,
            f"--exclude-namespaces={exclude_pattern(prefix, allowed_namespaces)}"]


def run(checkout: Path, kubeconfig: Path, *, prefix: str, allowed_namespaces: list[str]) -> dict[str, Any]:
    """One `--once` run. It logs a failure and still exits 0, so its log is checked for one."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(checkout)}
    out = runs.child(command(checkout, prefix=prefix, allowed_namespaces=allowed_namespaces), env=env,
                     cwd=str(checkout))
    log = out.pop("stderr") + out.pop("stdout")
    if "Failed to" in log or "Traceback" in log:
        raise RuntimeError(f"kube-downscaler failed: {log[-2000:]}")
    return out


def restore_all(api: pykube.HTTPClient) -> int:
    """Scale every Deployment the peer froze back to its recorded replicas (unmeasured, between repetitions;
    the bench's own concurrent PATCHes are faster than the peer's one-by-one upscale)."""
    resp = api.get(version="apps/v1", url="deployments")
    resp.raise_for_status()
    frozen = [d for d in resp.json()["items"] if ANNOTATION_ORIGINAL in d["metadata"].get("annotations", {})]

    def restore(dep: dict[str, Any]) -> None:
        meta = dep["metadata"]
        body = {"metadata": {"annotations": {ANNOTATION_ORIGINAL: None}},
                "spec": {"replicas": int(meta["annotations"][ANNOTATION_ORIGINAL])}}
        api.patch(version="apps/v1", namespace=meta["namespace"], url=f"deployments/{meta['name']}", json=body,
                  headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()

    with ThreadPoolExecutor(max_workers=runs.CONCURRENCY) as pool:
        list(pool.map(restore, frozen))
    return len(frozen)
