"""The version tier (`make test-versions`): the compatibility suite (tests marked `versions`) against a real
control plane of every supported Kubernetes minor, one after another, each with its own kubectl.

The hold between runs (tests/e2e/test_hold.py: the admission policy `nsscaler-hold` against a real editor) is in
the selection: what a ValidatingAdmissionPolicy may read (`namespaceObject`, optional fields in CEL) must hold on
every supported version.

Each version's build and test time and pytest's own counts (from its JUnit XML: passed, failed, errors, skipped)
are printed and recorded in docs/operating/versions.json with the commit and the date, one entry per minor: a run
of some minors (`--minor 1.35`) replaces only theirs. That file is what the README's and
docs/operating/versions.md's table is written from (`make versions-table`; `make lint` fails on a stale table).
A run given pytest arguments that select (`-k`, `-x`, a path...) tests a selection, not the suite: it is recorded
only in build/test-versions.json; reporting arguments (`-rs`, `-v`) select nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from devtools import versions_table
from devtools.cluster import build, versions

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "build" / "test-versions.json"
RECORD = versions_table.RECORD


#: pytest arguments that run less than the whole suite (a path, anything not starting with "-", does too)
SELECTING = ("-k", "-m", "-x", "--exitfirst", "--maxfail", "--deselect", "--lf", "--last-failed", "--sw",
             "--stepwise", "--ignore", "--ignore-glob")


def selects(pytest_args: list[str]) -> bool:
    return any(not a.startswith("-") or a.split("=")[0] in SELECTING for a in pytest_args)


def _commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                           check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=False).stdout.strip()
    return (found.stdout.strip() or "unknown") + ("-dirty" if dirty else "")


def counts(junit: Path) -> dict[str, int]:
    """pytest's own tally of one run, from its JUnit XML (a run that never wrote one counts nothing)."""
    if not junit.exists():
        return {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    root = ET.parse(junit).getroot()  # noqa: S314 (the report pytest just wrote, here)
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None, junit
    tests, failed, errors, skipped = (int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped"))
    return {"passed": tests - failed - errors - skipped, "failed": failed, "errors": errors, "skipped": skipped}


def run_version(minor: str, pytest_args: list[str]) -> dict[str, object]:
    started = time.monotonic()
    build.ensure_built(minor=minor)
    built = time.monotonic() - started
    env = {**os.environ, versions.VERSION_ENV: minor}
    junit = ROOT / "build" / f"test-versions-{minor}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    tested = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "pytest", "-m", "versions", "-p", "no:cacheprovider",
                           f"--junitxml={junit}", *pytest_args], cwd=ROOT, env=env, check=False).returncode
    return {"minor": minor, "kubernetes": versions.kubernetes_version(minor), "exit": code, **counts(junit),
            "build_seconds": round(built), "test_seconds": round(time.monotonic() - tested)}


def record(results: list[dict[str, object]], *, commit: str, date: str, path: Path = RECORD) -> None:
    """Each minor's entry replaced by this run's; the others kept as they were."""
    kept = json.loads(path.read_text())["versions"] if path.exists() else {}
    for r in results:
        kept[str(r["minor"])] = {**{k: v for k, v in r.items() if k != "minor"}, "commit": commit, "date": date}
    ordered = {m: kept[m] for m in sorted(kept, key=lambda m: tuple(int(n) for n in m.split(".")))}
    path.write_text(json.dumps({"versions": ordered}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minor", action="append", choices=list(versions.SUPPORTED),
                        help="only this minor (repeatable); default: every supported one")
    args, pytest_args = parser.parse_known_args(argv)
    results = [run_version(minor, pytest_args) for minor in args.minor or versions.SUPPORTED]
    commit, date = _commit(), dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"commit": commit, "date": date, "pytest_args": pytest_args,
                                   "versions": results}, indent=2) + "\n")
    if not selects(pytest_args):
        record(results, commit=commit, date=date)
        versions_table.main([])
    print("\nversion tier:", file=sys.stderr)
    for r in results:
        print(f"  Kubernetes {r['kubernetes']}: {'passed' if r['exit'] == 0 else 'FAILED'}: {r['passed']} passed, "
              f"{r['failed']} failed, {r['errors']} errors, {r['skipped']} skipped "
              f"(build {r['build_seconds']}s, tests {r['test_seconds']}s)", file=sys.stderr)
    where = RECORD.relative_to(ROOT) if not selects(pytest_args) else f"{RESULTS.relative_to(ROOT)} only (a selection)"
    print(f"  recorded in {where}", file=sys.stderr)
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
