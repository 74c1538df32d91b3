"""Which namespaces each policy holds or keeps running, and why: the held-namespace selection.

Pure: (policies, namespaces, activity, now) in, a `Selection` out; no I/O and no clock. The per-workload
decisions (freeze, restore, adopt) are the planner's and build on this.

Rules, in order of precedence:
1. Protected namespaces, the job's own namespace and Terminating namespaces are untouchable.
2. A policy serves unless it is suspended; a serving policy holds only while its schedule says so
   (inside one of its `hold_windows`, in its `time_zone`, and before `until`). A policy that does not
   hold right now neither holds nor keeps anything, exactly like a suspended one.
3. A holding policy keeps running the in-scope namespaces its active list names (`prefix + suffix`),
   and, with `keep_recent: k`, the k other in-scope namespaces with the newest activity (ties by name).
   Activity is the newest of a namespace's creation and the last user change of a workload of the
   policy's kinds (see `job.model.activity`).
4. A namespace is held when a holding policy has it in scope and no holding policy keeps it running:
   "active wins". Holders are sorted by name; the first is recorded in `scaled-by`. Rules 2 to 4 are
   `job.decide.holding`'s, which the waker and the plugin use too; here with `keep_recent` known.
5. A namespace rule 4 would hold is kept running while it has an Active Wake (`job.decide.waking`, within the
   policy's wake budget, `job.decide.budget`): a wake only ever adds running namespaces, and ends exactly at its
   applied end.
"""

from __future__ import annotations

import datetime as dt
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from job.decide import budget, holding, waking
from job.decide.budget import Woken
from job.decide.waking import WakeVerdict
from job.errors import unexpected
from job.model.activity import CREATED, Change
from job.model.calendar import Match
from job.model.kinds import Kind
from job.model.policy import Policy
from job.model.settings import Settings
from job.model.stamps import utc_stamp
from job.model.wake import STATE_IGNORED, Wake
from job.model.workloads import Namespace, Workload

_NEVER = dt.datetime.min.replace(tzinfo=dt.UTC)

#: namespace -> kind -> the newest user change to a workload of that kind in it
Activity = Mapping[str, Mapping[Kind, Change]]


@dataclass(frozen=True)
class Verdict:
    """How one namespace stands: the policies holding it (sorted by name) and those keeping it running."""

    holders: tuple[Policy, ...] = ()
    keepers: tuple[str, ...] = ()
    untouchable: bool = False
    #: the Wake keeping it running though its holders would hold it (rule 5)
    woken: WakeVerdict | None = None

    def holder_for(self, kinds: frozenset[Kind]) -> Policy | None:
        """The first holder selecting any of `kinds` (a CronJob's Job is held by a policy selecting CronJob)."""
        if self.keepers or self.untouchable or self.woken:
            return None
        return next((p for p in self.holders if kinds & p.kinds), None)


@dataclass
class PolicySelection:
    """One policy's share of the selection, and the words to explain it."""

    name: str
    holding: bool = False
    expired: bool = False
    next_change: dt.datetime | None = None
    #: in-scope namespaces its active list names
    listed: list[str] = field(default_factory=list)
    #: namespaces kept as one of the `keep_recent` most recently active, with their newest activity
    recent: dict[str, Change] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)
    #: namespaces it would hold, but another policy keeps running ("active wins")
    kept_running_by: dict[str, list[str]] = field(default_factory=dict)
    #: namespaces it would hold, kept running by a Wake (rule 5)
    woken: dict[str, WakeVerdict] = field(default_factory=dict)
    #: why it is not holding right now (empty while holding)
    not_holding: str = ""
    #: the exception deciding today (local day in its time_zone), and the next day one decides
    exception: Match | None = None
    next_exception: Match | None = None
    keep_recent: int = 0
    #: with `wake.budget`: its record of woken time as this run leaves it (`job.decide.budget`); None without one
    wake_history: tuple[Woken, ...] | None = None
    #: with `wake.budget`: per namespace woken in the window, the time woken and when the budget frees up
    wake_budget: list[dict[str, Any]] = field(default_factory=list)

    @property
    def _recent_words(self) -> str:
        if self.keep_recent == 1:
            return "the most recently active"
        return f"one of the {self.keep_recent} most recently active"

    def reason(self, namespace: str) -> str:
        """Why this policy holds, keeps or leaves one in-scope namespace, in a few words."""
        if self.not_holding:
            return f"not held: {self.not_holding}"
        if namespace in self.recent:
            change = self.recent[namespace]
            return (f"kept: {self._recent_words} (last change {utc_stamp(change.time, precision='minutes')} "
                    f"by {change.by})")
        if namespace in self.woken:
            return f"kept: {waking.woken_words(self.woken[namespace])}"
        if namespace in self.kept_running_by:
            return f"kept: active for {', '.join(self.kept_running_by[namespace])} (active wins)"
        if namespace in self.listed:
            return "kept: listed in active_namespace_suffixes"
        recent = f" and not {self._recent_words}" if self.keep_recent else ""
        day = f"; {self.exception.words()}" if self.exception is not None else ""
        return f"held by {self.name}: not listed in active_namespace_suffixes{recent}{day}"


