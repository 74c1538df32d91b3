"""A CycloneDX 1.6 SBOM (JSON) of the Python environment that runs this script: every installed distribution with
its name, version, package URL and declared licence. Standard library only, so the image's own interpreter runs it
at build time (`/opt/nsscaler/bin/python tools/sbom.py`) and the SBOM describes exactly the venv that ships.

The output is reproducible: components sorted, no timestamp, and a serial number derived from the content, so two
builds of the same commit write the same bytes. The distribution named by `--subject` (default nsscaler) is the
SBOM's `metadata.component`; every other one is a component.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import sysconfig
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any

SPEC_VERSION = "1.6"
#: uuid5 namespace of the serial numbers: the same content always gets the same serial
_SERIALS = uuid.UUID("6f1d7f52-5a34-4b8e-9a3e-3c2b5d9f0c11")


def _field(dist: metadata.Distribution, key: str) -> str | None:
    values = dist.metadata.get_all(key)
    return str(values[0]) if values else None


def _name(dist: metadata.Distribution) -> str:
    return re.sub(r"[-_.]+", "-", _field(dist, "Name") or "").lower()


def _licenses(dist: metadata.Distribution) -> list[dict[str, Any]]:
    expression = _field(dist, "License-Expression")
    if expression:
        return [{"expression": expression}]
    classifiers = dist.metadata.get_all("Classifier") or []
    names = sorted({c.rsplit(" :: ", 1)[1] for c in classifiers if c.startswith("License :: ") and c.count("::") > 1})
    return [{"license": {"name": name}} for name in names]


def component(dist: metadata.Distribution, *, kind: str = "library") -> dict[str, Any]:
    name, version = _name(dist), dist.version
    purl = f"pkg:pypi/{name}@{version}"
    found: dict[str, Any] = {"type": kind, "bom-ref": purl, "name": name, "version": version, "purl": purl}
    summary = _field(dist, "Summary")
    if summary:
        found["description"] = summary
    licenses = _licenses(dist)
    if licenses:
        found["licenses"] = licenses
    return found


def installed(paths: list[str]) -> list[metadata.Distribution]:
    """The distributions installed under `paths`, one per name (the first on the path wins, as for imports)."""
    seen: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions(path=paths):
        seen.setdefault(_name(dist), dist)
    return [seen[name] for name in sorted(seen)]


def bom(dists: list[metadata.Distribution], *, subject: str) -> dict[str, Any]:
    main = [d for d in dists if _name(d) == subject]
    body: dict[str, Any] = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "nsscaler tools/sbom.py"}]},
            "properties": [{"name": "nsscaler:python", "value": f"{platform.python_implementation()} "
                                                                f"{platform.python_version()}"}],
        },
        "components": [component(d) for d in dists if _name(d) != subject],
    }
    if main:
        body["metadata"]["component"] = component(main[0], kind="application")
    content = json.dumps(body, sort_keys=True).encode()
    return {"serialNumber": f"urn:uuid:{uuid.uuid5(_SERIALS, content.decode())}", **body}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", action="append", help="a folder of installed distributions (default: this "
                        "interpreter's site-packages)")
    parser.add_argument("--subject", default="nsscaler", help="the distribution the SBOM is about")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    paths = args.path or sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    text = json.dumps(bom(installed(paths), subject=args.subject), indent=2, sort_keys=True) + "\n"
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
