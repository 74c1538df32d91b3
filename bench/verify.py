"""`python -m bench.verify` (run by `make lint` and a unit test): every result under bench/results/ is exactly what
the tool writes from its JSON. For each result of the current format the Markdown is rendered again from the JSON,
and the cost targets' verdicts are decided again from the measured rows: any difference fails (a figure or a
verdict edited by hand, a stored figure that was not measured in that run).

Results written before the tool recorded its commit, the API server's own version and the load average are
listed in `LEGACY` by name, and are not checked: a new result without the format is refused. Among them,
wake-20261204T214822Z.md was edited by hand after the tool wrote it (its load-average sentence); the results
whose peer figures were stored rather than measured in their run were removed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench import markdown, summary

RESULTS = Path(__file__).resolve().parent / "results"
#: the results written by earlier versions of the tool, kept as they are (their figures are cited in
#: docs/contributing/performance.md), never added to
LEGACY = frozenset({
    "bench-20261202T193422Z", "bench-20261203T124239Z", "bench-20261203T143613Z", "bench-20261203T150146Z",
    "bench-20261203T161331Z", "bench-20261204T184513Z", "bench-20261204T190648Z", "bench-20261204T191024Z",
    "bench-20261204T191129Z", "bench-20261204T215619Z", "bench-20261204T215745Z", "bench-20261204T215845Z",
    "bench-20261204T221629Z", "bench-20261204T221718Z", "bench-20261204T221810Z", "bench-20261205T002305Z",
    "bench-20261205T004036Z", "bench-20261205T004612Z", "wake-20261204T214822Z",
})
#: the one format this check knows (`bench.__main__.FORMAT`, written into each result)
FORMAT = 2


def rendered(name: str, result: dict[str, Any]) -> str:
    return markdown.render_wake(result) if name.startswith("wake-") else markdown.render(result)


def decided(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdicts, decided again from the rows measured in that run."""
    return summary.targets(result["rows"], result["family"]["rows"], result["memory"])


def problems(folder: Path = RESULTS) -> list[str]:
    found = []
    names = {p.stem for p in folder.glob("*.json")} | {p.stem for p in folder.glob("*.md")}
    for name in sorted(names):
        data, text = folder / f"{name}.json", folder / f"{name}.md"
        if not data.exists() or not text.exists():
            found.append(f"{name}: a result is a .json and the .md rendered from it; one of them is missing")
            continue
        if name in LEGACY:
            continue
        result = json.loads(data.read_text())
        if not isinstance(result, dict) or result.get("format") != FORMAT:
            found.append(f"{name}: not written by this version of the tool (no \"format\": {FORMAT})")
            continue
        if not name.startswith("wake-") and decided(result) != result["targets"]:
            found.append(f"{name}.json: its verdicts are not those its measured rows give")
        if rendered(name, result) != text.read_text():
            found.append(f"{name}.md: differs from the Markdown rendered from {name}.json")
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    print(f"bench results: {len(found)} problems", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