@dataclass
class Selection:
    verdicts: dict[str, Verdict]
    policies: dict[str, PolicySelection]
    #: namespace -> the policies holding it
    held_by: dict[str, list[str]]
    #: (namespace, name) -> how the run judged each Wake
    wakes: dict[tuple[str, str], WakeVerdict] = field(default_factory=dict)


#: a change later than this after the run's instant is no change: managedFields times can be written by anyone who
#: may update the object, and a forged one in the year 9999 would keep a namespace "most recently active" for good
FUTURE_TOLERANCE = dt.timedelta(minutes=10)


def activity(workloads: Iterable[Workload], *, now: dt.datetime | None = None) -> dict[str, dict[Kind, Change]]:
    """The newest user change per namespace and selecting kind, from the workloads the run LISTed anyway (none
    later than `now` allows)."""
    newest: dict[str, dict[Kind, Change]] = {}
    latest = None if now is None else now + FUTURE_TOLERANCE
    for w in workloads:
        if w.last_user_change is None or (latest is not None and w.last_user_change.time > latest):
            continue
        by_kind = newest.setdefault(w.namespace, {})
        # Filed under every kind whose selection freezes it: a Job someone started by hand is activity
        # for a policy that selects CronJob, since that policy suspends it too.
        for kind in w.selecting_kinds:
            known = by_kind.get(kind)
            if known is None or w.last_user_change > known:
                by_kind[kind] = w.last_user_change
    return newest


def last_activity(policy: Policy, namespace: Namespace, found: Activity) -> Change:
    """A namespace's newest activity as `policy` sees it: its creation, or a change to a workload of its kinds."""
    changes = [c for kind, c in (found.get(namespace.name) or {}).items() if kind in policy.kinds]
    if namespace.created is not None:
        changes.append(Change(namespace.created, CREATED))
    return max(changes, key=lambda c: c.time, default=Change(_NEVER, "nobody"))


def _schedule_state(policy: Policy, now: dt.datetime | None) -> PolicySelection:
    state = PolicySelection(name=policy.name, keep_recent=policy.spec.keep_recent)
    if policy.spec.suspend:
        state.not_holding = "the policy is suspended"
        return state
    if policy.life.deleting:  # the run leaves these out before selecting; the words stay true if one gets here
        state.not_holding = "the policy is being deleted"
        return state
    schedule = policy.schedule
    state.holding = holding.holds_now(policy, now)  # raises without `now` for a policy that needs it
    if schedule.always or now is None:
        return state
    state.expired = schedule.expired(now)
    state.next_change = schedule.next_change(now)
    state.exception = None if state.expired else schedule.exception(now)
    state.next_exception = None if state.expired else schedule.next_exception(now, after_today=True)
    if state.expired:
        state.not_holding = f"expired at {schedule.until:%Y-%m-%dT%H:%M:%SZ} (until)"
    elif state.exception is not None and not state.holding:
        after = f"; holds again {state.next_change:%Y-%m-%dT%H:%MZ}" if state.next_change else ""
        state.not_holding = f"{state.exception.words()}{after}"
    elif not state.holding:
        after = f"; next window opens {state.next_change:%Y-%m-%dT%H:%MZ}" if state.next_change else ""
        state.not_holding = f"outside hold_windows ({schedule.zone_name}){after}"
    return state


def _keep(policy: Policy, state: PolicySelection, candidates: Sequence[Namespace], found: Activity) -> None:
    """Fill `listed` and `recent` for a holding policy from its in-scope, touchable namespaces."""
    state.listed = sorted(ns.name for ns in candidates if policy.lists_active(ns.name))
    k = policy.spec.keep_recent
    if not k:
        return
    others = [(last_activity(policy, ns, found), ns.name) for ns in candidates if not policy.lists_active(ns.name)]
    # newest first, then by name: reproducible, so a run without new activity changes nothing
    for change, name in heapq.nsmallest(k, others, key=lambda item: (_NEVER - item[0].time, item[1])):
        state.recent[name] = change


def judge_wakes(policies: Sequence[Policy], wakes: Sequence[Wake], now: dt.datetime | None, *,
                touchable: set[str]) -> dict[tuple[str, str], WakeVerdict]:
    """Every Wake judged against the serving policies that have its namespace in scope."""
    if wakes and now is None:
        raise ValueError("there are Wakes: the selection needs `now`")
    serving = [p for p in policies if not p.spec.suspend]
    return {w.key: _judged(w, [p for p in serving if p.in_scope(w.namespace)], now=now,
                           untouchable=w.namespace not in touchable)
            for w in wakes if now is not None}


