"""What each Wake means this run (pure; `now` is a parameter): Active, Expired or Ignored, the end it applies,
and the words for its status and the namespace's Event. The Wake as read, a value, is `job.model.wake`'s; this
module is the decision about it (called by the selection, `job.decide.selection`).

Rules, in order of precedence:
1. A Wake whose spec cannot be read is Ignored, and says why; so is one in a namespace nsscaler never touches
   (protected, its own, Terminating).
2. A Wake in a namespace that no serving (unsuspended) policy has in scope is Ignored: a wake never touches
   a namespace no policy holds.
3. If one of those policies says `wake.allowed: false`, the Wake is Ignored, naming that policy.
4. The applied end is the requested end (`until`, or creation + `duration`), cut to creation + the smallest
   `wake.max_duration` of those policies: a wake past the cap runs until the cap, and says so.
5. At or after its applied end a Wake is Expired; before it, Active. Of several Active Wakes in a namespace,
   the latest applied end wins (`latest`).
6. Where a policy sets `wake.budget`, `job.decide.budget` then cuts each Active Wake to what is left of the
   namespace's budget, or ignores it when nothing is left.
A Wake that no run has seen yet has no status: its state reads Pending (the CRD's default).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from job.model.policy import Policy
from job.model.stamps import utc_stamp
from job.model.wake import STATE_ACTIVE, STATE_EXPIRED, STATE_IGNORED, Wake


@dataclass(frozen=True)
class WakeVerdict:
    """How the run judged one Wake."""

    wake: Wake
    state: str
    message: str
    policies: tuple[str, ...] = ()
    applied_end: dt.datetime | None = None
    capped: bool = False
    #: why the applied end is earlier than the requested one, as words appended to the message ("" if it is not)
    cut: str = ""

    @property
    def active(self) -> bool:
        return self.state == STATE_ACTIVE


def woken_words(verdict: WakeVerdict) -> str:
    """ "woken by alice until 2026-12-04T18:00Z: customer demo" """
    w, end = verdict.wake, verdict.applied_end
    until = f" until {utc_stamp(end, precision='minutes')}" if end else ""
    return f"woken by {w.requested_by or 'an unknown user'}{until}" + (f": {w.reason}" if w.reason else "")


def judge(wake: Wake, in_scope: Sequence[Policy], *, now: dt.datetime, untouchable: bool = False) -> WakeVerdict:
    """Rules 1-5 for one Wake; `in_scope`: the serving policies that have its namespace in scope."""
    if wake.invalid or wake.requested_end is None:
        return WakeVerdict(wake, STATE_IGNORED, wake.invalid or "spec has no end")
    if untouchable:
        return WakeVerdict(wake, STATE_IGNORED, f"nsscaler never touches namespace {wake.namespace} (protected, "
                                                f"its own, or Terminating): there is nothing to wake")
    names = tuple(sorted(p.name for p in in_scope))
    if not in_scope:
        return WakeVerdict(wake, STATE_IGNORED, f"no serving NSScaler has namespace {wake.namespace} in scope: "
                                                f"there is nothing to wake")
    refusing = sorted(p.name for p in in_scope if not p.spec.wake.allowed)
    if refusing:
        return WakeVerdict(wake, STATE_IGNORED, f"NSScaler {', '.join(refusing)} does not allow wakes "
                                                f"(spec.wake.allowed: false); the namespace stays as it decides",
                           policies=names)
    tightest = min(in_scope, key=lambda p: (p.spec.wake.cap, p.name))
    cap_end = wake.created + tightest.spec.wake.cap
    capped = wake.requested_end > cap_end
    end = cap_end if capped else wake.requested_end
    cut = (f"; capped at {tightest.spec.wake.max_duration} by NSScaler {tightest.name} (requested until "
           f"{utc_stamp(wake.requested_end, precision='minutes')})") if capped else ""
    return ending(WakeVerdict(wake, STATE_ACTIVE, "", names, end, capped, cut), now=now)


def ending(verdict: WakeVerdict, *, now: dt.datetime) -> WakeVerdict:
    """A verdict with an applied end, made Active or Expired by `now` (rule 5), with the words to say so."""
    end = verdict.applied_end
    if end is None:
        raise ValueError("only a verdict with an applied end can end")
    if now >= end:
        return replace(verdict, state=STATE_EXPIRED,
                       message=f"ended at {utc_stamp(end, precision='minutes')}{verdict.cut}")
    active = replace(verdict, state=STATE_ACTIVE)
    return replace(active, message=f"{woken_words(active)}{verdict.cut}")


def latest(verdicts: Iterable[WakeVerdict]) -> WakeVerdict | None:
    """Of the Active verdicts, the one with the latest applied end (ties: by name): it is the namespace's."""
    active = [v for v in verdicts if v.active and v.applied_end is not None]
    return max(active, key=lambda v: (v.applied_end, v.wake.name), default=None)


def status_body(verdict: WakeVerdict) -> dict[str, Any]:
    """A Wake's `status`: a function of the verdict alone (no run time in it), so a run that judges a Wake as
    the run before did sends nothing (`status_updates`). `null` removes a field (merge patch)."""
    end = verdict.applied_end
    return {
        "state": verdict.state,
        "policy": ", ".join(verdict.policies) or None,
        "appliedUntil": utc_stamp(end) if end else None,
        "capped": verdict.capped,
        "message": verdict.message[:1024],
        "observedGeneration": verdict.wake.generation,
    }


def _same(previous: dict[str, Any], body: dict[str, Any]) -> bool:
    return all(previous.get(k) == v for k, v in body.items())


def status_updates(judged: Iterable[WakeVerdict]) -> list[tuple[WakeVerdict, dict[str, Any]]]:
    """The Wakes whose status this run changes, with their new status (sorted by namespace and name)."""
    out = []
    for verdict in sorted(judged, key=lambda v: v.wake.key):
        body = status_body(verdict)
        if not _same(verdict.wake.status, body):
            out.append((verdict, body))
    return out
