"""The exit codes of `kubectl nsscaler`, each with what it means: declared once here, shown in every `--help`
epilog, and in the table of docs/using/plugin.md (a unit test compares the two)."""

from __future__ import annotations

import textwrap

from job.errors import EXIT_CANNOT_START, EXIT_FAILED, EXIT_OK

#: the namespace or NSScaler named does not exist. Not 3: for the `nsscaler` command 3 means that another run
#: held the run Lease, and a code means one thing across nsscaler's commands.
EXIT_NOT_FOUND = 4

MEANINGS = {
    EXIT_OK: "done: the status shown, the Wake created, your Wakes ended",
    EXIT_FAILED: "the API server refused what was asked (a Wake you may not create) or failed it (429, 5xx: one "
                 "line), or the status cannot be told (these credentials may read none of the namespace's "
                 "workloads)",
    EXIT_CANNOT_START: "nothing was asked: bad arguments, an unusable kubeconfig, the API server unreachable or "
                       "refusing the credentials (one line, within seconds)",
    EXIT_NOT_FOUND: "the namespace or NSScaler named does not exist",
}


def epilog(width: int = 100) -> str:
    """The `--help` epilog: each code with its meaning, wrapped to `width` (argparse would run them together)."""
    return "exit codes:\n" + "\n".join(textwrap.fill(f"{code}  {meaning}", width=width, initial_indent="  ",
                                                      subsequent_indent="     ") for code, meaning in MEANINGS.items())
