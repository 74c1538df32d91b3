"""What a request's outcome says, in words: the API server's message, its Retry-After, why a connection failed,
why the kubeconfig's exec credential plugin gave no credential. `job.cluster.kube` sends; this reads."""

from __future__ import annotations

import re
import subprocess

import requests

#: a Retry-After longer than this is cut to it: the retry budget is the bound that matters
MAX_RETRY_AFTER = 30.0
#: what pykube's run of an exec credential plugin raises: it failed, is missing, or printed no credential
CREDENTIAL_ERRORS = (subprocess.SubprocessError, OSError, ValueError, KeyError, NotImplementedError)
#: urllib3 names the connection object first ("HTTPSConnection(host='10.0.0.1', port=6443): "): the URL says it
_CONNECTION_PREFIX = re.compile(r"^\w+\([^)]*\): ")


def retry_after(resp: requests.Response) -> float | None:
    value = resp.headers.get("Retry-After", "")
    return min(float(value), MAX_RETRY_AFTER) if value.isdigit() else None


def error_message(resp: requests.Response) -> str:
    try:
        body = resp.json()
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except ValueError:
        pass
    return resp.reason or f"HTTP {resp.status_code}"


def unreachable(server: str, exc: requests.RequestException) -> str:
    """Why a connection failed, as urllib3 says it ("Failed to establish a new connection: [Errno 111]
    Connection refused", "Read timed out."), without the wrappers requests puts around it."""
    inner = exc.args[0] if exc.args else exc
    cause = _CONNECTION_PREFIX.sub("", str(getattr(inner, "reason", None) or inner))
    return f"cannot reach the API server at {server}: {type(exc).__name__}: {cause}"


def credential_failure(user: dict[str, object], exc: Exception) -> str | None:
    """The message for an error raised while pykube ran the user's exec plugin; None if it came from elsewhere."""
    plugin = user.get("exec")
    if not isinstance(plugin, dict) or isinstance(exc, requests.RequestException):
        return None
    return (f"cannot get credentials from the kubeconfig's exec plugin ({plugin.get('command')}): "
            f"{type(exc).__name__}: {exc}")
