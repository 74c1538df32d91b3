"""Bad settings: one clear line per problem, exit 2, before anything touches a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from job.cli import EXIT_CANNOT_START, main


@pytest.mark.parametrize(("argv", "env", "expected"), [
    pytest.param(["--default-kinds", "Pod"], {}, "--default-kinds (NSSCALER_DEFAULT_KINDS)[0]", id="unknown-kind"),
    pytest.param(["--concurrency", "-1"], {}, "--concurrency (NSSCALER_CONCURRENCY): Input should be greater",
                 id="negative-concurrency"),
    pytest.param([], {"NSSCALER_MAX_FREEZE": "-3"}, "--max-freeze (NSSCALER_MAX_FREEZE)", id="negative-cap-env"),
    pytest.param(["--log-format", "xml"], {}, "--log-format (NSSCALER_LOG_FORMAT): Input should be 'text' or 'json'",
                 id="bad-log-format"),
    pytest.param(["--request-timeout", "soon"], {}, "--request-timeout", id="not-a-number"),
    pytest.param(["--frobnicate"], {}, "unrecognized arguments: --frobnicate", id="unknown-flag"),
])
def test_invalid_settings_exit_2_with_the_field_and_reason(argv, env, expected, monkeypatch, capsys):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(argv) == EXIT_CANNOT_START
    err = capsys.readouterr().err
    assert expected in err
    assert len(err.strip().splitlines()) == 1, err


def test_settings_from_the_environment_alone_are_read_without_the_command_line_parser(monkeypatch):
    """The CronJob passes no flags: its settings come from the environment, as they would with the parser."""
    from job.cli import load_settings  # noqa: PLC0415
    from job.model.settings import Settings  # noqa: PLC0415

    for key, value in {"NSSCALER_DRY_RUN": "true", "NSSCALER_DEFAULT_KINDS": "Deployment,CronJob",
                       "NSSCALER_LOG_FORMAT": "JSON", "NSSCALER_PROTECTED_NAMESPACES": '["a", "b"]',
                       "NSSCALER_SOFT_DEADLINE": "540"}.items():
        monkeypatch.setenv(key, value)
    assert load_settings([]) == Settings(_cli_parse_args=[])  # type: ignore[call-arg]
    assert load_settings([]).dry_run is True and load_settings([]).log_format == "json"
    assert load_settings(["--no-dry-run"]).dry_run is False


def test_missing_kubeconfig_says_what_to_do(tmp_path, capsys):
    assert main(["--kubeconfig", str(tmp_path / "nope")]) == EXIT_CANNOT_START
    err = capsys.readouterr().err
    assert "no credentials" in err and "--kubeconfig" in err


def test_unknown_context_lists_the_known_ones(tmp_path, capsys):
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters: [{name: c, cluster: {server: "
                      "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: a, "
                      "context: {cluster: c, user: u}}]\n")
    assert main(["--kubeconfig", str(config), "--context", "b"]) == EXIT_CANNOT_START
    assert "context 'b' is not in" in capsys.readouterr().err


@pytest.mark.parametrize("text", [
    pytest.param("/home/me/.kube/config\n", id="a-path-not-a-file"),
    pytest.param("apiVersion: v1\nkind: Config\nclusters: []\n", id="no-current-context"),
    pytest.param("apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters: []\n", id="unknown-context"),
])
def test_an_unusable_kubeconfig_is_named_in_one_line(tmp_path, capsys, text):
    """(A kubeconfig without a server means localhost, as for kubectl: that is an unreachable API server.)"""
    config = tmp_path / "config"
    config.write_text(text)
    assert main(["--kubeconfig", str(config)]) == EXIT_CANNOT_START
    err = capsys.readouterr().err
    assert str(config) in err and "--kubeconfig" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_help_lists_every_setting(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--kubeconfig", "--context", "--dry-run", "--max-freeze", "--protected-namespaces",
                 "--log-format", "--output", "--concurrency", "--retry-attempts"):
        assert flag in out


@pytest.mark.parametrize("command", [["nsscaler"], ["python", "-m", "job"]])
def test_the_command_keeps_the_exit_code_and_every_line_when_it_skips_the_teardown(tmp_path, command):
    """`job.command` ends the process with os._exit: the code and the last lines still come out whole."""
    bin_dir = Path(sys.executable).parent
    argv = [str(bin_dir / command[0]), *command[1:], "--kubeconfig", str(tmp_path / "nope")]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60,
                            env={**os.environ, "NSSCALER_LOG_FORMAT": "json"})
    assert result.returncode == EXIT_CANNOT_START
    [line] = result.stderr.splitlines()
    assert json.loads(line)["event"] == "startup-failed" and "no credentials" in line
