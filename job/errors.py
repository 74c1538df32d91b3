"""The errors a run distinguishes, because each leads to a different exit code or decision."""

from __future__ import annotations


class StartupError(Exception):
    """The run cannot start (bad settings, no credentials, CRD or RBAC missing, API unreachable).

    Its message is one line that says what to do. Exit code 2: retrying will not help.
    """


class ApiError(Exception):
    """A request the API server refused, or could not be reached for (status 0), after retries."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}" if status else message)
        self.status = status
        self.message = message


class Conflict(ApiError):
    """409: the object changed since it was read (the resourceVersion precondition failed)."""
