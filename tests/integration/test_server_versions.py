"""nsscaler knows which Kubernetes it talks to: the real API server behind a proxy that changes only what
`/version` says, so every other request is answered for real.

Below the supported range the run does not start (exit 2, one line naming the range) and changes nothing; above
it, and on a server without MutatingAdmissionPolicy v1, it says so once and serves every policy."""

from __future__ import annotations

import json

import pytest

from devtools import builders
from devtools.builders import AdminApi
from job.model import kubernetes
from tests.faults import FaultProxy


def reporting(git_version: str):
    major, minor = git_version.lstrip("v").split(".")[:2]

    def rewrite(method: str, path: str, body: bytes) -> bytes:
        if method == "GET" and path.split("?", maxsplit=1)[0] == "/version":
            return json.dumps({**json.loads(body), "major": major, "minor": minor, "gitVersion": git_version}).encode()
        return body
    return rewrite


def family(api: AdminApi, prefix: str) -> str:
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v9"]))
    return ns


def test_a_server_older_than_the_range_gets_exit_2_and_one_line_and_nothing_changes(
        api, control_plane, run_job, prefix, admin_token, tmp_path):
    ns = family(api, prefix)
    with FaultProxy(control_plane, fraction=0.0, rewrite=reporting("v1.33.7")) as proxy:
        result = run_job(kubeconfig=proxy.kubeconfig(tmp_path / "old", admin_token))
    assert result.exit_code == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if "Kubernetes v1.33.7" in line]
    assert len(lines) == 1 and f"({kubernetes.SUPPORTED_RANGE})" in lines[0], result.stderr
    assert "upgrade the cluster" in lines[0]
    assert api.replicas("Deployment", ns, "web") == 2  # the run did not start


@pytest.mark.parametrize(("git_version", "said"), [
    pytest.param("v1.38.0", "newer than nsscaler is proven on", id="newer"),
    pytest.param("v1.35.4", "does not serve MutatingAdmissionPolicy v1", id="without-mutating-policy"),
])
def test_a_server_in_or_above_the_range_is_served_and_what_differs_is_said_once(
        api, control_plane, run_job, prefix, admin_token, tmp_path, git_version, said):
    ns = family(api, prefix)
    with FaultProxy(control_plane, fraction=0.0, rewrite=reporting(git_version)) as proxy:
        result = run_job(kubeconfig=proxy.kubeconfig(tmp_path / "new", admin_token))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count(said) == 1, result.stderr
    assert api.replicas("Deployment", ns, "web") == 0
