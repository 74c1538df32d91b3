"""A tiny run of the benchmark code (N=20, one repetition), so `make bench` cannot rot unnoticed."""

from __future__ import annotations

import json

from bench.__main__ import main


def test_benchmark_smoke(tmp_path, capsys):
    """Starts its own control plane without the Deployment controller, as `make bench` does."""
    assert main(["--sizes", "20", "--reps", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "smoke.json").read_text())
    rows = {(r["scenario"], r["tool"]): r for r in result["rows"]}
    assert rows[("first run", "nsscaler")]["requests"]["patch"] >= 80  # 80 % of 100 Deployments, plus status
    assert rows[("first run", "limit")]["total_requests"] == 80
    assert rows[("steady state", "nsscaler")]["requests"].get("patch") == 1  # the status write only
    assert rows[("first run", "nsscaler")]["rss_mb"] > 10
    assert "| 20 | first run | nsscaler |" in capsys.readouterr().out
