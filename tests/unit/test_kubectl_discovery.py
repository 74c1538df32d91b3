"""A new control plane forgets what kubectl remembers about the address it got. kubectl keeps a server's resource
list on disk for hours, keyed by host and port only; a plane of another Kubernetes version that gets the same port
later was otherwise asked with the old list, and an overlay the server does not serve failed with "the server could
not find the requested resource" instead of naming the kind."""

from __future__ import annotations

from devtools.cluster import controlplane


def test_a_new_plane_forgets_only_its_own_address(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECACHEDIR", str(tmp_path))
    ours = tmp_path / "discovery" / "127.0.0.1_41819"
    other = tmp_path / "discovery" / "127.0.0.1_41820"
    for cached in (ours, other):
        (cached / "admissionregistration.k8s.io" / "v1").mkdir(parents=True)
        (cached / "servergroups.json").write_text("{}")
    controlplane.forget_kubectl_discovery("127.0.0.1", 41819)
    assert not ours.exists()
    assert (other / "servergroups.json").exists()


def test_an_address_kubectl_never_saw_is_fine(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECACHEDIR", str(tmp_path))
    controlplane.forget_kubectl_discovery("10.245.0.1", 6443)
    assert not (tmp_path / "discovery").exists()
