"""Wake on the first request, end to end on the real node: nothing here stands in for another program.

- **Node**: the node tier's kubelet and containerd run the app's Pod, the waker's two Pods (the component's own
  Deployment, the CronJob's image, `kustomize/overlays/local-with-waker`) and the Jobs of the runs, the one the
  waker starts included.
- **Gateway**: Traefik v3.6.12, built from its Go module (devtools/cluster/traefik.py), run on the host with the
  plane's admin kubeconfig (its Gateway API provider), with the Gateway API CRDs v1.4.0 that Traefik pins. It
  sends requests to the Pods' addresses (EndpointSlices), which the host reaches over the node's bridge.
- **Browser**: Debian's headless Chromium through chromium-driver (tests/browser.py), a fresh profile. Its
  screenshots are kept in `.artifacts/`.

Not proven here: the waker's NetworkPolicy (this node has no network plugin that enforces NetworkPolicies).
Every wait polls a condition, bounded; the time from the first request to the app's page is printed as a node
tier figure, never asserted (the benchmark's business)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images, traefik
from job.model.marks import ANNOTATION_ORIGINAL_RULES, ANNOTATION_WAKE_REQUEST, HEADER_NAMESPACE
from job.waker.actions import WAKE_NAME
from job.waker.page import WAKER_HEADER
from tests.browser import chromium
from tests.conftest import ROOT, apply_manifest
from tests.gateway import gateway_crds, httproute
from tests.node.conftest import NAMESPACE, job_result, run_cronjob_now

__all__ = ["gateway_crds"]
pytestmark = [pytest.mark.node, pytest.mark.usefixtures("installed", "gateway_crds")]
ARTIFACTS = ROOT / ".artifacts"
OVERLAY = ROOT / "kustomize" / "overlays" / "local-with-waker"
WAKER = "nsscaler-waker"
#: the app's page
APP_PAGE = "<!doctype html><title>shop</title><h1 id=app>THE SHOP APP</h1>"


@pytest.fixture(scope="module")
def waker_pods(api: AdminApi, control_plane: controlplane.ControlPlane) -> Iterator[None]:
    """The overlay with the waker, applied as a user would; both waker Pods Ready. Afterwards the waker goes
    again (the other node tests run without it)."""
    apply_manifest(control_plane.admin_kubeconfig, OVERLAY, kustomize=True)
    api.patch("CronJob", "nsscaler", {"spec": {"suspend": True}}, NAMESPACE)  # only the runs this test starts
    wait_until(lambda: (api.get("Deployment", WAKER, NAMESPACE).get("status") or {}).get("readyReplicas") == 2,
               timeout=240, what="both waker Pods Ready")
    yield
    for kind in ("Deployment", "Service", "PodDisruptionBudget"):
        api.delete(kind, WAKER, NAMESPACE)


@pytest.fixture
def gateway(api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str,
            tmp_path: Path) -> Iterator[tuple[str, int]]:
    """Traefik watching the plane, and a Gateway `<prefix>gw/web` on its entry point; (namespace, port)."""
    ns = prefix + "gw"
    api.create(builders.namespace(ns))
    log = tmp_path / "traefik.log"
    try:
        with traefik.gateway(api, control_plane.admin_kubeconfig, namespace=ns, class_name=f"{prefix}traefik",
                             log=log) as port:
            yield ns, port
    finally:
        print(log.read_text(errors="replace")[-5000:] if log.exists() else "")


def via(port: int, host: str, method: str = "GET", **headers: str) -> requests.Response:
    return requests.request(method, f"http://127.0.0.1:{port}/", headers={"Host": host, **headers}, timeout=30)


def from_waker(resp: requests.Response) -> bool:
    """The waker's answer, as it reaches the client through the gateway: 503, the waker's own header, and its
    `Retry-After` (the seconds a client waits before it asks again) passed on by Traefik."""
    return resp.status_code == 503 and WAKER_HEADER in resp.headers and resp.headers.get("Retry-After") == "5"


def observed(api: AdminApi) -> dict[str, float]:
    """The waker Pods' request-to-ready histograms, added up: {"count": n, "sum": seconds}."""
    found = {"count": 0.0, "sum": 0.0}
    for pod in api.list("Pod", NAMESPACE, labelSelector=f"app.kubernetes.io/name={WAKER}"):
        ip = (pod.get("status") or {}).get("podIP")
        text = requests.get(f"http://{ip}:8080/metrics", timeout=10).text if ip else ""
        for line in text.splitlines():
            for key in found:
                if line.startswith(f"nsscaler_waker_request_to_ready_seconds_{key} "):
                    found[key] += float(line.split()[-1])
    return found


def assert_route_back(api: AdminApi, ns: str, before: dict[str, Any]) -> None:
    route = api.get("HTTPRoute", "shop", ns)
    assert route["spec"] == before  # exactly as it was
    assert ANNOTATION_ORIGINAL_RULES not in (route["metadata"].get("annotations") or {})


