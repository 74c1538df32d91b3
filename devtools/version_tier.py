"""The version tier (`make test-versions`): the compatibility suite (tests marked `versions`) against a real
control plane of every supported Kubernetes minor, one after another, each with its own kubectl.

The hold between runs (tests/e2e/test_hold.py: the admission policy `nsscaler-hold` against a real editor) is in
the selection: what a ValidatingAdmissionPolicy may read (`namespaceObject`, optional fields in CEL) must hold on
every supported version.

Each version's build and test time and result are printed and written to build/test-versions.json (with the
commit and the date), which is what the README's "Supported Kubernetes versions" table cites.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from devtools.cluster import build, versions

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "build" / "test-versions.json"


def _commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                           check=False)
    return found.stdout.strip() or "unknown"


def run_version(minor: str, pytest_args: list[str]) -> dict[str, object]:
    started = time.monotonic()
    build.ensure_built(minor=minor)
    built = time.monotonic() - started
    env = {**os.environ, versions.VERSION_ENV: minor}
    tested = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "pytest", "-m", "versions", "-p", "no:cacheprovider",
                           *pytest_args], cwd=ROOT, env=env, check=False).returncode
    return {"minor": minor, "kubernetes": versions.kubernetes_version(minor), "passed": code == 0,
            "exit": code, "build_seconds": round(built), "test_seconds": round(time.monotonic() - tested)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minor", action="append", choices=list(versions.SUPPORTED),
                        help="only this minor (repeatable); default: every supported one")
    args, pytest_args = parser.parse_known_args(argv)
    results = [run_version(minor, pytest_args) for minor in args.minor or versions.SUPPORTED]
    record = {"commit": _commit(), "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"), "versions": results}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=2) + "\n")
    print("\nversion tier:", file=sys.stderr)
    for r in results:
        print(f"  Kubernetes {r['kubernetes']}: {'passed' if r['passed'] else 'FAILED'} "
              f"(build {r['build_seconds']}s, tests {r['test_seconds']}s)", file=sys.stderr)
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
