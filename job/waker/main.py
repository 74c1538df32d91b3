"""`nsscaler-waker`: the waker's process. Settings are the job's (`NSSCALER_KUBECONFIG`, or the Pod's
ServiceAccount), plus its own flags."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from job.cluster.kube import Kube
from job.model.settings import Settings
from job.waker.server import Waker, app

_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nsscaler-waker", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("NSSCALER_WAKER_PORT", "8080")))
    parser.add_argument("--host", default="0.0.0.0",  # noqa: S104  # in its Pod: the Service reaches it there
                        help="address to listen on")
    parser.add_argument("--namespace", default=os.environ.get("NSSCALER_OWN_NAMESPACE")
                        or (_SA_NAMESPACE.read_text().strip() if _SA_NAMESPACE.exists() else "nsscaler"),
                        help="nsscaler's namespace: its CronJob, and the waker's own ServiceAccount")
    parser.add_argument("--service-account", default=os.environ.get("NSSCALER_WAKER_SERVICE_ACCOUNT",
                                                                     "nsscaler-waker"))
    parser.add_argument("--identity", default=os.environ.get("NSSCALER_WAKER_IDENTITY"),
                        help="the user the API server knows the waker as (default: its ServiceAccount's)")
    parser.add_argument("--cronjob", default="nsscaler")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    kube = Kube(Settings(_cli_parse_args=[]))  # type: ignore[call-arg]  # NSSCALER_* from the environment only
    identity = args.identity or f"system:serviceaccount:{args.namespace}:{args.service_account}"
    waker = Waker(kube, identity=identity, namespace=args.namespace, cronjob=args.cronjob)
    web.run_app(app(waker), host=args.host, port=args.port, print=None, shutdown_timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
