"""Every kind that runs Pods, against the real control plane: Jobs, ReplicaSets, ReplicationControllers,
scalable custom resources (test CRDs), KEDA ScaledObjects (the CRD only) and the real HPA controller."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from devtools import builders
from devtools.builders import AdminApi, wait_until
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_FREED,
    ANNOTATION_KEDA_PAUSED,
    ANNOTATION_ORIGINAL_PAUSED,
    ANNOTATION_ORIGINAL_REPLICAS,
    ANNOTATION_ORIGINAL_SUSPEND,
    ANNOTATION_SCALED_BY,
)
from tests import crds
from tests.faults import FaultProxy, KillAt
from tests.invariants import stored_since

NSSCALER = str(Path(sys.executable).parent / "nsscaler")
POOL, FLEET = "Pool.test.nsscaler.io", "Fleet.test.nsscaler.io"
pytestmark = pytest.mark.usefixtures("crd")


def record(obj: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in (obj["metadata"].get("annotations") or {}).items() if k.startswith("nsscaler.wubw.fun/")}


def ours(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The managedFields entries of nsscaler's field manager: empty if nsscaler never wrote the object."""
    return [m for m in obj["metadata"].get("managedFields") or [] if m.get("manager") == "nsscaler"]


def writes_since(api: AdminApi, kind: str, ns: str, name: str, rv: str) -> list[dict[str, Any]]:
    """Every version of one object written after `rv`, replayed by a real watch: how many writes it took."""
    return stored_since(api, api.url(kind, ns), rv, fieldSelector=f"metadata.name={name}")


def job_pods(api: AdminApi, ns: str, name: str) -> list[dict[str, Any]]:
    return [p for p in api.pods(ns) if p["metadata"].get("labels", {}).get("job") == name
            and not p["metadata"].get("deletionTimestamp")]


@pytest.fixture(scope="module")
def test_kinds(api: AdminApi) -> None:
    crds.install(api, crds.TEST_KINDS)


@pytest.mark.versions
def test_running_job_is_suspended_its_pods_go_and_it_resumes_a_finished_job_is_untouched(api, run_job, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.job(ns, "batch", parallelism=2))
    # finished for real: the job controller fails it once its deadline passes
    api.create(builders.job(ns, "late", activeDeadlineSeconds=1))
    wait_until(lambda: len(job_pods(api, ns, "batch")) == 2, what="the running Job's two Pods")
    wait_until(lambda: any(c["type"] == "Failed" and c["status"] == "True"
                           for c in api.get("Job", "late", ns).get("status", {}).get("conditions") or []),
               what="the deadline Job to fail")
    finished_rv = api.get("Job", "late", ns)["metadata"]["resourceVersion"]
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["Job"]))

    assert run_job().exit_code == 0
    batch = api.get("Job", "batch", ns)
    assert batch["spec"]["suspend"] is True
    # its footprint too: a Job's unit is its parallelism, here 2 Pods whose container requests nothing
    assert record(batch) == {ANNOTATION_ORIGINAL_SUSPEND: "false", ANNOTATION_SCALED_BY: f"{prefix}p",
                             ANNOTATION_FREED: '{"pods":2,"unrequested":2}'}
    wait_until(lambda: job_pods(api, ns, "batch") == [], what="the suspended Job's Pods to go")
    late = api.get("Job", "late", ns)
    assert late["metadata"]["resourceVersion"] == finished_rv and ours(late) == []

    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
    assert run_job().exit_code == 0
    batch = api.get("Job", "batch", ns)
    assert batch["spec"]["suspend"] is False and record(batch) == {}
    wait_until(lambda: len(job_pods(api, ns, "batch")) == 2, what="the resumed Job's Pods")


@pytest.mark.versions
def test_cronjob_policy_suspends_the_cronjob_and_its_running_job_and_a_deleted_job_is_no_error(
        api, run_job, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    cron = api.create(builders.cronjob(ns, "nightly"))
    api.create(builders.job(ns, "nightly-1", owner=cron))  # what the CronJob (or `create job --from`) starts
    api.create(builders.job(ns, "nightly-2", owner=cron))
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["CronJob"]))
    assert run_job().exit_code == 0
    assert api.get("CronJob", "nightly", ns)["spec"]["suspend"] is True
    for name in ("nightly-1", "nightly-2"):
        job = api.get("Job", name, ns)
        assert job["spec"]["suspend"] is True and record(job)[ANNOTATION_ORIGINAL_SUSPEND] == "false"
    api.delete("Job", "nightly-2", ns)  # CronJob history cleanup, between the freeze and the restore
    wait_until(lambda: not api.exists("Job", "nightly-2", ns), what="the Job to be deleted")
    api.delete("NSScaler", f"{prefix}p")
    assert run_job().exit_code == 0
    assert api.get("CronJob", "nightly", ns)["spec"]["suspend"] is False
    assert api.get("Job", "nightly-1", ns)["spec"]["suspend"] is False


