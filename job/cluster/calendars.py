"""The ICS calendars policies name: one GET per ConfigMap, only in runs where a policy names one, and only in
nsscaler's own namespace (a Role there grants `get` on ConfigMaps; nsscaler may read no other namespace's).

A ConfigMap or key that is missing or cannot be read is said as the problem of the policies naming it
(`job.model.calendars`), with the fix; the run goes on for the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from job.cluster.access import REINSTALL
from job.cluster.kube import Kube
from job.errors import ApiError
from job.model.calendar import InvalidCalendar
from job.model.calendars import CalendarText
from job.model.exceptions import CalendarRef
from job.model.policy import InvalidPolicy, Policy

#: the Role in nsscaler's namespace that lets its ServiceAccount get ConfigMaps there (kustomize/base)
CALENDAR_ROLE = "nsscaler-calendars"
#: a run that does not know its own namespace (outside a Pod, without the setting) reads no calendar
NO_OWN_NAMESPACE = ("cannot be read: this run does not know nsscaler's namespace, where calendars live (it runs "
                    "outside a Pod); set --own-namespace (NSSCALER_OWN_NAMESPACE) to the namespace nsscaler is "
                    "installed in")


def calendars(kube: Kube, found: Sequence[Policy | InvalidPolicy], *,
              namespace: str | None) -> dict[CalendarRef, CalendarText]:
    """The ICS texts the policies' exceptions name, read from ConfigMaps in `namespace` (nsscaler's own): one GET
    per ConfigMap, only in runs where a policy names one. A ConfigMap or key that is missing or cannot be read
    is a problem of the policies naming it, said with the fix; the run goes on for the others."""
    wanted = {ref for p in found if isinstance(p, Policy) for ref in (c.ref for c in p.calendars)}
    if namespace is None:
        return dict.fromkeys(wanted, InvalidCalendar(NO_OWN_NAMESPACE))
    texts: dict[CalendarRef, CalendarText] = {}
    for name in sorted({n for n, _ in wanted}):
        try:
            data = kube.get(version="v1", plural="configmaps", name=name, namespace=namespace).get("data") or {}
        except ApiError as exc:
            data = InvalidCalendar(_unread(exc, namespace=namespace, name=name))
        for ref in sorted(r for r in wanted if r[0] == name):
            texts[ref] = data if isinstance(data, InvalidCalendar) else _key(data, ref[1])
    return texts


def _unread(exc: ApiError, *, namespace: str, name: str) -> str:
    if exc.status == 404:
        return (f"does not exist in nsscaler's namespace {namespace}: create it there (kubectl -n {namespace} create "
                f"configmap {name} --from-file=...) or fix the name")
    if exc.status == 403:
        return (f"cannot be read: nsscaler's ServiceAccount may not get ConfigMaps in its namespace {namespace} "
                f"(the Role {CALENDAR_ROLE} grants it): {REINSTALL}")
    return f"could not be read ({exc.status}): {str(exc)[:200]}; the next run tries again"


def _key(data: dict[str, Any], key: str) -> CalendarText:
    if key in data and isinstance(data[key], str):
        return str(data[key])
    keys = ", ".join(sorted(data)[:10]) or "none"
    return InvalidCalendar(f"has no key {key!r} (its keys: {keys}); put the .ics text under that key or fix key")
