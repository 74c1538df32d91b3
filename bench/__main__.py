"""`make bench`: the cost targets side by side in one run, on a real local control plane (without the
Deployment and ReplicaSet controllers, so thousands of Deployments spawn no Pods).

For each N (--sizes): N namespaces `bench-*` in one family, 5 Deployments each (1-3 replicas), one NSScaler
allowing 20 %. Scenarios: first run (freeze 80 %), steady state (nothing to do), restore run (the allowed
20 % moves: restore one fifth, freeze another). Tools: nsscaler, kube-downscaler (--peer), the naive
algorithm and the physical limit (bench/baselines.py). Then a family of --family namespaces `family-*` in a
cluster of --family-cluster, and nsscaler's first run at --memory-sizes for its peak RSS. Medians of --reps;
markdown on stdout, JSON and markdown under bench/results/. See bench/scenarios.py for each scenario.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import apimetrics, baselines, cluster, markdown, peer, runs, scenarios, summary
from devtools.builders import AdminApi
from devtools.cluster import controlplane


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,3000", help="namespace counts (comma-separated)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per scenario (median is reported)")
    parser.add_argument("--peer", type=Path, help="a checkout of kube-downscaler (its venv: <checkout>/.venv, "
                        "created when missing); without it, nothing is compared with kube-downscaler")
    parser.add_argument("--compare-max", type=int, default=1000,
                        help="largest N at which naive and limit run (they take long and add nothing new above)")
    parser.add_argument("--family", type=int, default=50, help="namespaces in the family scenario (0: skip)")
    parser.add_argument("--family-cluster", type=int, default=3000,
                        help="namespaces of the cluster the family scenario runs in")
    parser.add_argument("--memory-sizes", default="10000",
                        help="N for nsscaler's first run alone, for peak RSS (comma-separated, empty: none)")
    parser.add_argument("--out", type=Path, default=cluster.ROOT / "bench" / "results", help="where results go")
    return parser.parse_args(argv)


def _sizes(text: str) -> list[int]:
    return sorted({int(s) for s in text.split(",") if s.strip()})


class Grower:
    """The `bench-` family only grows, from one size to the next."""

    def __init__(self, api: AdminApi, plane: controlplane.ControlPlane) -> None:
        self.api, self.plane, self.done = api, plane, 0

    def to(self, n: int) -> None:
        if n <= self.done:
            return
        started = time.monotonic()
        cluster.populate(self.api, prefix=scenarios.PREFIX, start=self.done, stop=n)
        apimetrics.wait_quiet(self.plane)
        scenarios.say(f"N={n}: {n} namespaces, {n * cluster.PER_NAMESPACE} Deployments ready in "
                      f"{time.monotonic() - started:.0f}s")
        self.done = n


#: the shape of a result this tool writes; `bench.verify` checks every result of this format against its Markdown
FORMAT = 2


def commit() -> tuple[str, bool]:
    """The commit of the code measured, and whether the work tree differed from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(cluster.ROOT), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--untracked-files=no"))


def server_version(api: AdminApi) -> str:
    """The version the API server itself reports, not the one the bench meant to build."""
    resp = api.http.get(f"{api.plane.server}/version", timeout=30)
    resp.raise_for_status()
    return str(resp.json()["gitVersion"])


def run_all(args: argparse.Namespace, plane: controlplane.ControlPlane) -> dict[str, Any]:
    api = AdminApi(plane)
    version = server_version(api)
    cluster.ensure_crd(plane.admin_kubeconfig, api)
    b = scenarios.Bench(plane=plane, api=api, client=baselines.client(str(plane.admin_kubeconfig), runs.CONCURRENCY),
                        reps=args.reps, peer=args.peer, compare_max=args.compare_max)
    sizes, memory_sizes = _sizes(args.sizes), _sizes(args.memory_sizes)
    grow, raw, notes = Grower(api, plane), [], []
    restore_check = None
    for n in sizes:
        grow.to(n)
        raw += scenarios.all_family(b, n)
        if b.peer and restore_check is None:
            restore_check = scenarios.peer_restores_excluded(b, n)
    family_raw: list[dict[str, Any]] = []
    family_cluster = None
    if args.family:
        grow.to(args.family_cluster)
        cluster.populate(api, prefix=scenarios.FAMILY_PREFIX, start=0, stop=args.family)
        apimetrics.wait_quiet(plane)
        family_cluster = grow.done
        family_raw = scenarios.family(b, size=args.family, cluster_size=family_cluster)
    memory_raw = []
    todo = [m for m in memory_sizes if m not in sizes]
    notes += [f"memory size {m} skipped: the cluster already has {grow.done} namespaces" for m in todo if m < grow.done]
    todo = [m for m in todo if m >= grow.done]
    # the memory sizes count the bench- family alone: the family scenario's namespaces go (while it grows)
    deleting = cluster.delete_family(api, prefix=scenarios.FAMILY_PREFIX, count=args.family) if todo else []
    for i, m in enumerate(todo):
        grow.to(m)
        cluster.wait_gone(api, deleting)
        apimetrics.wait_quiet(plane)
        memory_raw.append(scenarios.memory(b, m, reset=i < len(todo) - 1))
    return {"raw": raw, "family_raw": family_raw, "memory_raw": memory_raw, "restore_check": restore_check,
            "notes": notes, "family_cluster": family_cluster, "server_version": version}


