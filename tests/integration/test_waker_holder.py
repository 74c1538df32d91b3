"""The waker against the real control plane, where two policies have a namespace in scope: it opens the door of
the policy that holds the namespace now (`job.decide.holding`, the run's rule), not of the first in scope. The real
`nsscaler-waker` process runs as its own ServiceAccount with the component's RBAC, as in test_waker_server.py; the
plugin names the same policy."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from devtools import builders
from devtools.builders import AdminApi
from devtools.cluster import controlplane
from job.model.marks import HEADER_NAMESPACE
from job.model.windows import DAYS
from tests.users import plugin
from tests.waker_process import WakerProcess, waker

pytestmark = pytest.mark.usefixtures("crd", "wake_admission")


def elsewhen() -> list[str]:
    """A hold window three days from today: the policy is outside its windows for the whole test."""
    return [f"{DAYS[(dt.datetime.now(dt.UTC).weekday() + 3) % 7]} 00:00-01:00"]


@pytest.fixture
def world(api: AdminApi, control_plane: controlplane.ControlPlane, prefix: str,
          tmp_path: Path) -> Iterator[tuple[str, WakerProcess]]:
    """`<prefix>s...` is in scope of `<prefix>a-shop` (wakes for 1h, but outside its hold_windows now);
    `<prefix>sv1` is held by `<prefix>b-shop-v` (wakes for 3h), `<prefix>sw1` by `<prefix>c-shop-w` (does not
    wake on request). By name, `a-shop` comes first for all of them."""
    for suffix in ("sv1", "sw1", "sys"):
        api.create(builders.namespace(prefix + suffix))
    api.create(builders.nsscaler(f"{prefix}a-shop", f"{prefix}s", ["ys"], hold_windows=elsewhen(),
                                 wake={"on_request": True, "max_duration": "1h"}))
    api.create(builders.nsscaler(f"{prefix}b-shop-v", f"{prefix}sv", [],
                                 wake={"on_request": True, "max_duration": "3h"}))
    api.create(builders.nsscaler(f"{prefix}c-shop-w", f"{prefix}sw", [], wake={"on_request": False}))
    with waker(api, control_plane, namespace=prefix + "sys", prefix=prefix, workdir=tmp_path) as process:
        yield prefix, process
        print(process.logs())


def ask(process: WakerProcess, ns: str) -> requests.Response:
    return requests.get(process.url + "/cart", timeout=30, headers={"Host": "shop.example", HEADER_NAMESPACE: ns})


def test_the_wake_follows_the_policy_holding_the_namespace_not_the_first_in_scope(
        api: AdminApi, world: tuple[str, WakerProcess]) -> None:
    prefix, process = world
    ns = prefix + "sv1"
    answer = ask(process, ns)
    assert answer.status_code == 503 and answer.json()["namespace"] == ns
    assert answer.json()["policy"] == prefix + "b-shop-v"
    (wake,) = api.list("Wake", ns)
    assert wake["spec"]["duration"] == "3h"  # b-shop-v's max_duration; a-shop would have said 1h


def test_a_namespace_whose_holder_does_not_wake_on_request_is_refused_though_another_in_scope_would(
        api: AdminApi, world: tuple[str, WakerProcess]) -> None:
    prefix, process = world
    ns = prefix + "sw1"
    refused = ask(process, ns)
    assert refused.status_code == 404 and refused.json()["state"] == "refused"
    assert api.list("Wake", ns) == []


def test_the_plugin_names_the_policy_the_waker_chose(control_plane: controlplane.ControlPlane,
                                                     world: tuple[str, WakerProcess]) -> None:
    prefix, _ = world
    shown = plugin(control_plane.admin_kubeconfig, "status", "-n", prefix + "sv1")
    assert f"NSScaler {prefix}b-shop-v holds {prefix}sv1 now\n" in shown.stdout, (shown.stdout, shown.stderr)
    assert f"  NSScaler {prefix}a-shop: " in shown.stdout  # in scope too, and still shown as the run left it
