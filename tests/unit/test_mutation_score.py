"""The score `make mutation` prints (tools/mutation.py), from `mutmut results --all true` lines: only the mutants
the run checked count, per package and per module, and a timeout is never a kill."""

from __future__ import annotations

import pytest

from tools.mutation import report, tallies

LINES = [
    "    job.decide.plan.x_make_plan__mutmut_1: killed",
    "    job.decide.plan.x_make_plan__mutmut_2: survived",
    "    job.decide.plan.x\u01c1_Judge\u01c1__call____mutmut_3: killed",
    "    job.decide.plan.x_kinds_in_use__mutmut_1: no tests",
    "    job.decide.status.x_body__mutmut_1: not checked",
    "    job.model.kinds.replicas.x\u01c1ReplicasHandler\u01c1size_of__mutmut_1: timeout",
    "    job.model.kinds.replicas.x\u01c1ReplicasHandler\u01c1size_of__mutmut_2: killed",
    "    job.model.workloads.x__recorded__mutmut_9: survived",
    "a line mutmut prints about something else",
]


@pytest.mark.parametrize(("key", "killed", "checked", "statuses"), [
    pytest.param("job.decide", 2, 4, {"killed": 2, "survived": 1, "no tests": 1}, id="a-package"),
    pytest.param("job.decide.plan", 2, 4, {"killed": 2, "survived": 1, "no tests": 1}, id="its-module"),
    pytest.param("job.model", 1, 3, {"killed": 1, "timeout": 1, "survived": 1}, id="a-timeout-is-no-kill"),
    pytest.param("job.model.kinds.replicas", 1, 2, {"killed": 1, "timeout": 1}, id="a-nested-module"),
])
def test_only_checked_mutants_count(key, killed, checked, statuses):
    found = tallies(LINES)
    assert (found[key].killed, found[key].checked, dict(found[key].statuses)) == (killed, checked, statuses)
    assert "job.decide.status" not in found


def test_the_report_names_each_survivor_under_its_package():
    text = report(tallies(LINES), survivors=True)
    assert "2/4 = 50.0%" in text and "1/3 = 33.3%" in text
    assert text.splitlines()[-2:] == ["  job.decide.plan.x_make_plan__mutmut_2",
                                      "  job.model.workloads.x__recorded__mutmut_9"]


def test_a_run_that_checked_nothing_says_so():
    assert "no checked mutant" in report(tallies(["    job.decide.plan.x_make_plan__mutmut_1: not checked"]),
                                         survivors=False)
