"""`make bench`: requests, wall time and peak memory of nsscaler as a cluster grows, next to the naive
algorithm and the physical limit, on a real local control plane (without the Deployment and ReplicaSet
controllers, so thousands of Deployments spawn no Pods).

For each N: N namespaces in one family, 5 Deployments each (1-3 replicas), one NSScaler allowing 20 %.
Scenarios: first run (freeze 80 %), steady state (nothing to do), restore run (the allowed 20 % moves:
restore one fifth, freeze another). Median of --reps repetitions; markdown on stdout, JSON and markdown
under bench/results/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import baselines
from tests import builders
from tests.builders import AdminApi, wait_until
from tests.cluster import controlplane

ROOT = Path(__file__).resolve().parent.parent
NSSCALER = str(Path(sys.executable).parent / "nsscaler")
PREFIX = "bench-"
POLICY = "bench"
PER_NAMESPACE = 5
CONCURRENCY = 8


def suffix(i: int) -> str:
    return f"n{i:05d}"


def allowed(n: int, shift: int) -> list[str]:
    return [suffix(i) for i in range(n) if i % 5 == shift]


def populate(api: AdminApi, n: int, start: int) -> None:
    """Namespaces start..n-1 with their Deployments (the family grows from one size to the next)."""
    rng = random.Random(n)

    def make(i: int) -> None:
        ns = PREFIX + suffix(i)
        api.create(builders.namespace(ns))
        for j in range(PER_NAMESPACE):
            api.create(builders.deployment(ns, f"d{j}", rng.randint(1, 3)))

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(make, range(start, n)))


# A one-child wrapper: its RUSAGE_CHILDREN is exactly the peak RSS of the one nsscaler process it ran.
_MEASURE = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")


def server_cpu(plane: controlplane.ControlPlane) -> float:
    """CPU seconds kube-apiserver and etcd have used so far (utime + stime from /proc): the profile that
    says whether a run is limited by the client or by the server."""
    total = 0
    for name in ("kube-apiserver", "etcd"):
        fields = Path(f"/proc/{plane.pids[name]}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def with_server_cpu(plane: controlplane.ControlPlane, measure_one: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    before = server_cpu(plane)
    result = measure_one()
    result["server_cpu_s"] = server_cpu(plane) - before
    return result


def run_nsscaler(kubeconfig: Path, *args: str) -> dict[str, Any]:
    """One run in a child process: wall time from outside, requests from its report, its own peak RSS."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _MEASURE, NSSCALER, "--kubeconfig", str(kubeconfig), "--output",
                           "json", "--log-level", "error", "--concurrency", str(CONCURRENCY), *args],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"nsscaler failed ({proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    rss_kb = int(proc.stderr.strip().splitlines()[-1])
    return {"seconds": seconds, "requests": report["summary"]["requests"], "rss_mb": rss_kb / 1024}


def set_policy(api: AdminApi, active: list[str] | None) -> None:
    if active is None:
        api.delete("NSScaler", POLICY)
        wait_until(lambda: not api.exists("NSScaler", POLICY), what="the policy to go")
    elif api.exists("NSScaler", POLICY):
        api.patch("NSScaler", POLICY, {"spec": {"active_namespace_suffixes": active}})
    else:
        api.create(builders.nsscaler(POLICY, PREFIX, active))


def measure(n: int, reps: int, api: AdminApi, plane: controlplane.ControlPlane) -> list[dict[str, Any]]:
    first, second = allowed(n, 0), allowed(n, 1)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    kubeconfig = plane.admin_kubeconfig

    def add(scenario: str, tool: str, measure_one: Callable[[], dict[str, Any]]) -> None:
        rows.setdefault((scenario, tool), []).append(with_server_cpu(plane, measure_one))

    client = baselines.client(str(kubeconfig), CONCURRENCY)
    for rep in range(reps):
        print(f"  N={n} rep {rep + 1}/{reps}: nsscaler", file=sys.stderr, flush=True)
        set_policy(api, first)
        add("first run", "nsscaler", lambda: run_nsscaler(kubeconfig))
        add("steady state", "nsscaler", lambda: run_nsscaler(kubeconfig))
        set_policy(api, second)
        add("restore run", "nsscaler", lambda: run_nsscaler(kubeconfig))
        set_policy(api, None)
        run_nsscaler(kubeconfig)  # back to all running, unmeasured

        print(f"  N={n} rep {rep + 1}/{reps}: naive", file=sys.stderr, flush=True)
        for scenario, active in (("first run", first), ("steady state", first), ("restore run", second)):
            add(scenario, "naive",
                lambda active=active: baselines.naive(client, prefix=PREFIX, active=set(active), policy=POLICY))
        baselines.naive(client, prefix=PREFIX, active={suffix(i) for i in range(n)}, policy=POLICY)

        print(f"  N={n} rep {rep + 1}/{reps}: limit", file=sys.stderr, flush=True)
        for scenario, active in (("first run", first), ("steady state", first), ("restore run", second)):
            patches = baselines.planned_patches(client, prefix=PREFIX, active=set(active), policy=POLICY)
            add(scenario, "limit", lambda patches=patches: baselines.limit(client, patches, concurrency=CONCURRENCY))
        everyone = {suffix(i) for i in range(n)}
        baselines.limit(client, baselines.planned_patches(client, prefix=PREFIX, active=everyone, policy=POLICY),
                        concurrency=CONCURRENCY)
    return [summarise(n, scenario, tool, results) for (scenario, tool), results in rows.items()]


