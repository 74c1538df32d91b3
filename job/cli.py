"""The command line: its subcommands (`nsscaler run`, the default, and `nsscaler release`), settings, logging,
one run, output and the exit code. No business logic here."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from pydantic_settings import CliSettingsSource, SettingsError

import job
from job.errors import EXIT_CANNOT_START, EXIT_FAILED, EXIT_LEASE_HELD, EXIT_OK, StartupError, unexpected
from job.model.settings import Settings

log = logging.getLogger("nsscaler")

_POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _settings_error(exc: ValidationError) -> str:
    """One line per bad setting, naming both the flag and the environment variable."""
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else "?"
        where = ".".join(str(p) for p in err["loc"][1:])
        flag, env = "--" + field.replace("_", "-"), "NSSCALER_" + field.upper()
        lines.append(f"nsscaler: invalid setting {flag} ({env}){'[' + where + ']' if where else ''}: "
                     f"{err['msg']} (got {err.get('input')!r})")
    return "\n".join(lines)


@dataclass(frozen=True)
class Subcommand:
    """One subcommand of `nsscaler`: what its `--help` says, and what each of its exit codes means
    (docs/reference/exit-codes.md, which a unit test compares with these)."""

    name: str
    summary: str
    description: str
    exits: Mapping[int, str]


RUN = Subcommand("run", "one run: hold each family at zero but its active namespaces, give back the rest", (
    "One run, as the CronJob starts it: read every NSScaler, hold each family's namespaces at zero except the "
    "active and the woken ones, give back exactly what is no longer held, and write each policy's status and "
    "Events. The default when no subcommand is given. Every setting is also an environment variable "
    "NSSCALER_<SETTING>; a flag wins."), {
    EXIT_OK: "every policy reconciled",
    EXIT_FAILED: "the run finished but something failed (each failure named in the log), the API server answered "
                 'only "not now" (429 or 5xx), or the soft deadline came: the Job tries again',
    EXIT_CANNOT_START: "the run could not start: bad settings, no credentials, the API server unreachable, the "
                       "CRD or RBAC missing (one line says what to do): the Job fails at once",
    EXIT_LEASE_HELD: "another run held the run Lease all the while this one could wait: this run wrote nothing",
})
RELEASE = Subcommand("release", "give back every workload nsscaler holds, before nsscaler is removed", (
    "Give back every workload nsscaler holds, across all policies, before nsscaler is removed: the run's stages "
    "again and again (restore tiers in order) until nothing is left to send, then one more read names whatever "
    "still carries a record. Writes no status and no Event. Takes the run's settings."), {
    EXIT_OK: "every workload given back: no record left",
    EXIT_FAILED: "something is left frozen, or a route still points at the waker (each named in the log): fix "
                 "it and release again",
    EXIT_CANNOT_START: "the release could not start: bad settings, no credentials, the API server unreachable, "
                       "the CRD or RBAC missing (one line says what to do)",
})
SUBCOMMANDS = {c.name: c for c in (RUN, RELEASE)}
_WIDTH = 100


def exit_codes(exits: Mapping[int, str], *, title: str = "exit codes") -> str:
    """An epilog: each code with what it means, one paragraph each (the help's formatter keeps them as they are)."""
    return f"{title}:\n" + "\n".join(textwrap.fill(f"{code}  {meaning}", width=_WIDTH, initial_indent="  ",
                                                   subsequent_indent="     ") for code, meaning in exits.items())


def top_help() -> str:
    """`nsscaler --help`: the subcommands, and what each one's exit codes mean."""
    parser = argparse.ArgumentParser(prog="nsscaler", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage="nsscaler [-h] [--version] [{run,release}] [settings ...]",
                                     description=textwrap.fill(
                                         "Hold namespace families at zero replicas, and give them back exactly. "
                                         "Without a subcommand, nsscaler runs once (`nsscaler run`), as the "
                                         "CronJob calls it. `nsscaler <subcommand> --help` lists its settings.",
                                         width=_WIDTH),
                                     epilog="\n\n".join(exit_codes(c.exits, title=f"exit codes of {c.name}")
                                                         for c in SUBCOMMANDS.values()))
    parser.add_argument("--version", action="store_true", help="show the version and exit")
    sub = parser.add_subparsers(title="subcommands", metavar="{run,release}")
    for command in SUBCOMMANDS.values():
        sub.add_parser(command.name, help=command.summary)
    return parser.format_help()


def load_settings(argv: Sequence[str], *, command: Subcommand = RUN) -> Settings:
    """Flags and the environment; without flags (the CronJob sets only environment variables) the command-line
    parser is not even built: a few milliseconds of every run."""
    if argv:
        source: CliSettingsSource[argparse.ArgumentParser] = CliSettingsSource(
            Settings, cli_prog_name=f"nsscaler {command.name}")
        source.root_parser.description = textwrap.fill(command.description, width=_WIDTH)
        source.root_parser.epilog = exit_codes(command.exits)
        settings = Settings(_cli_settings_source=source(args=list(argv)))  # type: ignore[call-arg]
    else:
        settings = Settings()
    if settings.own_namespace is None and _POD_NAMESPACE_FILE.exists():
        settings = settings.model_copy(update={"own_namespace": _POD_NAMESPACE_FILE.read_text().strip()})
    return settings


def subcommand_of(args: list[str]) -> tuple[Subcommand, list[str]]:
    """The subcommand the arguments name, and the rest; with none, `run` and every argument (the CronJob's)."""
    if args[:1] and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]], args[1:]
    return RUN, args


