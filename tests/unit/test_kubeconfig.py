"""The connection the run and `kubectl nsscaler` share (job.cluster.kube, job.cluster.kubeconfig): a KUBECONFIG
of several files merged as kubectl merges it, exec credential plugins as far as pykube-ng runs them, and
failures that keep their cause; and the custom kinds the plugin finds in API discovery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from job.cluster import kubeconfig
from job.cluster.kube import PERSON_TIMEOUT, Kube
from job.plugin import cli
from job.plugin.workloads import Served, scalable_custom_kinds

CLUSTER = {"name": "k", "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": "ca.crt"}}
CONTEXT = {"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "shop-v1"}}


def write(path: Path, **doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **doc}))
    return path


def test_the_first_file_wins_per_key_and_paths_stay_relative_to_their_own_file(tmp_path):
    a = tmp_path / "a" / "config"
    b = tmp_path / "b" / "config"
    merged = kubeconfig.merge([
        (a, {"current-context": "c", "clusters": [CLUSTER], "contexts": [CONTEXT]}),
        (b, {"current-context": "other", "contexts": [{"name": "c", "context": {"cluster": "elsewhere"}}],
             "users": [{"name": "u", "user": {"client-certificate": "u.crt", "client-key": "/keys/u.key",
                                              "exec": {"command": "./creds", "apiVersion": "x"}}}]}),
    ])
    assert merged["current-context"] == "c"
    assert merged["contexts"] == [CONTEXT]
    assert merged["clusters"][0]["cluster"]["certificate-authority"] == str(a.parent / "ca.crt")
    user = merged["users"][0]["user"]
    assert user["client-certificate"] == str(b.parent / "u.crt") and user["client-key"] == "/keys/u.key"
    assert user["exec"]["command"] == str(b.parent / "creds")


@pytest.mark.parametrize(("explicit", "listed", "paths", "flag"), [
    pytest.param("/x/config", "/a:/b", ["/x/config"], True, id="--kubeconfig alone, as kubectl"),
    pytest.param(None, "/a::/b:/a", ["/a", "/b"], False, id="KUBECONFIG: a list, empty and repeated entries out"),
    pytest.param(None, "", None, False, id="neither"),
])
def test_which_files_are_read(explicit, listed, paths, flag):
    found = kubeconfig.source(Path(explicit) if explicit else None, {"KUBECONFIG": listed})
    assert (found and [str(p) for p in found.paths], found and found.flag) == (paths, paths and flag)


def test_a_kubeconfig_of_two_files_has_the_users_credentials_from_the_second(tmp_path, monkeypatch):
    (tmp_path / "a" / "ca.crt").parent.mkdir()
    (tmp_path / "a" / "ca.crt").write_text("not read before a request")
    first = write(tmp_path / "a" / "config", **{"current-context": "c"}, clusters=[CLUSTER], contexts=[CONTEXT])
    second = write(tmp_path / "b" / "config", users=[{"name": "u", "user": {"token": "t"}}])
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'gone'}:{second}")
    kube = Kube.as_user(kubeconfig=None, context=None)
    assert kube.config.user == {"token": "t"} and kube.config.namespace == "shop-v1"
    # a person is waiting: an answer at once, not a retry loop; asked again only when the answer says when
    assert kube.retry_only_when_asked and kube.settings.retry_budget == PERSON_TIMEOUT


def test_an_unreachable_server_is_named_with_the_cause(tmp_path, capsys):
    config = write(tmp_path / "config", **{"current-context": "c"}, contexts=[CONTEXT],
                   clusters=[{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
                   users=[{"name": "u", "user": {"token": "t"}}])
    assert cli.main(["wake", "--kubeconfig", str(config), "--for", "1h"]) == 2
    assert capsys.readouterr().err == ("kubectl nsscaler: cannot reach the API server at https://127.0.0.1:1: "
                                       "ConnectionError: Failed to establish a new connection: [Errno 111] "
                                       "Connection refused\n")


@pytest.mark.parametrize(("user", "said"), [
    pytest.param({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "creds"}},
                 "exec credential plugin speaks client.authentication.k8s.io/v1", id="an exec version pykube refuses"),
    pytest.param({"token": "t"}, "context 'elsewhere' is not in", id="an unknown context"),
])
def test_a_kubeconfig_the_client_cannot_use_is_refused_before_any_request(tmp_path, capsys, user, said):
    config = write(tmp_path / "config", **{"current-context": "c"}, contexts=[CONTEXT],
                   clusters=[{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
                   users=[{"name": "u", "user": user}])
    context = ["--context", "elsewhere"] if "context" in said else []
    assert cli.main(["status", "--kubeconfig", str(config), *context]) == 2
    assert said in capsys.readouterr().err


def test_a_failing_exec_plugin_is_named_with_its_cause(tmp_path, capsys):
    config = write(tmp_path / "config", **{"current-context": "c"}, contexts=[CONTEXT],
                   clusters=[{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
                   users=[{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                          "command": str(tmp_path / "no-such-plugin")}}}])
    assert cli.main(["wake", "--kubeconfig", str(config), "--for", "1h"]) == 2  # the first request cannot be sent
    err = capsys.readouterr().err
    assert f"cannot get credentials from the kubeconfig's exec plugin ({tmp_path / 'no-such-plugin'}): " \
           f"FileNotFoundError" in err, err


def _resource(plural: str, kind: str, *, scale: bool = True, scope: str = "Namespaced") -> dict[str, Any]:
    return {"resource": plural, "responseKind": {"kind": kind}, "scope": scope, "verbs": ["get", "list"],
            "subresources": [{"subresource": "scale"}] if scale else []}


def test_the_scalable_custom_kinds_come_from_discovery():
    found = {"kind": "APIGroupDiscoveryList", "items": [
        {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
            _resource("deployments", "Deployment"), _resource("daemonsets", "DaemonSet", scale=False)]}]},
        {"metadata": {"name": "argoproj.io"}, "versions": [
            {"version": "v1", "resources": [_resource("rollouts", "Rollout")]},
            {"version": "v1beta1", "resources": [_resource("rollouts", "Rollout")]}]},
        {"metadata": {"name": "example.com"}, "versions": [{"version": "v1", "resources": [
            _resource("plains", "Plain", scale=False), _resource("globals", "Global", scope="Cluster")]}]},
    ]}
    assert scalable_custom_kinds(found) == [Served("Rollout.argoproj.io", "argoproj.io/v1", "rollouts")]
    assert scalable_custom_kinds({"kind": "APIGroupList", "groups": []}) == []  # a server before 1.30
