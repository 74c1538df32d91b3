"""A real OCI registry on loopback for the release tests: `crane registry serve` (go-containerregistry's registry,
built from its module by `make publish-tools`), blobs on disk in the test's folder, on a port the kernel chooses,
stopped at the end. Its log has one line per request, which is how a test sees who pulled what."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devtools.builders import wait_until


@dataclass(frozen=True)
class Registry:
    #: `127.0.0.1:<port>`
    host: str
    log: Path

    def requests(self) -> list[str]:
        """Every request the registry answered so far, `GET /v2/…`, oldest first."""
        return re.findall(r"\b((?:GET|HEAD|PUT|POST|PATCH|DELETE) /v2/\S*)", self.log.read_text(errors="replace"))


@contextlib.contextmanager
def serve(crane: Path, folder: Path) -> Iterator[Registry]:
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "registry.log"
    blobs = folder / "blobs"
    blobs.mkdir(exist_ok=True)
    with log.open("w") as out:
        process = subprocess.Popen([str(crane), "registry", "serve", "--address", "127.0.0.1:0", "--disk", str(blobs)],
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def port() -> str | None:
            found = re.search(r"serving on port (\d+)", log.read_text())
            assert process.poll() is None, f"the registry exited ({process.returncode}):\n{log.read_text()}"
            return found[1] if found else None

        wait_until(lambda: port() is not None, timeout=30, what="the local registry to listen")
        yield Registry(f"127.0.0.1:{port()}", log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


@dataclass(frozen=True)
class KeyPair:
    key: Path
    public: Path
    password: str


def key_pair(cosign: Path, folder: Path, password: str = "release-test") -> KeyPair:  # noqa: S107 (a test key)
    """A cosign key pair made for this test run (`cosign generate-key-pair`), its private key encrypted with
    `password` (COSIGN_PASSWORD)."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(cosign), "generate-key-pair", "--output-key-prefix", str(folder / "release")], cwd=folder,
                   env=cosign_env(password, folder), check=True, capture_output=True, timeout=60)
    return KeyPair(folder / "release.key", folder / "release.pub", password)


def cosign_env(password: str, folder: Path) -> dict[str, str]:
    """cosign offline: the key's password, and its TUF cache in the test's folder (nothing is fetched with a key
    and no transparency log, and nothing is written to the user's ~/.sigstore)."""
    return {**os.environ, "COSIGN_PASSWORD": password, "TUF_ROOT": str(folder / "tuf"), "COSIGN_YES": "true"}


def cosign(tool: Path, folder: Path, *args: str, password: str = "") -> subprocess.CompletedProcess[str]:
    """A cosign command against the loopback registry (plain HTTP), verification without a transparency log."""
    return subprocess.run([str(tool), *args], env=cosign_env(password, folder), capture_output=True, text=True,
                          check=False, timeout=300)


def verify(tool: Path, folder: Path, public: Path, reference: str, *more: str) -> subprocess.CompletedProcess[str]:
    """`cosign verify --key <public>` as the docs tell a user to run it against a key-signed, offline release."""
    return cosign(tool, folder, "verify", "--key", str(public), "--insecure-ignore-tlog=true",
                  "--allow-insecure-registry", "--allow-http-registry", *more, reference)
