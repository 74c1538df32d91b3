"""Pure: the bench's results as the markdown printed on stdout and saved beside the JSON."""

from __future__ import annotations

import statistics
from typing import Any

from bench import apimetrics, summary


def _verbs(counts: dict[str, int] | None) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items())) if counts else ""


def _kb(n: float) -> str:
    return f"{n / 1024:,.0f}" if n >= 10240 else f"{n / 1024:.1f}"


def _opt(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None else ""


def runs_table(rows: list[dict[str, Any]], *, label: str = "N") -> list[str]:
    lines = [f"| {label} | scenario | tool | wall s | API server + etcd CPU s | client CPU s | requests (API server) | "
             "by verb | KB received | own count | peak RSS MB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['scenario']} | {r['tool']} | {r['seconds']:.2f} | {r['server_cpu_s']:.2f} | "
                     f"{_opt(r.get('client_cpu_s'), '.2f')} | {r['server_total_requests']} | "
                     f"{_verbs(r['server_requests'])} | "
                     f"{_kb(r['server_total_bytes'])} | {_opt(r['total_requests'], 'd')} | "
                     f"{_opt(r['rss_mb'], '.0f')} |")
    return lines


def ratios_table(ratio_rows: list[dict[str, Any]]) -> list[str]:
    if not ratio_rows:
        return []
    lines = ["| N | scenario | time nsscaler/naive | time nsscaler/limit | requests nsscaler/naive |",
             "|---|---|---|---|---|"]
    for r in ratio_rows:
        limit = f"{r['time_vs_limit']:.2f}" if r["time_vs_limit"] is not None else "n/a (nothing to send)"
        lines.append(f"| {r['n']} | {r['scenario']} | {r['time_vs_naive']:.3f} | {limit} | "
                     f"{r['requests_vs_naive']:.4f} |")
    return lines


def _figures(r: dict[str, Any]) -> str:
    rss = f" / {r['rss_mb']:.0f} MB" if r.get("rss_mb") else ""
    client = f" / {r['client_cpu_s']:.2f} s" if r.get("client_cpu_s") is not None else " / n/a"
    return f"{r['seconds']:.2f} s / {r['server_total_requests']} / {r['server_cpu_s']:.2f} s{client}{rss}"


def side_by_side(rows: list[dict[str, Any]]) -> list[str]:
    """nsscaler next to kube-downscaler, where both were measured in this run."""
    by_key = summary.index(rows)
    lines = ["| N | scenario | nsscaler wall / requests / API-server CPU / client CPU / RSS | kube-downscaler | "
             "source |",
             "|---|---|---|---|---|"]
    for (n, scenario, tool), ours in by_key.items():
        theirs = by_key.get((n, scenario, summary.PEER))
        if tool == "nsscaler" and theirs:
            lines.append(f"| {n} | {scenario} | {_figures(ours)} | {_figures(theirs)} | measured |")
    return lines if len(lines) > 2 else []


def steady_profile(rows: list[dict[str, Any]]) -> list[str]:
    """Where a steady-state run of nsscaler goes, by the API server's counts: requests and KB per resource."""
    lines = ["| scenario | N | requests by verb/resource | KB received by resource |", "|---|---|---|---|"]
    for r in rows:
        if r["tool"] == "nsscaler" and r["scenario"] == "steady state":
            requests = " ".join(f"{k}={v}" for k, v in r.get("server_requests_by_resource", {}).items())
            received = " ".join(f"{k.split('/', 1)[1]}={_kb(v)}" for k, v in r["server_bytes"].items())
            lines.append(f"| {r.get('label', 'all-family')} | {r['n']} | {requests} | {received} |")
    return lines


#: packages shown by name in the import profile; the rest are summed
TOP_IMPORTS = 12


def steady_client(rows: list[dict[str, Any]]) -> list[str]:
    """Where the client's time goes in nsscaler's steady state: wall seconds per stage (start: the interpreter,
    the imports and the settings, before the run's first request), and import time per package."""
    lines = ["| N | client CPU s | wall s | start | read | decide | write | look again | report |",
             "|---|---|---|---|---|---|---|---|---|"]
    steady = [r for r in rows if r["tool"] == "nsscaler" and r["scenario"] == "steady state"]
    for r in steady:
        st = r.get("stages") or {}
        cells = " | ".join(_opt(st.get(k), ".3f") for k in ("start", "read", "decide", "write", "look_again", "report"))
        lines.append(f"| {r['n']} | {_opt(r.get('client_cpu_s'), '.2f')} | {r['seconds']:.2f} | {cells} |")
    for r in steady:
        imports = r.get("imports")
        if not imports:
            continue
        top = sorted(imports.items(), key=lambda kv: -kv[1])
        shown = [f"{name} {seconds * 1000:.0f}" for name, seconds in top[:TOP_IMPORTS]]
        rest = sum(seconds for _, seconds in top[TOP_IMPORTS:])
        lines += ["", f"Imports of one steady-state run at N={r['n']} (`python -X importtime`, every module it "
                  f"imports, lazy ones included; ms of its own import time, median of the repetitions): total "
                  f"{sum(imports.values()) * 1000:.0f}: {', '.join(shown)}, the rest {rest * 1000:.0f}."]
    return lines


def record_lines(rows: list[dict[str, Any]]) -> list[str]:
    """What nsscaler's record costs each freeze's PATCH."""
    out = []
    for r in rows:
        record = r.get("record")
        if r["tool"] == "nsscaler" and r["scenario"] == "first run" and record:
            out.append(f"- N={r['n']}: nsscaler's record on a frozen Deployment is {record['record_bytes']} bytes of "
                       f"JSON (annotations and label, keys included), of which the freed-capacity record is "
                       f"{record['freed_bytes']} (`{record['freed_value']}`).")
    return out


def peer_lines(peer: dict[str, Any] | None) -> list[str]:
    if not peer:
        return ["kube-downscaler was not run in this run (no `--peer`; `make bench PEER=<checkout>`): nothing is "
                "compared with it, and each target against it reads \"not compared\"."]
    lines = [f"kube-downscaler {peer['commit']} (`{peer['checkout']}`), its command line in the checkout "
             f"(N={peer['example_n']}; the allowed namespaces change with N, every command is in the JSON):", "",
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
             "namespaces (their Deployments running, no policy on them); the reference is one cluster-wide LIST, in "
             "pages of 500, of every object of the kinds the family's policy freezes (Deployments, StatefulSets)",
             "",
             *runs_table(family["rows"], label="family")]
    return lines


def memory_section(memory: dict[str, Any]) -> list[str]:
    lines = ["### Peak RSS of nsscaler's first run", "", "| N | workloads | peak RSS MB |", "|---|---|---|"]
    lines += [f"| {p['n']} | {p['workloads']:,} | {p['rss_mb']:.0f} |" for p in memory["points"]]
    if memory["mb_per_1000_workloads"] is not None:
        lines += ["", f"Least-squares slope: {memory['mb_per_1000_workloads']:.2f} MB per 1,000 workloads."]
    return lines


def provenance(results: dict[str, Any]) -> list[str]:
    """Where and on what the figures were measured, as the tool recorded it when it ran."""
    m = results["machine"]
    load = " ".join(f"{x:.2f}" for x in m["load_before"]), " ".join(f"{x:.2f}" for x in m["load_after"])
    dirty = " (with uncommitted changes)" if m["commit_dirty"] else ""
    return [f"Measured at commit {m['commit']}{dirty} against kube-apiserver {m['server_version']} (as its /version "
            f"answered), on {m['cpus']} cores ({m['machine']}, Python {m['python']}); load average (1, 5, 15 min) "
            f"{load[0]} before the runs and {load[1]} after them."]


def render(results: dict[str, Any]) -> str:
    targets = ["| cost target | figures | verdict |", "|---|---|---|"]
    targets += [f"| {t['target']} | {t['figures']} | {t['verdict']} |" for t in results["targets"]]
    filtered = ", ".join(sorted(apimetrics.BACKGROUND_RESOURCES))
    notes = [
        "Requests and KB received are the API server's own counters (`apiserver_request_total`, "
        "`apiserver_response_sizes_sum`, read from its /metrics just before and after each run) for every tool; "
        "not counted: non-resource requests, WATCH, and the server's housekeeping resources "
        f"({filtered}). Bytes are observed for reads (GET, LIST) only, as sent: the API server gzips a response "
        "over 128 KB for clients that accept it, and every client here does (requests' default). `own count` is "
        "what the tool itself reported (nsscaler's JSON report; naive and limit count their requests).",
        "Wall time is the whole process for nsscaler and kube-downscaler (Python start-up included, as a CronJob "
        "pays it); both tools' own sources are byte-compiled first, as in an image pip installed them (this "
        "machine sets PYTHONDONTWRITEBYTECODE). The naive baseline uses nsscaler's client settings (no ~/.netrc or "
        "environment lookup per request). The limit is the same PATCHes, built beforehand, sent by the standard "
        "library's http.client over as many keep-alive TLS connections as nsscaler has writers (--concurrency), in "
        "a process of its own: its wall is from its first connection to its last answer (bench/limit.py). CPU is "
        "kube-apiserver + etcd (/proc, 10 ms ticks). Medians of the repetitions.",
        *results["notes"],
        f"The whole bench took {results['elapsed_s'] / 60:.0f} min.",
    ]
    family_rows = [{**r, "label": "family"} for r in results["family"]["rows"]]
    out = [*provenance(results), "", "## Targets", "", *targets, "", "## nsscaler and kube-downscaler", "",
           *side_by_side(results["rows"]), "",
           *peer_lines(results["peer"]), "", "## All-family scenarios", "", *runs_table(results["rows"]), "",
           *ratios_table(results["ratios"]), "", *family_section(results["family"]), "",
           "### Where nsscaler's steady state goes", "", *steady_profile(results["rows"] + family_rows), "",
           *steady_client(results["rows"]), "", "### What a freeze's PATCH carries", "",
           *record_lines(results["rows"]), "",
           *memory_section(results["memory"]), "", "## Notes", "", *[f"- {n}" for n in notes]]
    return "\n".join(out) + "\n"


def render_wake(result: dict[str, Any]) -> str:
    """`make bench-wake`'s result: request to ready by each path, with where it was measured."""
    m = result["machine"]
    load = " ".join(f"{x:.2f}" for x in m["load_before"]), " ".join(f"{x:.2f}" for x in m["load_after"])
    dirty = " (with uncommitted changes)" if m["commit_dirty"] else ""
    lines = [f"# Wake on request: request to ready on a real node ({result['when']} UTC)", "",
             f"{result['reps']} repetitions each; seconds from the first request (waker) or the Wake's creation "
             "(schedule) to the app's first answer through the gateway. Measured at commit "
             f"{m['commit']}{dirty} against kube-apiserver {m['server_version']}, on {m['cpus']} cores; load average "
             f"(1, 5, 15 min) {load[0]} before and {load[1]} after.", "",
             "| path | median | worst | all |", "|---|---|---|---|"]
    for path, times in result["found"].items():
        lines.append(f"| {path} | {statistics.median(times):.1f} s | {max(times):.1f} s | "
                     f"{', '.join(f'{t:.1f}' for t in times)} |")
    return "\n".join(lines) + "\n"
