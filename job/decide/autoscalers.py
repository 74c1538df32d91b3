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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from job.decide.plan import Action, Problem, Verb
from job.model.kinds import Kind, MalformedRecord
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_KEDA_PAUSED,
    ANNOTATION_ORIGINAL_PAUSED,
    ANNOTATION_SCALED_BY,
    LABEL_SCALED,
)
from job.model.policy import InvalidPolicy, Policy
from job.model.workloads import Workload, from_api

KEDA_GROUP = "keda.sh"
KEDA_VERSION = "v1alpha1"
HPA_API_VERSION = "autoscaling/v2"
HPA_PLURAL = "horizontalpodautoscalers"
SCALED_OBJECT = Kind("ScaledObject.keda.sh")
#: the words by which a policy's status names an HPA with minReplicas 0 (written and read only here)
_HPA_MIN_0 = "has minReplicas 0 and targets"


@dataclass(frozen=True)
class ScaledObjectHandler:
    """A ScaledObject behind the kind interface (where it lives, its record, how it reads in logs).
    `size` is 0 when paused at zero, else 1."""

    kind: Kind = SCALED_OBJECT
    group: str = KEDA_GROUP
    version: str = KEDA_VERSION
    plural: str = "scaledobjects"
    record_key: str = ANNOTATION_ORIGINAL_PAUSED
    owner_selects: frozenset[Kind] = frozenset()
    freezes_controlled: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def size_of(self, obj: dict[str, Any]) -> int:
        return 0 if _paused(obj) == "0" else 1

    def frozen_body(self) -> dict[str, Any]:
        return {"metadata": {"annotations": {ANNOTATION_KEDA_PAUSED: "0"}}}

    def original_value(self, size: int) -> str:
        raise NotImplementedError("a ScaledObject's record is its previous annotation, see pause_patch")

    def restored_body(self, original: str) -> dict[str, Any]:
        try:
            value = json.loads(original)
        except ValueError:
            value = 0  # not a string: reported below
        if value is not None and not isinstance(value, str):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_PAUSED}={original!r} is neither null nor a JSON string")
        return {"metadata": {"annotations": {ANNOTATION_KEDA_PAUSED: value}}}

    def restored_size(self, original: str) -> int:
        return 0 if self.restored_body(original)["metadata"]["annotations"][ANNOTATION_KEDA_PAUSED] == "0" else 1

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else ("paused at 0" if size == 0 else "scaling")


SCALED_OBJECTS = ScaledObjectHandler()


def _paused(obj: dict[str, Any]) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_KEDA_PAUSED)
    return None if value is None else str(value)


def _target(namespace: str, ref: dict[str, Any]) -> tuple[str, str, str, str]:
    """(namespace, group, kind, name) of a scaleTargetRef; KEDA and the HPA default to apps/v1 Deployment."""
    api_version = str(ref.get("apiVersion") or "apps/v1")
    group = api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""
    return namespace, group, str(ref.get("kind") or "Deployment"), str(ref.get("name", ""))


def _key(w: Workload) -> tuple[str, str, str, str]:
    return w.namespace, w.handling.group, w.kind.short, w.name


@dataclass(frozen=True)
class ScaledObject:
    workload: Workload  # the ScaledObject itself, seen through the kind interface
    paused: str | None
    target: tuple[str, str, str, str]


def scaled_object(obj: dict[str, Any]) -> ScaledObject:
    w = from_api(SCALED_OBJECTS, obj)
    return ScaledObject(w, _paused(obj), _target(w.namespace, (obj.get("spec") or {}).get("scaleTargetRef") or {}))


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
    triggers = {_key(a.workload): a for a in actions if a.verb in (Verb.FREEZE, Verb.RESTORE)}
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


def hpa_problems(actions: Sequence[Action], hpas: Iterable[dict[str, Any]], *,
                 kept: Iterable[tuple[str, Workload]] = ()) -> list[Problem]:
    """HPAs with minReplicas 0 aimed at a workload being frozen, or kept frozen (`kept`, from `hpa_rechecks`):
    they can scale it up again."""
    frozen = {_key(a.workload): (a.policy, a.workload) for a in actions if a.verb is Verb.FREEZE}
    frozen |= {_key(w): (policy, w) for policy, w in kept}
    problems = []
    for hpa in hpas:
        meta, spec = hpa.get("metadata") or {}, hpa.get("spec") or {}
        target = frozen.get(_target(str(meta.get("namespace", "")), spec.get("scaleTargetRef") or {}))
        if target is None or int(spec.get("minReplicas", 1)) != 0:
            continue
        policy, workload = target
        problems.append(Problem(policy, workload, (
            f"HorizontalPodAutoscaler {meta.get('name')} in {meta.get('namespace')} {_HPA_MIN_0} "
            f"{workload.ref}: it can scale the frozen workload up again while the namespace is "
            f"held. Set its minReplicas to 1 or more (an HPA leaves a workload at 0 replicas alone), or "
            f"annotate the workload {ANNOTATION_EXCLUDE}=true")))
    return problems
