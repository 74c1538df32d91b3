"""Publish a release (`make publish REGISTRY=<host>[:<port>]/<path>`): the image and the chart as signed OCI
artifacts, addressed by digest.

1. The image: the project's Dockerfile built with buildah (the node tier's build, `images.ensure_project_image`,
   cached by what it is built from), pushed from its docker-archive with crane to `<registry>/nsscaler:<version>`.
2. The chart: `charts/nsscaler` copied to a temporary folder, its values pinned to that image by digest
   (`image.repository`, `image.digest`), `helm package`d and `helm push`ed to `oci://<registry>/charts`, so it is
   `<registry>/charts/nsscaler:<version>` (the image keeps the repository `nsscaler` and its tag to itself).
3. Both signed with cosign and a key pair, by digest; the image's CycloneDX SBOM (written by the image build)
   attached to it as a signed attestation (`--type cyclonedx`). Offline: no transparency log upload
   (`--tlog-upload=false`) and no Fulcio certificate (a key, not a keyless identity); verification then needs
   `--insecure-ignore-tlog=true` (docs/contributing/releasing.md says how to verify).
4. Every digest printed, one `name<TAB>reference@digest` line each, and returned.

A loopback registry (127.0.0.1, localhost) is spoken to in plain HTTP, as the tests' registry is; any other over
TLS, with the credentials crane, helm and cosign find (`docker login` / `helm registry login`). The private key
is `COSIGN_KEY` (a file, or any key reference cosign takes), its password `COSIGN_PASSWORD`.

Standard library only (plus the tools it builds), like the other devtools that run before .venv may exist.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from devtools.cluster import images, tools
from devtools.cluster.versions import cache_root

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "nsscaler"
IMAGE_NAME = "nsscaler"
CHARTS_PATH = "charts"
#: the tools a release needs, built from their Go modules (`make publish-tools`)
TOOLS = ("crane", "cosign", "helm")
_LOOPBACK = re.compile(r"^(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?$")


class ReleaseError(RuntimeError):
    """A step of the release failed; the message says which and what to do."""


@dataclass(frozen=True)
class Published:
    version: str
    #: `<registry>/nsscaler@sha256:…`
    image: str
    #: `<registry>/charts/nsscaler@sha256:…`
    chart: str
    #: the signatures' and the attestation's own digests, as cosign stored them
    image_signature: str
    chart_signature: str
    sbom_attestation: str

    def lines(self) -> list[str]:
        return [f"image\t{self.image}", f"chart\t{self.chart}", f"image signature\t{self.image_signature}",
                f"chart signature\t{self.chart_signature}", f"sbom attestation\t{self.sbom_attestation}"]


def version() -> str:
    found = re.search(r'__version__ = "(.+)"', (ROOT / "job" / "__init__.py").read_text())
    assert found
    return found[1]


def plain_http(registry: str) -> bool:
    """A registry on this machine's loopback is spoken to without TLS."""
    return bool(_LOOPBACK.match(registry.split("/", 1)[0]))


def check_registry(registry: str) -> str:
    """`host[:port][/path]`, without a scheme or a trailing slash; else a ReleaseError saying what to give."""
    registry = registry.strip().rstrip("/")
    if not re.fullmatch(r"[A-Za-z0-9.\-]+(:[0-9]+)?(/[a-z0-9._\-]+)*", registry):
        raise ReleaseError(f"REGISTRY={registry!r}: give the registry as host[:port]/path, without a scheme "
                           "(make publish REGISTRY=<registry>/<path>)")
    return registry


def helm_env() -> dict[str, str]:
    """helm's cache, config and data in the tools' cache, never the user's (registry logins included: a maintainer
    logs in with `helm registry login --registry-config` or sets HELM_REGISTRY_CONFIG)."""
    home = cache_root() / "helm-home"
    env = {**os.environ, **{f"HELM_{part}_HOME": str(home / part.lower()) for part in ("CACHE", "CONFIG", "DATA")}}
    if "HELM_REGISTRY_CONFIG" not in os.environ and Path.home().joinpath(".config/helm/registry/config.json").exists():
        env["HELM_REGISTRY_CONFIG"] = str(Path.home() / ".config/helm/registry/config.json")
    return env


