"""The plugin's connection: the user's kubeconfig and permissions, nothing of nsscaler's own.

Thin on purpose: a request and the API server's answer (a refusal is shown as the server words it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykube


class Refused(Exception):
    """The API server said no (or could not be reached); `status` 0 when it could not be reached."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _kubeconfig_path(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), None)
    return Path(first) if first else Path.home() / ".kube" / "config"


@dataclass
class Client:
    http: pykube.HTTPClient
    namespace: str

    @classmethod
    def connect(cls, *, kubeconfig: str | None, context: str | None) -> Client:
        config = pykube.KubeConfig.from_file(str(_kubeconfig_path(kubeconfig)))
        if context:
            config.set_current_context(context)
        return cls(http=pykube.HTTPClient(config, timeout=15), namespace=config.namespace or "default")

    def call(self, method: str, path: str, *, body: dict[str, Any] | None = None,
             params: dict[str, str] | None = None) -> dict[str, Any]:
        """One request to `path` (from /api or /apis); the response's JSON, or Refused with the server's words."""
        try:
            resp = self.http.session.request(method, str(self.http.url) + path, json=body, params=params,
                                             timeout=15)
        except Exception as exc:
            raise Refused(0, f"cannot reach the API server at {self.http.url}: {type(exc).__name__}") from None
        if resp.status_code >= 400:
            try:
                message = str(resp.json().get("message") or resp.text)
            except ValueError:
                message = resp.text
            raise Refused(resp.status_code, message)
        return dict(resp.json()) if resp.content else {}

    def whoami(self) -> str:
        review = self.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                           body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")
