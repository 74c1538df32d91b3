"""One family holding every kind nsscaler freezes, frozen and given back exactly: what the version tier proves
on each supported Kubernetes version (`make test-versions`), and what `make test` proves on the default one.

Real controllers (the control plane's kube-controller-manager); kubectl is the server's own version's. The
control plane has no node, so nothing here waits for a Pod: the StatefulSet's claims, the DaemonSet's scheduling
(its node selector) and every record are read from the API."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane, versions
from job.model.marks import ANNOTATION_SCALED_BY, LABEL_SCALED
from tests import crds
from tests.conftest import kubectl
from tests.integration.test_restore_tiers import make_db_ready

pytestmark = [pytest.mark.versions, pytest.mark.usefixtures("crd")]
KINDS = ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job", "ReplicaSet", "Fleet.test.nsscaler.io"]
EVENTS = {"Frozen"}
#: the API server counts a DaemonSet's template changes here itself; a freeze and a restore are two of them
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


def state(api: AdminApi, ns: str) -> dict[str, Any]:
    """What a freeze changes and a restore must give back, per object; and the labels and annotations of each."""
    def spec_of(kind: str, name: str) -> Any:
        obj = api.get(kind, name, ns)
        spec = obj["spec"]
        picked = {"Deployment": "replicas", "StatefulSet": "replicas", "ReplicaSet": "replicas", "Fleet": "replicas",
                  "CronJob": "suspend", "Job": "suspend"}
        if kind == "DaemonSet":
            value: Any = spec["template"]["spec"].get("nodeSelector")
        else:
            value = spec.get(picked[kind])
        meta = obj["metadata"]
        extra = spec.get("persistentVolumeClaimRetentionPolicy") if kind == "StatefulSet" else None
        notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != TEMPLATE_GENERATION}
        return value, extra, meta.get("labels") or {}, notes
    names = {"Deployment": "web", "StatefulSet": "db", "DaemonSet": "agent", "CronJob": "nightly", "Job": "batch",
             "ReplicaSet": "legacy", "Fleet": "fleet"}
    out = {kind: spec_of(kind, name) for kind, name in names.items()}
    autoscale = api.get("ScaledObject", "web", ns)["metadata"].get("annotations") or {}
    return {**out, "ScaledObject": autoscale, "HPA": api.get("HorizontalPodAutoscaler", "web", ns)["spec"]}


def claims(api: AdminApi, ns: str) -> list[str]:
    return sorted(c["metadata"]["name"] for c in api.list("PersistentVolumeClaim", ns)
                  if not c["metadata"].get("deletionTimestamp"))


def kubectl_as_admin(plane: controlplane.ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl(), "--kubeconfig", str(plane.admin_kubeconfig), *args],
                          capture_output=True, text=True, check=False)


def family_of_every_kind(api: AdminApi, prefix: str) -> str:
    crds.install(api, [*crds.TEST_KINDS, crds.SCALED_OBJECT])
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.namespace(prefix + "v2"))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.statefulset_with_claims(ns, "db", 1, when_scaled="Delete"))
    api.create(builders.daemonset(ns, "agent"))
    api.create(builders.cronjob(ns, "nightly"))
    api.create(builders.job(ns, "batch", parallelism=2))
    api.create(builders.replicaset(ns, "legacy", 2))
    api.create(builders.custom("Fleet", ns, "fleet", {"replicas": 4}))
    api.create(builders.hpa(ns, "web", "web", min_replicas=3))
    api.create(builders.scaled_object(ns, "web", "web", annotations={"team": "shop"}))
    wait_until(lambda: claims(api, ns) == ["data-db-0"], timeout=120,
               what="the StatefulSet controller to create the claims")
    return ns


def test_a_family_of_every_kind_is_frozen_and_given_back_exactly(api, run_job, prefix, control_plane):
    ns = family_of_every_kind(api, prefix)
    name = f"{prefix}p"
    before = state(api, ns)
    api.create(builders.nsscaler(name, prefix, ["v2"], kinds=KINDS, restore_order=["StatefulSet"]))

    frozen = run_job()
    assert frozen.exit_code == 0, frozen.stderr
    held = state(api, ns)
    for kind in ("Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job", "ReplicaSet", "Fleet"):
        assert held[kind][2].get(LABEL_SCALED) == "true" and held[kind][3].get(ANNOTATION_SCALED_BY) == name, kind
    assert [held[k][0] for k in ("Deployment", "StatefulSet", "ReplicaSet", "Fleet", "CronJob", "Job")] == \
        [0, 0, 0, 0, True, True]
    assert held["DaemonSet"][0] and held["StatefulSet"][1] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert claims(api, ns) == ["data-db-0"]  # a freeze deletes no data
    # `done`, what a release pipeline waits on, with kubectl's own jsonpath wait: once the controllers have
    # removed the frozen workloads' Pods, the next run says so
    wait_until(lambda: api.pods(ns) == [], timeout=120, what="the frozen workloads' Pods to go")
    assert run_job().exit_code == 0
    waited = kubectl_as_admin(control_plane, "wait", f"nsscaler/{name}", "--for=jsonpath={.status.done}=true",
                              "--timeout=30s")
    assert waited.returncode == 0, waited.stderr
    shown = kubectl_as_admin(control_plane, "get", "nsscaler", name)
    header, row = shown.stdout.splitlines()[:2]
    assert header.split()[:6] == ["NAME", "PREFIX", "ACTIVE", "HELD", "DONE", "RESTORING"], shown.stdout
    assert row.split()[:5] == [name, prefix, '["v2"]', "1", "true"], shown.stdout
    events = {e["reason"] for e in api.list("Event", ns)}
    assert events >= EVENTS, events

    api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})
    first = run_job("--restore-wait-in-run", "0")
    assert first.exit_code == 0, first.stderr
    # restore in tiers: the StatefulSet first, the rest once it is available (no node: its Pod is reported
    # ready by hand, as a kubelet would, and the StatefulSet controller counts it)
    assert api.replicas("StatefulSet", ns, "db") == 1 and api.replicas("Deployment", ns, "web") == 0
    make_db_ready(api, ns)
    last = run_job("--restore-wait-in-run", "0")
    assert last.exit_code == 0, last.stderr
    after = state(api, ns)
    assert after == before, json.dumps({k: (before[k], after[k]) for k in before if before[k] != after[k]})
    assert claims(api, ns) == ["data-db-0"]


def test_the_server_and_kubectl_are_the_version_the_tier_asked_for(api):
    """The version tier's guard: a suite that silently ran against another version would prove nothing."""
    asked = versions.selected_minor()
    assert "{}.{}".format(*api.server_version()) == asked
    shown = subprocess.run([kubectl(), "version", "--client", "-o", "json"], capture_output=True, text=True, check=True)
    assert json.loads(shown.stdout)["clientVersion"]["gitVersion"] == versions.kubernetes_version(asked)
