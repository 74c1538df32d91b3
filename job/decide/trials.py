"""Whether a row can work here, asked of the API server before it is used (pure: which writes to try, and what a
refusal removes). A row is data a platform team may have written for another operator version, and the CRD's
schema cannot tell everything (admission webhooks, validation rules, RBAC): so before the first real write of a
custom kind in a run, its freeze is sent once with `dryRun=All` on the object it is about to freeze.

- Only a run that is about to freeze a custom kind tries it: a run with nothing to freeze, or a dry run, sends
  nothing more (the steady state's requests are unchanged).
- One try per kind per run, on the first object of its freezes.
- A refusal (the API server's 400, 403 or 422) is one problem for each policy that would have frozen that kind,
  naming the kind and the reason; none of its objects is frozen or adopted in this run (nor the StatefulSets of
  its operator, for a `pause` row), and every other write goes on. Its restores go on: giving back what an
  earlier run froze is never held up by a freeze that no longer works.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from job.decide.actions import Action, Problem, Verb
from job.decide.decision import Decision
from job.model.kinds import BUILTIN, Kind

#: the answers that mean the row cannot work here (a Conflict, a 404 or a 5xx says nothing about the row)
REFUSALS = frozenset({400, 403, 422})
_HELD = (Verb.FREEZE, Verb.ADOPT)


def trials(decision: Decision) -> list[Action]:
    """Per custom kind about to be frozen for real, the first of its freezes: the write to try."""
    found: dict[Kind, Action] = {}
    for step in decision.steps:
        for write in step:
            a = write.action
            if a.verb is Verb.FREEZE and not a.dry_run and a.workload.kind not in BUILTIN \
                    and write.trigger is None:
                found.setdefault(a.workload.kind, a)
    return list(found.values())


def refusal(tried: Action, error: str) -> str:
    kind = tried.workload.kind
    return (f"kind {kind}: its row cannot work here, left as it is: the API server refused a dry run of its freeze "
            f"on {tried.workload.ref}: {error}; fix the row (or nsscaler's access to {tried.workload.handling.plural}"
            f".{kind.group}) and the next run tries again")


def without(decision: Decision, refused: Mapping[Kind, tuple[Action, str]]) -> Decision:
    """`decision` without the freezes and adoptions of the `refused` kinds (and of the StatefulSets their
    operators control), and with one problem per policy that would have made them."""
    if not refused:
        return decision

    def dropped(a: Action) -> Kind | None:
        owner = a.workload.paused_owner
        kind = owner.kind if owner is not None else a.workload.kind
        return kind if a.verb in _HELD and kind in refused else None

    told: set[tuple[str, Kind]] = set()
    problems: list[Problem] = []
    for step in decision.steps:
        for write in step:
            kind = dropped(write.action)
            if kind is not None and (write.action.policy, kind) not in told:
                told.add((write.action.policy, kind))
                tried, message = refused[kind]
                problems.append(Problem(write.action.policy, tried.workload, message))
    gone = {id(w.action) for step in decision.steps for w in step if dropped(w.action) is not None}
    # a ScaledObject's pause waits for its workload's freeze: it goes with it
    steps = tuple(tuple(w for w in step if id(w.action) not in gone and id(w.trigger) not in gone
                        and id(w.after) not in gone) for step in decision.steps)
    return replace(decision, steps=steps, problems=(*decision.problems, *problems))
