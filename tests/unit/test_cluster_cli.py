"""`python -m devtools.cluster down` stops what a start ran from its state folder even when no state file records it
(a start interrupted before it saved a pid), and nothing else that merely names the folder."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.cluster import __main__ as cluster


@pytest.fixture
def sleeper() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def run_as(sleeper: list[subprocess.Popen[bytes]], argv0: str, *args: str) -> subprocess.Popen[bytes]:
    """A process whose command line reads `argv0 ... args`, as a program of that name would show in /proc (bash
    waiting in its `read` builtin: no child of its own to leave behind)."""
    proc = subprocess.Popen([argv0, "-c", "read -t 600 _", "waiting", *args], executable=shutil.which("bash"),
                            stdin=subprocess.PIPE)
    sleeper.append(proc)
    return proc


def test_down_stops_a_program_of_ours_no_state_file_records_and_nothing_else(tmp_path, sleeper, capsys):
    state = tmp_path / "cluster"
    state.mkdir()
    (state / "etcd.log").write_text("")
    ours = run_as(sleeper, "/cache/k8s/kube-apiserver", f"--cert-dir={state}/apiserver-certs")
    theirs = run_as(sleeper, "tail", f"{state}/etcd.log")  # someone reading a log: not ours to stop
    elsewhere = run_as(sleeper, "/cache/k8s/etcd", f"--data-dir={tmp_path}/other/etcd")
    assert cluster.strays(state) == [ours.pid]

    assert cluster.down(state) == 0
    assert cluster.strays(state) == [] and not Path(f"/proc/{ours.pid}").exists()  # stopped and reaped
    assert theirs.poll() is None and elsewhere.poll() is None
    assert not state.exists()
    assert "stopped" in capsys.readouterr().err


def test_down_with_nothing_there_says_so(tmp_path, capsys):
    assert cluster.down(tmp_path / "cluster") == 0
    assert "nothing to stop" in capsys.readouterr().err
