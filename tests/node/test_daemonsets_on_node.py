"""DaemonSets on a real node: their Pods really stop when the namespace is held, and come back with the Pod
template exactly as it was (kubelet, containerd, the real DaemonSet controller; the CronJob's own image)."""

from __future__ import annotations

import json

import pytest

from devtools import builders
from devtools.builders import wait_until
from devtools.cluster import images
from job.model.marks import ANNOTATION_ORIGINAL_NODE_SELECTOR, FROZEN_NODE_LABEL
from tests.node.conftest import kubectl_out, run_cronjob_now, running_pods

pytestmark = [pytest.mark.node, pytest.mark.usefixtures("installed")]


def revisions(control_plane, ns: str) -> list[int]:
    found = json.loads(kubectl_out(control_plane, "-n", ns, "get", "controllerrevisions", "-o", "json"))
    return sorted(int(r["revision"]) for r in found["items"])


def test_a_daemonset_leaves_the_node_and_comes_back_with_its_template_exactly(control_plane, api, prefix):
    ns = prefix + "a"
    api.create(builders.namespace(ns))
    api.create(builders.namespace(prefix + "live"))
    agent = builders.on_node(builders.daemonset(ns, "agent"), images.busybox_image(),
                             node_selector={"kubernetes.io/os": "linux"})
    api.create(agent)
    wait_until(lambda: running_pods(api, ns) == 1, timeout=120, what="the DaemonSet's Pod Running on the node")
    before = api.get("DaemonSet", "agent", ns)["spec"]["template"]
    name = f"{prefix}p"
    api.create(builders.nsscaler(name, prefix, ["live"], kinds=["DaemonSet"]))

    frozen = run_cronjob_now(control_plane, api)
    assert frozen.exit_code == 0, frozen.log
    wait_until(lambda: not api.pods(ns), timeout=90, what="the DaemonSet's Pod to leave the node")
    held = api.get("DaemonSet", "agent", ns)
    assert held["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux", FROZEN_NODE_LABEL: "true"}
    assert json.loads(held["metadata"]["annotations"][ANNOTATION_ORIGINAL_NODE_SELECTOR]) == {
        "kubernetes.io/os": "linux"}
    assert held["status"]["desiredNumberScheduled"] == 0

    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["live", "a"]}})
    restored = run_cronjob_now(control_plane, api)
    assert restored.exit_code == 0, restored.log
    assert api.get("DaemonSet", "agent", ns)["spec"]["template"] == before
    wait_until(lambda: running_pods(api, ns) == 1, timeout=120, what="the DaemonSet's Pod Running again")
    # `kubectl rollout history`: the freeze made a second revision; the restore's template is the first
    # one's again, so the controller takes that revision back (renumbered) instead of adding a third.
    assert revisions(control_plane, ns) == [2, 3]
