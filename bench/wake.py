"""`make bench-wake` (root): how long a held namespace takes to answer again, on a real node, by two paths.

- **waker**: a client asks the namespace's URL through the gateway (Traefik, built from its Go module) and retries
  on 503 every 0.2 s; timed from its first request to the first answer of the app itself.
- **schedule**: no waker (its Deployment at 0); a person's Wake is created, and the CronJob, scheduled every
  minute (the shortest a CronJob allows), restores the namespace at its next run; timed from the Wake's creation
  to the app's first answer. With a longer schedule this path waits longer, on average half the period more.

Each repetition first freezes the namespace again (a Job from the CronJob) and waits until its Pod is gone. The
node, the images and the overlay are the node tier's (`kustomize/overlays/local-with-waker`). Medians and worst
of --reps; markdown on stdout and under bench/results/, the Markdown rendered from the JSON beside it (with the
commit, the API server's own version, the cores and the load average before and after).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from bench import markdown
from bench.__main__ import FORMAT, commit, server_version
from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, images, node, traefik, versions
from job.waker.answer import RATE_SECONDS

ROOT = Path(__file__).resolve().parent.parent
OVERLAY = ROOT / "kustomize" / "overlays" / "local-with-waker"
NS, HELD, HOST = "nsscaler", "bench-wake-v1", "v1.bench-wake.test"
PAGE = "<!doctype html><title>bench</title><h1>THE APP</h1>"


def kubectl(plane: controlplane.ControlPlane, *args: str) -> str:
    return subprocess.run([str(versions.bin_dir() / "kubectl"), "--kubeconfig", str(plane.admin_kubeconfig), *args],
                          check=True, capture_output=True, text=True).stdout


def answers(port: int) -> bool:
    try:
        resp = requests.get(f"http://127.0.0.1:{port}/", headers={"Host": HOST}, timeout=5)
    except requests.RequestException:
        return False
    return resp.status_code == 200 and "THE APP" in resp.text


def until(check: Callable[[], bool], *, limit: float = 600.0) -> float:
    """Seconds until `check` holds, polling every 0.2 s."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > limit:
            raise TimeoutError(f"not within {limit:.0f}s")
        time.sleep(0.2)
    return time.monotonic() - started


def freeze(plane: controlplane.ControlPlane, api: AdminApi, rep: str) -> None:
    """No Wake left, a run from the CronJob, the app's Pod gone and its route pointed at the waker."""
    for wake in api.list("Wake", HELD):
        api.delete("Wake", wake["metadata"]["name"], HELD)
    kubectl(plane, "-n", NS, "create", "job", "--from=cronjob/nsscaler", f"bench-freeze-{rep}")
    wait_until(lambda: api.replicas("Deployment", HELD, "web") == 0 and not api.pods(HELD), timeout=180,
               what="the app frozen and its Pod gone")


def install(plane: controlplane.ControlPlane, api: AdminApi) -> None:
    kubectl(plane, "apply", "--server-side", "-k", str(OVERLAY))
    api.patch("CronJob", "nsscaler", {"spec": {"suspend": True}}, NS)
    traefik.install_gateway_crds(api, plane.admin_kubeconfig, versions.bin_dir() / "kubectl")
    wait_until(lambda: (api.get("Deployment", "nsscaler-waker", NS).get("status") or {}).get("readyReplicas") == 2,
               timeout=240, what="the waker")
    for ns in (HELD, "bench-wake-v2", "bench-wake-gw"):
        api.create(builders.namespace(ns))
    for obj in builders.web_app(HELD, images.busybox_image(), page=PAGE):
        api.create(obj)
    api.create(builders.nsscaler("bench-wake", "bench-wake-v", ["2"], wake={"on_request": True, "max_duration": "1h"}))


def measure(plane: controlplane.ControlPlane, api: AdminApi, port: int, reps: int) -> dict[str, list[float]]:
    api.create({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"name": "app", "namespace": HELD},
                "spec": {"parentRefs": [{"name": "web", "namespace": "bench-wake-gw"}], "hostnames": [HOST],
                         "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}})
    until(lambda: answers(port), limit=120)
    found: dict[str, list[float]] = {"waker": [], "schedule": []}
    for rep in range(reps):
        freeze(plane, api, f"w{rep}")
        time.sleep(RATE_SECONDS + 1)  # not timed: the waker wakes a namespace at most once in RATE_SECONDS
        found["waker"].append(until(lambda: answers(port)))
    api.patch("Deployment", "nsscaler-waker", {"spec": {"replicas": 0}}, NS)
    for rep in range(reps):
        freeze(plane, api, f"s{rep}")
        api.patch("CronJob", "nsscaler", {"spec": {"schedule": "*/1 * * * *", "suspend": False}}, NS)
        api.create(builders.wake(HELD, "1h", requestedBy="nsscaler-test-admin", reason="bench"))
        found["schedule"].append(until(lambda: answers(port)))
        api.patch("CronJob", "nsscaler", {"spec": {"suspend": True}}, NS)
    return found


def measured_at(plane: controlplane.ControlPlane, api: AdminApi) -> dict[str, Any]:
    """What the figures were measured on, as found while the bench ran (`bench.__main__`'s own fields)."""
    head, dirty = commit()
    return {"commit": head, "commit_dirty": dirty, "cpus": os.cpu_count(), "server_version": server_version(api)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wake", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    images.ensure_images()
    load_before = list(os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="nsscaler-bench-wake-") as tmp:
        plane, started = node.start_with_plane(Path(tmp) / "cluster")
        try:
            api = AdminApi(plane)
            machine = measured_at(plane, api)
            install(plane, api)
            with traefik.gateway(api, plane.admin_kubeconfig, namespace="bench-wake-gw", class_name="bench-wake",
                                 log=Path(tmp) / "traefik.log") as port:
                found = measure(plane, api, port, args.reps)
        finally:
            node.stop_with_plane(plane, started)
    now = dt.datetime.now(dt.UTC)
    result = {"format": FORMAT, "when": f"{now:%Y-%m-%d %H:%M}", "reps": args.reps, "found": found,
              "machine": {**machine, "load_before": load_before, "load_after": list(os.getloadavg())}}
    text = markdown.render_wake(result)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    (args.out / f"wake-{stamp}.md").write_text(text)
    (args.out / f"wake-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
