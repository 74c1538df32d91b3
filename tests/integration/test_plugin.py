"""`kubectl nsscaler` against the real control plane, through the API layer the run uses (job.cluster.kube):
status names what is frozen of every kind, built in or custom, and a kubeconfig may be several files with
the credentials in any of them, given by an exec credential plugin."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster import controlplane
from job.plugin.workloads import NO_TEAM_ROWS
from tests import crds
from tests.conftest import ROOT
from tests.users import User, grant_edit, plugin

POOL = "Pool.test.nsscaler.io"


@pytest.fixture(scope="module")
def test_kinds(api: AdminApi) -> None:
    crds.install(api, crds.TEST_KINDS)


@pytest.mark.versions
@pytest.mark.usefixtures("test_kinds")
def test_status_lists_frozen_daemonsets_and_custom_kinds(api: AdminApi, control_plane, run_job, prefix, tmp_path):
    ns, policy = prefix + "v1", f"{prefix}p"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.daemonset(ns, "agent"))
    api.create(builders.custom("Pool", ns, "pool", {"workers": {"count": 3}}))
    api.create(builders.nsscaler(policy, prefix, [], kinds=["Deployment", "DaemonSet", POOL]))
    result = run_job()
    assert result.exit_code == 0, result.stderr

    shown = plugin(control_plane.admin_kubeconfig, "status", "-n", ns)
    assert shown.returncode == 0, shown.stderr
    assert (f"{ns}: held: 3 workloads frozen\n  frozen Deployment/web (by {policy})\n"
            f"  frozen DaemonSet/agent (by {policy})\n  frozen {POOL}/pool (by {policy})\n") in shown.stdout, \
        shown.stdout
    assert "  runs " not in shown.stdout  # the Deployment's ReplicaSet is at 0 with it, and shown through it

    # Someone with `edit` there: the built-in kinds, and what they may not read said plainly (the test
    # CRDs grant nothing to `edit`).
    alice = User(control_plane, f"{prefix}alice", tmp_path)
    grant_edit(api, ns, alice)
    theirs = alice.plugin("status", "-n", ns)
    assert theirs.returncode == 0, theirs.stderr
    assert f"{ns}: held: 2 workloads frozen\n" in theirs.stdout, theirs.stdout
    assert f"  frozen DaemonSet/agent (by {policy})\n" in theirs.stdout
    [unread] = [line for line in theirs.stdout.splitlines() if "cannot read with these permissions: " in line]
    assert POOL in unread.split(": ")[1].split(", "), theirs.stdout


@pytest.mark.usefixtures("test_kinds")
def test_status_lists_the_frozen_objects_of_every_row_kind_with_or_without_scale(api: AdminApi, control_plane,
                                                                                 run_job, prefix, tmp_path):
    """A catalogue kind frozen by a field (Zalando's postgresql: no /scale) and a team's NSScalerKind kind frozen
    by an annotation are listed beside the /scale kinds; someone who may not list the NSScalerKinds is told so."""
    crds.install(api, [yaml.safe_load((ROOT / "kustomize/base/kind-crd.yaml").read_text()),
                       crds.made_up("Sleeper", "sleepers"),
                       *[c for c in crds.operators() if c["metadata"]["name"] == "postgresqls.acid.zalan.do"]])
    row = f"{prefix}sleeper"
    api.create({"apiVersion": "operators.wubw.fun/v1alpha1", "kind": "NSScalerKind", "metadata": {"name": row},
                "spec": {"kind": "Sleeper.test.nsscaler.io", "plural": "sleepers", "versions": ["v1"],
                         "freeze": {"method": "annotation", "key": "example.com/hibernation", "value": "on"}}})
    ns, policy = prefix + "v1", f"{prefix}p"
    api.create(builders.namespace(ns))
    api.create(builders.custom("Sleeper", ns, "nap", {}))
    api.create({"apiVersion": "acid.zalan.do/v1", "kind": "postgresql", "metadata": {"name": "pg", "namespace": ns},
                "spec": {"teamId": "acid", "numberOfInstances": 2, "postgresql": {"version": "17"},
                         "volume": {"size": "1Gi"}}})
    api.create(builders.nsscaler(policy, prefix, [], kinds=["Sleeper.test.nsscaler.io", "postgresql.acid.zalan.do"]))
    try:
        result = run_job()
        assert result.exit_code == 0, result.stderr

        shown = plugin(control_plane.admin_kubeconfig, "status", "-n", ns)
        assert shown.returncode == 0, shown.stderr
        assert f"{ns}: held: 2 workloads frozen\n" in shown.stdout, shown.stdout
        assert f"  frozen Sleeper.test.nsscaler.io/nap (by {policy})\n" in shown.stdout, shown.stdout
        assert f"  frozen postgresql.acid.zalan.do/pg (by {policy})\n" in shown.stdout, shown.stdout

        alice = User(control_plane, f"{prefix}alice", tmp_path)
        grant_edit(api, ns, alice)
        theirs = alice.plugin("status", "-n", ns)
        assert theirs.returncode == 0, theirs.stderr
        assert NO_TEAM_ROWS in theirs.stdout, theirs.stdout
    finally:
        api.delete("NSScaler", policy)
        api.delete("NSScalerKind", row)


def exec_plugin(folder: Path, user: User) -> Path:
    """A credential plugin as kubectl runs one (client.authentication.k8s.io/v1beta1): it prints the user's
    client certificate and key in an ExecCredential."""
    script = folder / "alice-credentials"
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"clientCertificateData": user.cert.read_text(), "clientKeyData": user.key.read_text()}}
    script.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(credential))})\n")
    script.chmod(0o700)
    return script


@pytest.mark.usefixtures("wake_admission")  # the Wake ClusterRoles aggregated to `edit`
def test_a_kubeconfig_of_two_files_with_the_users_credentials_in_the_second(
        api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str, tmp_path: Path):
    """KUBECONFIG=first:missing:second, merged as kubectl merges it: the cluster, the context and the current
    context from the first file; the user only in the second, whose own context of the same name and current
    context lose to the first file's; its exec command a path relative to the second file."""
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    alice = User(control_plane, f"{prefix}alice", tmp_path)
    grant_edit(api, ns, alice)
    first, second = tmp_path / "first" / "config", tmp_path / "second" / "config"
    first.parent.mkdir()
    second.parent.mkdir()
    own = yaml.safe_load(alice.kubeconfig.read_text())
    first.write_text(yaml.safe_dump({**own, "users": []}))
    exec_plugin(second.parent, alice)
    second.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "elsewhere",
        "clusters": [{"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": own["current-context"], "context": {"cluster": "nowhere", "user": alice.name}}],
        "users": [{"name": alice.name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "./alice-credentials",
            "interactiveMode": "Never"}}}]}))
    listed = ":".join(map(str, (first, tmp_path / "missing" / "config", second)))

    slept = plugin(listed, "sleep", "-n", ns)  # who am I: asks the API server
    assert slept.returncode == 0, slept.stderr
    assert slept.stdout.startswith(f"{alice.name} has no Wake in {ns}."), slept.stdout
    shown = plugin(listed, "status", "-n", ns)
    assert shown.returncode == 0 and shown.stdout.startswith(f"{ns}: running\n"), (shown.stdout, shown.stderr)
    only_first = plugin(first, "status", "-n", ns)  # no user: anonymous, which the API server refuses
    assert "cannot read with these permissions: " in only_first.stdout, only_first.stdout
