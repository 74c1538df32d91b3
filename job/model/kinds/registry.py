"""The registry of built-in kinds (`BUILTIN`), made from their rows (`job.model.kinds.builtin.BUILTIN_DATA`): each
row becomes the handler of its way of freezing (`ReplicasHandler`, `SuspendHandler`, `NodeSelectorHandler`) with
its facts, and what derives from them (`BUILTIN_NAMES`, `FOLLOWED`, `BUILTIN_GROUPS`, `FREEZES_CONTROLLED`) is
read from the same rows. A built-in kind that freezes like another is one row; one frozen a new way is one
module in this package, its method in `job.model.kinds.rows.BuiltinFreeze` and its case in `_handler`. What
else names the built-in kinds is checked against the rows by tests that name the file to change (the CRD's kind
patterns, the ClusterRole, the docs' kind tables, the settings' description: tests/unit/test_kinds.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from job.model.kinds.builtin import BUILTIN_DATA
from job.model.kinds.handler import KindHandler, PausedBy
from job.model.kinds.kind import Kind
from job.model.kinds.node_selector import NodeSelectorHandler
from job.model.kinds.replicas import GUARDS, ReplicasHandler
from job.model.kinds.rows import BuiltinRow, parse_builtin_rows
from job.model.kinds.suspend import TEMPLATES, SuspendHandler, running_of

#: the built-in rows, validated once at import
BUILTIN_ROWS: tuple[BuiltinRow, ...] = parse_builtin_rows(BUILTIN_DATA)


class _Facts(TypedDict):
    owner_selects: frozenset[Kind]
    freezes_controlled: bool
    followed: bool
    data_tier: bool


def _handler(row: BuiltinRow) -> KindHandler:
    """The handler of one built-in row: where it lives and its facts, then how it is frozen."""
    kind = Kind(row.kind)
    facts = _Facts(owner_selects=frozenset(Kind(k) for k in row.owner_selects),
                   freezes_controlled=row.freezes_controlled, followed=row.followed, data_tier=row.tier == "data")
    if row.freeze.method == "scale":
        return ReplicasHandler(kind, row.group, row.version, row.plural,
                               guard=None if row.guard is None else GUARDS[row.guard], **facts)
    if row.freeze.method == "suspend":
        return SuspendHandler(kind, row.group, row.version, row.plural, running_of(row.finishes),
                              TEMPLATES[row.pods], **facts)
    return NodeSelectorHandler(kind, row.group, row.version, row.plural, **facts)


BUILTIN: Mapping[Kind, KindHandler] = {Kind(row.kind): _handler(row) for row in BUILTIN_ROWS}
#: What the census LISTs to follow a Pod's owner chain: kind -> where it lives.
FOLLOWED: Mapping[str, KindHandler] = {str(k): h for k, h in BUILTIN.items() if h.followed}
#: The API groups of the built-in kinds: an owner reference outside them names a custom kind
#: (`Rollout.argoproj.io`).
BUILTIN_GROUPS = frozenset(h.group for h in BUILTIN.values())
#: Kinds frozen even under a controller: a Pod whose chain passes through one stops when it is frozen.
FREEZES_CONTROLLED = frozenset(str(k) for k, h in BUILTIN.items() if h.freezes_controlled)


def paused_owner(handler: KindHandler, controller: str | None) -> PausedBy | None:
    """The paused operator kind whose object controls this one (`controller`: the kind an ownerReference names,
    without its group), if the run serves one."""
    if controller is None:
        return None
    return next((p for p in handler.paused_by if p.kind.short == controller), None)


def selecting_kinds(handler: KindHandler, controller: str | None) -> frozenset[Kind]:
    """The kinds a policy may select to freeze one object: its own, or its controller's where that
    controller's freeze does not stop it (a CronJob's Job); only its operator's kind where that operator is
    paused before it is scaled (never frozen on its own while its operator runs)."""
    paused = paused_owner(handler, controller)
    if paused is not None:
        return frozenset({paused.kind})
    if controller is not None and controller in handler.owner_selects:
        return frozenset({handler.kind, Kind(controller)})
    return frozenset({handler.kind})


def listed_for(handler: KindHandler, selected: frozenset[Kind]) -> bool:
    """Whether a LIST of this kind must return every object (else only those with our record)."""
    return (handler.kind in selected or bool(handler.owner_selects & selected)
            or any(p.kind in selected for p in handler.paused_by))
