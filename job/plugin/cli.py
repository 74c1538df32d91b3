"""`kubectl nsscaler wake|sleep|status`: wake a held namespace for a bounded time, end your wake, see how a
namespace or a policy stands. Everything goes with the user's own kubeconfig and permissions: `edit` in the
namespace is enough to wake and sleep it (the Wake ClusterRoles are aggregated to `edit` and `admin`)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence
from typing import Any

from job.model import policy as policy_api
from job.model import wake as wake_api
from job.model.marks import ANNOTATION_SCALED_BY, LABEL_SCALED
from job.plugin import cron
from job.plugin.client import Client, Refused

_WAKES = f"/apis/{policy_api.API_VERSION}/namespaces/{{ns}}/{wake_api.PLURAL}"
_FROZEN_KINDS = (("apps/v1", "deployments", "Deployment"), ("apps/v1", "statefulsets", "StatefulSet"),
                 ("batch/v1", "cronjobs", "CronJob"))


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


def next_run_words(client: Client, cronjob: str, *, now: dt.datetime) -> str:
    """ "next nsscaler run due 2026-12-04 12:30Z", or why that cannot be said."""
    ns, _, name = cronjob.partition("/")
    try:
        obj = client.call("GET", f"/apis/batch/v1/namespaces/{ns}/cronjobs/{name}")
    except Refused as exc:
        return f"next nsscaler run: unknown (cannot read CronJob {cronjob}: {exc.status or 'unreachable'})"
    spec = obj.get("spec") or {}
    if spec.get("suspend"):
        return f"next nsscaler run: none (CronJob {cronjob} is suspended)"
    try:
        due = cron.next_run(str(spec.get("schedule", "")), now=now, time_zone=spec.get("timeZone"))
    except (cron.BadSchedule, LookupError) as exc:
        return f"next nsscaler run: unknown ({exc})"
    return f"next nsscaler run due {_stamp(due)} (schedule {spec.get('schedule')!r})"


def wake(client: Client, args: argparse.Namespace, *, now: dt.datetime) -> int:
    ns = args.namespace or client.namespace
    try:
        length = policy_api.parse_duration(args.duration)
    except ValueError as exc:
        print(f"kubectl nsscaler wake: --for {exc}", file=sys.stderr)
        return 2
    spec: dict[str, Any] = {"duration": args.duration, **({"reason": args.reason} if args.reason else {})}
    body = {"apiVersion": policy_api.API_VERSION, "kind": wake_api.KIND,
            "metadata": {"generateName": "wake-", "namespace": ns}, "spec": spec}
    try:
        created = client.call("POST", _WAKES.format(ns=ns), body=body)
    except Refused as exc:
        print(f"kubectl nsscaler wake: the API server refused: {exc.message}", file=sys.stderr)
        return 1
    name, by = created["metadata"]["name"], (created.get("spec") or {}).get("requestedBy", "?")
    print(f"Wake {ns}/{name} created by {by} for {args.duration} (until {_stamp(now + length)} at most; the "
          f"policy may cap it).")
    print(f"It is Pending until the next run restores {ns}: {next_run_words(client, args.cronjob, now=now)}.")
    return 0


def sleep(client: Client, args: argparse.Namespace, *, now: dt.datetime) -> int:
    ns = args.namespace or client.namespace
    try:
        me = client.whoami()
        found = client.call("GET", _WAKES.format(ns=ns)).get("items") or []
        mine = [w["metadata"]["name"] for w in found if (w.get("spec") or {}).get("requestedBy") == me]
        for name in mine:
            client.call("DELETE", f"{_WAKES.format(ns=ns)}/{name}")
    except Refused as exc:
        print(f"kubectl nsscaler sleep: the API server refused: {exc.message}", file=sys.stderr)
        return 1
    if not mine:
        others = len(found)
        print(f"{me} has no Wake in {ns}" + (f" ({others} by others, theirs to end)" if others else "") + ".")
        return 0
    print(f"Deleted {', '.join(mine)} in {ns}. Unless another Wake keeps it running, {ns} is held again from "
          f"the next run: {next_run_words(client, args.cronjob, now=now)}.")
    return 0


def _workloads(client: Client, ns: str) -> tuple[list[str], list[str]]:
    """What nsscaler froze in `ns` ("Deployment/web (by shop)") and what still runs ("Deployment/api: 2"), of
    the kinds it freezes by default and CronJobs, as far as the user may read them."""
    frozen, running = [], []
    for version, plural, kind in _FROZEN_KINDS:
        try:
            items = client.call("GET", f"/apis/{version}/namespaces/{ns}/{plural}").get("items") or []
        except Refused:
            continue
        for o in items:
            meta, spec = o["metadata"], o.get("spec") or {}
            if (meta.get("labels") or {}).get(LABEL_SCALED) == "true":
                frozen.append(f"{kind}/{meta['name']} (by {(meta.get('annotations') or {}).get(ANNOTATION_SCALED_BY)})")
            elif spec.get("replicas", 1) and not spec.get("suspend"):
                size = f": {spec['replicas']}" if "replicas" in spec else ""
                running.append(f"{kind}/{meta['name']}{size}")
    return frozen, running


def _wake_lines(client: Client, ns: str) -> list[str]:
    try:
        wakes = client.call("GET", _WAKES.format(ns=ns)).get("items") or []
    except Refused as exc:
        return [f"  Wakes: cannot read ({exc.status})"]
    lines = []
    for w in wakes:
        status = w.get("status") or {}
        lines.append(f"  Wake {w['metadata']['name']}: {status.get('state', wake_api.STATE_PENDING)}, by "
                     f"{(w.get('spec') or {}).get('requestedBy', '?')}, until {status.get('appliedUntil', '?')}"
                     f"{': ' + status['message'] if status.get('message') else ''}")
    return lines or ["  no Wake"]


def _policy_lines(client: Client, ns: str) -> list[str]:
    """What each NSScaler with `ns` in scope says about it (only when the user may read NSScalers)."""
    try:
        policies = client.call("GET", f"/apis/{policy_api.API_VERSION}/{policy_api.PLURAL}").get("items") or []
    except Refused:
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


def status(client: Client, args: argparse.Namespace, *, now: dt.datetime) -> int:
    if args.policy:
        return _policy_status(client, args.policy, cronjob=args.cronjob, now=now)
    ns = args.namespace or client.namespace
    frozen, running = _workloads(client, ns)
    print(f"{ns}: {'held: ' + str(len(frozen)) + ' workloads frozen' if frozen else 'running'}")
    lines = [f"  frozen {line}" for line in frozen[:20]] + [f"  runs {line}" for line in running[:20]]
    print("\n".join(lines + _wake_lines(client, ns) + _policy_lines(client, ns)))
    print(next_run_words(client, args.cronjob, now=now))
    return 0


def _policy_status(client: Client, name: str, *, cronjob: str, now: dt.datetime) -> int:
    try:
        obj = client.call("GET", f"/apis/{policy_api.API_VERSION}/{policy_api.PLURAL}/{name}")
    except Refused as exc:
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
    print(next_run_words(client, cronjob, now=now))
    return 0


_COMMANDS = {"wake": wake, "sleep": sleep, "status": status}


def main(argv: Sequence[str] | None = None, *, now: dt.datetime | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        client = Client.connect(kubeconfig=args.kubeconfig, context=args.context)
    except Exception as exc:
        print(f"kubectl nsscaler: cannot load the kubeconfig: {exc}", file=sys.stderr)
        return 2
    return _COMMANDS[args.command](client, args, now=now or dt.datetime.now(dt.UTC))
