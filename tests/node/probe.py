"""Runs inside the nsscaler image with the CronJob's Pod spec (tests/node): one JSON line of what the process
sees, then the in-pod credentials (`pykube.KubeConfig.from_service_account`, as nsscaler uses them) asked who
they are. Standard library and nsscaler's own dependencies only."""

import errno
import json
import os
import sys
from pathlib import Path

import pykube

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def try_write(path: str) -> str:
    try:
        Path(path).write_text("x")
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    return "ok"


config = pykube.KubeConfig.from_service_account()
review = pykube.HTTPClient(config).post(
    version="authentication.k8s.io/v1", url="selfsubjectreviews",
    json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(),
    "root_write": try_write("/probe"), "tmp_write": try_write("/tmp/probe"),  # noqa: S108 (the emptyDir the CronJob mounts)
    "kubeconfig": os.environ.get("KUBECONFIG") or os.environ.get("NSSCALER_KUBECONFIG"),
    "token_file": (SERVICE_ACCOUNT / "token").is_file(), "server": config.cluster["server"],
    "whoami": review.json().get("status", {}).get("userInfo", {}).get("username", review.text),
    "image_python": sys.executable,
}))
