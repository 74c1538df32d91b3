"""`kubectl nsscaler` tells the truth when it cannot know, or when the truth is longer than a status: an API
server that does not answer is said in one line at once (exit 2), a namespace that does not exist is said as
such (exit 4), and "held" comes from the workloads' own records, however many namespaces a policy holds.

Every command here is the installed plugin run by real kubectl (`tests.users.plugin`)."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster.controlplane import ControlPlane, free_ports
from job.cluster.kube import PERSON_TIMEOUT
from job.plugin.exits import EXIT_NOT_FOUND
from tests.conftest import make_family
from tests.faults import FaultProxy, StoppedServer
from tests.users import plugin

#: more held namespaces than a status lists (`status_list_limit`, 20 by default)
HELD = 26


def kubeconfig_for(server: str, path: Path) -> Path:
    """A kubeconfig whose cluster is `server` (nothing there is trusted or answers; no CA is needed)."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "not-used"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "shop-v1"}}]}))
    return path


def test_a_stopped_api_server_is_said_in_one_line_after_one_attempt(tmp_path):
    """The API server takes the connection and never answers: one attempt, one line naming the server and the
    cause, exit 2, within seconds (before: ~11 requests each retried for 10 s, then "running", exit 0)."""
    with StoppedServer() as stopped:
        started = time.monotonic()
        shown = plugin(kubeconfig_for(stopped.url, tmp_path / "config"), "status")
        took = time.monotonic() - started
        attempts = stopped.connections
    assert shown.returncode == 2, (shown.stdout, shown.stderr)
    assert shown.stdout == ""
    [line] = shown.stderr.splitlines()
    assert line.startswith(f"kubectl nsscaler: cannot reach the API server at {stopped.url}: "), line
    assert "timed out" in line, line
    assert attempts == 1
    assert took < 10, f"{took:.1f} s (one request may take {PERSON_TIMEOUT} s to connect and as long to answer)"


def test_a_closed_port_is_said_in_one_line(tmp_path):
    (port,) = free_ports(1)
    shown = plugin(kubeconfig_for(f"https://127.0.0.1:{port}", tmp_path / "config"), "wake", "--for", "1h")
    assert shown.returncode == 2, (shown.stdout, shown.stderr)
    assert shown.stderr.splitlines() == [f"kubectl nsscaler: cannot reach the API server at https://127.0.0.1:{port}: "
                                         f"ConnectionError: Failed to establish a new connection: [Errno 111] "
                                         f"Connection refused"]


def test_credentials_the_api_server_rejects_are_said_in_one_line(control_plane: ControlPlane, tmp_path):
    config = control_plane.kubeconfig(tmp_path / "config", user="nobody", token="not-a-token")  # noqa: S106
    shown = plugin(config, "status", "-n", "default")
    assert shown.returncode == 2, (shown.stdout, shown.stderr)
    assert shown.stderr.splitlines() == [f"kubectl nsscaler: the API server at {control_plane.server} rejected your "
                                         f"credentials (401): log in again, or renew the token or certificate in "
                                         f"your kubeconfig"]


def test_a_failing_api_server_is_not_passed_off_as_a_permission(api: AdminApi, control_plane: ControlPlane,
                                                                 admin_token: str, prefix: str, tmp_path):
    """The check passes, then the LIST of Deployments gets 503: said in one line, exit 1 (before: "cannot read
    with these permissions: Deployment", and "running")."""
    ns = prefix + "v1"
    api.create(builders.namespace(ns))

    failed: list[str] = []

    def deployments_fail(method: str, path: str) -> str | None:
        if method == "GET" and path.startswith(f"/apis/apps/v1/namespaces/{ns}/deployments"):
            failed.append(path)
            return "503"
        return None

    with FaultProxy(control_plane, fraction=0.0, before_forward=deployments_fail) as proxy:
        shown = plugin(proxy.kubeconfig(tmp_path / "config", admin_token), "status", "-n", ns)
    assert len(failed) == 1, failed  # sent once: not retried
    assert shown.returncode == 1, (shown.stdout, shown.stderr)
    assert shown.stdout == ""
    [line] = shown.stderr.splitlines()
    assert line.startswith(f"kubectl nsscaler: the API server at {proxy.url} answered 503 "), line


