"""The benchmark reports only what it measured: without the peer's run a target against it reads "not compared",
no stored figure stands in for the peer, and every recorded result is what the tool renders from its JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench import markdown, summary, verify

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"


def _row(n: int, tool: str, **figures: float) -> dict:
    return {"n": n, "scenario": "steady state", "tool": tool, "seconds": 0.5, "server_cpu_s": 0.1,
            "client_cpu_s": 0.3, "rss_mb": 40.0, **figures}


def test_a_target_against_a_peer_that_did_not_run_reads_not_compared():
    by_key = summary.index([_row(100, "nsscaler")])
    targets = summary.steady_targets(by_key)
    at_100 = [t for t in targets if "N=100:" in t["target"]]
    assert [t["verdict"] for t in at_100] == ["not compared"] * 4
    assert all("kube-downscaler not run" in t["figures"] for t in at_100)
    assert {t["verdict"] for t in targets if "N=1000:" in t["target"]} == {"not measured"}


def test_a_target_against_a_measured_peer_is_met_or_missed_by_the_measurement():
    by_key = summary.index([_row(100, "nsscaler"), _row(100, summary.PEER, seconds=0.3, server_cpu_s=0.2)])
    verdicts = {t["target"].split(": ")[1]: t["verdict"] for t in summary.steady_targets(by_key)
                if "N=100:" in t["target"]}
    assert verdicts == {"wall time ≤ kube-downscaler's": "missed", "API-server CPU ≤ kube-downscaler's": "met",
                        "client CPU ≤ kube-downscaler's": "met", "peak RSS ≤ kube-downscaler's": "met"}


def test_no_stored_peer_figure_in_the_bench_code():
    """The bench's code holds no figure of kube-downscaler's: every one comes from a run."""
    code = "\n".join(p.read_text() for p in BENCH.glob("*.py"))
    assert not hasattr(summary, "PEER_REFERENCE")
    assert not re.search(r"kube-downscaler[^\n]*\b2[0-9]\.[0-9]+\.[0-9]+", code), "a peer version in the code"


def test_every_recorded_result_is_what_the_tool_renders_from_its_json():
    assert verify.problems() == []


def test_a_result_edited_by_hand_is_caught(tmp_path):
    result = {"format": verify.FORMAT, "when": "2026-12-05 09:00", "reps": 1, "found": {"waker": [3.9]},
              "machine": {"commit": "0" * 40, "commit_dirty": False, "cpus": 2, "server_version": "v1.36.3",
                          "load_before": [1.0, 1.0, 1.0], "load_after": [2.0, 2.0, 2.0]}}
    (tmp_path / "wake-x.json").write_text(json.dumps(result))
    (tmp_path / "wake-x.md").write_text(markdown.render_wake(result))
    assert verify.problems(tmp_path) == []
    (tmp_path / "wake-x.md").write_text(markdown.render_wake(result).replace("3.9 s", "2.9 s"))
    assert verify.problems(tmp_path) == ["wake-x.md: differs from the Markdown rendered from wake-x.json"]
    (tmp_path / "wake-y.json").write_text(json.dumps({"waker": [1.0]}))
    (tmp_path / "wake-y.md").write_text("by hand\n")
    assert "wake-y: not written by this version of the tool" in verify.problems(tmp_path)[1]