def test_an_excluded_cronjob_keeps_its_running_job_running(api, run_job, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    cron = api.create(builders.cronjob(ns, "nightly", annotations={ANNOTATION_EXCLUDE: "true"}))
    api.create(builders.job(ns, "nightly-1", owner=cron))
    api.create(builders.cronjob(ns, "hourly"))  # the policy does hold the namespace for CronJobs
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["CronJob"]))
    assert run_job().exit_code == 0
    assert api.get("CronJob", "hourly", ns)["spec"]["suspend"] is True
    for kind, name in (("CronJob", "nightly"), ("Job", "nightly-1")):
        obj = api.get(kind, name, ns)
        assert not obj["spec"].get("suspend") and ours(obj) == [], (kind, name)
        assert record(obj) == ({ANNOTATION_EXCLUDE: "true"} if kind == "CronJob" else {}), (kind, name)
    assert api.status(f"{prefix}p")["counts"]["excluded"] == 2


@pytest.mark.versions
def test_standalone_replicasets_are_frozen_and_restored_a_deployments_never(api, run_job, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.replicaset(ns, "solo", 2))
    api.create(builders.replicaset(ns, "legacy", 3, kind="ReplicationController"))
    api.create(builders.deployment(ns, "web", 2))
    wait_until(lambda: any(r["metadata"]["name"].startswith("web-") for r in api.list("ReplicaSet", ns)),
               what="the Deployment's ReplicaSet")
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=["ReplicaSet", "ReplicationController"]))
    assert run_job().exit_code == 0
    assert api.replicas("ReplicaSet", ns, "solo") == 0 and api.replicas("ReplicationController", ns, "legacy") == 0
    assert record(api.get("ReplicaSet", "solo", ns))[ANNOTATION_ORIGINAL_REPLICAS] == "2"
    assert api.replicas("Deployment", ns, "web") == 2  # not selected, and its ReplicaSet not touched either

    api.patch("NSScaler", f"{prefix}p", {"spec": {"kinds": ["ReplicaSet", "ReplicationController", "Deployment"]}})
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", ns, "web") == 0  # frozen through its owner
    # The Deployment controller copies the Deployment's annotations, our record included, onto its
    # ReplicaSet: a run that lists ReplicaSets whole must still leave it alone, frozen and restored alike.
    wait_until(lambda: any(ANNOTATION_ORIGINAL_REPLICAS in record(rs) for rs in deployment_sets(api, ns)),
               what="the Deployment's ReplicaSet to carry the copied annotations")
    assert run_job().exit_code == 0
    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
    assert run_job().exit_code == 0
    assert (api.replicas("ReplicaSet", ns, "solo"), api.replicas("ReplicationController", ns, "legacy"),
            api.replicas("Deployment", ns, "web")) == (2, 3, 2)
    assert deployment_sets(api, ns) and all(ours(rs) == [] for rs in deployment_sets(api, ns))  # never patched


def deployment_sets(api: AdminApi, ns: str) -> list[dict[str, Any]]:
    return [rs for rs in api.list("ReplicaSet", ns) if rs["metadata"]["name"].startswith("web-")]


