"""Pure: the bench's results as the markdown printed on stdout and saved beside the JSON."""

from __future__ import annotations

from typing import Any

from bench import apimetrics, summary


def _verbs(counts: dict[str, int] | None) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items())) if counts else ""


def _kb(n: float) -> str:
    return f"{n / 1024:,.0f}" if n >= 10240 else f"{n / 1024:.1f}"


def _opt(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None else ""


def runs_table(rows: list[dict[str, Any]], *, label: str = "N") -> list[str]:
    lines = [f"| {label} | scenario | tool | wall s | API server + etcd CPU s | requests (API server) | by verb | "
             "KB received | own count | peak RSS MB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['scenario']} | {r['tool']} | {r['seconds']:.2f} | {r['server_cpu_s']:.2f} | "
                     f"{r['server_total_requests']} | {_verbs(r['server_requests'])} | "
                     f"{_kb(r['server_total_bytes'])} | {_opt(r['total_requests'], 'd')} | "
                     f"{_opt(r['rss_mb'], '.0f')} |")
    return lines


def ratios_table(ratio_rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| N | scenario | time nsscaler/naive | time nsscaler/limit | requests nsscaler/naive |",
             "|---|---|---|---|---|"]
    for r in ratio_rows:
        limit = f"{r['time_vs_limit']:.2f}" if r["time_vs_limit"] is not None else "n/a (nothing to send)"
        lines.append(f"| {r['n']} | {r['scenario']} | {r['time_vs_naive']:.3f} | {limit} | "
                     f"{r['requests_vs_naive']:.4f} |")
    return lines


def peer_lines(peer: dict[str, Any] | None) -> list[str]:
    if not peer:
        rows = [f"| {n} | {scenario} | {f['seconds']} s / {f['server_total_requests']} / {f['server_cpu_s']} s / "
                f"{f['rss_mb']} MB |" for (n, scenario), f in summary.PEER_REFERENCE.items()]
        return ["kube-downscaler was not run (no `--peer`; `make bench PEER=<checkout>`). Its reference figures "
                "from issue 14 (26.4.0, measured on this machine, not in this run):", "",
                "| N | scenario | wall / requests / API-server CPU / RSS |", "|---|---|---|", *rows]
    lines = [f"kube-downscaler {peer['commit']} (`{peer['checkout']}`), command line (N={peer['example_n']}; the "
             "allowed namespaces change with N, every command is in the JSON):", "",
             f"    KUBECONFIG=<admin kubeconfig> {peer['example_command']}"]
    restore = peer.get("restore_check")
    if restore:
        lines += ["", f"Restore run left out for kube-downscaler: it skips a namespace matched by "
                  f"`--exclude-namespaces` before looking at its Deployments, so it never restores one it froze "
                  f"when the namespace becomes allowed (checked at N={restore['n']}: {restore['still_at_zero']} of "
                  f"{restore['newly_allowed_deployments']} Deployments of the newly allowed namespaces stayed at 0)."]
    return lines


def family_section(family: dict[str, Any]) -> list[str]:
    if not family["rows"]:
        return []
    lines = [f"### Family: {family['size']} namespaces `family-*` in a cluster of {family['cluster']} other "
             "namespaces (their Deployments running, no policy on them)", "",
             *runs_table(family["rows"], label="family")]
    return lines


def memory_section(memory: dict[str, Any]) -> list[str]:
    lines = ["### Peak RSS of nsscaler's first run", "", "| N | workloads | peak RSS MB |", "|---|---|---|"]
    lines += [f"| {p['n']} | {p['workloads']:,} | {p['rss_mb']:.0f} |" for p in memory["points"]]
    if memory["mb_per_1000_workloads"] is not None:
        lines += ["", f"Least-squares slope: {memory['mb_per_1000_workloads']:.2f} MB per 1,000 workloads."]
    return lines


def render(results: dict[str, Any]) -> str:
    targets = ["| target (issue 14) | figures | verdict |", "|---|---|---|"]
    targets += [f"| {t['target']} | {t['figures']} | {t['verdict']} |" for t in results["targets"]]
    filtered = ", ".join(sorted(apimetrics.BACKGROUND_RESOURCES))
    notes = [
        "Requests and KB received are the API server's own counters (`apiserver_request_total`, "
        "`apiserver_response_sizes_sum`, read from its /metrics just before and after each run) for every tool; "
        "not counted: non-resource requests, WATCH, and the server's housekeeping resources "
        f"({filtered}). Bytes are observed for reads (GET, LIST) only. `own count` is what the tool "
        "itself reported (nsscaler's JSON report; naive and limit count their requests).",
        "Wall time is the whole process for nsscaler and kube-downscaler (Python start-up included, as a CronJob "
        "pays it); CPU is kube-apiserver + etcd (/proc, 10 ms ticks). Medians of the repetitions.",
        *results["notes"],
    ]
    out = ["## Targets", "", *targets, "", "## All-family scenarios", "", *runs_table(results["rows"]), "",
           *ratios_table(results["ratios"]), "", *peer_lines(results["peer"]), "",
           *family_section(results["family"]), "", *memory_section(results["memory"]), "",
           "## Notes", "", *[f"- {n}" for n in notes]]
    return "\n".join(out) + "\n"
