"""`kubectl nsscaler status`: how a namespace stands (held or running, why, until when), or a policy's namespaces.

"Held" is read from the workloads' own records (`job.model.marks`), which are complete, never from a policy's
status lists, which name at most `status_list_limit` namespaces each; a status list is used only where the
records cannot be read, and then says that it may be cut."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from job.cluster.kube import Kube
from job.decide import holding
from job.decide.events import REASON_LEASE_HELD
from job.errors import EXIT_FAILED, EXIT_OK, ApiError
from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.kinds import BUILTIN, Kind
from job.plugin import cron, workloads
from job.plugin.exits import EXIT_NOT_FOUND

_CRONJOBS = BUILTIN[Kind.CRONJOB]


def stamp(when: dt.datetime | None) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%MZ") if when else "unknown"


def next_run_words(kube: Kube, cronjob: str, *, now: dt.datetime) -> str:
    """ "next nsscaler run due 2026-12-04 12:30Z", or why that cannot be said."""
    ns, _, name = cronjob.partition("/")
    try:
        obj = kube.get(version=_CRONJOBS.api_version, plural=_CRONJOBS.plural, namespace=ns, name=name)
    except ApiError as exc:
        return f"next nsscaler run: unknown (cannot read CronJob {cronjob}: {exc.status or 'unreachable'})"
    spec = obj.get("spec") or {}
    if spec.get("suspend"):
        return f"next nsscaler run: none (CronJob {cronjob} is suspended)"
    try:
        due = cron.next_run(str(spec.get("schedule", "")), now=now, time_zone=spec.get("timeZone"))
    except (cron.BadSchedule, LookupError) as exc:
        return f"next nsscaler run: unknown ({exc})"
    return f"next nsscaler run due {stamp(due)} (schedule {spec.get('schedule')!r})"


def namespace_of(kube: Kube, args: argparse.Namespace) -> str:
    """The namespace a command is about: `-n`, else the context's."""
    return str(args.namespace or kube.config.namespace or "default")


def namespace_missing(kube: Kube, ns: str) -> bool:
    """Whether `ns` does not exist, so that a mistyped name is said as such rather than read as "running" or
    "no Wake". A user who may not read it (403) cannot tell: the command goes on, and what it may read says
    the rest."""
    try:
        kube.get(version="v1", plural="namespaces", name=ns)
    except ApiError as exc:
        workloads.raise_unless_unreadable(exc)
        return exc.status == 404
    return False


