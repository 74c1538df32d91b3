"""The physical limit of a run that writes: exactly the PATCHes it needs (built beforehand by nsscaler's own patch
builders, bench.baselines.planned_patches), sent by the smallest client that can send them, as fast as the API
server takes them, in a process of its own.

The client is the standard library's `http.client`: one keep-alive TLS connection per worker, the kubeconfig's
own credentials (client certificate or bearer token), a PATCH written and its response read, nothing else: no
session, adapter, retry policy or per-request lookup. It uses as many connections side by side as nsscaler is
allowed writers (`--concurrency`: job/cluster/write.py sends a run's PATCHes from that many threads), so the
only difference left between the two is what nsscaler does besides sending: starting, reading, deciding,
recording. Its time is from the first connection to the last response (the handshakes included, as nsscaler
pays them); the interpreter's start is not part of the limit and is reported beside it.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from bench import runs

Patch = tuple[str, str, dict[str, Any]]


class Credentials:
    """Where the API server is and who we are, from a kubeconfig's current context."""

    def __init__(self, kubeconfig: Path) -> None:
        doc = yaml.safe_load(kubeconfig.read_text())
        context = _named(doc["contexts"], doc["current-context"])["context"]
        cluster, user = _named(doc["clusters"], context["cluster"])["cluster"], _named(doc["users"], context["user"])
        url = urlsplit(cluster["server"])
        self.host, self.port = url.hostname or "localhost", url.port or 443
        self.tls = ssl.create_default_context()
        with tempfile.TemporaryDirectory(prefix="nsscaler-limit-") as tmp:
            ca = _file(cluster, "certificate-authority", Path(tmp))
            if ca:
                self.tls.load_verify_locations(ca)
            cert, key = _file(user["user"], "client-certificate", Path(tmp)), _file(user["user"], "client-key",
                                                                                     Path(tmp))
            if cert:
                self.tls.load_cert_chain(cert, key)
        token = user["user"].get("token")
        self.headers = {"Content-Type": "application/merge-patch+json", "Accept": "application/json",
                        **({"Authorization": f"Bearer {token}"} if token else {})}

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.tls, timeout=30)


def _named(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["name"] == name)


def _file(section: dict[str, Any], key: str, tmp: Path) -> str | None:
    """A kubeconfig's file reference, or its inline `-data` written to a file (ssl loads only files)."""
    if section.get(key):
        return str(section[key])
    if section.get(f"{key}-data"):
        path = tmp / key
        path.write_bytes(base64.b64decode(section[f"{key}-data"]))
        return str(path)
    return None


def send(creds: Credentials, patches: list[Patch], *, concurrency: int) -> dict[str, Any]:
    """Every PATCH, `concurrency` connections side by side; raises on the first answer that is not 200."""
    todo: Iterator[Patch] = iter(patches)
    take = threading.Lock()
    failed: list[str] = []

    def worker() -> None:
        conn = creds.connect()
        try:
            while not failed:
                with take:
                    item = next(todo, None)
                if item is None:
                    return
                ns, name, body = item
                conn.request("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/{name}?fieldManager=nsscaler",
                             body=json.dumps(body).encode(), headers=creds.headers)
                resp = conn.getresponse()
                answer = resp.read()
                if resp.status != 200:
                    failed.append(f"{ns}/{name}: {resp.status} {answer[:300]!r}")
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(min(concurrency, max(1, len(patches))))]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"the limit's PATCH failed: {failed[0]}")
    return {"seconds": seconds, "requests": {"patch": len(patches)} if patches else {}}


def in_own_process(kubeconfig: Path, patches: list[Patch], *, concurrency: int) -> dict[str, Any]:
    """`send` in a fresh interpreter, as nsscaler itself runs (a large heap in the bench's own process slows
    every thread's allocations); `process_seconds` is that process's whole wall, its start included."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="nsscaler-limit-") as batch:
        json.dump(patches, batch)
        batch.flush()
        out = runs.child([sys.executable, "-m", "bench.limit", str(kubeconfig), batch.name, str(concurrency)])
    result: dict[str, Any] = json.loads(out.pop("stdout"))
    out.pop("stderr")
    return {**out, "process_seconds": out["seconds"], **result}


def send_unmeasured(kubeconfig: Path, patches: list[Patch], *, concurrency: int) -> None:
    """The same PATCHes from this process (giving the family back between repetitions, not measured)."""
    send(Credentials(kubeconfig), patches, concurrency=concurrency)


if __name__ == "__main__":
    config_path, batch_path, threads = sys.argv[1:4]
    batch = [(ns, name, body) for ns, name, body in json.loads(Path(batch_path).read_text())]
    print(json.dumps(send(Credentials(Path(config_path)), batch, concurrency=int(threads))))
