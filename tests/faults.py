"""A fault-injecting HTTPS proxy in front of the local kube-apiserver (a test utility, not the product).

It terminates TLS with a certificate from the control plane's own CA and forwards each request to the
real API server, passing the bearer token through (so the job runs as a ServiceAccount). On a chosen
fraction of requests it answers 429 with Retry-After, answers 503, resets the connection, or adds
latency instead. A hook may act on a request before it is forwarded (to stage a race for real) and may
answer it with a fault instead; `KillAt` is such a hook: it SIGKILLs a process at its n-th request of a
kind, so a crash lands at the same point of a run however busy the machine is (never after a sleep).
Everything stays on loopback; the proxy stops with its `with` block.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from devtools.cluster import pki
from devtools.cluster.controlplane import ControlPlane

FAULTS = ("429", "503", "reset", "latency")
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}
#: what a `before_forward` hook returns: None forwards the request, a name from FAULTS answers with that fault
Hook = Callable[[str, str], str | None]
#: an `after_forward` hook gets the method, the path and the API server's status code
AfterHook = Callable[[str, str, int], None]
#: a `rewrite` hook gets the method, the path and the API server's answer, and returns the body to send instead
#: (e.g. a `/version` that names another Kubernetes version)
Rewrite = Callable[[str, str, bytes], bytes]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client killed mid-request, or an upstream that is down, ends the connection; nothing to print."""


class FaultProxy:
    def __init__(self, plane: ControlPlane, *, fraction: float, faults: tuple[str, ...] = FAULTS,
                 seed: int = 7, before_forward: Hook | None = None, after_forward: AfterHook | None = None,
                 rewrite: Rewrite | None = None) -> None:
        self.plane = plane
        self.fraction = fraction
        self.faults = faults
        self.random = random.Random(seed)
        self.before_forward = before_forward
        self.after_forward = after_forward
        self.rewrite = rewrite
        self.injected: Counter[str] = Counter()
        #: each User-Agent the clients sent, with how many requests carried it
        self.agents: Counter[str] = Counter()
        self.forwarded = 0
        #: connections the clients opened (each costs a TLS handshake on both sides)
        self.connections = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition()
        self._in_flight = 0
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

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Until no request is being handled: a request whose client was killed may still be on its way to the
        API server, and what the test reads next must not depend on whether it got there yet."""
        with self._idle:
            if not self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout):
                raise AssertionError(f"{self._in_flight} requests still in the proxy after {timeout}s")

    def _track(self, delta: int) -> None:
        with self._idle:
            self._in_flight += delta
            self._idle.notify_all()

    def __enter__(self) -> FaultProxy:
        # Signed by the control plane's own CA, so the job trusts the proxy exactly as it trusts the server.
        cert, key = pki.Authority.load(Path(self.plane.ca_cert).parent).issue(
            f"fault-proxy-{id(self)}", common_name="fault-proxy", server=True)
        proxy = self
        upstream_ctx = ssl.create_default_context(cafile=str(self.plane.ca_cert))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:  # one handler per connection the client opens
                with proxy._lock:
                    proxy.connections += 1
                super().setup()

            def log_message(self, format: str, *args: object) -> None:
                return

            def _handle(self) -> None:
                proxy._track(+1)
                try:
                    self._proxy()
                finally:
                    proxy._track(-1)

            def _proxy(self) -> None:
                with proxy._lock:
                    proxy.agents[self.headers.get("User-Agent", "")] += 1
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = proxy._choose()
                if fault is None and proxy.before_forward:
                    fault = proxy.before_forward(self.command, self.path)
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
                conn = http.client.HTTPSConnection(*proxy._upstream, context=upstream_ctx, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if proxy.after_forward:
                    proxy.after_forward(self.command, self.path, resp.status)
                if proxy.rewrite:
                    data = proxy.rewrite(self.command, self.path, data)
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP_HEADERS:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        server = _QuietServer(("127.0.0.1", 0), Handler)
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


class KillAt:
    """Hooks that SIGKILL the process `start()` started at its n-th request matching `method` and a path containing
    `path_part`: at the first such request once n-1 of them have succeeded (a 409 the run re-reads and sends again
    is not counted). With `lands`, that request still goes on to the API server (it was in flight when its client
    died); without, it is reset (the client died before sending it).

    The requests are counted where the proxy sees them, so the kill lands at the same point of a run on an idle or
    a loaded machine. One per run: `KillAt(...).on(proxy)`; after `wait()`, `proxy.wait_idle()` before reading
    what the run left.
    """

    def __init__(self, *, method: str, path_part: str, n: int, lands: bool = True) -> None:
        self.method, self.path_part, self.n, self.lands = method, path_part, n, lands
        self.seen = 0
        self.succeeded = 0
        self.killed = threading.Event()
        self._started = threading.Event()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def on(self, proxy: FaultProxy) -> KillAt:
        proxy.before_forward, proxy.after_forward = self.before_forward, self.after_forward
        return self

    def _matches(self, method: str, path: str) -> bool:
        # the run Lease (a namespaced Lease, taken by a run's first write) is not the run's work, nor is a dry run
        # (a row tried before its first freeze, `job.decide.trials`) a write: never counted
        return method == self.method and self.path_part in path and "/leases/" not in path and "dryRun=" not in path

    def before_forward(self, method: str, path: str) -> str | None:
        if not self._matches(method, path):
            return None
        with self._lock:  # held while killing: once the kill is chosen, the process's other workers wait for it
            self.seen += 1
            if self.killed.is_set() or self.succeeded < self.n - 1:
                return None
            if not self._started.wait(timeout=60) or self._proc is None:
                raise AssertionError("a request came before the process was started")
            os.kill(self._proc.pid, signal.SIGKILL)
            self.killed.set()
        return None if self.lands else "reset"

    def after_forward(self, method: str, path: str, status: int) -> None:
        if self._matches(method, path) and 200 <= status < 300:
            with self._lock:
                self.succeeded += 1

    def start(self, cmd: Sequence[str]) -> subprocess.Popen[bytes]:
        self._proc = subprocess.Popen(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._started.set()
        return self._proc

    def wait(self, timeout: float = 120.0) -> int:
        """The process's exit code once it ended; -9 when this hook killed it."""
        assert self._proc is not None
        return self._proc.wait(timeout=timeout)


class StoppedServer:
    """What a stopped API server (its process paused, or hung) is on the wire: the kernel completes each TCP
    handshake, and nothing ever answers, not even the TLS ClientHello. It counts the connections a client opens,
    so a test can say how many attempts it made. Imitated, not done for real: pausing the suite's one
    kube-apiserver would stop every other test with it."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self._listener.getsockname()[1]}"
        self._held: list[socket.socket] = []  # kept open, unanswered, until the end
        self._lock = threading.Lock()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._held)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed: the `with` block is over
                return
            with self._lock:
                self._held.append(conn)

    def __enter__(self) -> StoppedServer:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):  # wakes the accepting thread, which a close alone may not
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for conn in self._held:
                conn.close()
