"""Properties of the planner over generated clusters (hypothesis)."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from job.decide.plan import make_plan
from job.model.kinds import BUILTIN, Kind, ReplicasHandler
from tests.unit.examples import examples
from tests.unit.factories import apply_plan, namespaces, policy, settings, workload

#: a scalable custom resource whose replica field is nested, as discovery would build it
WORKERS = ReplicasHandler(Kind("Worker.example.com"), "example.com", "v1", "workers", path=("spec", "workers", "count"))
HANDLERS = [*BUILTIN.values(), WORKERS]

SUFFIXES = ["v1", "v2", "v3", "v4"]
NAMESPACES = [f"shop-{s}" for s in SUFFIXES] + ["kube-system", "other-a", "other-v1"]


policies_st = st.lists(
    st.builds(
        lambda name, prefix, active, suspend, restore, kinds: policy(
            name, prefix, active, suspend=suspend, restore=restore, kinds=kinds
        ),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["shop-", "other-", "kube-"]),
        st.lists(st.sampled_from([*SUFFIXES, "system", "a"]), unique=True, max_size=3),
        st.booleans(),
        st.booleans(),
        st.sampled_from([None, ["Deployment"], ["CronJob", "StatefulSet"], ["Deployment", "StatefulSet", "CronJob"],
                         ["Job"], ["ReplicaSet", "ReplicationController", "Worker.example.com"],
                         ["CronJob", "Job", "Deployment", "Worker.example.com"]]),
    ),
    max_size=3,
    unique_by=lambda p: p.name,
)

workloads_st = st.lists(
    st.builds(
        lambda ns, i, size, handler, excluded, controller: workload(
            ns, f"w{i}", size if isinstance(handler, ReplicasHandler) else min(size, 1), handler=handler,
            excluded=excluded, controller=controller,
        ),
        st.sampled_from(NAMESPACES),
        st.integers(0, 50),
        st.integers(0, 9),
        st.sampled_from(HANDLERS),
        st.booleans(),
        st.sampled_from([None, None, "Deployment", "CronJob"]),  # the kind of a controller owner
    ),
    max_size=25,
    unique_by=lambda w: w.key,
)


@hyp_settings(max_examples=examples(200), deadline=None)
@given(policies_st, workloads_st, st.sets(st.sampled_from(NAMESPACES), max_size=2))
def test_never_touches_what_it_must_not(policies, workloads, protected):
    # every excluded CronJob has a running Job: the exclusion covers it too
    workloads = workloads + [
        workload(w.namespace, f"{w.name}-job", 1, kind=Kind.JOB, controller="CronJob", controller_name=w.name)
        for w in workloads if w.excluded and w.kind == Kind.CRONJOB]
    excluded = {w.key for w in workloads if w.excluded}
    plan = make_plan(
        policies,
        namespaces=namespaces(*NAMESPACES),
        workloads=workloads,
        settings=settings(protected_namespaces=sorted(protected | {"kube-system"})),
    )
    for action in plan.actions:
        w = action.workload
        assert not w.excluded
        assert (w.controller, w.namespace, w.controller_name) not in excluded
        assert w.namespace not in protected and w.namespace != "kube-system"
        if action.verb.value == "freeze":
            holder = next(p for p in policies if p.name == action.policy)
            assert holder.in_scope(w.namespace)
            # an object with a controller owner is frozen through its owner, a Job alone excepted
            assert w.controller is None or w.kind == Kind.JOB
            assert w.kind in holder.kinds or (w.controller in holder.kinds and w.kind == Kind.JOB)
            assert not any(p.lists_active(w.namespace) for p in policies if not p.spec.suspend)


@hyp_settings(max_examples=examples(200), deadline=None)
@given(policies_st, workloads_st)
def test_plan_then_apply_is_idempotent(policies, workloads):
    after = apply_plan(
        make_plan(policies, namespaces=namespaces(*NAMESPACES), workloads=workloads, settings=settings()), workloads
    )
    assert make_plan(policies, namespaces=namespaces(*NAMESPACES), workloads=after, settings=settings()).actions == []


@hyp_settings(max_examples=examples(200), deadline=None)
@given(policies_st, workloads_st, st.lists(st.integers(0, 9), max_size=25))
def test_freeze_then_restore_is_identity_even_with_manual_scale_ups(policies, workloads, scale_ups):
    nss = namespaces(*NAMESPACES)
    frozen = apply_plan(make_plan(policies, namespaces=nss, workloads=workloads, settings=settings()), workloads)
    # users scale some frozen workloads up by hand; the next run freezes them again
    touched = [
        dataclasses.replace(w, size=n) if w.has_record and isinstance(w.handling, ReplicasHandler) and n else w
        for w, n in zip(frozen, scale_ups + [0] * len(frozen), strict=False)
    ]
    refrozen = apply_plan(make_plan(policies, namespaces=nss, workloads=touched, settings=settings()), touched)
    restored = apply_plan(make_plan([], namespaces=nss, workloads=refrozen, settings=settings()), refrozen)
    original = {w.key: w.size for w in workloads}
    for w in restored:
        if w.namespace == "kube-system" or w.excluded:
            continue
        assert w.original is None, w
        assert w.size == original[w.key], w
