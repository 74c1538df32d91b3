"""Owner chains of the Pods left in held namespaces, and what each means for a policy (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from job.decide import drain, pods
from job.decide.actions import Action, ActionResult, Verb
from job.decide.pods import Census, Meta, PolicyView, Ref
from job.model.workloads import Kind
from tests.unit.factories import workload

NS = "shop-v1"


def meta(name: str, *, owner: tuple[str, str, str] | None = None, excluded: bool = False, frozen: bool = False,
         ns: str = NS) -> dict[str, Any]:
    """Metadata as a metadata-only LIST returns it; `owner` is (apiVersion, kind, name) of the controller."""
    out: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        out["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "not-a-controller"},
                                  {"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "controller": True}]
    if excluded:
        out["annotations"] = {"nsscaler.wubw.fun/exclude": "true"}
    if frozen:
        out["labels"] = {"nsscaler.wubw.fun/scaled": "true"}
    return out


RS = ("apps/v1", "ReplicaSet", "web-5d4f")
DEPLOY = ("apps/v1", "Deployment", "web")
JOB = ("batch/v1", "Job", "nightly-29000")
CRON = ("batch/v1", "CronJob", "nightly")

CLUSTER = {  # owner kind -> the owner objects a LIST of that kind returns
    "ReplicaSet": [meta("web-5d4f", owner=DEPLOY)],
    "Deployment": [meta("web")],
    "Job": [meta("nightly-29000", owner=CRON), meta("once")],
    "CronJob": [meta("nightly")],
    "StatefulSet": [meta("db")],
    "DaemonSet": [meta("agent")],
}


def census_of(pod_metas: list[dict[str, Any]], cluster: dict[str, list[dict[str, Any]]] | None = None,
              seed: list[Meta] | None = None) -> Census:
    """A census filled the way job.decide.drain fills it, from an in-memory cluster; `seed`: the owners the run
    read whole already."""
    census = Census()
    census.seed(seed or [])
    for m in pod_metas:
        census.add_pod(m)
    objects = CLUSTER if cluster is None else cluster
    while lookups := census.lookups():
        for kind, namespace in lookups:
            items = [{"metadata": o} for o in objects.get(kind, []) if namespace in (None, o["namespace"])]
            census.add_owners(kind, namespace, items)
    return census


def explain_one(pod: dict[str, Any], view: PolicyView, cluster: dict[str, list[dict[str, Any]]] | None = None,
                errors: dict[str, str] | None = None, seed: list[Meta] | None = None) -> tuple[str, str | None]:
    census = census_of([pod], cluster, seed)
    start = next(iter(census.groups))
    links = census.chain(start)
    return links[-1][0].owner, pods.explain(links, view=view, errors=errors or census.errors)


DEFAULT = PolicyView(kinds=frozenset({"Deployment", "StatefulSet"}))


@pytest.mark.parametrize(("pod", "view", "owner", "says"), [
    pytest.param(meta("web-1", owner=RS), DEFAULT, "Deployment/web", "not frozen by this run", id="deployment"),
    pytest.param(meta("db-0", owner=("apps/v1", "StatefulSet", "db")), DEFAULT, "StatefulSet/db",
                 "not frozen by this run", id="statefulset"),
    pytest.param(meta("n-1", owner=JOB), DEFAULT, "CronJob/nightly", "add CronJob to spec.kinds", id="cronjob-job"),
    pytest.param(meta("o-1", owner=("batch/v1", "Job", "once")), DEFAULT, "Job/once", "add Job to spec.kinds",
                 id="job"),
    pytest.param(meta("n-1", owner=JOB), PolicyView(kinds=frozenset({"Job"})), "CronJob/nightly",
                 "not frozen by this run", id="job-selected-under-cronjob"),
    pytest.param(meta("agent-x", owner=("apps/v1", "DaemonSet", "agent")), DEFAULT, "DaemonSet/agent",
                 "DaemonSet is not in spec.kinds: add DaemonSet", id="daemonset"),
    pytest.param(meta("debug"), DEFAULT, "Pod/debug", "nsscaler does not freeze bare Pods", id="bare-pod"),
    pytest.param(meta("etcd-n1", owner=("v1", "Node", "n1")), DEFAULT, "Node/n1", "does not freeze static Pods",
                 id="static-pod"),
    pytest.param(meta("r-1", owner=("argoproj.io/v1alpha1", "Rollout", "shop")), DEFAULT, "Rollout.argoproj.io/shop",
                 "add Rollout.argoproj.io to spec.kinds", id="custom-kind"),
    pytest.param(meta("web-1", owner=RS), PolicyView(kinds=DEFAULT.kinds, dry_run=True), "Deployment/web",
                 "dry run", id="dry-run"),
    pytest.param(meta("web-1", owner=RS), PolicyView(kinds=DEFAULT.kinds, capped=True), "Deployment/web",
                 "max_freeze", id="capped"),
    pytest.param(meta("web-1", owner=RS), PolicyView(kinds=DEFAULT.kinds,
                                                     failures={Ref("Deployment", NS, "web"): "403 forbidden"}),
                 "Deployment/web", "freezing Deployment/web failed: 403 forbidden", id="failed"),
])
def test_each_owner_chain_is_explained_with_its_fix(pod, view, owner, says):
    found_owner, reason = explain_one(pod, view)
    assert found_owner == owner
    assert reason is not None and says in reason


@pytest.mark.parametrize(("cluster", "pod"), [
    pytest.param({**CLUSTER, "Deployment": [meta("web", excluded=True)]}, meta("web-1", owner=RS), id="deployment"),
    pytest.param({**CLUSTER, "ReplicaSet": [meta("web-5d4f", owner=DEPLOY, excluded=True)]},
                 meta("web-1", owner=RS), id="its-replicaset"),
    pytest.param({**CLUSTER, "CronJob": [meta("nightly", excluded=True)]}, meta("n-1", owner=JOB), id="cronjob"),
    pytest.param({**CLUSTER, "DaemonSet": [meta("agent", excluded=True)]},
                 meta("a-1", owner=("apps/v1", "DaemonSet", "agent")), id="daemonset"),
    pytest.param(CLUSTER, meta("debug", excluded=True), id="bare-pod"),
])
def test_an_excluded_object_anywhere_on_the_chain_means_meant_to_run(cluster, pod):
    assert explain_one(pod, DEFAULT, cluster)[1] is None


RC = ("v1", "ReplicationController", "legacy")
ROLLOUT_RS = ("apps/v1", "ReplicaSet", "shop-6c9")
ROLLOUT = "Rollout.argoproj.io"
WITH_ROLLOUT = {**CLUSTER, "ReplicaSet": [*CLUSTER["ReplicaSet"],
                                          meta("shop-6c9", owner=("argoproj.io/v1alpha1", "Rollout", "shop"))]}
OLD_KINDS = PolicyView(kinds=frozenset({"ReplicationController", ROLLOUT}))


def seeded(kind: str, name: str, **marks: bool) -> list[Meta]:
    return [Meta(Ref(kind, NS, name), **marks)]


@pytest.mark.parametrize(("pod", "seed", "owner", "says"), [
    pytest.param(meta("legacy-1", owner=RC), seeded("ReplicationController", "legacy", excluded=True),
                 "ReplicationController/legacy", None, id="rc-excluded"),
    pytest.param(meta("legacy-1", owner=RC), seeded("ReplicationController", "legacy", frozen=True),
                 "ReplicationController/legacy", "still terminating", id="rc-frozen"),
    pytest.param(meta("legacy-1", owner=RC), seeded("ReplicationController", "legacy"),
                 "ReplicationController/legacy", "not frozen by this run", id="rc-selected"),
    pytest.param(meta("shop-1", owner=ROLLOUT_RS), seeded(ROLLOUT, "shop", excluded=True),
                 f"{ROLLOUT}/shop", None, id="rollout-excluded"),
    pytest.param(meta("shop-1", owner=ROLLOUT_RS), seeded(ROLLOUT, "shop", frozen=True),
                 f"{ROLLOUT}/shop", "still terminating", id="rollout-frozen"),
])
def test_owners_the_run_read_whole_end_their_chains_with_their_marks(pod, seed, owner, says):
    found_owner, reason = explain_one(pod, OLD_KINDS, WITH_ROLLOUT, seed=seed)
    assert found_owner == owner
    assert reason is None if says is None else (reason is not None and says in reason)


def test_seeded_owners_cost_no_lookup():
    census = Census()
    census.seed(seeded("ReplicationController", "legacy", excluded=True))
    census.add_pod(meta("legacy-1", owner=RC))
    assert census.lookups() == []
    assert pods.tally(census, [NS], view=OLD_KINDS) == ([], 1)


def test_known_owners_are_the_unlistable_kinds_of_held_namespaces_as_this_run_left_them():
    legacy = workload(NS, "legacy", kind=Kind.REPLICATIONCONTROLLER)
    shop = workload(NS, "shop", kind=Kind(ROLLOUT), excluded=True)
    elsewhere = workload("shop-v2", "legacy", kind=Kind.REPLICATIONCONTROLLER)
    known = drain.known_owners([legacy, shop, elsewhere, workload(NS, "web")], {NS: ["p"]})
    assert known == [Meta(Ref("ReplicationController", NS, "legacy")), Meta(Ref(ROLLOUT, NS, "shop"), excluded=True)]
    census = Census()
    census.seed(known)

    def freeze(w: Any, outcome: str) -> ActionResult:
        return ActionResult(Action(Verb.FREEZE, w, "p", {}, 0, "held", outcome == "dry-run"), outcome)

    drain.frozen_now(census, [freeze(legacy, "dry-run"), freeze(elsewhere, "applied")])
    assert not census.known[Ref("ReplicationController", NS, "legacy")].frozen  # a dry run freezes nothing
    drain.frozen_now(census, [freeze(legacy, "applied")])
    assert census.known[Ref("ReplicationController", NS, "legacy")].frozen
    assert Ref("ReplicationController", "shop-v2", "legacy") not in census.known


def test_a_frozen_owner_is_reported_as_terminating_whatever_the_kinds():
    cluster = {**CLUSTER, "Deployment": [meta("web", frozen=True)]}
    assert "still terminating" in (explain_one(meta("web-1", owner=RS), PolicyView(kinds=frozenset()), cluster)[1]
                                   or "")


def test_an_owner_that_could_not_be_read_is_said_so():
    census = Census()
    census.add_pod(meta("web-1", owner=RS))
    for kind, namespace in census.lookups():
        census.failed(kind, namespace, "403 forbidden")
    assert census.lookups() == []  # never asked twice in one run
    reason = pods.explain(census.chain(next(iter(census.groups))), view=DEFAULT, errors=census.errors)
    assert reason is not None and "could not read its ReplicaSet: 403 forbidden" in reason


def test_no_pod_means_no_lookup():
    assert Census().lookups() == []


@pytest.mark.parametrize("pods_per_namespace", [1, 3, 30])
@pytest.mark.parametrize("namespaces", [1, 4, 5, 40])
def test_lookups_do_not_grow_with_the_pods(pods_per_namespace, namespaces):
    cluster: dict[str, list[dict[str, Any]]] = {"ReplicaSet": [], "Deployment": []}
    pod_metas = []
    for i in range(namespaces):
        ns = f"shop-{i}"
        cluster["ReplicaSet"].append(meta("web-5d4f", owner=DEPLOY, ns=ns))
        cluster["Deployment"].append(meta("web", ns=ns, excluded=True))
        pod_metas += [meta(f"web-{j}", owner=RS, ns=ns) for j in range(pods_per_namespace)]
    census = Census()
    for m in pod_metas:
        census.add_pod(m)
    sent = []
    while lookups := census.lookups():
        sent += lookups
        for kind, namespace in lookups:
            census.add_owners(kind, namespace, [{"metadata": o} for o in cluster[kind]
                                                if namespace in (None, o["namespace"])])
    per_kind = min(namespaces, pods.NAMESPACED_LISTS_MAX) if namespaces <= pods.NAMESPACED_LISTS_MAX else 1
    assert len(sent) == 2 * per_kind
    remaining, excluded = pods.tally(census, {m["namespace"] for m in pod_metas}, view=DEFAULT)
    assert remaining == [] and excluded == namespaces * pods_per_namespace


def test_tally_groups_by_root_owner_and_counts_only_held_namespaces():
    other = "shop-v2"
    census = census_of([meta("web-1", owner=RS), meta("web-2", owner=RS), meta("debug"),
                        meta("web-1", owner=RS, ns=other)],
                       {**CLUSTER, "ReplicaSet": CLUSTER["ReplicaSet"] + [meta("web-5d4f", owner=DEPLOY, ns=other)],
                        "Deployment": CLUSTER["Deployment"] + [meta("web", ns=other)]})
    remaining, excluded = pods.tally(census, [NS], view=DEFAULT)
    assert [(r.namespace, r.owner, r.pods) for r in remaining] == [(NS, "Deployment/web", 2), (NS, "Pod/debug", 1)]
    assert excluded == 0


def test_a_reference_loop_ends():
    loop = {"ReplicaSet": [meta("a", owner=("apps/v1", "ReplicaSet", "b")),
                           meta("b", owner=("apps/v1", "ReplicaSet", "a"))]}
    census = census_of([meta("p", owner=("apps/v1", "ReplicaSet", "a"))], loop)
    assert [ref.name for ref, _ in census.chain(next(iter(census.groups)))] == ["a", "b"]


@given(st.lists(st.tuples(st.sampled_from(["shop-a", "shop-b", "shop-c"]),
                          st.sampled_from(["web", "db", "debug", "agent", "once"]), st.booleans()), max_size=40))
def test_every_held_pod_is_either_remaining_or_excluded(spec):
    owners = {"web": RS, "db": ("apps/v1", "StatefulSet", "db"), "agent": ("apps/v1", "DaemonSet", "agent"),
              "once": ("batch/v1", "Job", "once"), "debug": None}
    cluster: dict[str, list[dict[str, Any]]] = {k: [] for k in pods.LISTABLE}
    pod_metas = []
    for i, (ns, app, excluded) in enumerate(spec):
        for kind, objs in CLUSTER.items():
            cluster[kind] += [{**o, "namespace": ns} for o in objs if {**o, "namespace": ns} not in cluster[kind]]
        pod_metas.append(meta(f"{app}-{i}", owner=owners[app], excluded=excluded, ns=ns))
    census = census_of(pod_metas, cluster)
    remaining, excluded_count = pods.tally(census, ["shop-a", "shop-b"], view=DEFAULT)
    held = sum(1 for ns, _, _ in spec if ns in ("shop-a", "shop-b"))
    assert sum(r.pods for r in remaining) + excluded_count == held
