"""Small factories for the planner's inputs, shared by the unit and property tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from job import policy as policy_api
from job.plan import Plan
from job.settings import Settings
from job.workloads import HANDLERS, Kind, Namespace, Workload

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
             rv: str = "1") -> Workload:
    return Workload(kind=kind, namespace=ns, name=name, resource_version=rv, size=size, original=original,
                    scaled_by=scaled_by, excluded=excluded)


def apply_plan(plan: Plan, workloads: list[Workload]) -> list[Workload]:
    """What the API server would hold after the plan's merge patches (a model of the patch semantics)."""
    by_key = {w.key: w for w in workloads}
    for action in plan.actions:
        w = by_key[action.workload.key]
        handler = HANDLERS[w.kind]
        annotations = action.patch["metadata"].get("annotations", {})
        original = annotations.get(handler.record_key, w.original) if handler.record_key in annotations else w.original
        scaled_by = annotations.get("nsscaler.wubw.fun/scaled-by", w.scaled_by) \
            if "nsscaler.wubw.fun/scaled-by" in annotations else w.scaled_by
        spec = action.patch.get("spec")
        size = w.size if spec is None else (spec["replicas"] if "replicas" in spec else int(not spec["suspend"]))
        by_key[w.key] = dataclasses.replace(w, size=size, original=original, scaled_by=scaled_by,
                                            resource_version=str(int(w.resource_version) + 1))
    return list(by_key.values())
