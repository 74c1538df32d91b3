"""How one run is measured, the same way for every tool: wall time of the whole process (as a CronJob pays it),
its peak RSS when it is a child process, the CPU the API server and etcd spent on it, and what the API
server counted (bench.apimetrics). Also the cluster state checks that prove a tool did the same job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pykube

from bench import apimetrics
from devtools.cluster import controlplane

NSSCALER = str(Path(sys.executable).parent / "nsscaler")
CONCURRENCY = 8

# A one-child wrapper: its RUSAGE_CHILDREN is exactly the peak RSS and the CPU (user + system) of the one
# process it ran, printed on its last line of stderr.
_MEASURE = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
            "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(u.ru_maxrss, u.ru_utime + u.ru_stime, file=sys.stderr); sys.exit(code)")


def byte_compile(python: str | Path, package: Path) -> None:
    """A tool's own modules compiled to bytecode before it is measured, as pip leaves them in an image:
    otherwise each run compiles them again (this machine sets PYTHONDONTWRITEBYTECODE)."""
    subprocess.run([str(python), "-m", "compileall", "-q", str(package)], check=True, capture_output=True)


def server_cpu(plane: controlplane.ControlPlane) -> float:
    """CPU seconds kube-apiserver and etcd have used so far (utime + stime from /proc): the profile that
    says whether a run is limited by the client or by the server."""
    total = 0
    for name in ("kube-apiserver", "etcd"):
        fields = Path(f"/proc/{plane.pids[name]}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def measured(plane: controlplane.ControlPlane, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`run` between two /metrics scrapes and two CPU readings; the scrapes stay outside the CPU window
    (a scrape is a 1.6 MB page the server renders)."""
    before = apimetrics.scrape(plane)
    cpu = server_cpu(plane)
    result = run()
    result["server_cpu_s"] = server_cpu(plane) - cpu
    result.update(apimetrics.delta(before, apimetrics.scrape(plane)))
    return result


def child(command: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None) -> dict[str, Any]:
    """One process: wall time from outside, its own peak RSS and CPU seconds (user + system: what the client
    costs the node it runs on), its stdout and stderr."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True,
                          check=False, env=env, cwd=cwd)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    head, _, last = proc.stderr.rstrip().rpartition("\n")
    rss_kb, cpu = last.split()
    return {"seconds": seconds, "rss_mb": int(rss_kb) / 1024, "client_cpu_s": float(cpu), "stdout": proc.stdout,
            "stderr": head}


def nsscaler_command(kubeconfig: Path, *args: str) -> list[str]:
    return [NSSCALER, "--kubeconfig", str(kubeconfig), "--output", "json", "--log-level", "error",
            "--concurrency", str(CONCURRENCY), *args]


def run_nsscaler(kubeconfig: Path, *args: str) -> dict[str, Any]:
    """One nsscaler run; its own request count and the seconds of each stage come from its JSON report (the
    start, before the run's first stage: interpreter, imports and settings, is the rest of the wall time)."""
    out = child(nsscaler_command(kubeconfig, *args))
    report = json.loads(out.pop("stdout"))
    out.pop("stderr")
    out["requests"] = report["summary"]["requests"]
    # of those, the run Lease's (a run that writes takes it): the server's counts leave leases out (its own
    # identity lease is renewed on a timer)
    out["lease_requests"] = report["summary"].get("lease_requests") or {}
    phases = report["summary"].get("phases") or {}
    out["stages"] = {"start": max(0.0, out["seconds"] - report["summary"]["seconds"]), **phases}
    return out


def import_times(kubeconfig: Path, *args: str) -> dict[str, float]:
    """One nsscaler run under `python -X importtime`: every module it imports, whenever (lazy ones included),
    its own import time in seconds, summed per top-level package (nsscaler's own per subpackage)."""
    command = nsscaler_command(kubeconfig, *args)
    proc = subprocess.run([sys.executable, "-X", "importtime", *command], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"nsscaler failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return by_package(proc.stderr)


def by_package(importtime: str) -> dict[str, float]:
    """`-X importtime` output (microseconds, self | cumulative | module) summed by package, in seconds."""
    micros: dict[str, int] = {}
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, module = line.removeprefix("import time:").split("|")
        parts = module.strip().split(".")
        package = ".".join(parts[:2]) if parts[0] == "job" else parts[0]
        micros[package] = micros.get(package, 0) + int(self_us)
    return {package: us / 1e6 for package, us in sorted(micros.items(), key=lambda kv: -kv[1])}


def wrong_replicas(api: pykube.HTTPClient, *, prefix: str, held: Callable[[str], bool]) -> list[str]:
    """The Deployments of the family whose replicas do not match the job: 0 in held namespaces, more than
    0 elsewhere. Empty when a tool did exactly what nsscaler's policy asks."""
    wrong = []
    params: dict[str, str | int] = {"limit": 500}
    while True:
        resp = api.get(version="apps/v1", url="deployments", params=params)
        resp.raise_for_status()
        page = resp.json()
        for dep in page["items"]:
            ns, replicas = dep["metadata"]["namespace"], dep["spec"].get("replicas", 1)
            if ns.startswith(prefix) and (replicas == 0) != held(ns):
                wrong.append(f"{ns}/{dep['metadata']['name']}={replicas}")
        if not page["metadata"].get("continue"):
            return wrong
        params["continue"] = page["metadata"]["continue"]


def check_job_done(api: pykube.HTTPClient, *, tool: str, prefix: str, held: Callable[[str], bool]) -> None:
    wrong = wrong_replicas(api, prefix=prefix, held=held)
    if wrong:
        raise RuntimeError(f"{tool} did not do the job: {len(wrong)} Deployments wrong, e.g. {wrong[:5]}")
