"""A process the cluster builders started is recognised by its pid and start time, from the instant Popen returns:
not by its command line, which reads empty until exec has laid out the new program's arguments (on a busy machine,
milliseconds later; `make cluster-up` then failed with "running, but not the program it was")."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.cluster import controlplane

# Field 22 (start time) is 4242; the command name holds a space and a parenthesis, as a process may name itself.
STAT = "1234 (kube ) apiserver) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 4242 1000 20 0 0"


@pytest.mark.parametrize(("stat", "expected"), [
    pytest.param(STAT, ("S", 4242), id="name-with-space-and-parenthesis"),
    pytest.param(STAT.replace(" S ", " Z ", 1), ("Z", 4242), id="zombie-keeps-its-start-time"),
    pytest.param(STAT.replace("(kube ) apiserver)", "(etcd)"), ("S", 4242), id="plain-name"),
])
def test_state_and_start_time_from_proc_stat(stat, expected):
    assert controlplane.parse_stat(stat) == expected


@pytest.fixture
def spawned(tmp_path: Path) -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_process_is_ours_from_the_instant_it_is_spawned(tmp_path, spawned):
    """Detached, as `make cluster-up` starts them: the spawn that raced the old command-line check."""
    for _ in range(20):
        pid, started = controlplane._spawn(["sleep", "60"], tmp_path / "sleep.log", die_with_parent=False)
        spawned.append(pid)
        assert controlplane.is_running(pid, started)


def test_another_start_time_or_none_is_not_ours(tmp_path, spawned):
    pid, started = controlplane._spawn(["sleep", "60"], tmp_path / "sleep.log", die_with_parent=True)
    spawned.append(pid)
    assert not controlplane.is_running(pid, started + 1)  # the same pid, recycled for another process
    assert not controlplane.is_running(pid, None)  # a record from before start times were kept


def test_an_exited_process_not_yet_waited_for_is_not_running(tmp_path):
    # it outlives the spawn: Popen reaps a child already gone when its object is dropped, leaving no zombie to see
    pid, started = controlplane._spawn(["sleep", "0.3"], tmp_path / "sleep.log", die_with_parent=True)
    deadline = time.monotonic() + 10
    while (controlplane.read_stat(pid) or ("Z",))[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert controlplane.read_stat(pid) == ("Z", started)
    assert not controlplane.is_running(pid, started)
    assert controlplane._how_it_ended(pid) == "exit code 0"