def _say(message: str) -> None:
    print(f"[release {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _run(cmd: list[str], *, env: dict[str, str] | None = None, what: str) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=1200)
    if result.returncode:
        raise ReleaseError(f"{what} failed (exit {result.returncode}): `{' '.join(cmd)}`\n"
                           f"{(result.stdout + result.stderr)[-3000:]}")
    return result.stdout + result.stderr


def _digest_of(text: str, *, what: str) -> str:
    found = re.findall(r"sha256:[0-9a-f]{64}", text)
    if not found:
        raise ReleaseError(f"{what}: no digest in its output:\n{text[-2000:]}")
    return found[-1]


def pin_chart_values(values: str, *, repository: str, digest: str) -> str:
    """values.yaml's text with `image.repository` and `image.digest` set, every comment and other line kept (the
    chart's values are a generated file; the pinned copy is only ever packaged)."""
    block = re.search(r"^image:\n((?:[ ]{2,}.*\n|\s*#.*\n|\s*\n)*)", values, re.MULTILINE)
    if block is None:
        raise ReleaseError("the chart's values.yaml has no `image:` block: cannot pin the image")
    body = block[1]
    for key, value in (("repository", repository), ("digest", digest)):
        body, count = re.subn(rf"^(  {key}:).*$", rf"\g<1> {value}", body, count=1, flags=re.MULTILINE)
        if count != 1:
            raise ReleaseError(f"the chart's values.yaml has no `image.{key}`: cannot pin the image")
    return values[:block.start(1)] + body + values[block.end(1):]


def _cosign_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("COSIGN_YES", "true")  # no interactive "are you sure"; nothing is uploaded anywhere else
    return env


def _registry_flags(registry: str) -> list[str]:
    return ["--allow-insecure-registry", "--allow-http-registry"] if plain_http(registry) else []


def cosign_sign(cosign: Path, key: str, reference: str, registry: str) -> str:
    """Sign `reference` (by digest) with `key`, offline: no transparency log; returns the signature's digest."""
    _run([str(cosign), "sign", "--key", key, "--tlog-upload=false", "--yes", *_registry_flags(registry),
          reference], env=_cosign_env(), what=f"cosign sign {reference}")
    return _triangulate(cosign, reference, registry, "signature")


def cosign_attest_sbom(cosign: Path, key: str, reference: str, sbom: Path, registry: str) -> str:
    _run([str(cosign), "attest", "--key", key, "--type", "cyclonedx", "--predicate", str(sbom),
          "--tlog-upload=false", "--yes", *_registry_flags(registry), reference],
         env=_cosign_env(), what=f"cosign attest {reference}")
    return _triangulate(cosign, reference, registry, "attestation")


def _triangulate(cosign: Path, reference: str, registry: str, kind: str) -> str:
    """The digest of the signature (or attestation) manifest cosign stored beside `reference`."""
    where = _run([str(cosign), "triangulate", "--type", kind, *_registry_flags(registry), reference],
                 env=_cosign_env(), what=f"cosign triangulate {reference}").split()[-1]
    crane = tools.binary("crane")
    digest = _run([str(crane), "digest", *(["--insecure"] if plain_http(registry) else []), where],
                  what=f"crane digest {where}").strip()
    return f"{where.rsplit(':', 1)[0]}@{digest}"


def push_image(crane: Path, archive: Path, target: str, registry: str) -> str:
    """Push the docker-archive to `target` (a tag); returns the pushed manifest's digest."""
    out = _run([str(crane), "push", *(["--insecure"] if plain_http(registry) else []), str(archive), target],
               what=f"crane push to {target}")
    return _digest_of(out, what="crane push")


def package_chart(helm: Path, *, repository: str, digest: str, dest: Path) -> Path:
    """`helm package` of a copy of the chart whose values pin the image by digest."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / CHART.name
        shutil.copytree(CHART, copy)
        values = copy / "values.yaml"
        values.write_text(pin_chart_values(values.read_text(), repository=repository, digest=digest))
        out = _run([str(helm), "package", str(copy), "-d", str(dest)], env=helm_env(), what="helm package")
    match = re.search(r"saved it to: (\S+\.tgz)", out)
    if match is None:
        raise ReleaseError(f"helm package: no archive named in its output:\n{out}")
    return Path(match[1])


def push_chart(helm: Path, package: Path, registry: str) -> str:
    out = _run([str(helm), "push", str(package), f"oci://{registry}/{CHARTS_PATH}",
                *(["--plain-http"] if plain_http(registry) else [])], env=helm_env(), what="helm push")
    return _digest_of(out, what="helm push")


def release(registry: str, *, key: str, archive: Path | None = None, sbom: Path | None = None,
            dist: Path | None = None) -> Published:
    """Build (or take from the cache) the image, push, package, push, sign and attest; see the module's doc.
    `archive` and `sbom` default to the project image's, built if the cache lacks them."""
    registry = check_registry(registry)
    if "COSIGN_PASSWORD" not in os.environ:
        raise ReleaseError("COSIGN_PASSWORD is not set: export the private key's password (empty for none)")
    ver = version()
    crane, cosign, helm = (tools.ensure_tool(name) for name in TOOLS)
    images.cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="publish-", dir=images.cache_dir()) as tmp:  # links, not copies
        if archive is None:
            _say("the image: the Dockerfile built with buildah (cached by its inputs)")
            archive, sbom = images.ensure_project_image(Path(tmp))
        if sbom is None or not sbom.exists():
            raise ReleaseError(f"the image's SBOM {sbom} is missing: build the image again (make node-images)")
        return _publish(registry, ver, key, archive, sbom, dist or ROOT / "dist", crane=crane, cosign=cosign,
                        helm=helm)


