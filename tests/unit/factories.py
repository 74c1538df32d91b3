"""Small factories for the planner's inputs, shared by the unit and property tests."""

from __future__ import annotations

from typing import Any

from job import policy as policy_api
from job.settings import Settings
from job.workloads import Kind, Namespace, Workload

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
