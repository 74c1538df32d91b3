"""What a freeze gives back, against the real control plane: status.freed equals a computation written out by
hand from the objects the test creates (devtools.builders.mixed_requests), and a restore takes it back to zero.

Workloads have no node to run on: the API server accepts their templates (extended resources included), and
the figures are what the scheduler would have had to find room for.
"""

from __future__ import annotations

import json

from devtools import builders
from devtools.builders import AdminApi
from job.model.marks import ANNOTATION_FREED, ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_SCALED_BY, LABEL_SCALED

MI, GI = 2**20, 2**30

# By hand, per held workload: replicas x the Pod's effective request (the scheduler's way).
#   v2 d-none  2 x nothing                                   -> 2 Pods without requests
#   v2 d-cpu   3 x 250m CPU                                  -> 750m
#   v2 d-gpu   1 x (1Gi memory, 1 GPU; limits 2Gi, 1 GPU)
#   v3 s-init  2 x max(app 200m/128Mi + sidecar 100m/64Mi = 300m/192Mi,
#                      inits: migrate 1/256Mi, sidecar 100m/64Mi, warm 500m/512Mi + sidecar = 600m/576Mi)
#            = 2 x (1 CPU, 576Mi)                            -> 2, 1152Mi
#   v3 d-kata  2 x (500m/256Mi + overhead 250m/120Mi) = 2 x (750m, 376Mi) -> 1500m, 752Mi
#   v2 d-old   frozen by an older nsscaler (a record, no footprint): unknown, not counted
CPU = 0.750 + 2 + 1.5
MEMORY = 1 * GI + 1152 * MI + 752 * MI
FREED = {
    "workloads": 6, "unknownWorkloads": 1, "pods": 2 + 3 + 1 + 2 + 2, "podsWithoutRequests": 2, "gpus": 1,
    "requests": {"cpu": "4250m", "memory": "2928Mi", "nvidia.com/gpu": "1"},
    "limits": {"memory": "2Gi", "nvidia.com/gpu": "1"},
    "resources": [{"resource": "cpu", "requests": CPU, "limits": 0},
                  {"resource": "memory", "requests": MEMORY, "limits": 2 * GI},
                  {"resource": "nvidia.com/gpu", "requests": 1, "limits": 1}],
}
NOTHING = {
    "workloads": 0, "unknownWorkloads": 0, "pods": 0, "podsWithoutRequests": 0, "gpus": 0,
    "requests": {"cpu": "0", "memory": "0"}, "limits": {}, "topNamespaces": [],
    "resources": [{"resource": "cpu", "requests": 0, "limits": 0}, {"resource": "memory", "requests": 0, "limits": 0}],
}


def _older_freeze(ns: str, policy: str) -> dict:
    """A Deployment as an nsscaler without footprints left it: at 0, with the record and nothing more."""
    obj = builders.deployment(ns, "d-old", 0, annotations={ANNOTATION_ORIGINAL_REPLICAS: "2",
                                                           ANNOTATION_SCALED_BY: policy})
    obj["metadata"]["labels"] = {LABEL_SCALED: "true"}
    return builders.with_pod_spec(obj, containers=[builders.container("app", requests={"cpu": "8"})])


def _dry_run_says_what_it_would_free(api: AdminApi, run_job, prefix: str) -> None:
    planned = run_job("--dry-run")
    assert planned.exit_code == 0, planned.stderr
    would = {(a["namespace"].removeprefix(prefix), a["name"]): a.get("frees") for a in planned.report["actions"]}
    assert would[("v3", "d-kata")] == {"pods": 2, "podsWithoutRequests": 0, "limits": {},
                                       "requests": {"cpu": "1500m", "memory": "752Mi"}}
    assert would[("v2", "d-none")] == {"pods": 2, "podsWithoutRequests": 2, "limits": {}, "requests": {}}
    (policy,) = planned.report["policies"]
    assert {k: policy["freed"][k] for k in FREED} == FREED  # before anything happened
    assert api.replicas("Deployment", prefix + "v2", "d-cpu") == 3


def test_status_says_what_the_freeze_freed_and_restore_gives_it_back(api: AdminApi, run_job, prefix):
    name = f"{prefix}release"
    created = builders.mixed_requests(prefix)
    for obj in created:
        api.create(obj)
    api.create(_older_freeze(prefix + "v2", name))
    runtime_class = created[3]["metadata"]["name"]
    try:
        api.create(builders.nsscaler(name, prefix, ["v1"]))
        _dry_run_says_what_it_would_free(api, run_job, prefix)

        first = run_job()
        assert first.exit_code == 0, first.stderr
        status = api.status(name)
        assert status["counts"]["frozen"] == 5
        top = status["freed"].pop("topNamespaces")
        assert status["freed"] == FREED
        assert top == [{"namespace": prefix + "v3", "pods": 4, "cpu": "3500m", "memory": "1904Mi"},
                       {"namespace": prefix + "v2", "pods": 6, "cpu": "750m", "memory": "1Gi"}]
        cpu = api.get("Deployment", "d-cpu", prefix + "v2")["metadata"]["annotations"]
        assert json.loads(cpu[ANNOTATION_FREED]) == {"pods": 1, "requests": {"cpu": "250m"}}
        active = api.get("Deployment", "d-cpu", prefix + "v1")["metadata"]
        assert ANNOTATION_FREED not in (active.get("annotations") or {})

        steady = run_job()  # metadata only now: the figures come from the records
        assert steady.exit_code == 0
        again = api.status(name)["freed"]
        assert again.pop("topNamespaces") == top and again == FREED

        api.patch("NSScaler", name, {"spec": {"active_namespace_suffixes": ["v1", "v2", "v3"]}})
        restore = run_job()
        assert restore.exit_code == 0, restore.stderr
        assert api.status(name)["counts"]["restored"] == 6
        assert api.status(name)["freed"] == NOTHING
        assert api.replicas("Deployment", prefix + "v3", "d-kata") == 2
        assert api.replicas("Deployment", prefix + "v2", "d-old") == 2
        kata = api.get("Deployment", "d-kata", prefix + "v3")["metadata"].get("annotations") or {}
        assert not {k for k in kata if k.startswith("nsscaler.wubw.fun/")}, kata
    finally:
        api.delete("RuntimeClass", runtime_class)