def _answered_at_once(args: list[str]) -> bool:
    """`nsscaler --version` and `nsscaler --help` (before any subcommand): answered without settings."""
    if args[:1] == ["--version"]:
        print(f"nsscaler {job.__version__}")
    elif args[:1] in (["-h"], ["--help"]):
        print(top_help(), end="")
    else:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if _answered_at_once(args):
        return EXIT_OK
    command, args = subcommand_of(args)
    try:
        settings = load_settings(args, command=command)
    except ValidationError as exc:
        print(_settings_error(exc), file=sys.stderr)
        return EXIT_CANNOT_START
    except SettingsError as exc:
        print(f"nsscaler: {exc}; see nsscaler {command.name} --help", file=sys.stderr)
        return EXIT_CANNOT_START
    # The run's modules and the API client load only once the settings are good: `--help` and a bad setting
    # answer without them.
    from job import report, run  # noqa: PLC0415
    from job.cluster.kube import Kube  # noqa: PLC0415

    report.setup_logging(log_format=settings.log_format, level=settings.log_level)
    started = dt.datetime.now(dt.UTC)
    try:
        kube = Kube(settings)
        if command is RELEASE:
            from job import release  # noqa: PLC0415  (`nsscaler release` only)

            released = release.release(kube, settings, now=started)
            release.log_report(released)
            return released.exit_code
        result = run.run(kube, settings, now=started)
    except StartupError as exc:
        if exc.retryable:
            log.error("cannot start now: %s", exc, extra={"event": "startup-failed", "exit_code": EXIT_FAILED})
            return EXIT_FAILED
        log.error("cannot start: %s", exc, extra={"event": "startup-failed", "exit_code": EXIT_CANNOT_START})
        return EXIT_CANNOT_START
    except Exception as exc:
        log.error("run stopped: %s", unexpected(exc), extra={"event": "run-failed", "exit_code": EXIT_FAILED})
        log.debug("where it stopped", exc_info=True)
        return EXIT_FAILED
    result = dataclasses.replace(result, finished=dt.datetime.now(dt.UTC))
    text, fields = report.summary(result)
    level = logging.ERROR if result.failed else logging.WARNING if result.lease_held_by else logging.INFO
    log.log(level, text, extra=fields)
    if settings.output == "json":
        report.write_json(result, sys.stdout)
    elif settings.dry_run:
        print(report.plan_table(result), end="")
    return result.exit_code