def wake_runs(api: AdminApi) -> list[dict[str, Any]]:
    return [j for j in api.list("Job", NAMESPACE) if j["metadata"]["name"].startswith("nsscaler-wake-")]


def family_with_routes(api: AdminApi, prefix: str, gw_ns: str, host: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """`<prefix>v1` with the app and route `shop` for `host`; `v2`, `v3`; `q1` with a route of its own. Returns
    the two routes' specs as written. Policy `<prefix>p` holds `v1` and `v3` and wakes on request; `<prefix>q`
    holds `q1` and does not."""
    api.create(builders.nsscaler(f"{prefix}p", prefix + "v", ["2"], wake={"on_request": True, "max_duration": "1h"}))
    api.create(builders.nsscaler(f"{prefix}q", prefix + "q", []))
    for suffix in ("v1", "v2", "v3", "q1"):
        api.create(builders.namespace(prefix + suffix))
    for obj in builders.web_app(prefix + "v1", images.busybox_image(), page=APP_PAGE):
        api.create(obj)
    for ns, name in ((prefix + "v1", host), (prefix + "q1", f"q1.{prefix}shop.test")):
        api.create(httproute(ns, "shop", hostname=name, gateway=(gw_ns, "web"),
                             rules=[{"backendRefs": [{"name": "web", "port": 80}]}]))
    return api.get("HTTPRoute", "shop", prefix + "v1")["spec"], api.get("HTTPRoute", "shop", prefix + "q1")["spec"]


def test_a_held_namespace_s_url_shows_the_waiting_page_wakes_it_and_the_same_browser_then_shows_the_app(
        api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str, tmp_path: Path, waker_pods: None,
        gateway: tuple[str, int], figures: list[str]) -> None:
    gw_ns, port = gateway
    held, other, untouched = prefix + "v1", prefix + "v3", prefix + "q1"
    host = f"v1.{prefix}shop.test"
    before, untouched_before = family_with_routes(api, prefix, gw_ns, host)
    wait_until(lambda: "THE SHOP APP" in via(port, host).text, timeout=120, what="Traefik to route to the app")

    frozen = run_cronjob_now(control_plane, api)
    assert frozen.exit_code == 0, frozen.log
    assert api.replicas("Deployment", held, "web") == 0
    assert ANNOTATION_ORIGINAL_RULES in api.get("HTTPRoute", "shop", held)["metadata"]["annotations"]
    wait_until(lambda: from_waker(via(port, host, "HEAD")), timeout=60, what="Traefik to send to the waker")

    # a health checker and a HEAD do not wake
    assert from_waker(via(port, host, "HEAD"))
    assert from_waker(via(port, host, **{"User-Agent": "kube-probe/1.36"}))
    assert api.list("Wake", held) == [] and wake_runs(api) == []

    ARTIFACTS.mkdir(exist_ok=True)
    with chromium(tmp_path / "profile", resolve={host: "127.0.0.1"}) as browser:
        asked = time.monotonic()
        browser.open(f"http://{host}:{port}/")
        assert "Waking" in browser.source() and held in browser.source()
        browser.screenshot(ARTIFACTS / "wake-on-request-waiting-page.png")
        # a header a client sends cannot choose another namespace: the gateway sets it
        forged = via(port, host, **{HEADER_NAMESPACE: other, "Accept": "application/json"})
        assert from_waker(forged) and forged.json()["namespace"] == held, (forged.headers, forged.text)
        assert forged.json()["retryAfterSeconds"] == 5  # the body says what the header says
        assert api.list("Wake", other) == []
        (wake,) = api.list("Wake", held)  # the browser's request and the client's made one Wake
        assert wake["metadata"]["name"] == WAKE_NAME
        assert wake["spec"]["requestedBy"] == f"system:serviceaccount:{NAMESPACE}:{WAKER}"
        assert wake["metadata"]["annotations"][ANNOTATION_WAKE_REQUEST] == f"GET {host}:{port}/"
        wait_until(lambda: len(wake_runs(api)) == 1, timeout=30, what="the run the waker starts")

        wait_until(lambda: "THE SHOP APP" in browser.source(), timeout=240,
                   what="the waiting page to open the app in the same browser session")
        figures.append(f"wake on request: first request to the app's page in the same browser "
                       f"{time.monotonic() - asked:.1f}s")
        assert browser.url() == f"http://{host}:{port}/"
        browser.screenshot(ARTIFACTS / "wake-on-request-app.png")

    (started,) = wake_runs(api)
    woken = job_result(control_plane, api, started["metadata"]["name"])
    assert woken.exit_code == 0, woken.log
    assert_route_back(api, held, before)
    assert via(port, host).status_code == 200  # a client that retried on 503 reaches the app now
    wait_until(lambda: observed(api)["count"] == 1, timeout=60,
               what="the waker that woke it to see its routes back")
    figures.append(f"wake on request: request to ready as the waker observed it {observed(api)['sum']:.1f}s")
    assert api.get("HTTPRoute", "shop", untouched)["spec"] == untouched_before  # its policy did not opt in
