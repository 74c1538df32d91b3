"""The mutation score `make mutation` prints: mutmut's verdict on every mutant it checked, counted per package and
per module.

mutmut (configured in pyproject.toml's `[tool.mutmut]`) mutates job/decide and job/model and runs the pure unit
tests against each mutant; `mutmut results --all true` then lists one `name: status` line per mutant. This module
reads that list, leaves out the mutants the run did not check (a run restricted to some modules), and prints for
each package and module: killed / checked, the survivors, the timeouts and the mutants no test reaches.
A timeout is shown apart, never counted as killed; the score is killed / checked.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: `    job.decide.plan.x_make_plan__mutmut_12: survived` (a method: `job.model.workloads.xǁWorkloadǁkey__mutmut_1`)
_LINE = re.compile(r"^\s*(?P<name>[\w.ǁ]+?)\.x[_ǁ]\S*__mutmut_\d+:\s*(?P<status>.+?)\s*$")
UNCHECKED = "not checked"


@dataclass
class Tally:
    """mutmut's verdicts on the checked mutants of one module or package, and the survivors' names."""

    statuses: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)

    @property
    def checked(self) -> int:
        return sum(self.statuses.values())

    @property
    def killed(self) -> int:
        return self.statuses["killed"]

    def score(self) -> str:
        if not self.checked:
            return "-"
        return f"{self.killed}/{self.checked} = {100 * self.killed / self.checked:.1f}%"


def tallies(lines: list[str]) -> dict[str, Tally]:
    """Per module (`job.decide.plan`) and per package (`job.decide`), the checked mutants' verdicts."""
    found: dict[str, Tally] = {}
    for line in lines:
        match = _LINE.match(line)
        if not match or match["status"] == UNCHECKED:
            continue
        module = match["name"]
        package = ".".join(module.split(".")[:2])
        mutant = line.split(":", 1)[0].strip()
        for key in dict.fromkeys((package, module)):
            tally = found.setdefault(key, Tally())
            tally.statuses[match["status"]] += 1
            if match["status"] == "survived":
                tally.survivors.append(mutant)
    return found


def report(found: dict[str, Tally], *, survivors: bool) -> str:
    """The table `make mutation` prints: packages first, then their modules."""
    packages = sorted(k for k in found if k.count(".") == 1)
    rows = [f"{'package / module':<34} {'score (killed/checked)':>26} {'survived':>9} {'timeout':>8} {'no tests':>9}"]
    for package in packages:
        for key in [package, *sorted(k for k in found if k.startswith(package + ".") and k != package)]:
            tally = found[key]
            name = key if key == package else "  " + key.removeprefix(package + ".")
            rows.append(f"{name:<34} {tally.score():>26} {tally.statuses['survived']:>9} "
                        f"{tally.statuses['timeout']:>8} {tally.statuses['no tests']:>9}")
            other = {k: v for k, v in tally.statuses.items() if k not in ("killed", "survived", "timeout", "no tests")}
            if other:
                rows.append(f"{'':<4}also: {', '.join(f'{v} {k}' for k, v in sorted(other.items()))}")
    if not packages:
        rows.append("no checked mutant: run `make mutation` first")
    if survivors:
        rows += ["", "survivors (`.venv/bin/mutmut show NAME` prints one's diff):"]
        rows += [f"  {name}" for package in packages for name in found[package].survivors]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--survivors", action="store_true", help="also list every surviving mutant by name")
    args = parser.parse_args(argv)
    mutmut = Path(sys.executable).parent / "mutmut"
    listed = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True,
                            check=True)
    print(report(tallies(listed.stdout.splitlines()), survivors=args.survivors))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