def wakes_in(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return list(kube.list_all(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=ns))


def _wake_lines(kube: Kube, ns: str) -> list[str]:
    try:
        wakes = wakes_in(kube, ns)
    except ApiError as exc:
        workloads.raise_unless_unreadable(exc)
        return [f"  Wakes: cannot read ({exc.status})"]
    lines = []
    for w in wakes:
        status = w.get("status") or {}
        state = status.get("state", wake_api.STATE_PENDING)
        lines.append(f"  Wake {w['metadata']['name']}: {state}, by "
                     f"{(w.get('spec') or {}).get('requestedBy', '?')}, until {status.get('appliedUntil', '?')}"
                     f"{': ' + status['message'] if status.get('message') else ''}")
        if state == wake_api.STATE_PENDING and (held := _lease_held_words(kube, ns, w['metadata']['name'])):
            lines.append(f"    {held}")
    return lines or ["  no Wake"]


def _lease_held_words(kube: Kube, ns: str, wake: str) -> str:
    """What the last run for a pending Wake said on its namespace if it found another run holding the run Lease
    (a `RunLeaseHeld` Event: that run wrote no status)."""
    try:
        said = list(kube.list_all(version="v1", plural="events", namespace=ns,
                                  field_selector=f"reason={REASON_LEASE_HELD}"))
    except ApiError:
        return ""
    mine = [e for e in said if str(e.get("message", "")).startswith(f"Wake {wake}:")]
    latest = max(mine, key=lambda e: str(e.get("lastTimestamp") or ""), default=None)
    return f"{latest.get('lastTimestamp')}: {latest['message']}" if latest else ""


def policy_state(ns: str, name: str, status: dict[str, Any], found: workloads.Workloads) -> str:
    """How the NSScaler `name` (its `status`) stands towards `ns`, whose workloads are `found`. Pure.

    Held: some workload in `ns` carries this policy's record. A status list names at most `status_list_limit`
    namespaces, so a namespace it names is so, and one it leaves out may still be: only the records say "not".
    """
    restoring = {w.get("namespace"): w for w in status.get("restoring") or []}
    woken = {w.get("namespace"): w for w in status.get("wokenNamespaces") or []}
    if ns in restoring:
        return f"coming back in tiers: {tier_words(restoring[ns])}"
    if frozen := found.frozen_by(name):
        return f"held ({frozen} workloads frozen by it)"
    if ns in (status.get("heldNamespaces") or []):  # its workloads are of kinds these credentials may not read
        return "held"
    if ns in woken:
        return f"woken by {woken[ns].get('by')} until {woken[ns].get('until')}"
    if found.unreadable:
        return "not held, as far as these credentials may read (no workload they may read carries its record)"
    return "not held (no workload carries its record: active, kept, woken, or the policy does not hold now)"


def holder_words(objs: list[dict[str, Any]], ns: str, *, now: dt.datetime) -> str:
    """Which NSScaler holds `ns` now by the run's own rule (`job.decide.holding`: scope, active lists, suspend,
    hold_windows, until), and until when. Pure. Whether it is held is the records' to say (`policy_state`): the
    run may keep it running for recent activity or a Wake, which this rule does not know."""
    # the kinds do not decide who holds a namespace; the run's default stands in for CRs that set none
    parsed = [policy_api.parse(o, default_kinds=frozenset({Kind.DEPLOYMENT})) for o in objs]
    held = holding.holder_of([p for p in parsed if isinstance(p, policy_api.Policy)], ns, now=now)
    if held is None:
        return f"  by their schedules and active lists, no NSScaler holds {ns} now"
    until = f" until {stamp(held.until)}" if held.until else ""
    return f"  by their schedules and active lists, NSScaler {held.policy.name} holds {ns} now{until}"


def _policy_lines(kube: Kube, ns: str, found: workloads.Workloads, *, now: dt.datetime) -> list[str]:
    """What each NSScaler with `ns` in scope says about it (only when the user may read NSScalers)."""
    try:
        policies = list(kube.list_all(version=policy_api.API_VERSION, plural=policy_api.PLURAL))
    except ApiError as exc:
        workloads.raise_unless_unreadable(exc)
        return ["  NSScalers: cannot read them with these permissions (the records on workloads say enough)"]
    lines = []
    for p in policies:
        if not ns.startswith((p.get("spec") or {}).get("scope_prefix", "\0")):
            continue
        status = p.get("status") or {}
        state = policy_state(ns, p["metadata"]["name"], status, found)
        lines.append(f"  NSScaler {p['metadata']['name']}: {state}; holding: {status.get('holding')}")
    return [*lines, holder_words(policies, ns, now=now)] if lines else [f"  no NSScaler has {ns} in scope"]


def tier_words(entry: dict[str, Any]) -> str:
    """One `status.restoring` entry, in words."""
    waiting = ", ".join(entry.get("waitingFor") or []) or "the earlier tiers"
    return (f"tier {entry.get('tier')} ({entry.get('pending')} workloads still at zero) waits for {waiting} to be "
            f"available, at most until {entry.get('until')}")


def headline(ns: str, found: workloads.Workloads) -> tuple[str, int]:
    """The first line of a namespace's status, and the exit code it leads to. Pure."""
    if found.frozen:
        return f"{ns}: held: {len(found.frozen)} workloads frozen", EXIT_OK
    if not found.readable:
        return f"{ns}: unknown: these credentials may read none of its workloads", EXIT_FAILED
    return f"{ns}: running", EXIT_OK


def status(kube: Kube, args: argparse.Namespace, *, now: dt.datetime) -> int:
    if args.policy:
        return _policy_status(kube, args.policy, cronjob=args.cronjob, now=now)
    ns = namespace_of(kube, args)
    found = workloads.in_namespace(kube, ns)
    first, code = headline(ns, found)
    lines = [first, *(f"  frozen {f}" for f in found.frozen[:20]), *(f"  runs {line}" for line in found.running[:20])]
    if found.unreadable:
        lines.append(f"  cannot read with these permissions: {', '.join(found.unreadable)}")
    print("\n".join(lines + _wake_lines(kube, ns) + _policy_lines(kube, ns, found, now=now)))
    print(next_run_words(kube, args.cronjob, now=now))
    return code


def held_words(status: dict[str, Any], held: dict[str, int] | None) -> str:
    """The held namespaces of a policy: from the records (`held`, complete), else from its status list, saying
    when that list is cut. Pure."""
    if held is not None:
        return ", ".join(held) or "none"
    listed, count = status.get("heldNamespaces") or [], (status.get("counts") or {}).get("heldNamespaces", 0)
    cut = f" (the first {len(listed)} of {count}, as its status lists them)" if count > len(listed) else ""
    return (", ".join(listed) or "none") + cut


def calendar_lines(status: dict[str, Any]) -> list[str]:
    """When the hold next changes and which exceptions decide today and next, as the last run wrote them (the run
    reads the calendars; the status says what it found). Pure."""
    lines = [f"  next change: {status.get('nextChange') or 'none ahead'}"]
    for key, words in (("exception", "today"), ("nextException", "next exception")):
        entry = status.get(key)
        if isinstance(entry, dict):
            verb = "held all day" if entry.get("action") == "hold" else "released all day"
            lines.append(f"  {words}: {verb} on {entry.get('date')} ({entry.get('name')})")
    return lines


def _policy_status(kube: Kube, name: str, *, cronjob: str, now: dt.datetime) -> int:
    try:
        obj = kube.get(version=policy_api.API_VERSION, plural=policy_api.PLURAL, name=name)
    except ApiError as exc:
        if exc.status == 0:
            raise
        print(f"kubectl nsscaler status: {exc.message}", file=sys.stderr)
        return EXIT_NOT_FOUND if exc.status == 404 else EXIT_FAILED
    status = obj.get("status") or {}
    counts = status.get("counts") or {}
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    held = workloads.held_namespaces(kube, name)
    print(f"NSScaler {name}: holding {status.get('holding')}, "
          f"{len(held) if held is not None else counts.get('heldNamespaces', 0)} held, "
          f"{counts.get('wokenNamespaces', 0)} woken; last run {status.get('lastRunTime', 'never')}")
    print(f"  Ready {ready.get('status', '?')} ({ready.get('reason', '?')}): {ready.get('message', '')}")
    print(f"  held: {held_words(status, held)}")
    for line in calendar_lines(status):
        print(line)
    for w in status.get("wokenNamespaces") or []:
        print(f"  woken: {w.get('namespace')} by {w.get('by')} until {w.get('until')}"
              f"{': ' + w['reason'] if w.get('reason') else ''}")
    for w in status.get("restoring") or []:
        print(f"  restoring: {w.get('namespace')}: {tier_words(w)}")
    print(next_run_words(kube, cronjob, now=now))
    return EXIT_OK