def summarise(n: int, scenario: str, tool: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    median_run = sorted(results, key=lambda r: r["seconds"])[len(results) // 2]
    rss = [r["rss_mb"] for r in results if "rss_mb" in r]
    return {"n": n, "scenario": scenario, "tool": tool, "seconds": statistics.median(r["seconds"] for r in results),
            "requests": median_run["requests"], "total_requests": sum(median_run["requests"].values()),
            "rss_mb": max(rss) if rss else None, "reps": len(results),
            "server_cpu_s": statistics.median(r["server_cpu_s"] for r in results)}


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    index = {(r["n"], r["scenario"], r["tool"]): r for r in rows}
    for (n, scenario, tool), row in index.items():
        if tool != "nsscaler":
            continue
        naive, limit = index[(n, scenario, "naive")], index[(n, scenario, "limit")]
        out.append({"n": n, "scenario": scenario,
                    "time_vs_naive": row["seconds"] / naive["seconds"],
                    "time_vs_limit": row["seconds"] / limit["seconds"] if limit["total_requests"] else None,
                    "requests_vs_naive": row["total_requests"] / max(1, naive["total_requests"])})
    return out


def markdown(rows: list[dict[str, Any]], ratio_rows: list[dict[str, Any]]) -> str:
    lines = ["| N | scenario | tool | wall s | API server + etcd CPU s | requests | by verb | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        verbs = " ".join(f"{k}={v}" for k, v in sorted(r["requests"].items()))
        rss = f"{r['rss_mb']:.0f}" if r["rss_mb"] else ""
        lines.append(f"| {r['n']} | {r['scenario']} | {r['tool']} | {r['seconds']:.2f} | {r['server_cpu_s']:.1f} | "
                     f"{r['total_requests']} | {verbs} | {rss} |")
    lines += ["", "| N | scenario | time nsscaler/naive | time nsscaler/limit | requests nsscaler/naive |",
              "|---|---|---|---|---|"]
    for r in ratio_rows:
        limit = f"{r['time_vs_limit']:.2f}" if r["time_vs_limit"] is not None else "n/a (nothing to send)"
        lines.append(f"| {r['n']} | {r['scenario']} | {r['time_vs_naive']:.3f} | {limit} | "
                     f"{r['requests_vs_naive']:.4f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,3000", help="namespace counts (comma-separated)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per scenario (median is reported)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="where results go")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="nsscaler-bench-") as tmp:
        print("starting a control plane without Pod-creating controllers", file=sys.stderr)
        plane = controlplane.start(Path(tmp) / "plane", controllers=controlplane.BENCH_CONTROLLERS)
        try:
            api = AdminApi(plane)
            ensure_crd(plane.admin_kubeconfig, api)
            done = 0
            for n in sorted(sizes):
                started = time.monotonic()
                populate(api, n, done)
                done = n
                print(f"N={n}: {n} namespaces, {n * PER_NAMESPACE} Deployments ready in "
                      f"{time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
                rows += measure(n, args.reps, api, plane)
        finally:
            plane.stop()
    ratio_rows = ratios(rows)
    table = markdown(rows, ratio_rows)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    machine = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
               "kubernetes": "v1.36.3 (local, etcd --unsafe-no-fsync)", "concurrency": CONCURRENCY}
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"bench-{stamp}" if sizes != [20] else "smoke"
    (args.out / f"{name}.json").write_text(json.dumps({"machine": machine, "rows": rows, "ratios": ratio_rows},
                                                      indent=2) + "\n")
    (args.out / f"{name}.md").write_text(table)
    return 0


def ensure_crd(kubeconfig: Path, api: AdminApi) -> None:
    subprocess.run([str(Path(sys.executable).parent / "kubectl"), "--kubeconfig", str(kubeconfig), "apply",
                    "--server-side", "--force-conflicts", "-f", str(ROOT / "kustomize/base/crd.yaml")],
                   check=True, capture_output=True)
    wait_until(api.crd_established, what="the CRD")


if __name__ == "__main__":
    raise SystemExit(main())
