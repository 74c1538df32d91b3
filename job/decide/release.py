"""Release: every workload nsscaler holds is given back, across all policies (pure: `now` is a parameter).

`nsscaler release` runs before nsscaler is removed from a cluster. It decides with the planner's own restore
rules, over policies that no longer hold anything: each valid policy becomes a copy whose hold ended at the
release's instant (`until`), so every record it wrote is restored exactly as the run restores an expired
policy's, and its restore tiers are kept (its `restore_order`, and what its status remembers of a wait). What
would keep a workload frozen in a run does not in a release: a suspended policy, `restore: false`, a policy's
dry run, an invalid spec (its records are restored as a gone policy's are). What a release never does is
touch a workload someone excluded, or restore a record that cannot be read: those are left and named.

Rules:
1. Every valid policy is released: not suspended, restoring, not a dry run, holding until `now` and no longer,
   its `restore_wait` at most `wait` (so a restore in tiers ends in bounded time).
2. An invalid policy is dropped: its records are restored as those of a policy that is gone.
3. Every restore says it is the release's (`REASON`), in the log and in the 409 re-decision alike.
4. What is left after the release is every workload still carrying a record (an object frozen with its owner
   is its owner's, one in a namespace being deleted goes with it), each with why: the last failure of a write
   on it, a problem the planner named, its exclusion, or a tier still waiting.
5. Before it gives anything back, the release suspends nsscaler's own CronJob and marks it released, in one
   write, and leaves it so: no scheduled run starts between the release and the removal, and a run started from
   the CronJob anyway (by hand, by the waker) finds the mark and freezes nothing.
6. A release is never a dry run: one that gave nothing back would let an uninstall remove nsscaler while
   workloads stay frozen, with nothing left to restore them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from job.decide.actions import Action, ActionResult, Problem, Verb
from job.decide.decision import Decision, Write
from job.decide.tiers import TierWait
from job.model.marks import ANNOTATION_EXCLUDE, ANNOTATION_RELEASED, OWN_CRONJOB
from job.model.policy import InvalidPolicy, Policy
from job.model.workloads import Namespace, Workload

#: why every workload comes back in a release
REASON = "nsscaler release: everything nsscaler holds is given back"

#: rule 6: what a release asked for a dry run says (exit 2)
NEVER_A_DRY_RUN = ("a release is never a dry run: it gives back everything nsscaler holds, or fails naming what it "
                   "could not; to see what a run would change, run nsscaler --dry-run instead (remove --dry-run or "
                   "NSSCALER_DRY_RUN from the release)")


def release_mark(cronjob: Mapping[str, Any], *, now: dt.datetime) -> dict[str, Any]:
    """Rule 5: the merge patch of nsscaler's own CronJob, suspended and marked released at `now`; a CronJob an
    earlier release marked keeps that first instant."""
    at = released_at(cronjob) or now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"annotations": {ANNOTATION_RELEASED: at}}, "spec": {"suspend": True}}


def released_at(cronjob: Mapping[str, Any] | None) -> str | None:
    """Rule 5: when the release marked this CronJob, or None (no CronJob, or not released)."""
    annotations = ((cronjob or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(ANNOTATION_RELEASED)
    return str(value) if value is not None else None


def refusal(*, namespace: str, at: str) -> str:
    """Rule 5: what a run started from a released CronJob says before it exits 2, writing nothing."""
    return (f"nsscaler was released at {at} (the CronJob {namespace}/{OWN_CRONJOB} carries {ANNOTATION_RELEASED} "
            f"and is suspended): this run freezes nothing. To keep using nsscaler, remove the annotation and "
            f"unsuspend the CronJob: kubectl -n {namespace} annotate cronjob {OWN_CRONJOB} "
            f"{ANNOTATION_RELEASED}- && kubectl -n {namespace} patch cronjob {OWN_CRONJOB} "
            f"-p '{{\"spec\":{{\"suspend\":false}}}}'")


def released(policies: Sequence[Policy | InvalidPolicy], *, now: dt.datetime,
             wait: dt.timedelta) -> tuple[Policy, ...]:
    """Rules 1 and 2: the policies as a release decides with them."""
    out = []
    for p in policies:
        if not isinstance(p, Policy):
            continue
        spec = p.spec.model_copy(update={
            "suspend": False, "restore": True, "dry_run": False, "hold_windows": (), "exceptions": (), "until": now,
            "restore_wait": _seconds(min(p.restore_wait, wait))})
        released_policy = replace(p, spec=spec)
        released_policy.__dict__.pop("schedule", None)  # a cached schedule is the original's
        out.append(released_policy)
    return tuple(out)


def _seconds(wait: dt.timedelta) -> str:
    return f"{max(1, int(wait.total_seconds()))}s"


@dataclass(frozen=True, slots=True)
class Left:
    """A workload still carrying a record after the release, and why it was not given back."""

    workload: Workload
    why: str

    @property
    def ref(self) -> str:
        return self.workload.ref


def relabelled(decision: Decision) -> Decision:
    """Rule 3: the decision with every restore saying it is the release's; a write that waits for another, or
    goes with another, still points at that same one (the writer matches them by identity)."""
    memo: dict[int, Action] = {}

    def mapped(action: Action | None) -> Action | None:
        if action is None or action.verb is not Verb.RESTORE:
            return action
        return memo.setdefault(id(action), replace(action, reason=REASON))

    def write(w: Write) -> Write:
        return replace(w, action=mapped(w.action) or w.action, trigger=mapped(w.trigger), after=mapped(w.after))
    return replace(decision, steps=tuple(tuple(write(w) for w in step) for step in decision.steps),
                   refused=tuple(replace(r, action=mapped(r.action) or r.action) for r in decision.refused))


def left(workloads: Iterable[Workload], *, namespaces: Iterable[Namespace], results: Sequence[ActionResult],
         problems: Sequence[Problem], waits: Sequence[TierWait]) -> list[Left]:
    """Rule 4, from a fresh read after the last write."""
    going = {ns.name for ns in namespaces if ns.terminating}
    failed = {r.action.workload.ref: r.message for r in results if r.outcome == "failed"}
    named = {p.workload.ref: p.message for p in problems}
    waiting = {w.namespace: w for w in waits}
    out = []
    for w in workloads:
        if not w.has_record or w.frozen_with_its_owner or w.namespace in going:
            continue
        if w.excluded:
            why = (f"annotated {ANNOTATION_EXCLUDE}=true, so nsscaler never touches it: restore it by hand and remove "
                   f"its nsscaler.wubw.fun annotations and label")
        elif w.ref in named:
            why = named[w.ref]
        elif w.ref in failed:
            why = f"the restore failed: {failed[w.ref]}"
        elif w.namespace in waiting:
            tier = waiting[w.namespace]
            why = (f"restore tier {tier.tier} still waits for {', '.join(tier.waiting_for) or 'the earlier tiers'} "
                   f"(until {tier.until:%Y-%m-%dT%H:%M:%SZ}); run the release again")
        else:
            why = "still frozen after the release; run it again"
        out.append(Left(w, why))
    return sorted(out, key=lambda item: item.ref)
