"""The order of a `pause` row's writes (`job.model.kinds.rows`): an operator is paused before the StatefulSets
its object controls are scaled to 0, and resumed only after they are given back, so it never sees its
StatefulSets at 0 while it reconciles them. Pure: from a plan's actions to three lists of writes.

- first: the pauses (the operator object's freeze: its marker set, the value before recorded in the same PATCH);
- then: every other action; a StatefulSet's freeze waits for its operator's pause of this run, and is held back
  when that pause failed (the operator would scale it up again);
- last: the resumes (the marker given back), each after a restore of its StatefulSets of this run, held back
  when that restore failed (the next run gives both back).
A StatefulSet whose operator was paused by an earlier run is frozen without waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from job.decide.actions import Action, Verb
from job.model.kinds.field import FieldHandler


@dataclass(frozen=True, slots=True)
class Ordered:
    """An action and the one of an earlier step it waits for, with what a user reads when that one failed."""

    action: Action
    after: Action | None = None
    held_back: str = ""


def pauses_operator(action: Action) -> bool:
    handler = action.workload.handler
    return isinstance(handler, FieldHandler) and handler.pauses_operator


def ordered(actions: Sequence[Action]) -> tuple[list[Ordered], list[Ordered], list[Ordered]]:
    """The actions in three steps, as this module's docstring says."""
    operators = {a.workload.exclusion_key: a for a in actions if pauses_operator(a)}
    pausing = {id(a) for a in operators.values()}
    restores: dict[tuple[str, str, str], Action] = {}
    for a in actions:
        if a.verb is Verb.RESTORE and a.workload.paused_owner is not None and a.workload.owner_key is not None:
            restores.setdefault(a.workload.owner_key, a)
    first: list[Ordered] = []
    then: list[Ordered] = []
    last: list[Ordered] = []
    for a in actions:
        if id(a) in pausing and a.verb is Verb.FREEZE:
            first.append(Ordered(a))
        elif id(a) in pausing and a.verb is Verb.RESTORE:
            restore = restores.get(a.workload.exclusion_key)
            last.append(Ordered(a, restore, f"not resumed: its StatefulSet {restore.workload.name} could not be "
                                            f"given back" if restore else ""))
        elif a.verb is Verb.FREEZE and a.workload.paused_owner is not None and a.workload.owner_key in operators \
                and operators[a.workload.owner_key].verb is Verb.FREEZE:
            pause = operators[a.workload.owner_key]
            then.append(Ordered(a, pause, f"not frozen: its operator's {pause.workload.short_ref} could not be "
                                          f"paused first"))
        else:
            then.append(Ordered(a))
    return first, then, last