def test_an_answer_that_says_when_to_ask_again_is_asked_again(api: AdminApi, control_plane: ControlPlane,
                                                              admin_token: str, prefix: str, tmp_path):
    """An API server whose storage is still starting answers 429 with Retry-After: the plugin asks again after
    it, as kubectl does (before: "answered 429 storage is (re)initializing", exit 1), and still only then."""
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    asked: list[str] = []

    def first_list_throttled(method: str, path: str) -> str | None:
        if method == "GET" and path.startswith(f"/apis/apps/v1/namespaces/{ns}/deployments"):
            asked.append(path)
            return "429" if len(asked) == 1 else None  # the proxy's 429 carries Retry-After: 1
        return None

    with FaultProxy(control_plane, fraction=0.0, before_forward=first_list_throttled) as proxy:
        shown = plugin(proxy.kubeconfig(tmp_path / "config", admin_token), "status", "-n", ns)
    assert shown.returncode == 0, (shown.stdout, shown.stderr)
    assert shown.stdout.startswith(f"{ns}: running\n"), shown.stdout
    assert len(asked) == 2, asked


def test_a_mistyped_namespace_reads_as_missing(api: AdminApi, control_plane: ControlPlane, prefix: str):
    api.create(builders.namespace(prefix + "v1"))
    for command in (["status", "-n", prefix + "v2"], ["wake", "-n", prefix + "v2", "--for", "1h"],
                    ["sleep", "-n", prefix + "v2"]):
        shown = plugin(control_plane.admin_kubeconfig, *command)
        assert shown.returncode == EXIT_NOT_FOUND, (command, shown.stdout, shown.stderr)
        assert shown.stdout == ""
        assert shown.stderr.splitlines() == [f"kubectl nsscaler {command[0]}: no namespace '{prefix}v2' (check -n, "
                                             f"or the context's namespace)"]
    assert plugin(control_plane.admin_kubeconfig, "status", "-n", prefix + "v1").stdout.startswith(
        f"{prefix}v1: running\n")
    missing = plugin(control_plane.admin_kubeconfig, "status", f"{prefix}no-such-policy")
    assert missing.returncode == EXIT_NOT_FOUND, (missing.stdout, missing.stderr)


def test_every_held_namespace_reads_held_beyond_the_status_list(api: AdminApi, control_plane: ControlPlane,
                                                               run_job, prefix: str):
    policy = f"{prefix}p"
    suffixes = [f"v{i:02}" for i in range(HELD + 1)]  # v00 stays active
    make_family(api, prefix, {suffix: {"d-web": 1} for suffix in suffixes})
    api.create(builders.nsscaler(policy, prefix, ["v00"]))
    result = run_job()
    assert result.exit_code == 0, result.stderr
    last = prefix + suffixes[-1]
    status = api.get("NSScaler", policy)["status"]
    assert status["counts"]["heldNamespaces"] == HELD
    assert last not in status["heldNamespaces"], "the status list is no longer cut: this test proves nothing"

    shown = plugin(control_plane.admin_kubeconfig, "status", "-n", last)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{last}: held: 1 workloads frozen\n"), shown.stdout
    assert f"  NSScaler {policy}: held (1 workloads frozen by it); holding: True\n" in shown.stdout, shown.stdout

    listed = plugin(control_plane.admin_kubeconfig, "status", policy)
    assert listed.returncode == 0, listed.stderr
    [held] = [line for line in listed.stdout.splitlines() if line.startswith("  held: ")]
    assert held.removeprefix("  held: ").split(", ") == [prefix + s for s in suffixes[1:]]
    assert f"NSScaler {policy}: holding True, {HELD} held, " in listed.stdout, listed.stdout
