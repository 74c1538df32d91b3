"""A release into a real OCI registry (crane's, on loopback): `python -m devtools.publish` — what `make publish`
runs — pushes the project's image and its chart pinned to that image's digest, signs both and attests the SBOM
with a key pair made for this run; cosign verifies them with the public key, `helm pull --version` gives the pinned
chart, and an image or a chart pushed over the same tag afterwards is refused by verification.

The image is the node tier's build of the Dockerfile (buildah, root), taken from the cache when it holds it."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devtools import publish
from devtools.cluster import images
from job import __version__
from tests.conftest import ROOT, built_tool
from tests.registry import KeyPair, Registry, cosign, key_pair, serve, verify

PATH = "platform"


@pytest.fixture(scope="module")
def tools_built() -> dict[str, Path]:
    return {name: built_tool(name) for name in publish.TOOLS}


@pytest.fixture(scope="module")
def registry(tools_built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with serve(tools_built["crane"], tmp_path_factory.mktemp("registry")) as started:
        yield started


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("release")


@pytest.fixture(scope="module")
def keys(tools_built: dict[str, Path], work: Path) -> KeyPair:
    return key_pair(tools_built["cosign"], work / "keys")


@pytest.fixture(scope="module")
def image_buildable() -> None:
    if not images.archives()[images.project_image()].exists() and os.geteuid() != 0:
        pytest.skip("the image is built with buildah as root (`sudo make node-images` once fills the cache)")


def publish_cli(registry: str, keys: KeyPair, *, password: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COSIGN_PASSWORD": keys.password if password is None else password}
    return subprocess.run([sys.executable, "-m", "devtools.publish", registry, "--key", str(keys.key)], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False, timeout=1800)


@pytest.fixture(scope="module")
def printed(registry: Registry, keys: KeyPair, image_buildable: None) -> dict[str, str]:
    """The release's output: name -> reference@digest."""
    result = publish_cli(f"{registry.host}/{PATH}", keys)
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(line.split("\t") for line in result.stdout.splitlines())


def digest_of(crane: Path, reference: str) -> str:
    return subprocess.run([str(crane), "digest", "--insecure", reference], capture_output=True, text=True,
                          check=True).stdout.strip()


def helm(tools_built: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tools_built["helm"]), *args], env=publish.helm_env(), capture_output=True, text=True,
                          check=False, timeout=300)


def test_the_release_prints_the_digest_of_every_artifact_and_cosign_verifies_them_with_the_public_key(
        printed: dict[str, str], registry: Registry, keys: KeyPair, tools_built: dict[str, Path],
        work: Path) -> None:
    assert set(printed) == {"image", "chart", "image signature", "chart signature", "sbom attestation"}
    repository = f"{registry.host}/{PATH}/nsscaler"
    assert printed["image"] == f"{repository}@{digest_of(tools_built['crane'], f'{repository}:{__version__}')}"
    chart = f"{registry.host}/{PATH}/charts/nsscaler"
    assert printed["chart"] == f"{chart}@{digest_of(tools_built['crane'], f'{chart}:{__version__}')}"
    for name in ("image signature", "chart signature", "sbom attestation"):  # each is really in the registry
        digest = printed[name].split("@")[1]
        assert digest_of(tools_built["crane"], printed[name]) == digest, name
    for artifact in (printed["image"], printed["chart"]):
        verified = verify(tools_built["cosign"], work, keys.public, artifact)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        (claim,) = json.loads(verified.stdout)
        assert claim["critical"]["image"]["docker-manifest-digest"] == artifact.split("@")[1]
    # another key verifies nothing
    other = key_pair(tools_built["cosign"], work / "other-keys")
    refused = verify(tools_built["cosign"], work, other.public, printed["image"])
    assert refused.returncode != 0 and "no matching signatures" in refused.stderr, refused.stderr


def test_the_sbom_is_attached_to_the_image_as_a_signed_cyclonedx_attestation(
        printed: dict[str, str], keys: KeyPair, tools_built: dict[str, Path], work: Path) -> None:
    attested = cosign(tools_built["cosign"], work, "verify-attestation", "--key", str(keys.public),
                      "--type", "cyclonedx", "--insecure-ignore-tlog=true", "--allow-insecure-registry",
                      "--allow-http-registry", printed["image"])
    assert attested.returncode == 0, attested.stdout + attested.stderr
    (envelope,) = [json.loads(line) for line in attested.stdout.splitlines() if line.strip()]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["predicateType"] == "https://cyclonedx.org/bom"
    assert statement["subject"][0]["digest"]["sha256"] == printed["image"].split("sha256:")[1]
    exported = subprocess.run([str(tools_built["crane"]), "export", "--insecure", printed["image"], "-"],
                              capture_output=True, check=True, timeout=300).stdout
    with tarfile.open(fileobj=io.BytesIO(exported)) as rootfs:
        inside = rootfs.extractfile(images.SBOM_PATH.lstrip("/"))
        assert inside is not None
        assert statement["predicate"] == json.loads(inside.read())  # the SBOM the pushed image carries


