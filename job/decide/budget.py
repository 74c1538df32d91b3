"""Wake budgets (pure; `now` is a parameter): at most `wake.budget.hours` of woken time per namespace in any
rolling day or week, counted across all the namespace's Wakes, the waker's too, and those deleted since.

The record is the policy's own `status.wakeHistory`: per namespace, each Wake that kept it running, by uid, from
the instant a run first honoured it (or its creation, if later) to its applied end. A Wake deleted, or no longer
honoured, before that end is cut on the record at the run that finds it so (the namespace ran until then). A
Wake re-created is a new uid and a new entry: its time adds to the old one's. The record keeps a week (the longest
window), so a budget changed mid-window counts what was already woken.

Rules, in order, for each Active Wake (`job.decide.waking`) of a namespace, oldest first, where the namespace
would be held but for its Wakes (a Wake in a namespace that runs anyway, listed active or outside the policy's
hold windows, keeps nothing running and costs nothing):
1. It starts where the record says, or at `max(creation, now)` when the record has no entry for it yet.
2. Each budgeted policy with the namespace in scope grants it until its woken time in a rolling window would pass
   the allowance (`job.decide.woken_time.granted_end`), counted over the record of every other Wake, the ones
   honoured earlier in this run included; the earliest end granted wins, when earlier than the Wake's own.
3. A Wake granted nothing is Ignored, naming the budget and when enough of it frees up; one granted less than it
   asked for is cut there, and says so (`capped`). Expired, from its end on, like any Wake.
Time is counted as a union, so two Wakes at once, or the same entry seen twice, count once; and a run records
before it wakes anything (`job.run`), so a run that dies after its writes loses nothing of the record.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from job.decide import woken_time
from job.decide.waking import WakeVerdict, ending
from job.model.activity import parse_time
from job.model.policy import BUDGET_WINDOWS, Policy, WakeBudget
from job.model.stamps import utc_stamp
from job.model.wake import STATE_IGNORED

#: the key of the record in a policy's status
STATUS_KEY = "wakeHistory"
#: how long an entry stays on the record after its end: the longest window a budget counts over
KEEP = max(BUDGET_WINDOWS.values())
#: entries kept per namespace (the newest): a bound on the status, far beyond what a week of budget holds
MAX_PER_NAMESPACE = 24


@dataclass(frozen=True)
class Woken:
    """One Wake's time on the record: `[start, end)`."""

    namespace: str
    wake: str
    uid: str
    start: dt.datetime
    end: dt.datetime

    @property
    def seconds(self) -> woken_time.Interval:
        return _seconds(self.start), _seconds(self.end)


@dataclass(frozen=True)
class Budgeted:
    """The verdicts with the budgets applied, and each budgeted policy's record as this run leaves it."""

    verdicts: dict[tuple[str, str], WakeVerdict]
    history: dict[str, tuple[Woken, ...]]