@pytest.mark.versions
def test_custom_resources_are_frozen_with_their_record_in_one_write_and_restored_exactly(
        api, run_job, prefix, test_kinds):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    spec = {"workers": {"count": 3, "size": "large"}, "image": "x"}
    created = [api.create(builders.custom("Pool", ns, "pool", spec)),
               api.create(builders.custom("Fleet", ns, "fleet", {"replicas": 2}))]
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[POOL, FLEET]))
    result = run_job()
    assert result.exit_code == 0, result.stderr
    pool, fleet = api.get("Pool", "pool", ns), api.get("Fleet", "fleet", ns)
    assert pool["spec"] == {"workers": {"count": 0, "size": "large"}, "image": "x"}
    assert fleet["spec"] == {"replicas": 0}
    for obj, count, before in ((pool, "3", created[0]), (fleet, "2", created[1])):
        assert record(obj) == {ANNOTATION_ORIGINAL_REPLICAS: count, ANNOTATION_SCALED_BY: f"{prefix}p"}
        # one write set both the replica field and the record
        (write,) = writes_since(api, obj["kind"], ns, obj["metadata"]["name"], before["metadata"]["resourceVersion"])
        assert write["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert api.http.get(api.url("Pool", ns, "pool", "scale"), timeout=10).json()["spec"].get("replicas", 0) == 0
    assert run_job().exit_code == 0  # steady: nothing more
    assert api.get("Pool", "pool", ns)["metadata"]["resourceVersion"] == pool["metadata"]["resourceVersion"]

    api.delete("NSScaler", f"{prefix}p")
    api.create(builders.nsscaler(f"{prefix}q", prefix + "other", [], kinds=[POOL, FLEET]))  # keeps the kinds listed
    assert run_job().exit_code == 0
    assert api.get("Pool", "pool", ns)["spec"] == {"workers": {"count": 3, "size": "large"}, "image": "x"}
    assert api.get("Fleet", "fleet", ns)["spec"] == {"replicas": 2}
    assert record(api.get("Pool", "pool", ns)) == {} and record(api.get("Fleet", "fleet", ns)) == {}


def test_a_409_on_a_custom_resource_is_reread_and_decided_again(api, control_plane, run_job, prefix, test_kinds,
                                                                  admin_token, tmp_path):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.custom("Pool", ns, "pool", {"workers": {"count": 3}}))
    api.create(builders.nsscaler(f"{prefix}p", prefix, [], kinds=[POOL]))
    raced = threading.Event()

    def user_scales_first(method: str, path: str) -> None:
        if method == "PATCH" and f"/namespaces/{ns}/pools/pool" in path and not raced.is_set():
            raced.set()
            api.patch("Pool", "pool", {"spec": {"workers": {"count": 5}}}, namespace=ns)

    with FaultProxy(control_plane, fraction=0.0, before_forward=user_scales_first) as proxy:
        result = run_job(kubeconfig=proxy.kubeconfig(tmp_path / "race", admin_token))
    assert raced.is_set() and result.exit_code == 0, result.stderr
    assert result.requests_besides_the_lease.get("get") == 1  # the one re-read after the 409
    pool = api.get("Pool", "pool", ns)
    assert pool["spec"]["workers"]["count"] == 0 and record(pool)[ANNOTATION_ORIGINAL_REPLICAS] == "5"


def test_sigkill_mid_run_loses_no_custom_resource_count(api, control_plane, prefix, test_kinds, admin_token,
                                                        tmp_path):
    """SIGKILLs at chosen PATCHes of a freeze and a restore of 40 custom resources (a smaller variant of
    test_faults.py's): the fault proxy counts the PATCHes and kills the run at the n-th, so each kill lands at the
    same point on an idle or a busy machine. Some killed PATCHes still reach the API server, some never do. No
    count is ever lost, each run resumes exactly where the killed one stopped, and the next run converges."""
    rng = random.Random(10)
    originals = {}
    for i in range(40):
        ns = f"{prefix}n{i}"
        api.create(builders.namespace(ns))
        originals[ns] = rng.randint(1, 4)
        api.create(builders.custom("Pool", ns, "pool", {"workers": {"count": originals[ns]}}))
    api.create(builders.nsscaler(f"{prefix}p", prefix + "n", [], kinds=[POOL]))

    def state() -> dict[str, tuple[int, str | None]]:
        return {p["metadata"]["namespace"]: (p["spec"]["workers"]["count"], record(p).get(ANNOTATION_ORIGINAL_REPLICAS))
                for p in api.list("Pool") if p["metadata"]["namespace"] in originals}

    def frozen_count() -> int:
        now = state()
        lost = {ns: s for ns, s in now.items() if s not in ((originals[ns], None), (0, str(originals[ns])))}
        assert not lost, lost
        return sum(1 for count, _ in now.values() if count == 0)

    with FaultProxy(control_plane, fraction=0.0) as proxy:
        cmd = [NSSCALER, "--kubeconfig", str(proxy.kubeconfig(tmp_path / "kill", admin_token)), "--concurrency", "1",
               "--log-level", "error"]

        def killed_at(n: int, *, lands: bool) -> None:
            kill = KillAt(method="PATCH", path_part="/pools/pool", n=n, lands=lands).on(proxy)
            kill.start(cmd)
            assert kill.wait() == -signal.SIGKILL and kill.killed.is_set(), f"the run ended before PATCH {n}"
            proxy.wait_idle()

        # freeze, n counting each run's own PATCHes: killed at the 1st (it lands: 1 frozen), at the 15th (it does
        # not: 1 + 14), at the 25th, the last one left (it lands: all 40)
        for n, lands, frozen in ((1, True, 1), (15, False, 15), (25, True, 40)):
            killed_at(n, lands=lands)
            assert frozen_count() == frozen, f"killed at PATCH {n} (lands: {lands})"
        counter = KillAt(method="PATCH", path_part="/pools/pool", n=10**6).on(proxy)
        assert subprocess.run(cmd, check=False).returncode == 0
        assert counter.seen == 0  # the killed runs left nothing to finish
        assert state() == {ns: (0, str(n)) for ns, n in originals.items()}

        api.delete("NSScaler", f"{prefix}p")
        api.create(builders.nsscaler(f"{prefix}keep", prefix + "none", [], kinds=[POOL]))
        killed_at(22, lands=True)  # restore: 22 given back, 18 still frozen
        assert frozen_count() == 18
        assert subprocess.run(cmd, check=False).returncode == 0
    assert state() == {ns: (n, None) for ns, n in originals.items()}


