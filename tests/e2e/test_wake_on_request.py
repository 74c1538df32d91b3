"""Wake on the first request, end to end: a real gateway, a real browser, the real waker and the real job.

- **Gateway**: Traefik v3.6.12, built from its Go module (devtools/cluster/traefik.py), run as a host process
  with the plane's admin kubeconfig (its Gateway API provider reads KUBECONFIG), with the Gateway API CRDs v1.4.0
  that Traefik pins.
- **Browser**: Debian's headless Chromium through chromium-driver (tests/browser.py), a fresh profile.
- **Waker**: the real `nsscaler-waker` process as its own ServiceAccount with the component's RBAC.
- **App**: a stub HTTP server on the host.

This control plane has no node, so nothing runs in a Pod: the waker and the app run as host processes, and each
reaches Traefik through a Service without a selector plus a hand-written EndpointSlice pointing at its
127.0.0.1 port (Traefik load-balances over EndpointSlices, as it does in a cluster). The Job the waker creates
from the CronJob cannot run either: the test runs the job's own command in its place, once the Job exists, and
writes the app's Pod status as a kubelet would so that the real Deployment controller counts it available.
Every wait polls a condition, bounded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, tools, traefik
from job.model.marks import ANNOTATION_ORIGINAL_RULES, HEADER_NAMESPACE, WAKER_PORT, WAKER_SERVICE
from job.waker.actions import WAKE_NAME
from tests.browser import chromium
from tests.conftest import ROOT
from tests.gateway import gateway_crds, httproute, ready_pods
from tests.waker_process import free_port, waker

__all__ = ["gateway_crds"]
pytestmark = pytest.mark.usefixtures("crd", "wake_admission", "gateway_crds")
ARTIFACTS = ROOT / ".artifacts"
APP = textwrap.dedent("""
    import http.server, sys
    class App(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!doctype html><title>shop</title><h1 id=app>THE SHOP APP</h1>"
            self.send_response(200); self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        def do_HEAD(self):
            self.send_response(200); self.send_header("Content-Type", "text/html"); self.end_headers()
        def log_message(self, *args): pass
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), App).serve_forever()
""")


def host_service(api: AdminApi, ns: str, name: str, *, port: int, target: int) -> None:
    """A Service without a selector and its EndpointSlice: the host process on 127.0.0.1:`target`."""
    api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
                "spec": {"ports": [{"name": "http", "port": port, "targetPort": target}]}})
    api.create({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": f"{name}-host", "namespace": ns,
                             "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": target, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]})


@pytest.fixture
def gateway(api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str,
            tmp_path: Path) -> Iterator[tuple[str, int]]:
    """Traefik watching the plane, and a Gateway `<prefix>gw/web` on its entry point; (namespace, port)."""
    try:
        binary = traefik.ensure_traefik()
    except tools.SourceUnavailable as exc:
        pytest.skip(f"Traefik not built: {exc}")
    port, ping = free_port(), free_port()
    ns = prefix + "gw"
    api.create(builders.namespace(ns))
    api.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                "metadata": {"name": f"{prefix}traefik"}, "spec": {"controllerName": "traefik.io/gateway-controller"}})
    api.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"gatewayClassName": f"{prefix}traefik", "listeners": [
                    {"name": "http", "protocol": "HTTP", "port": port,
                     "allowedRoutes": {"namespaces": {"from": "All"}}}]}})
    log = tmp_path / "traefik.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(binary), f"--entryPoints.web.address=127.0.0.1:{port}", f"--entryPoints.ping.address=127.0.0.1:{ping}",
             "--ping.entryPoint=ping", "--providers.kubernetesgateway=true", "--log.level=INFO",
             "--global.checkNewVersion=false", "--global.sendAnonymousUsage=false"],
            env={"KUBECONFIG": str(control_plane.admin_kubeconfig), "PATH": "/usr/bin:/bin"}, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{ping}/ping", timeout=2).ok, timeout=60, what="Traefik")
        yield ns, port
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        api.delete("GatewayClass", f"{prefix}traefik")
        print(log.read_text(errors="replace")[-5000:])


@pytest.fixture
def app(tmp_path: Path) -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", APP, str(port)])
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/", timeout=2).ok, timeout=30, what="the app")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def via(port: int, host: str, method: str = "GET", **headers: str) -> requests.Response:
    return requests.request(method, f"http://127.0.0.1:{port}/", headers={"Host": host, **headers}, timeout=30)


def from_waker(resp: requests.Response) -> bool:
    return resp.status_code == 503 and "X-Nsscaler-Waker" in resp.headers


def the_job_s_run(api: AdminApi, run_job: Any, *, held: str, sys_ns: str, before: dict[str, Any]) -> None:
    """The run the waker's Job would make, in its place (no node): the workloads come back, then the route, once
    they are available."""
    woken = run_job("--own-namespace", sys_ns, "--restore-wait-in-run", "0")
    assert woken.exit_code == 0, woken.stderr
    assert api.replicas("Deployment", held, "web") == 1
    ready_pods(api, held, "app=web")
    wait_until(lambda: (api.get("Deployment", "web", held).get("status") or {}).get("availableReplicas") == 1,
               timeout=60, what="the Deployment controller to count web available")
    last = run_job("--own-namespace", sys_ns, "--restore-wait-in-run", "0")
    assert last.exit_code == 0, last.stderr
    assert api.get("HTTPRoute", "shop", held)["spec"] == before  # exactly as it was


def test_a_held_namespace_s_url_shows_the_waiting_page_wakes_it_and_the_same_browser_then_shows_the_app(
        api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str, tmp_path: Path, run_job: Any,
        gateway: tuple[str, int], app: int) -> None:
    gw_ns, port = gateway
    held, other, sys_ns = prefix + "v1", prefix + "v3", prefix + "sys"
    host = "v1.shop.test"
    for ns in (held, prefix + "v2", other, sys_ns):
        api.create(builders.namespace(ns))
    api.create(builders.deployment(held, "web", 1))
    host_service(api, held, "web", port=80, target=app)
    api.create(httproute(held, "shop", hostname=host, gateway=(gw_ns, "web"),
                         rules=[{"backendRefs": [{"name": "web", "port": 80}]}]))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"], wake={"on_request": True, "max_duration": "1h"}))
    before = api.get("HTTPRoute", "shop", held)["spec"]
    wait_until(lambda: via(port, host).text.count("THE SHOP APP") == 1, timeout=60, what="Traefik to route to the app")

    with waker(api, control_plane, namespace=sys_ns, prefix=prefix, workdir=tmp_path) as process:
        host_service(api, sys_ns, WAKER_SERVICE, port=WAKER_PORT, target=int(process.url.rsplit(":", 1)[1]))
        frozen = run_job("--own-namespace", sys_ns, "--restore-wait-in-run", "0")
        assert frozen.exit_code == 0, frozen.stderr
        assert ANNOTATION_ORIGINAL_RULES in api.get("HTTPRoute", "shop", held)["metadata"]["annotations"]
        wait_until(lambda: from_waker(via(port, host, "HEAD")), timeout=60, what="Traefik to send to the waker")

        # a health checker and a HEAD do not wake; a header a client sends cannot choose another namespace
        assert from_waker(via(port, host, "HEAD"))
        assert from_waker(via(port, host, **{"User-Agent": "kube-probe/1.36"}))
        assert api.list("Wake", held) == []

        ARTIFACTS.mkdir(exist_ok=True)
        with chromium(tmp_path / "profile", resolve={host: "127.0.0.1"}) as browser:
            browser.open(f"http://{host}:{port}/")
            assert "Waking" in browser.source() and held in browser.source()
            browser.screenshot(ARTIFACTS / "wake-on-request-waiting-page.png")
            forged = via(port, host, **{HEADER_NAMESPACE: other, "Accept": "application/json"})
            assert from_waker(forged) and forged.json()["namespace"] == held
            assert api.list("Wake", other) == []
            (wake,) = api.list("Wake", held)  # the browser's request (and the client's) made one Wake
            assert wake["metadata"]["name"] == WAKE_NAME and wake["spec"]["requestedBy"] == process.identity
            assert wake["spec"]["reason"].startswith(f"request to GET {host}")
            wait_until(lambda: any(j["metadata"]["name"].startswith("nsscaler-wake-")
                                   for j in api.list("Job", sys_ns)), timeout=30, what="the waker's Job")

            the_job_s_run(api, run_job, held=held, sys_ns=sys_ns, before=before)

            wait_until(lambda: "THE SHOP APP" in browser.source(), timeout=120,
                       what="the waiting page to open the app in the same browser session")
            assert browser.url() == f"http://{host}:{port}/"
            browser.screenshot(ARTIFACTS / "wake-on-request-app.png")
        assert via(port, host).status_code == 200  # a client that retried on 503 reaches the app now