def _publish(registry: str, ver: str, key: str, archive: Path, sbom: Path, dist: Path, *, crane: Path,
             cosign: Path, helm: Path) -> Published:
    repository = f"{registry}/{IMAGE_NAME}"
    _say(f"pushing {archive.name} to {repository}:{ver}")
    image_digest = push_image(crane, archive, f"{repository}:{ver}", registry)
    image = f"{repository}@{image_digest}"
    dist.mkdir(parents=True, exist_ok=True)
    _say(f"packaging the chart pinned to {image}")
    package = package_chart(helm, repository=repository, digest=image_digest, dest=dist)
    chart_digest = push_chart(helm, package, registry)
    chart = f"{registry}/{CHARTS_PATH}/nsscaler@{chart_digest}"
    _say("signing the image and the chart, attaching the SBOM (cosign, key pair, no transparency log)")
    image_signature = cosign_sign(cosign, key, image, registry)
    chart_signature = cosign_sign(cosign, key, chart, registry)
    attestation = cosign_attest_sbom(cosign, key, image, sbom, registry)
    return Published(ver, image, chart, image_signature, chart_signature, attestation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("registry", help="where to push: host[:port]/path (a loopback host is plain HTTP)")
    parser.add_argument("--key", default=os.environ.get("COSIGN_KEY", "cosign.key"),
                        help="cosign's private key (default: $COSIGN_KEY, else cosign.key)")
    args = parser.parse_args(argv)
    try:
        if "://" not in args.key and not Path(args.key).exists():
            raise ReleaseError(f"no private key {args.key}: set COSIGN_KEY to your key "
                               "(`cosign generate-key-pair` makes one)")
        published = release(args.registry, key=args.key)
    except (ReleaseError, tools.SourceUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in published.lines():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