def test_unknown_kind_or_one_without_scale_is_invalid_and_the_other_policy_acts(api, run_job, prefix, test_kinds):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.nsscaler(f"{prefix}absent", prefix, [], kinds=["Deployment", "Rollout.argoproj.io"]))
    api.create(builders.nsscaler(f"{prefix}plain", prefix, [], kinds=["Plain.test.nsscaler.io"]))
    api.create(builders.nsscaler(f"{prefix}good", prefix, []))
    result = run_job()
    assert result.exit_code == 1
    assert api.replicas("Deployment", ns, "web") == 0
    for name, says in (("absent", "Rollout.argoproj.io is not served"), ("plain", "has no /scale subresource")):
        ready = {c["type"]: c for c in api.status(f"{prefix}{name}")["conditions"]}["Ready"]
        assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec") and says in ready["message"], ready
    assert api.status(f"{prefix}good")["conditions"][0]["status"] == "True"


@pytest.mark.versions
def test_keda_scaled_objects_are_paused_and_get_exactly_their_own_setting_back(api, run_job, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.deployment(ns, "api", 1))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v9"]))
    if not api.exists("CustomResourceDefinition", crds.KEDA_CRD):
        assert run_job().exit_code == 0  # without KEDA nothing of this runs and nothing fails
        assert api.replicas("Deployment", ns, "web") == 0
        api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
        assert run_job().exit_code == 0 and api.replicas("Deployment", ns, "web") == 2
        api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v9"]}})
    crds.install(api, [crds.SCALED_OBJECT])
    api.create(builders.scaled_object(ns, "web", "web", annotations={ANNOTATION_KEDA_PAUSED: "1", "team": "a"}))
    api.create(builders.scaled_object(ns, "api", "api"))
    api.create(builders.scaled_object(ns, "elsewhere", "not-frozen"))
    assert run_job().exit_code == 0
    web, other = api.get("ScaledObject", "web", ns), api.get("ScaledObject", "api", ns)
    assert web["metadata"]["annotations"][ANNOTATION_KEDA_PAUSED] == "0"
    assert web["metadata"]["annotations"][ANNOTATION_ORIGINAL_PAUSED] == '"1"'
    assert other["metadata"]["annotations"][ANNOTATION_KEDA_PAUSED] == "0"
    assert other["metadata"]["annotations"][ANNOTATION_ORIGINAL_PAUSED] == "null"
    assert ours(api.get("ScaledObject", "elsewhere", ns)) == []

    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1"]}})
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", ns, "web") == 2 and api.replicas("Deployment", ns, "api") == 1
    assert api.get("ScaledObject", "web", ns)["metadata"]["annotations"] == {ANNOTATION_KEDA_PAUSED: "1", "team": "a"}
    assert api.get("ScaledObject", "api", ns)["metadata"].get("annotations", {}) == {}