def _within_budgets(policies: Sequence[Policy], judged: dict[tuple[str, str], WakeVerdict], *,
                    now: dt.datetime | None, states: Mapping[str, PolicySelection],
                    would_hold: frozenset[str]) -> dict[tuple[str, str], WakeVerdict]:
    """Rule 5's budgets: the verdicts cut or ignored, and each budgeted policy's record as this run leaves it."""
    budgeted = [p for p in policies if not p.spec.suspend and p.spec.wake.budget is not None]
    if not budgeted or now is None:
        return judged
    applied = budget.apply(judged, budgeted, now=now, would_hold=would_hold)
    for p in budgeted:
        states[p.name].wake_history = applied.history[p.name]
        states[p.name].wake_budget = budget.usage(p, applied.history[p.name], now=now)
    return applied.verdicts


def _judged(wake: Wake, in_scope: list[Policy], *, now: dt.datetime, untouchable: bool) -> WakeVerdict:
    """One Wake judged; an error nobody expected ignores that Wake, saying so in its status, and nothing else."""
    try:
        return waking.judge(wake, in_scope, now=now, untouchable=untouchable)
    except Exception as exc:
        return WakeVerdict(wake, STATE_IGNORED, f"could not be judged: {unexpected(exc)}")


def select_namespaces(policies: Sequence[Policy], *, namespaces: Sequence[Namespace], found: Activity,
                      settings: Settings, now: dt.datetime | None, wakes: Sequence[Wake] = ()) -> Selection:
    """Decide which namespaces each valid policy holds, keeps running, or leaves alone, and why, from the
    activity already ranked (`found`); `job.decide.plan.select_from_workloads` ranks it from the workloads.

    `now` may be None only when no serving policy has hold_windows or until and there is no Wake
    (ValueError otherwise)."""
    protected = set(settings.protected_namespaces)
    if settings.own_namespace:
        protected.add(settings.own_namespace)
    touchable = [ns for ns in namespaces if ns.name not in protected and not ns.terminating]
    states = {p.name: _schedule_state(p, now) for p in sorted(policies, key=lambda p: p.name)}
    serving = [p for p in sorted(policies, key=lambda p: p.name) if states[p.name].holding]
    for p in serving:
        _keep(p, states[p.name], [ns for ns in touchable if p.in_scope(ns.name)], found)
    kept_by_self = {p.name: {*states[p.name].listed, *states[p.name].recent} for p in serving}

    def keeps(policy: Policy, namespace: str) -> bool:
        return namespace in kept_by_self[policy.name]

    # rules 3 and 4 are `job.decide.holding`'s, the rule the waker and the plugin use too, with keep_recent known
    stands = {ns.name: holding.holders(ns.name, serving, keeps=keeps) for ns in touchable}
    touchable_names = {ns.name for ns in touchable}
    # rule 4 before the wakes: the namespaces a wake would keep running, the only ones where it costs budget
    would_hold = frozenset(name for name, (holders, keepers) in stands.items() if holders and not keepers)
    judged = _within_budgets(policies, judge_wakes(policies, wakes, now, touchable=touchable_names), now=now,
                             states=states, would_hold=would_hold)
    woken = _woken(judged.values())
    verdicts = {ns.name: Verdict(untouchable=True) for ns in namespaces if ns.name not in touchable_names}
    held_by: dict[str, list[str]] = {}
    for ns in sorted(touchable, key=lambda n: n.name):
        holders, keepers = stands[ns.name]
        if not (holders or keepers):
            continue
        verdicts[ns.name] = Verdict(holders=holders, keepers=keepers)
        if keepers:
            for p in holders:
                states[p.name].kept_running_by[ns.name] = list(keepers)
        elif ns.name in woken:
            verdicts[ns.name] = Verdict(holders=holders, woken=woken[ns.name])
            for p in holders:
                states[p.name].woken[ns.name] = woken[ns.name]
        else:
            held_by[ns.name] = [p.name for p in holders]
            for p in holders:
                states[p.name].held.append(ns.name)
    return Selection(verdicts=verdicts, policies=states, held_by=held_by, wakes=judged)


def _woken(judged: Iterable[WakeVerdict]) -> dict[str, WakeVerdict]:
    """Per namespace, its Active Wake with the latest applied end."""
    by_namespace: dict[str, list[WakeVerdict]] = {}
    for v in judged:
        by_namespace.setdefault(v.wake.namespace, []).append(v)
    return {ns: found for ns, found in ((ns, waking.latest(vs)) for ns, vs in by_namespace.items())
            if found is not None}
