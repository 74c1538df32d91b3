"""`kubectl nsscaler wake|sleep|status`: wake a held namespace for a bounded time, end your wake, see how a
namespace or a policy stands. Everything goes with the user's own kubeconfig and permissions: `edit` in the
namespace is enough to wake and sleep it (the Wake ClusterRoles are aggregated to `edit` and `admin`)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from job.cluster.kube import Kube
from job.decide.events import REASON_LEASE_HELD
from job.errors import ApiError, StartupError
from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.kinds import BUILTIN, Kind
from job.plugin import cron, workloads

_CRONJOBS = BUILTIN[Kind.CRONJOB]


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    common.add_argument("--context", help="kubeconfig context (default: its current one)")
    common.add_argument("--cronjob", default="nsscaler/nsscaler",
                        help="NAMESPACE/NAME of nsscaler's CronJob, to say when the next run is due "
                             "(default: nsscaler/nsscaler)")
    top = argparse.ArgumentParser(prog="kubectl nsscaler", description=(
        "Wake a namespace an NSScaler holds at zero, for a bounded time, on the record; end your wake; see how "
        "a namespace or a policy stands. A wake takes effect on the next nsscaler run."))
    sub = top.add_subparsers(dest="command", required=True)
    wake = sub.add_parser("wake", parents=[common], help="keep a held namespace running for a while (creates a Wake)",
                          description="Create a Wake in the namespace: from the next nsscaler run it keeps running "
                                      "until the end you ask for, or the policy's wake.max_duration, whichever "
                                      "comes first. Needs `edit` in the namespace.")
    wake.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
    wake.add_argument("--for", dest="duration", required=True, help="how long, e.g. 3h, 90m, 1h30m (the policy "
                                                                    "caps it at its wake.max_duration)")
    wake.add_argument("--reason", default="", help="why, in a few words (shown in Events and statuses)")
    sleep = sub.add_parser("sleep", parents=[common],
                           help="end your wakes in a namespace (deletes the Wakes you created)",
                           description="Delete the Wakes you created in the namespace: unless another Wake keeps "
                                       "it running, the next nsscaler run holds it again.")
    sleep.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
    status = sub.add_parser("status", parents=[common], help="whether a namespace is held or running, why, and "
                                                             "until when; or a policy's namespaces",
                            description="A namespace: held or running, its workloads frozen, its Wakes and what "
                                        "they say, what each NSScaler you can read says. A policy: its held and "
                                        "woken namespaces. Both: when the next run is due.")
    status.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
    status.add_argument("policy", nargs="?", help="an NSScaler's name, instead of a namespace")
    return top


def _stamp(when: dt.datetime | None) -> str:
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
    return f"next nsscaler run due {_stamp(due)} (schedule {spec.get('schedule')!r})"


def _namespace(kube: Kube, args: argparse.Namespace) -> str:
    return str(args.namespace or kube.config.namespace or "default")


def _wakes(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return list(kube.list_all(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=ns))


def wake(kube: Kube, args: argparse.Namespace, *, now: dt.datetime) -> int:
    ns = _namespace(kube, args)
    try:
        length = policy_api.parse_duration(args.duration)
    except ValueError as exc:
        print(f"kubectl nsscaler wake: --for {exc}", file=sys.stderr)
        return 2
    try:
        # Who asks is named by the client and checked by the API server (the ValidatingAdmissionPolicy refuses
        # any name but the caller's own): this works on every supported version, with or without the
        # MutatingAdmissionPolicy that fills it in for a Wake written by hand.
        me = whoami(kube)
        spec: dict[str, Any] = {"duration": args.duration, **({"reason": args.reason} if args.reason else {}),
                                **({"requestedBy": me} if me else {})}
        body = {"apiVersion": policy_api.API_VERSION, "kind": wake_api.KIND,
                "metadata": {"generateName": "wake-", "namespace": ns}, "spec": spec}
        created = kube.create(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=ns, body=body)
    except ApiError as exc:
        print(f"kubectl nsscaler wake: the API server refused: {exc.message}", file=sys.stderr)
        return 1
    name, by = created["metadata"]["name"], (created.get("spec") or {}).get("requestedBy", "?")
    print(f"Wake {ns}/{name} created by {by} for {args.duration} (until {_stamp(now + length)} at most; the "
          f"policy may cap it).")
    # Where the waker runs, it starts a run for this Wake at once; the plugin cannot see that (an editor of one
    # namespace may not read nsscaler's), so it says both.
    print(f"It is Pending until a run restores {ns}: at once where nsscaler's waker runs, otherwise at the "
          f"{next_run_words(kube, args.cronjob, now=now)}.")
    return 0


def whoami(kube: Kube) -> str:
    review = kube.create(version="authentication.k8s.io/v1", plural="selfsubjectreviews",
                         body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")


def sleep(kube: Kube, args: argparse.Namespace, *, now: dt.datetime) -> int:
    ns = _namespace(kube, args)
    try:
        me = whoami(kube)
        found = _wakes(kube, ns)
        mine = [w["metadata"]["name"] for w in found if (w.get("spec") or {}).get("requestedBy") == me]
        for name in mine:
            kube.delete(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=ns, name=name)
    except ApiError as exc:
        print(f"kubectl nsscaler sleep: the API server refused: {exc.message}", file=sys.stderr)
        return 1
    if not mine:
        others = len(found)
        print(f"{me} has no Wake in {ns}" + (f" ({others} by others, theirs to end)" if others else "") + ".")
        return 0
    print(f"Deleted {', '.join(mine)} in {ns}. Unless another Wake keeps it running, {ns} is held again from "
          f"the next run: {next_run_words(kube, args.cronjob, now=now)}.")
    return 0


def _wake_lines(kube: Kube, ns: str) -> list[str]:
    try:
        wakes = _wakes(kube, ns)
    except ApiError as exc:
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


def _policy_lines(kube: Kube, ns: str) -> list[str]:
    """What each NSScaler with `ns` in scope says about it (only when the user may read NSScalers)."""
    try:
        policies = list(kube.list_all(version=policy_api.API_VERSION, plural=policy_api.PLURAL))
    except ApiError:
        return ["  NSScalers: cannot read them with these permissions (the records on workloads say enough)"]
    lines = []
    for p in policies:
        if not ns.startswith((p.get("spec") or {}).get("scope_prefix", "\0")):
            continue
        status = p.get("status") or {}
        woken = {w.get("namespace"): w for w in status.get("wokenNamespaces") or []}
        restoring = {w.get("namespace"): w for w in status.get("restoring") or []}
        if ns in restoring:
            state = f"coming back in tiers: {_tier_words(restoring[ns])}"
        elif ns in woken:
            state = f"woken by {woken[ns].get('by')} until {woken[ns].get('until')}"
        elif ns in (status.get("heldNamespaces") or []):
            state = "held"
        else:
            state = "not held (active, kept, or the policy does not hold now)"
        lines.append(f"  NSScaler {p['metadata']['name']}: {state}; holding: {status.get('holding')}")
    return lines or [f"  no NSScaler has {ns} in scope"]


def _tier_words(entry: dict[str, Any]) -> str:
    """One `status.restoring` entry, in words."""
    waiting = ", ".join(entry.get("waitingFor") or []) or "the earlier tiers"
    return (f"tier {entry.get('tier')} ({entry.get('pending')} workloads still at zero) waits for {waiting} to be "
            f"available, at most until {entry.get('until')}")


def status(kube: Kube, args: argparse.Namespace, *, now: dt.datetime) -> int:
    if args.policy:
        return _policy_status(kube, args.policy, cronjob=args.cronjob, now=now)
    ns = _namespace(kube, args)
    found = workloads.in_namespace(kube, ns)
    print(f"{ns}: {'held: ' + str(len(found.frozen)) + ' workloads frozen' if found.frozen else 'running'}")
    lines = [f"  frozen {line}" for line in found.frozen[:20]] + [f"  runs {line}" for line in found.running[:20]]
    if found.unreadable:
        lines.append(f"  cannot read with these permissions: {', '.join(found.unreadable)}")
    print("\n".join(lines + _wake_lines(kube, ns) + _policy_lines(kube, ns)))
    print(next_run_words(kube, args.cronjob, now=now))
    return 0


def _policy_status(kube: Kube, name: str, *, cronjob: str, now: dt.datetime) -> int:
    try:
        obj = kube.get(version=policy_api.API_VERSION, plural=policy_api.PLURAL, name=name)
    except ApiError as exc:
        print(f"kubectl nsscaler status: {exc.message}", file=sys.stderr)
        return 1
    status = obj.get("status") or {}
    counts = status.get("counts") or {}
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    print(f"NSScaler {name}: holding {status.get('holding')}, {counts.get('heldNamespaces', 0)} held, "
          f"{counts.get('wokenNamespaces', 0)} woken; last run {status.get('lastRunTime', 'never')}")
    print(f"  Ready {ready.get('status', '?')} ({ready.get('reason', '?')}): {ready.get('message', '')}")
    print(f"  held: {', '.join(status.get('heldNamespaces') or []) or 'none'}")
    for w in status.get("wokenNamespaces") or []:
        print(f"  woken: {w.get('namespace')} by {w.get('by')} until {w.get('until')}"
              f"{': ' + w['reason'] if w.get('reason') else ''}")
    for w in status.get("restoring") or []:
        print(f"  restoring: {w.get('namespace')}: {_tier_words(w)}")
    print(next_run_words(kube, cronjob, now=now))
    return 0


_COMMANDS = {"wake": wake, "sleep": sleep, "status": status}


def main(argv: Sequence[str] | None = None, *, now: dt.datetime | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        kube = Kube.as_user(kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None, context=args.context)
    except StartupError as exc:  # says which file and what to do
        print(f"kubectl nsscaler: {exc}", file=sys.stderr)
        return 2
    return _COMMANDS[args.command](kube, args, now=now or dt.datetime.now(dt.UTC))
