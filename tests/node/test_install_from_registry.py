"""Installed from a registry only, as a platform team installs a release: the release is published into a real
local OCI registry (crane's, on loopback) by `devtools.publish` (what `make publish` runs), cosign verifies the
image and the chart by digest with the release's public key, `helm install oci://…/nsscaler --version …`
installs the chart, and the kubelet pulls the image by digest from that registry (containerd reaches it through a
hosts.toml for that registry only). A run from the CronJob freezes a family on the node. An image pushed over the
release's tag afterwards is refused by verification and changes nothing: the chart names the digest.

The node tier's session installs the local overlay (`installed`): the chart owns the same cluster-wide objects,
so that install is set aside for this test and applied again afterwards."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools import builders, publish
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images, node
from job import __version__
from tests.conftest import apply_manifest, built_tool, kubectl
from tests.node.conftest import NAMESPACE, OVERLAY, run_cronjob_now, running_family
from tests.registry import KeyPair, Registry, key_pair, serve, verify

pytestmark = [pytest.mark.node]
PATH = "platform"
RELEASE = "nss"


@pytest.fixture(scope="module")
def tools_built() -> dict[str, Path]:
    return {name: built_tool(name) for name in publish.TOOLS}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("registry-install")


@pytest.fixture(scope="module")
def registry(tools_built: dict[str, Path], work: Path, the_node: node.Node) -> Iterator[Registry]:
    config = (the_node.state_dir / "containerd.toml").read_text()
    if str(the_node.registry_hosts) not in config:
        pytest.fail("this node's containerd has no registry hosts folder: it was started by an older checkout; "
                    "`make node-down` and let the tier start its own")
    with serve(tools_built["crane"], work / "registry") as started:
        the_node.reach_registry(started.host)
        try:
            yield started
        finally:
            the_node.forget_registry(started.host)


@pytest.fixture(scope="module")
def keys(tools_built: dict[str, Path], work: Path) -> KeyPair:
    return key_pair(tools_built["cosign"], work / "keys")


@pytest.fixture(scope="module")
def published(registry: Registry, keys: KeyPair, work: Path) -> publish.Published:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("COSIGN_PASSWORD", keys.password)
        env.setenv("TUF_ROOT", str(work / "tuf"))
        return publish.release(f"{registry.host}/{PATH}", key=str(keys.key), dist=work / "dist")


def helm(tools_built: dict[str, Path], plane: controlplane.ControlPlane, *args: str,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**publish.helm_env(), "KUBECONFIG": str(plane.admin_kubeconfig)}
    result = subprocess.run([str(tools_built["helm"]), *args], env=env, capture_output=True, text=True, check=False,
                            timeout=900)
    assert not check or result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result


def overlay_installed(api: AdminApi) -> bool:
    return api.exists("ServiceAccount", "nsscaler", NAMESPACE)


@pytest.fixture
def overlay_set_aside(control_plane: controlplane.ControlPlane, api: AdminApi, the_node: node.Node) -> Iterator[None]:
    """The session's kustomize install removed for the chart's, and applied again (suspended) afterwards. The
    node's own copy of the image (`localhost/nsscaler:<version>`, imported at its start) is removed too, so the
    kubelet has nothing but the registry to run the chart's image from, and imported again afterwards: the other
    tests run it with `imagePullPolicy: Never` (which works after the pull only because the node's kubelet does
    not check credentials for images already on it: `imagePullCredentialsVerificationPolicy`, node.py)."""
    was = overlay_installed(api)
    if was:
        subprocess.run([kubectl(), "--kubeconfig", str(control_plane.admin_kubeconfig), "delete", "-k", str(OVERLAY),
                        "--ignore-not-found", "--wait", "--timeout=180s"], check=True, capture_output=True)
    wait_until(lambda: not api.exists("Namespace", NAMESPACE), timeout=180, what=f"namespace {NAMESPACE} gone")
    with contextlib.suppress(subprocess.CalledProcessError):  # absent already: nothing to remove
        the_node.ctr("images", "rm", images.project_image())
    yield
    with contextlib.suppress(subprocess.CalledProcessError):
        the_node.ctr("images", "rm", images.project_image())
    the_node.ctr("images", "import", str(images.archives()[images.project_image()]))
    if was:
        wait_until(lambda: not api.exists("Namespace", NAMESPACE), timeout=180, what=f"namespace {NAMESPACE} gone")
        apply_manifest(control_plane.admin_kubeconfig, OVERLAY, kustomize=True)
        wait_until(lambda: overlay_installed(api), what="the nsscaler ServiceAccount")
        wait_until(api.crd_established, timeout=30, what="the NSScaler CRD to be established")
        api.patch("CronJob", "nsscaler", {"spec": {"suspend": True}}, NAMESPACE)


def test_the_node_installs_the_signed_release_from_the_registry_by_digest_and_a_tampered_image_is_refused(
        control_plane: controlplane.ControlPlane, api: AdminApi, prefix: str, tools_built: dict[str, Path],
        registry: Registry, keys: KeyPair, published: publish.Published, work: Path,
        overlay_set_aside: None) -> None:
    for artifact in (published.image, published.chart):  # what the docs tell a user to check before installing
        verified = verify(tools_built["cosign"], work, keys.public, artifact)
        assert verified.returncode == 0, verified.stdout + verified.stderr

    # The usual install: the release and the chart's objects in nsscaler, made by --create-namespace.
    helm(tools_built, control_plane, "install", RELEASE, f"oci://{registry.host}/{PATH}/charts/nsscaler",
         "--version", __version__, "--plain-http", "-n", NAMESPACE, "--create-namespace", "--set", "suspend=true",
         "--set", "crds.keep=false")
    try:
        wait_until(api.crd_established, timeout=60, what="the NSScaler CRD to be established")
        cronjob = api.get("CronJob", "nsscaler", NAMESPACE)
        (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == published.image

        running_family(api, prefix, {"a": {"d-web": 2}, "live": {"d-web": 1}})
        api.create(builders.nsscaler(f"{prefix}p", prefix, ["live"]))
        pulls_before = len(registry.requests())
        run = run_cronjob_now(control_plane, api)
        assert run.exit_code == 0 and run.lines[-1]["frozen"] == 1, run.log
        wait_until(lambda: not api.pods(prefix + "a"), timeout=90, what=f"no Pods left in {prefix}a")
        (pod,) = run.pods
        status = pod["status"]["containerStatuses"][0]
        repository, digest = published.image.split("@")
        assert status["imageID"] == published.image, status  # the kubelet ran exactly the signed manifest
        manifest = f"/v2/{PATH}/nsscaler/manifests/{digest}"
        assert any(r.endswith(manifest) and r.startswith("GET") for r in registry.requests()[pulls_before:]), \
            registry.requests()[pulls_before:]  # ... and fetched it from the local registry

        # Someone pushes another image over the release's tag: verification refuses it, and the install, which
        # names the digest, goes on running the signed one.
        tag = f"{repository}:{__version__}"
        subprocess.run([str(tools_built["crane"]), "mutate", "--insecure", "--label", "tampered=yes", tag, "-t", tag],
                       check=True, capture_output=True, timeout=300)
        refused = verify(tools_built["cosign"], work, keys.public, tag)
        assert refused.returncode != 0 and "no signatures found" in refused.stderr, refused.stderr
        again = run_cronjob_now(control_plane, api)
        assert again.exit_code == 0, again.log
        assert again.pods[0]["status"]["containerStatuses"][0]["imageID"] == published.image
    finally:
        # The release hook is waited for in any case; the set-aside fixture waits for the namespace, which Helm
        # leaves (it made it for --create-namespace) and is deleted here as a user would.
        helm(tools_built, control_plane, "uninstall", RELEASE, "-n", NAMESPACE, "--timeout", "10m")
        api.delete("Namespace", NAMESPACE)
