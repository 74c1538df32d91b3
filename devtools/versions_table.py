"""The supported versions' table (`make versions-table`), written from the version tier's own record.

The README's "Supported Kubernetes versions" section and docs/operating/versions.md hold the same table: one row per
minor of devtools/cluster/versions.py, at the patch the tier builds, saying what differs on it and when the tier last
proved it, with pytest's counts, as docs/operating/versions.json records them (devtools/version_tier.py writes that
file; nothing else does). A minor with no record at its patch reads "not proven at this patch". `--check` (part of
`make lint`) fails when either page's table is not what the record gives.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from devtools.cluster import versions

ROOT = Path(__file__).resolve().parent.parent
#: the version tier's record of the whole suite on each minor (devtools/version_tier.py writes it), the table's source
RECORD = ROOT / "docs" / "operating" / "versions.json"
PAGES = (ROOT / "README.md", ROOT / "docs" / "operating" / "versions.md")
HEADER = "| Kubernetes | What differs | Last proven |\n|---|---|---|\n"
#: minor -> what differs on it, for a reader choosing a version
DIFFERS = {
    "1.34": "No MutatingAdmissionPolicy v1: a Wake written by hand names its requester in `spec.requestedBy`",
    "1.35": "As 1.34",
    "1.36": "MutatingAdmissionPolicy v1 is served: `kustomize/components/wake-requester-stamp` may fill "
            "`requestedBy` in",
    "1.37": "As 1.36",
}


def proven(entry: dict[str, Any] | None, patch: str) -> str:
    if not entry or entry.get("kubernetes") != patch:
        return "not proven at this patch"
    tally = ", ".join(f"{entry[k]} {k}" for k in ("passed", "failed", "errors", "skipped") if entry.get(k))
    verdict = "" if entry["exit"] == 0 else "FAILED: "
    return f"{verdict}{entry['date']}, {entry['commit']} ({tally or 'nothing ran'})"


def table(record: dict[str, Any]) -> str:
    rows = [f"| {patch} | {DIFFERS[minor]} | {proven(record['versions'].get(minor), patch)} |\n"
            for minor, patch in versions.SUPPORTED.items()]
    return HEADER + "".join(rows)


def rewritten(text: str, new_table: str, page: Path) -> str:
    start = text.find(HEADER)
    if start < 0:
        raise SystemExit(f"{page.relative_to(ROOT)} has no version table (a line {HEADER.splitlines()[0]!r})")
    end = start + len(HEADER)
    while text.startswith("|", end):
        end = text.index("\n", end) + 1
    return text[:start] + new_table + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a page's table is not the record's")
    args = parser.parse_args(argv)
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {"versions": {}}
    new_table = table(record)
    stale = []
    for page in PAGES:
        text = page.read_text()
        new = rewritten(text, new_table, page)
        if new != text:
            stale.append(str(page.relative_to(ROOT)))
            if not args.check:
                page.write_text(new)
    if args.check and stale:
        print(f"the version table of {', '.join(stale)} is not what {RECORD.relative_to(ROOT)} records: "
              "run `make versions-table`", file=sys.stderr)
        return 1
    print(f"version table: {'current' if not stale else 'written to ' + ', '.join(stale)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
