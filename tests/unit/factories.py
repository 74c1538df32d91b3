"""Small factories for the planner's inputs, shared by the unit and property tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from job.decide.plan import Plan
from job.model import policy as policy_api
from job.model.kinds import KindHandler
from job.model.marks import ANNOTATION_SCALED_BY
from job.model.settings import Settings
from job.model.workloads import Kind, Namespace, Workload

DEFAULT_KINDS = frozenset({Kind.DEPLOYMENT, Kind.STATEFULSET})


def settings(**overrides: Any) -> Settings:
    return Settings(_cli_parse_args=[], **overrides)


def policy(name: str, prefix: str, active: list[str] | None = None, **spec: Any) -> policy_api.Policy:
    parsed = policy_api.parse({"metadata": {"name": name, "generation": 1},
                               "spec": {"scope_prefix": prefix, "active_namespace_suffixes": active or [], **spec}},
                              default_kinds=DEFAULT_KINDS)
    assert isinstance(parsed, policy_api.Policy), parsed
    return parsed


def namespaces(*names: str, terminating: tuple[str, ...] = ()) -> list[Namespace]:
    return [Namespace(n, terminating=n in terminating) for n in names]


def workload(ns: str, name: str = "web", size: int = 2, *, kind: Kind = Kind.DEPLOYMENT,
             original: str | None = None, scaled_by: str | None = None, excluded: bool = False,
             rv: str = "1", controller: str | None = None, controller_name: str | None = None,
             handler: KindHandler | None = None) -> Workload:
    return Workload(kind=handler.kind if handler else kind, namespace=ns, name=name, resource_version=rv, size=size,
                    original=original, scaled_by=scaled_by, excluded=excluded, controller=controller,
                    controller_name=controller_name, handler=handler)


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 merge patch, as the API server applies it."""
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = _merge(out.get(key) if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = value
    return out


def apply_plan(plan: Plan, workloads: list[Workload]) -> list[Workload]:
    """What the API server would hold after the plan's merge patches (a model of the patch semantics, for
    any kind: the object is rebuilt from the handler's own restore body, patched, and read back)."""
    by_key = {w.key: w for w in workloads}
    for action in plan.actions:
        w = by_key[action.workload.key]
        handler = w.kind_handler
        annotations = {k: v for k, v in ((handler.record_key, w.original), (ANNOTATION_SCALED_BY, w.scaled_by))
                       if v is not None}
        obj = _merge(handler.restored_body(handler.original_value(w.size)), {"metadata": {"annotations": annotations}})
        obj = _merge(obj, {k: v for k, v in action.patch.items() if k != "metadata"})
        obj = _merge(obj, {"metadata": {"annotations": action.patch["metadata"].get("annotations", {})}})
        after = obj["metadata"].get("annotations", {})
        by_key[w.key] = dataclasses.replace(w, size=handler.size_of(obj), original=after.get(handler.record_key),
                                            scaled_by=after.get(ANNOTATION_SCALED_BY),
                                            resource_version=str(int(w.resource_version) + 1))
    return list(by_key.values())