@pytest.mark.versions
def test_the_real_hpa_controller_leaves_a_frozen_deployment_at_zero_and_restore_gives_its_count(
        api, run_job, prefix):
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 1))
    api.create(builders.hpa(ns, "web", "web", min_replicas=2))
    # proof the HPA controller acts here: it lifts the Deployment to its minReplicas
    wait_until(lambda: api.replicas("Deployment", ns, "web") == 2, timeout=90, what="the HPA to scale web to 2")
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", ns, "web") == 0

    def hpa_saw_zero() -> bool:
        conditions = api.get("HorizontalPodAutoscaler", "web", ns).get("status", {}).get("conditions") or []
        return any(c["type"] == "ScalingActive" and c["reason"] == "ScalingDisabled" for c in conditions)

    wait_until(hpa_saw_zero, timeout=90, what="the HPA controller to see the frozen Deployment")
    assert api.replicas("Deployment", ns, "web") == 0
    assert run_job().exit_code == 0 and api.replicas("Deployment", ns, "web") == 0
    api.delete("NSScaler", f"{prefix}p")
    assert run_job().exit_code == 0
    assert api.replicas("Deployment", ns, "web") == 2


@pytest.mark.usefixtures("settled_cluster")
def test_an_hpa_with_min_replicas_0_on_a_frozen_deployment_is_named_in_the_status_until_it_is_fixed(
        api, run_job, prefix):
    """The API server runs with the HPAScaleToZero gate and the real HPA controller watches this HPA. No external
    metrics server runs, so the controller never scales on its metric: the risk is reported, not acted out."""
    ns = prefix + "v1"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.hpa(ns, "web-hpa", "web", min_replicas=0))
    assert api.get("HorizontalPodAutoscaler", "web-hpa", ns)["spec"]["minReplicas"] == 0

    def hpa_controller_saw_it() -> bool:
        conditions = api.get("HorizontalPodAutoscaler", "web-hpa", ns).get("status", {}).get("conditions") or []
        return any(c["type"] == "ScalingActive" for c in conditions)

    wait_until(hpa_controller_saw_it, timeout=90, what="the HPA controller to evaluate web-hpa")
    api.create(builders.nsscaler(f"{prefix}p", prefix, []))
    problem = (f"HorizontalPodAutoscaler web-hpa in {ns} has minReplicas 0 and targets deployment/web in {ns}: it "
               f"can scale the frozen workload up again while the namespace is held. Set its minReplicas to 1 or "
               f"more (an HPA leaves a workload at 0 replicas alone), or annotate the workload "
               f"nsscaler.wubw.fun/exclude=true")

    def ready() -> tuple[str, str, str]:
        c = next(c for c in api.get("NSScaler", f"{prefix}p")["status"]["conditions"] if c["type"] == "Ready")
        return c["status"], c["reason"], c["message"]

    runs = {}
    # the run that freezes, then one that only keeps web frozen: both name the HPA
    for run, frozen in (("freezes", 1), ("keeps frozen", 0)):
        runs[run] = run_job()
        # documented: 1 = the run finished but something failed (here: a problem a user must fix)
        assert runs[run].exit_code == 1, (run, runs[run].stderr)
        assert api.replicas("Deployment", ns, "web") == 0, run
        status = api.get("NSScaler", f"{prefix}p")["status"]
        assert (status["failures"], status["counts"]["frozen"]) == ([problem], frozen), run
        assert ready() == ("False", "PartialFailure", f"1 of {1 + frozen} changes failed; first: {problem}"), run

    api.patch("HorizontalPodAutoscaler", "web-hpa", {"spec": {"minReplicas": 1}}, ns)  # what the status says
    for run in ("sees the fix", "steady"):
        runs[run] = run_job()
        assert runs[run].exit_code == 0, (run, runs[run].stderr)
        assert api.get("NSScaler", f"{prefix}p")["status"]["failures"] == [], run
        assert ready()[:2] == ("True", "Reconciled"), run
    assert api.replicas("Deployment", ns, "web") == 0
    # the HPAs are LISTed only while the status names one: a plain steady state reads none
    assert runs["keeps frozen"].requests["list"] == runs["sees the fix"].requests["list"] \
        == runs["steady"].requests["list"] + 1
