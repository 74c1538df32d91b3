"""The ICS calendars policies name: one GET per ConfigMap, only in runs where a policy names one.

A ConfigMap or key that is missing or cannot be read is said as the problem of the policies naming it
(`job.model.calendars`), with the fix; the run goes on for the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from job.cluster.kube import Kube
from job.errors import ApiError
from job.model.calendar import InvalidCalendar
from job.model.calendars import CalendarText
from job.model.policy import InvalidPolicy, Policy


def calendars(kube: Kube, found: Sequence[Policy | InvalidPolicy]) -> dict[tuple[str, str, str], CalendarText]:
    """The ICS texts the policies' exceptions name: one GET per ConfigMap, only in runs where a policy names one.
    A ConfigMap or key that is missing or cannot be read is a problem of the policies naming it, said with the
    fix; the run goes on for the others."""
    wanted = {ref for p in found if isinstance(p, Policy) for ref in (c.ref for c in p.calendars)}
    texts: dict[tuple[str, str, str], CalendarText] = {}
    for namespace, name in sorted({(ns, n) for ns, n, _ in wanted}):
        try:
            data = kube.get(version="v1", plural="configmaps", name=name, namespace=namespace).get("data") or {}
        except ApiError as exc:
            data = InvalidCalendar(_unread(exc, namespace=namespace, name=name))
        for ref in sorted(r for r in wanted if r[:2] == (namespace, name)):
            texts[ref] = data if isinstance(data, InvalidCalendar) else _key(data, ref[2])
    return texts


def _unread(exc: ApiError, *, namespace: str, name: str) -> str:
    if exc.status == 404:
        return (f"does not exist: create it (kubectl -n {namespace} create configmap {name} --from-file=...) or "
                "fix the name")
    if exc.status == 403:
        return (f"cannot be read: grant nsscaler's ServiceAccount get on configmaps in {namespace} (the shipped "
                f"ClusterRole does)")
    return f"could not be read ({exc.status}): {str(exc)[:200]}; the next run tries again"


def _key(data: dict[str, Any], key: str) -> CalendarText:
    if key in data and isinstance(data[key], str):
        return str(data[key])
    keys = ", ".join(sorted(data)[:10]) or "none"
    return InvalidCalendar(f"has no key {key!r} (its keys: {keys}); put the .ics text under that key or fix key")