def _seconds(at: dt.datetime) -> int:
    return int(at.timestamp() // 1)


def _instant(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def recorded(status: Mapping[str, Any]) -> list[Woken]:
    """A policy's record as stored; an entry that cannot be read is left out (never raises: a status is ours,
    but anyone with the right to write it may have)."""
    out = []
    for item in status.get(STATUS_KEY) or []:
        if not isinstance(item, dict):
            continue
        start, end = parse_time(item.get("from")), parse_time(item.get("until"))
        if start is None or end is None or not item.get("uid") or not item.get("namespace"):
            continue
        out.append(Woken(str(item["namespace"]), str(item.get("wake") or ""), str(item["uid"]), start, end))
    return out


def entries(history: Iterable[Woken]) -> list[dict[str, Any]]:
    """`status.wakeHistory`, in the order a person reads it (namespace, then time)."""
    return [{"namespace": w.namespace, "wake": w.wake, "uid": w.uid, "from": utc_stamp(w.start),
             "until": utc_stamp(w.end)} for w in sorted(history, key=lambda w: (w.namespace, w.start, w.uid))]


def history_changed(status: Mapping[str, Any], history: Iterable[Woken]) -> bool:
    """Whether `history` differs from the record stored in `status` (what a run must write, and first)."""
    return (status.get(STATUS_KEY) or []) != entries(history)


def records_first(policies: Iterable[Policy], histories: Mapping[str, tuple[Woken, ...] | None]) -> list[
        tuple[str, dict[str, Any]]]:
    """The status writes a run sends before any other write: each budgeted policy's record, where this run changes
    it. Recorded first, a wake is on the record before the namespace comes back; a run that dies after its
    writes leaves a record that the next run reads (and never counts twice: an entry is its Wake's uid)."""
    out = []
    for p in sorted(policies, key=lambda p: p.name):
        history = histories.get(p.name)
        if history is not None and history_changed(p.status, history):
            out.append((p.name, {STATUS_KEY: entries(history)}))
    return out


def _combined(policies: Sequence[Policy], now: dt.datetime) -> dict[str, dict[str, Woken]]:
    """namespace -> uid -> entry, from every budgeted policy's record (a policy whose status write failed once
    may lack one): the earliest start and the latest end, so nothing woken is forgotten."""
    out: dict[str, dict[str, Woken]] = {}
    for p in policies:
        for stored in recorded(p.status):
            if stored.end <= now - KEEP or not p.in_scope(stored.namespace):
                continue
            known = out.setdefault(stored.namespace, {}).get(stored.uid)
            out[stored.namespace][stored.uid] = stored if known is None else replace(
                stored, start=min(stored.start, known.start), end=max(stored.end, known.end))
    return out


def apply(judged: Mapping[tuple[str, str], WakeVerdict], policies: Sequence[Policy], *, now: dt.datetime,
          would_hold: frozenset[str]) -> Budgeted:
    """Rules 1-3 for every Wake; `policies`: the serving ones; `would_hold`: the namespaces held but for their
    Wakes (`job.decide.selection`, rule 4). Without a budgeted policy, nothing changes."""
    budgeted = sorted((p for p in policies if p.spec.wake.budget is not None), key=lambda p: p.name)
    if not budgeted:
        return Budgeted(dict(judged), {})
    record = _combined(budgeted, now)
    verdicts = dict(judged)
    by_namespace: dict[str, list[WakeVerdict]] = {}
    for verdict in judged.values():
        by_namespace.setdefault(verdict.wake.namespace, []).append(verdict)
    for namespace in sorted({*by_namespace, *record}):
        entries_here = record.setdefault(namespace, {})
        honoured = set()
        for judged_one in sorted(by_namespace.get(namespace, []), key=lambda v: (_start(v, entries_here, now),
                                                                                   v.wake.name)):
            limits = [p for p in budgeted if p.name in judged_one.policies]
            if not judged_one.active or not limits or namespace not in would_hold:
                continue
            verdict = _within(judged_one, limits, entries_here, now=now)
            verdicts[verdict.wake.key] = verdict
            if verdict.active and verdict.applied_end is not None:
                honoured.add(verdict.wake.uid)
                entries_here[verdict.wake.uid] = Woken(namespace, verdict.wake.name, verdict.wake.uid,
                                                       _start(verdict, entries_here, now), verdict.applied_end)
        for uid, w in list(entries_here.items()):
            if uid not in honoured and w.end > now:  # deleted, or honoured no more: it ran until this run
                entries_here[uid] = replace(w, end=max(w.start, now))
    return Budgeted(verdicts, {p.name: _kept(p, record) for p in budgeted})


def _kept(policy: Policy, record: Mapping[str, Mapping[str, Woken]]) -> tuple[Woken, ...]:
    out: list[Woken] = []
    for namespace, by_uid in sorted(record.items()):
        if policy.in_scope(namespace):
            out += sorted(by_uid.values(), key=lambda w: (w.end, w.uid))[-MAX_PER_NAMESPACE:]
    return tuple(out)


def _start(verdict: WakeVerdict, entries_here: Mapping[str, Woken], now: dt.datetime) -> dt.datetime:
    known = entries_here.get(verdict.wake.uid)
    return known.start if known is not None else max(verdict.wake.created, now.replace(microsecond=0))


def _within(verdict: WakeVerdict, limits: Sequence[Policy], entries_here: Mapping[str, Woken], *,
            now: dt.datetime) -> WakeVerdict:
    """Rules 2-3 for one Active Wake."""
    start = _seconds(_start(verdict, entries_here, now))
    others = [w.seconds for uid, w in entries_here.items() if uid != verdict.wake.uid]
    assert verdict.applied_end is not None  # an Active verdict has one
    end, limiting = _seconds(verdict.applied_end), None
    for p in limits:
        budget = p.spec.wake.budget
        assert budget is not None
        granted = woken_time.granted_end(others, start=start, allowance=int(budget.allowance.total_seconds()),
                                         window=int(budget.window.total_seconds()))
        if granted < end:
            end, limiting = granted, p
    if limiting is None:
        return verdict
    budget = limiting.spec.wake.budget
    assert budget is not None
    if end <= start:
        return replace(verdict, state=STATE_IGNORED, applied_end=None, capped=False,
                       message=spent_words(limiting.name, budget, others, namespace=verdict.wake.namespace,
                                           now=start))
    cut = (f"; cut at {utc_stamp(_instant(end), precision='minutes')} by the wake budget of NSScaler "
           f"{limiting.name} ({budget.words}, counted across all Wakes of the namespace)")
    return ending(replace(verdict, applied_end=_instant(end), capped=True, cut=verdict.cut + cut), now=now)


def spent_words(policy: str, budget: WakeBudget, history: Sequence[woken_time.Interval], *, namespace: str,
                now: int) -> str:
    """Why a Wake is ignored: the budget, and when enough of it frees up. No figure that moves with `now` (the
    time woken is in the policy's `status.wakeBudget`): a run that judges the Wake as the one before sends nothing."""
    allowance, window = int(budget.allowance.total_seconds()), int(budget.window.total_seconds())
    frees = woken_time.frees_at(history, now=now, allowance=allowance, window=window)
    return (f"ignored: the wake budget of NSScaler {policy} ({budget.words}) is used up in namespace {namespace}; "
            f"the namespace stays held; the budget frees up at {utc_stamp(_instant(frees), precision='minutes')}")


def _hours(seconds: int) -> str:
    """ "2h", "1h30m", "45m" """
    hours, minutes = divmod(seconds // 60, 60)
    return f"{hours}h{minutes}m" if hours and minutes else f"{hours}h" if hours else f"{minutes}m"


def usage(policy: Policy, history: Iterable[Woken], *, now: dt.datetime) -> list[dict[str, Any]]:
    """`status.wakeBudget`: per namespace woken in the window, the time woken there and, when nothing is left,
    when enough of the budget frees up."""
    budget = policy.spec.wake.budget
    if budget is None:
        return []
    allowance, window, at = int(budget.allowance.total_seconds()), int(budget.window.total_seconds()), _seconds(now)
    by_namespace: dict[str, list[woken_time.Interval]] = {}
    for w in history:
        by_namespace.setdefault(w.namespace, []).append(w.seconds)
    out = []
    for namespace, spans in sorted(by_namespace.items()):
        used = woken_time.woken_within(spans, since=at - window, until=at)
        if not used and all(end <= at for _, end in spans):
            continue
        # below the allowance a Wake is granted time at once: only a used-up budget has a time it frees up
        frees = woken_time.frees_at(spans, now=at, allowance=allowance, window=window) if used >= allowance else at
        out.append({"namespace": namespace, "budget": budget.words, "woken": _hours(used),
                    **({"freesAt": utc_stamp(_instant(frees))} if frees > at else {})})
    return out
