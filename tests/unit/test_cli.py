"""Bad settings: one clear line per problem, exit 2, before anything touches a cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import job
from job.cli import RELEASE, RUN, exit_codes, load_settings, main, subcommand_of
from job.errors import EXIT_CANNOT_START, EXIT_FAILED, EXIT_LEASE_HELD, EXIT_OK


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


@pytest.mark.parametrize("command", [RUN, RELEASE], ids=lambda c: c.name)
def test_each_subcommand_has_its_own_help_ending_with_its_exit_codes(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "110")
    with pytest.raises(SystemExit) as exit_info:
        main([command.name, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: nsscaler {command.name} [-h] ")
    assert " ".join(command.description.split()) in " ".join(out.split())
    for flag in ("--kubeconfig", "--context", "--dry-run", "--max-freeze", "--protected-namespaces",
                 "--log-format", "--output", "--concurrency", "--retry-attempts"):
        assert flag in out
    assert out.endswith(exit_codes(command.exits) + "\n")
    assert [int(line.split()[0]) for line in out.split("exit codes:\n")[1].splitlines()
            if line.startswith("  ") and line.split()[0].isdigit()] == list(command.exits)


def test_the_run_lists_every_exit_code_of_the_command_and_the_release_all_but_the_lease():
    assert set(RUN.exits) == {EXIT_OK, EXIT_FAILED, EXIT_CANNOT_START, EXIT_LEASE_HELD}
    assert set(RELEASE.exits) == {EXIT_OK, EXIT_FAILED, EXIT_CANNOT_START}  # a release takes no run Lease


def test_the_top_help_lists_both_subcommands_and_their_exit_codes(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "110")
    assert main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("usage: nsscaler [-h] [--version] [{run,release}] [settings ...]\n")
    for command in (RUN, RELEASE):
        assert re.search(rf"^    {command.name} +{re.escape(command.summary)}$", out, re.M), out
        assert exit_codes(command.exits, title=f"exit codes of {command.name}") in out
    assert "Without a subcommand, nsscaler runs once (`nsscaler run`)" in " ".join(out.split())


@pytest.mark.parametrize(("argv", "command", "rest"), [
    pytest.param([], RUN, [], id="the CronJob: no argument"),
    pytest.param(["--dry-run", "--output", "json"], RUN, ["--dry-run", "--output", "json"], id="flags only"),
    pytest.param(["run", "--dry-run"], RUN, ["--dry-run"], id="run"),
    pytest.param(["release", "--restore-wait-in-run=30"], RELEASE, ["--restore-wait-in-run=30"], id="release"),
])
def test_run_is_the_subcommand_when_none_is_named(argv, command, rest):
    assert subcommand_of(argv) == (command, rest)


def test_a_subcommand_takes_its_settings_as_the_run_does(monkeypatch):
    monkeypatch.setenv("NSSCALER_LOG_FORMAT", "json")
    for command in (RUN, RELEASE):
        settings = load_settings(["--dry-run", "--max-freeze", "3"], command=command)
        assert (settings.dry_run, settings.max_freeze, settings.log_format) == (True, 3, "json")


def test_the_version_is_the_packages(capsys):
    assert main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out == f"nsscaler {job.__version__}\n"


def test_an_unknown_setting_of_the_release_points_to_the_releases_help(capsys):
    assert main(["release", "--frobnicate"]) == EXIT_CANNOT_START
    [line] = capsys.readouterr().err.splitlines()
    assert "unrecognized arguments: --frobnicate" in line and line.endswith("see nsscaler release --help")


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
