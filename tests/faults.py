"""A fault-injecting HTTPS proxy in front of the local kube-apiserver (a test utility, not the product).

It terminates TLS with a certificate from the control plane's own CA and forwards each request to the
real API server, passing the bearer token through (so the job runs as a ServiceAccount). On a chosen
fraction of requests it answers 429 with Retry-After, answers 503, resets the connection, or adds
latency instead. A hook may act on a request before it is forwarded (to stage a race for real).
Everything stays on loopback; the proxy stops with its `with` block.
"""

from __future__ import annotations

import http.client
import random
import socket
import ssl
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from tests.cluster import pki
from tests.cluster.controlplane import ControlPlane

FAULTS = ("429", "503", "reset", "latency")
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


class FaultProxy:
    def __init__(self, plane: ControlPlane, *, fraction: float, faults: tuple[str, ...] = FAULTS,
                 seed: int = 7, before_forward: Callable[[str, str], None] | None = None) -> None:
        self.plane = plane
        self.fraction = fraction
        self.faults = faults
        self.random = random.Random(seed)
        self.before_forward = before_forward
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        self._lock = threading.Lock()
        upstream = urlsplit(plane.server)
        self._upstream = (upstream.hostname or "127.0.0.1", upstream.port or 443)
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    def _choose(self) -> str | None:
        with self._lock:
            if self.random.random() < self.fraction:
                fault = self.random.choice(self.faults)
                self.injected[fault] += 1
                return fault
            self.forwarded += 1
            return None

    def __enter__(self) -> FaultProxy:
        # Signed by the control plane's own CA, so the job trusts the proxy exactly as it trusts the server.
        cert, key = pki.Authority.load(Path(self.plane.ca_cert).parent).issue(
            f"fault-proxy-{id(self)}", common_name="fault-proxy", server=True)
        proxy = self
        upstream_ctx = ssl.create_default_context(cafile=str(self.plane.ca_cert))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = proxy._choose()
                if fault == "reset":
                    # SO_LINGER 0: close with RST, the way a crashed load balancer drops a connection
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                if fault in ("429", "503"):
                    payload = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected fault"}'
                    self.send_response(int(fault))
                    if fault == "429":
                        self.send_header("Retry-After", "1")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if fault == "latency":
                    time.sleep(0.3)
                if proxy.before_forward:
                    proxy.before_forward(self.command, self.path)
                conn = http.client.HTTPSConnection(*proxy._upstream, context=upstream_ctx, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP_HEADERS:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self._server = server
        self.url = f"https://127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig whose server is this proxy (the proxy's certificate is signed by the same CA)."""
        saved = self.plane.server
        try:
            self.plane.server = self.url
            return self.plane.kubeconfig(path, user="fault-proxy-user", token=token)
        finally:
            self.plane.server = saved