def test_helm_pull_by_version_gives_the_chart_whose_values_pin_the_image_by_digest(
        printed: dict[str, str], registry: Registry, tools_built: dict[str, Path], work: Path) -> None:
    dest = work / "pulled"
    dest.mkdir()
    pulled = helm(tools_built, "pull", f"oci://{registry.host}/{PATH}/charts/nsscaler", "--version", __version__,
                  "--plain-http", "-d", str(dest))
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    package = f"nsscaler-{__version__}.tgz"
    assert (dest / package).read_bytes() == (ROOT / "dist" / package).read_bytes()  # what the release packaged
    with tarfile.open(dest / package) as archive:
        member = archive.extractfile("nsscaler/values.yaml")
        assert member is not None
        values_text = member.read().decode()
    values = yaml.safe_load(values_text)
    repository, digest = printed["image"].split("@")
    assert values["image"]["repository"] == repository and values["image"]["digest"] == digest
    assert values_text.startswith("# Generated by `make chart`")  # the chart's own file, only two values changed
    rendered = helm(tools_built, "template", "nss", str(dest / package))
    assert rendered.returncode == 0, rendered.stderr
    (cronjob,) = [d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "CronJob"]
    container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == printed["image"]


def test_an_image_pushed_over_the_released_tag_is_refused_by_verification(
        printed: dict[str, str], registry: Registry, keys: KeyPair, tools_built: dict[str, Path],
        work: Path) -> None:
    tag = f"{registry.host}/{PATH}/nsscaler:{__version__}"
    subprocess.run([str(tools_built["crane"]), "mutate", "--insecure", "--label", "tampered=yes", tag, "-t", tag],
                   check=True, capture_output=True, timeout=300)
    tampered = digest_of(tools_built["crane"], tag)
    assert f"@{tampered}" not in printed["image"]
    for reference in (tag, f"{tag.rsplit(':', 1)[0]}@{tampered}"):
        refused = verify(tools_built["cosign"], work, keys.public, reference)
        assert refused.returncode != 0 and "no signatures found" in refused.stderr, (reference, refused.stderr)
    still = verify(tools_built["cosign"], work, keys.public, printed["image"])  # the release, by its digest
    assert still.returncode == 0, still.stderr


def test_a_chart_pushed_over_the_released_version_is_refused_by_verification(
        printed: dict[str, str], registry: Registry, keys: KeyPair, tools_built: dict[str, Path],
        work: Path) -> None:
    forged = publish.package_chart(tools_built["helm"], repository=f"{registry.host}/elsewhere/nsscaler",
                                   digest="sha256:" + "0" * 64, dest=work / "forged")
    pushed = helm(tools_built, "push", str(forged), f"oci://{registry.host}/{PATH}/charts", "--plain-http")
    assert pushed.returncode == 0, pushed.stderr
    tag = f"{registry.host}/{PATH}/charts/nsscaler:{__version__}"
    tampered = digest_of(tools_built["crane"], tag)
    assert f"@{tampered}" not in printed["chart"]
    refused = verify(tools_built["cosign"], work, keys.public, tag)
    assert refused.returncode != 0 and "no signatures found" in refused.stderr, refused.stderr
    still = verify(tools_built["cosign"], work, keys.public, printed["chart"])
    assert still.returncode == 0, still.stderr


@pytest.mark.parametrize(("registry_arg", "password", "says"), [
    ("https://127.0.0.1:5000/x", "pw", "host[:port]/path, without a scheme"),
    ("127.0.0.1:5000/x", None, "COSIGN_PASSWORD is not set"),
])
def test_bad_input_gets_one_line_saying_what_to_do(registry_arg: str, password: str | None, says: str,
                                                    tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COSIGN_PASSWORD"}
    if password is not None:
        env["COSIGN_PASSWORD"] = password
    (tmp_path / "k.key").write_text("not used")
    result = subprocess.run([sys.executable, "-m", "devtools.publish", registry_arg, "--key", str(tmp_path / "k.key")],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and says in line, result.stderr