def peer_info(args: argparse.Namespace, sizes: list[int],
              restore_check: dict[str, Any] | None) -> dict[str, Any] | None:
    if not args.peer:
        return None
    commands = {n: peer.command(args.peer, prefix=scenarios.PREFIX,
                                allowed_namespaces=[scenarios.PREFIX + s for s in cluster.allowed(n, 0)])
                for n in sizes}
    checkout = str(args.peer)
    shown = {n: shlex.join([".venv/bin/python", *c[1:]]) for n, c in commands.items()}  # run in the checkout
    return {"commit": peer.commit(args.peer), "checkout": checkout, "commands": shown, "example_n": sizes[0],
            "example_command": shown[sizes[0]], "restore_check": restore_check}


def results_of(args: argparse.Namespace, measured: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any]:
    sizes = _sizes(args.sizes)
    rows = summary.summarise(measured["raw"])
    family_rows = summary.summarise(measured["family_raw"])
    memory_rows = summary.summarise(measured["memory_raw"])
    memory = summary.memory_profile(rows + memory_rows, cluster.PER_NAMESPACE)
    notes = [
        *([f"naive and limit run at N ≤ {args.compare_max} only: they take long at larger N and say nothing new "
           "there (both are linear in N)."] if sizes[-1] > args.compare_max else []),
        "Memory sizes: nsscaler's first run only, one repetition (peak RSS needs no median); kube-downscaler, "
        "naive and limit are not run there: it would take long, and only nsscaler's memory is a target.",
        "The cluster state is checked after every run of the first repetition: each tool froze exactly the "
        "Deployments of the held namespaces and left the others running.",
        *measured["notes"],
    ]
    if args.peer:
        notes.append("kube-downscaler: between repetitions the bench gives its Deployments back with its own "
                     "concurrent PATCHes (unmeasured); no restore run (see above).")
    return {
        "format": FORMAT,
        "machine": {**machine, "server_version": measured["server_version"], "concurrency": runs.CONCURRENCY},
        "options": {"sizes": sizes, "reps": args.reps, "family": args.family,
                    "family_cluster": measured["family_cluster"], "memory_sizes": _sizes(args.memory_sizes),
                    "compare_max": args.compare_max},
        "peer": peer_info(args, sizes, measured["restore_check"]),
        "rows": rows, "ratios": summary.ratios(rows),
        "family": {"size": args.family, "cluster": measured["family_cluster"], "rows": family_rows,
                   "steady_over_cluster_wide_list": summary.family_ratios(family_rows)},
        "memory": {**memory, "rows": memory_rows},
        "targets": summary.targets(rows, family_rows, memory),
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs.byte_compile(sys.executable, Path(__file__).resolve().parent.parent / "job")
    if args.peer:
        args.peer = args.peer.resolve()
        peer.ensure_venv(args.peer)
        runs.byte_compile(peer.python(args.peer), args.peer / "kube_downscaler")
    started = time.monotonic()
    head, dirty = commit()
    machine = {"commit": head, "commit_dirty": dirty, "machine": platform.machine(), "cpus": os.cpu_count(),
               "python": platform.python_version(), "load_before": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="nsscaler-bench-") as tmp:
        scenarios.say("starting a control plane without Pod-creating controllers")
        plane = controlplane.start(Path(tmp) / "plane", controllers=controlplane.BENCH_CONTROLLERS)
        try:
            measured = run_all(args, plane)
            machine["load_after"] = list(os.getloadavg())
        finally:
            plane.stop()
    results = results_of(args, measured, machine)
    results["elapsed_s"] = round(time.monotonic() - started)
    table = markdown.render(results)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"bench-{stamp}" if _sizes(args.sizes) != [20] else "smoke"
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / f"{name}.md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
