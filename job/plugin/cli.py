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

import job
from job.cluster.kube import Kube
from job.errors import EXIT_CANNOT_START, EXIT_FAILED, EXIT_OK, ApiError, StartupError
from job.model import policy as policy_api
from job.model import wake as wake_api
from job.plugin import exits
from job.plugin.status import namespace_missing, namespace_of, next_run_words, stamp, status, wakes_in


class _Help(argparse.HelpFormatter):
    """Wraps a description as argparse does, and keeps the exit codes' epilog one line per code."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return text if text == exits.epilog() else super()._fill_text(text, width, indent)


def _duration(text: str) -> str:
    """A `--for` as written, once it reads as a duration: refused with the other arguments, before any request."""
    try:
        policy_api.parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    common.add_argument("--context", help="kubeconfig context (default: its current one)")
    common.add_argument("--cronjob", default="nsscaler/nsscaler",
                        help="NAMESPACE/NAME of nsscaler's CronJob, to say when the next run is due "
                             "(default: nsscaler/nsscaler)")
    top = argparse.ArgumentParser(prog="kubectl nsscaler", formatter_class=_Help, epilog=exits.epilog(), description=(
        "Wake a namespace an NSScaler holds at zero, for a bounded time, on the record; end your wake; see how "
        "a namespace or a policy stands. A wake takes effect on the next nsscaler run."))
    top.add_argument("--version", action="version", version=f"kubectl nsscaler {job.__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    wake = sub.add_parser("wake", parents=[common], formatter_class=_Help, epilog=exits.epilog(),
                          help="keep a held namespace running for a while (creates a Wake)",
                          description="Create a Wake in the namespace: from the next nsscaler run it keeps running "
                                      "until the end you ask for, or the policy's wake.max_duration, whichever "
                                      "comes first. Needs `edit` in the namespace.")
    wake.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
    wake.add_argument("--for", dest="duration", required=True, type=_duration,
                      help="how long, e.g. 3h, 90m, 1h30m (the policy caps it at its wake.max_duration)")
    wake.add_argument("--reason", default="", help="why, in a few words (shown in Events and statuses)")
    sleep = sub.add_parser("sleep", parents=[common], formatter_class=_Help, epilog=exits.epilog(),
                           help="end your wakes in a namespace (deletes the Wakes you created)",
                           description="Delete the Wakes you created in the namespace: unless another Wake keeps "
                                       "it running, the next nsscaler run holds it again.")
    sleep.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
    status = sub.add_parser("status", parents=[common], formatter_class=_Help, epilog=exits.epilog(),
                            help="whether a namespace is held or running, why, and until when; or a policy's "
                                 "namespaces",
                            description="A namespace: held or running, its workloads frozen, its Wakes and what "
                                        "they say, what each NSScaler you can read says. A policy: its held and "
                                        "woken namespaces, when its hold next changes and the exceptions deciding "
                                        "today and next. Both: when the next run is due.")
    status.add_argument("-n", "--namespace", help="the namespace (default: the context's)")
    status.add_argument("policy", nargs="?", help="an NSScaler's name, instead of a namespace")
    return top


def wake(kube: Kube, args: argparse.Namespace, *, now: dt.datetime) -> int:
    ns = namespace_of(kube, args)
    length = policy_api.parse_duration(args.duration)
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
        if exc.status == 0:
            raise
        print(f"kubectl nsscaler wake: the API server refused: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    name, by = created["metadata"]["name"], (created.get("spec") or {}).get("requestedBy", "?")
    print(f"Wake {ns}/{name} created by {by} for {args.duration} (until {stamp(now + length)} at most; the "
          f"policy may cap it).")
    # Where the waker runs, it starts a run for this Wake at once; the plugin cannot see that (an editor of one
    # namespace may not read nsscaler's), so it says both.
    print(f"It is Pending until a run restores {ns}: at once where nsscaler's waker runs, otherwise at the "
          f"{next_run_words(kube, args.cronjob, now=now)}.")
    return EXIT_OK


def whoami(kube: Kube) -> str:
    review = kube.create(version="authentication.k8s.io/v1", plural="selfsubjectreviews",
                         body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")


def sleep(kube: Kube, args: argparse.Namespace, *, now: dt.datetime) -> int:
    ns = namespace_of(kube, args)
    try:
        me = whoami(kube)
        found = wakes_in(kube, ns)
        mine = [w["metadata"]["name"] for w in found if (w.get("spec") or {}).get("requestedBy") == me]
        for name in mine:
            kube.delete(version=policy_api.API_VERSION, plural=wake_api.PLURAL, namespace=ns, name=name)
    except ApiError as exc:
        if exc.status == 0:
            raise
        print(f"kubectl nsscaler sleep: the API server refused: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    if not mine:
        others = len(found)
        print(f"{me} has no Wake in {ns}" + (f" ({others} by others, theirs to end)" if others else "") + ".")
        return EXIT_OK
    print(f"Deleted {', '.join(mine)} in {ns}. Unless another Wake keeps it running, {ns} is held again from "
          f"the next run: {next_run_words(kube, args.cronjob, now=now)}.")
    return EXIT_OK


_COMMANDS = {"wake": wake, "sleep": sleep, "status": status}


def cannot_ask(kube: Kube, exc: ApiError) -> str:
    """One line for the connectivity check that failed: which API server, and why."""
    if exc.status == 0:  # unreachable, or the kubeconfig's exec plugin gave no credential: the message says which
        return exc.message
    if exc.status == 401:
        return (f"the API server at {kube.server} rejected your credentials (401): log in again, or renew the "
                f"token or certificate in your kubeconfig")
    return f"the API server at {kube.server} did not answer /version: {exc}"


def main(argv: Sequence[str] | None = None, *, now: dt.datetime | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        kube = Kube.as_user(kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None, context=args.context)
    except StartupError as exc:  # says which file and what to do
        print(f"kubectl nsscaler: {exc}", file=sys.stderr)
        return EXIT_CANNOT_START
    try:
        # One request first, sent once (Kube.as_user retries nothing): an API server that cannot be reached, or
        # refuses these credentials, is said in one line at once, before any request whose failure could read
        # as "not permitted" or "nothing there".
        kube.server_version()
    except ApiError as exc:
        if exc.status != 403:  # /version is open to everyone; a server that forbids it still answers
            print(f"kubectl nsscaler: {cannot_ask(kube, exc)}", file=sys.stderr)
            return EXIT_CANNOT_START
    try:
        if not getattr(args, "policy", None) and namespace_missing(kube, ns := namespace_of(kube, args)):
            print(f"kubectl nsscaler {args.command}: no namespace {ns!r} (check -n, or the context's namespace)",
                  file=sys.stderr)
            return exits.EXIT_NOT_FOUND
        return _COMMANDS[args.command](kube, args, now=now or dt.datetime.now(dt.UTC))
    except ApiError as exc:  # what no command says where it happens: the API server went away, or is failing
        if exc.status == 0:
            print(f"kubectl nsscaler: {cannot_ask(kube, exc)}", file=sys.stderr)
            return EXIT_CANNOT_START
        print(f"kubectl nsscaler: the API server at {kube.server} answered {exc}", file=sys.stderr)
        return EXIT_FAILED
