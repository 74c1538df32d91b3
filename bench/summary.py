"""Pure: raw measured runs into medians, ratios, the memory slope and the cost targets: met or missed when both
sides were measured in this run, "not compared" when nsscaler was measured and the peer was not run, "not
measured" when nsscaler's side was not. No stored figure ever stands in for a measurement."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

#: the peer's name in the rows
PEER = "kube-downscaler"
STEADY_SIZES = (100, 1000)
#: the N at which the steady state's peak RSS is held to the peer's
RSS_N = 100
FAMILY_RATIO = 1 / 5
MEMORY_N = 10000
MEMORY_LIMIT_MB = 100.0
LIMIT_N = 1000
LIMIT_RATIO = 1.1


def summarise(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (n, scenario, tool): medians of time and server CPU, the counts of the median run
    (by wall time), the highest peak RSS."""
    groups: dict[tuple[int, str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["n"], r["scenario"], r["tool"]), []).append(r)
    rows = []
    for (n, scenario, tool), group in groups.items():
        median_run = sorted(group, key=lambda r: r["seconds"])[len(group) // 2]
        rss = [r["rss_mb"] for r in group if r.get("rss_mb")]
        own = median_run.get("requests")
        rows.append({
            "n": n, "scenario": scenario, "tool": tool, "reps": len(group),
            "seconds": statistics.median(r["seconds"] for r in group),
            "server_cpu_s": statistics.median(r["server_cpu_s"] for r in group),
            "client_cpu_s": _median_of(group, "client_cpu_s"),
            "stages": _medians(r.get("stages") for r in group),
            "imports": _medians(r.get("imports") for r in group),
            "record": median_run.get("record") or next((r["record"] for r in group if r.get("record")), None),
            "server_total_bytes": statistics.median(r["server_total_bytes"] for r in group),
            "requests": own, "total_requests": sum(own.values()) if own is not None else None,
            "lease_requests": median_run.get("lease_requests") or {},
            **{k: median_run[k] for k in ("server_requests", "server_total_requests", "server_requests_by_resource",
                                          "server_bytes")},
            "rss_mb": max(rss) if rss else None,
        })
    return rows


def _median_of(group: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in group if r.get(key) is not None]
    return statistics.median(values) if values else None


def _medians(dicts: Iterable[dict[str, float] | None]) -> dict[str, float] | None:
    """Key by key, the median over the runs that measured it (None: no run did)."""
    found = [d for d in dicts if d]
    if not found:
        return None
    keys = dict.fromkeys(k for d in found for k in d)
    return {k: statistics.median(d.get(k, 0.0) for d in found) for k in keys}


def index(rows: Iterable[dict[str, Any]]) -> dict[tuple[int, str, str], dict[str, Any]]:
    return {(r["n"], r["scenario"], r["tool"]): r for r in rows}


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """nsscaler against naive and limit, where both were measured."""
    out = []
    by_key = index(rows)
    for (n, scenario, tool), row in by_key.items():
        naive, limit = by_key.get((n, scenario, "naive")), by_key.get((n, scenario, "limit"))
        if tool != "nsscaler" or naive is None or limit is None:
            continue
        out.append({"n": n, "scenario": scenario,
                    "time_vs_naive": row["seconds"] / naive["seconds"],
                    "time_vs_limit": row["seconds"] / limit["seconds"] if limit["server_total_requests"] else None,
                    "requests_vs_naive": row["server_total_requests"] / max(1, naive["server_total_requests"])})
    return out


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x; None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    num = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return num / sum((x - mean_x) ** 2 for x, _ in points)


def memory_profile(rows: list[dict[str, Any]], per_namespace: int) -> dict[str, Any]:
    """Peak RSS of nsscaler's first run per N, and its growth in MB per 1,000 workloads."""
    points = sorted((r["n"], r["rss_mb"]) for r in rows
                    if r["tool"] == "nsscaler" and r["scenario"] == "first run" and r.get("rss_mb"))
    per_thousand = slope([(n * per_namespace / 1000, mb) for n, mb in points])
    return {"points": [{"n": n, "workloads": n * per_namespace, "rss_mb": mb} for n, mb in points],
            "mb_per_1000_workloads": per_thousand}


def _opt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


#: every verdict a target may have
VERDICTS = ("met", "missed", "not compared", "not measured")


def _verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("met" if ok else "missed")


Index = dict[tuple[int, str, str], dict[str, Any]]


def steady_targets(by_key: Index) -> list[dict[str, Any]]:
    """nsscaler's steady state against kube-downscaler's, each measured in this run; without the peer's run the
    verdict is "not compared" (nsscaler's own figure still shown), without nsscaler's "not measured"."""
    out = []
    for n in STEADY_SIZES:
        ours, theirs = by_key.get((n, "steady state", "nsscaler")), by_key.get((n, "steady state", PEER))
        fields = [("seconds", "wall time", "s"), ("server_cpu_s", "API-server CPU", "s"),
                  ("client_cpu_s", "client CPU", "s")] + ([("rss_mb", "peak RSS", "MB")] if n == RSS_N else [])
        for field, label, unit in fields:
            mine, peer = (ours or {}).get(field), (theirs or {}).get(field)
            target = f"steady state N={n}: {label} ≤ kube-downscaler's"
            if mine is None:
                out.append({"target": target, "figures": "", "verdict": "not measured"})
            elif peer is None:
                out.append({"target": target, "figures": f"nsscaler {mine:.2f} {unit}; kube-downscaler not run",
                            "verdict": "not compared"})
            else:
                out.append({"target": target, "verdict": _verdict(mine <= peer),
                            "figures": f"nsscaler {mine:.2f} {unit} vs kube-downscaler {peer:.2f} {unit} (measured)"})
    return out


def family_ratios(family_rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """nsscaler's steady state in the family over one cluster-wide LIST, for server CPU and bytes received."""
    by_key = {(r["scenario"], r["tool"]): r for r in family_rows}
    steady, listing = by_key.get(("steady state", "nsscaler")), by_key.get(("cluster-wide LIST", "reference"))
    if steady is None or listing is None:
        return {}
    return {field: steady[field] / listing[field] if listing[field] else None
            for field in ("server_cpu_s", "server_total_bytes")}


def family_targets(family_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_key = {(r["scenario"], r["tool"]): r for r in family_rows}
    steady, listing = by_key.get(("steady state", "nsscaler")), by_key.get(("cluster-wide LIST", "reference"))
    ratios = family_ratios(family_rows)
    shown = {"server_cpu_s": lambda v: f"{v:.2f} s", "server_total_bytes": lambda v: f"{v / 1024:.0f} KB"}
    out = []
    for field, label in (("server_cpu_s", "API-server CPU"), ("server_total_bytes", "bytes received")):
        size = f" {steady['n']}" if steady else ""
        target = {"target": f"family{size}: steady-state {label} ≤ 1/5 of a cluster-wide LIST", "figures": "",
                  "verdict": _verdict(None)}
        if steady is not None and listing is not None:
            ratio = ratios[field]  # None: the LIST took less than one CPU tick
            target.update(figures=f"{shown[field](steady[field])} / {shown[field](listing[field])} = "
                                  f"{_opt(ratio, '.3f')}",
                          verdict=_verdict(None if ratio is None else ratio <= FAMILY_RATIO))
        out.append(target)
    return out


def memory_target(memory: dict[str, Any]) -> dict[str, Any]:
    at = {p["n"]: p["rss_mb"] for p in memory["points"]}
    figures = [f"{at[MEMORY_N]:.0f} MB"] if MEMORY_N in at else []
    if memory["mb_per_1000_workloads"] is not None:
        figures.append(f"slope {memory['mb_per_1000_workloads']:.2f} MB per 1,000 workloads")
    return {"target": f"first run N={MEMORY_N} ({MEMORY_N * 5:,} workloads): peak RSS < {MEMORY_LIMIT_MB:.0f} MB",
            "figures": "; ".join(figures),
            "verdict": _verdict(at[MEMORY_N] < MEMORY_LIMIT_MB if MEMORY_N in at else None)}


def limit_target(by_key: Index) -> dict[str, Any]:
    ours, limit = by_key.get((LIMIT_N, "first run", "nsscaler")), by_key.get((LIMIT_N, "first run", "limit"))
    figures, ok = "", None
    if ours and limit and limit["seconds"]:
        ratio = ours["seconds"] / limit["seconds"]
        figures, ok = f"{ours['seconds']:.2f} s / {limit['seconds']:.2f} s = {ratio:.2f} times", ratio <= LIMIT_RATIO
    return {"target": f"first run N={LIMIT_N}: wall at most {LIMIT_RATIO} times the physical limit",
            "figures": figures, "verdict": _verdict(ok)}


def targets(rows: list[dict[str, Any]], family_rows: list[dict[str, Any]],
            memory: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per cost target with its figures and met / missed / not measured."""
    by_key = index(rows)
    return [*steady_targets(by_key), *family_targets(family_rows), memory_target(memory), limit_target(by_key)]
