"""The errors a run distinguishes, because each leads to a different exit code or decision."""

from __future__ import annotations

#: The command's exit codes (docs/reference/exit-codes.md). 2 fails the Job at once (podFailurePolicy); 3 is a
#: run that waited for another run's Lease, gave up and wrote nothing: not a success, and not worth retrying
#: at once either, since the run that holds the Lease is doing the work.
EXIT_OK, EXIT_FAILED, EXIT_CANNOT_START, EXIT_LEASE_HELD = 0, 1, 2, 3


class StartupError(Exception):
    """The run cannot start (bad settings, no credentials, CRD or RBAC missing, API unreachable).

    Its message is one line that says what to do. Exit code 2: retrying will not help; except when
    `retryable` (the API server is overloaded or unavailable: 429 or 5xx after every retry), exit 1, so that
    the Job tries again instead of failing for good.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ApiError(Exception):
    """A request the API server refused, or could not be reached for (status 0), after retries."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}" if status else message)
        self.status = status
        self.message = message


class Conflict(ApiError):
    """409: the object changed since it was read (the resourceVersion precondition failed)."""


def unexpected(exc: BaseException) -> str:
    """One line for an exception nobody expected, caught at the boundary of one object (a policy, a Wake, a
    workload) so that the rest of the run goes on, or at the run's own: what it was, and what to do."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= 200 else text[:200] + "..."
    return f"{type(exc).__name__}: {text or 'no message'} (an unexpected error in nsscaler: please report it with " \
           f"this message)"


#: the most characters of a value someone wrote that a message quotes: enough to recognise it, never enough to
#: make a status or an Event too large for the API server to take
SHOWN_CHARACTERS = 100


def shown(value: object) -> str:
    """A value someone wrote, quoted for a message (`repr`), cut to `SHOWN_CHARACTERS`."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else f"{text[:SHOWN_CHARACTERS]}... ({len(text)} characters)"
