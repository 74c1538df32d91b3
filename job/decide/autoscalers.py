"""Autoscalers that would undo a freeze: KEDA ScaledObjects (paused in the same run) and HPAs (reported).

Pure: decisions from the plan's workload actions and the observed autoscalers, no I/O.

- A ScaledObject whose `scaleTargetRef` is a workload being frozen gets
  `autoscaling.keda.sh/paused-replicas: "0"`, with the value it had before (or that it had none) kept in
  `nsscaler.wubw.fun/original-paused-replicas` as JSON (`"3"` or `null`), so restore is exact. It is sent
  after the workload's freeze, and the resume before the workload's restore: an interrupted run leaves
  either a frozen workload (which KEDA may scale up; the next run freezes it again and pauses) or a
  resumed ScaledObject whose workload still carries its record (the next run restores it). Never a
  workload restored while KEDA still holds it at zero.
- An HPA with `minReplicas: 0` can scale a frozen workload up again (with `minReplicas >= 1` the HPA
  controller does not act on a workload at 0 replicas): a problem in the policy's status, saying what to do.
  The report stays while the HPA does: a later run that only keeps workloads frozen reads the HPAs again
  for the policies whose status names one, and for no other, so a plain steady state still reads none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from job.decide.actions import Action, Problem, Verb
from job.model.autoscalers import SCALED_OBJECTS, ScaledObject, scale_target, target_key
from job.model.kinds import MalformedRecord
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_KEDA_PAUSED,
    ANNOTATION_ORIGINAL_PAUSED,
    ANNOTATION_SCALED_BY,
    LABEL_SCALED,
)
from job.model.policy import InvalidPolicy, Policy
from job.model.workloads import Workload

#: the words by which a policy's status names an HPA with minReplicas 0 (written and read only here)
_HPA_MIN_0 = "has minReplicas 0 and targets"


def scaled_object_action(so: ScaledObject, trigger: Action) -> Action | None:
    """What the ScaledObject of `trigger`'s workload needs: paused for a freeze, resumed for a restore."""
    w = so.workload
    if trigger.verb is Verb.FREEZE and not (w.has_record and so.paused == "0"):
        record = w.original if w.has_record else json.dumps(so.paused)
        patch = {"metadata": {"resourceVersion": w.resource_version, "labels": {LABEL_SCALED: "true"},
                              "annotations": {ANNOTATION_KEDA_PAUSED: "0", ANNOTATION_ORIGINAL_PAUSED: record,
                                              ANNOTATION_SCALED_BY: trigger.policy}}}
        return Action(Verb.PAUSE, w, trigger.policy, patch, 0, f"its target {trigger.workload.ref} is frozen",
                      trigger.dry_run)
    if trigger.verb is Verb.RESTORE and w.has_record:
        restored = SCALED_OBJECTS.restored_body(w.original or "")  # raises MalformedRecord
        restored["metadata"].update(resourceVersion=w.resource_version, labels={LABEL_SCALED: None})
        restored["metadata"]["annotations"].update({ANNOTATION_ORIGINAL_PAUSED: None, ANNOTATION_SCALED_BY: None})
        return Action(Verb.RESUME, w, trigger.policy, restored, SCALED_OBJECTS.restored_size(w.original or ""),
                      f"its target {trigger.workload.ref} is restored", trigger.dry_run)
    return None


@dataclass
class KedaPlan:
    #: (resume, the restore it must precede), sent first; a failed resume holds its restore back
    resumes: list[tuple[Action, Action]]
    #: (pause, the freeze it follows), sent after the freezes that succeeded
    pauses: list[tuple[Action, Action]]
    problems: list[Problem]


def plan_scaled_objects(actions: Sequence[Action], scaled_objects: Iterable[ScaledObject]) -> KedaPlan:
    triggers = {target_key(a.workload): a for a in actions if a.verb in (Verb.FREEZE, Verb.RESTORE)}
    out = KedaPlan([], [], [])
    for so in scaled_objects:
        trigger = triggers.get(so.target)
        if trigger is None:
            continue
        try:
            action = scaled_object_action(so, trigger)
        except MalformedRecord as exc:
            out.problems.append(Problem(trigger.policy, so.workload, f"{so.workload.ref}: {exc}; fix or remove it "
                                                                    f"by hand, then the next run resumes it"))
            continue
        if action is not None:
            (out.pauses if action.verb is Verb.PAUSE else out.resumes).append((action, trigger))
    return out


def hpa_rechecks(policies: Sequence[Policy | InvalidPolicy], actions: Sequence[Action],
                 workloads: Iterable[Workload]) -> list[tuple[str, Workload]]:
    """(policy, workload) for each workload a policy keeps frozen this run (its record, no action on it) when
    that policy's last status named an HPA with minReplicas 0: whether it still applies needs the HPAs."""
    named = {p.name for p in policies if isinstance(p, Policy)
             and any(_HPA_MIN_0 in str(f) for f in p.status.get("failures") or [])}
    acted = {a.workload.key for a in actions}
    return [(w.scaled_by, w) for w in workloads
            if w.scaled_by is not None and w.scaled_by in named and w.has_record and w.key not in acted]


def hpa_problems(actions: Sequence[Action], hpas: Iterable[Mapping[str, Any]], *,
                 kept: Iterable[tuple[str, Workload]] = ()) -> list[Problem]:
    """HPAs with minReplicas 0 aimed at a workload being frozen, or kept frozen (`kept`, from `hpa_rechecks`):
    they can scale it up again."""
    frozen = {target_key(a.workload): (a.policy, a.workload) for a in actions if a.verb is Verb.FREEZE}
    frozen |= {target_key(w): (policy, w) for policy, w in kept}
    problems = []
    for hpa in hpas:
        meta, spec = hpa.get("metadata") or {}, hpa.get("spec") or {}
        target = frozen.get(scale_target(str(meta.get("namespace", "")), spec.get("scaleTargetRef") or {}))
        if target is None or int(spec.get("minReplicas", 1)) != 0:
            continue
        policy, workload = target
        problems.append(Problem(policy, workload, (
            f"HorizontalPodAutoscaler {meta.get('name')} in {meta.get('namespace')} {_HPA_MIN_0} "
            f"{workload.ref}: it can scale the frozen workload up again while the namespace is "
            f"held. Set its minReplicas to 1 or more (an HPA leaves a workload at 0 replicas alone), or "
            f"annotate the workload {ANNOTATION_EXCLUDE}=true")))
    return problems
