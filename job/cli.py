"""The command line: settings, logging, one run, output and the exit code. No business logic here."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError
from pydantic_settings import SettingsError

from job.errors import EXIT_CANNOT_START, EXIT_FAILED, StartupError, unexpected
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


def load_settings(argv: Sequence[str]) -> Settings:
    """Flags and the environment; without flags (the CronJob sets only environment variables) the command-line
    parser is not even built: a few milliseconds of every run."""
    # `_cli_parse_args` is pydantic-settings' init keyword
    settings = Settings(_cli_parse_args=list(argv)) if argv else Settings()  # type: ignore[call-arg]
    if settings.own_namespace is None and _POD_NAMESPACE_FILE.exists():
        settings = settings.model_copy(update={"own_namespace": _POD_NAMESPACE_FILE.read_text().strip()})
    return settings


#: `nsscaler release`: give back everything nsscaler holds, across all policies (`job.release`), before removing it
RELEASE = "release"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    releasing = args[:1] == [RELEASE]
    args = args[1:] if releasing else args
    try:
        settings = load_settings(args)
    except ValidationError as exc:
        print(_settings_error(exc), file=sys.stderr)
        return EXIT_CANNOT_START
    except SettingsError as exc:
        print(f"nsscaler: {exc}; see nsscaler --help", file=sys.stderr)
        return EXIT_CANNOT_START
    # The run's modules and the API client load only once the settings are good: `--help` and a bad setting
    # answer without them.
    from job import report, run  # noqa: PLC0415
    from job.cluster.kube import Kube  # noqa: PLC0415

    report.setup_logging(log_format=settings.log_format, level=settings.log_level)
    started = dt.datetime.now(dt.UTC)
    try:
        kube = Kube(settings)
        if releasing:
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
