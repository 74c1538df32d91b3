"""What the read stage asks before each read (pure): which kinds to LIST over which namespaces, and whether a
first page is mostly workloads the plan will need whole. The reads themselves are `job.cluster.read`'s; how
a kind is read at the least cost is `job.decide.listing`'s."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from job.decide.plan import sizes_needed
from job.decide.selection import Selection
from job.model.kinds import Kind, KindHandler, listed_for
from job.model.policy import InvalidPolicy, Policy
from job.model.workloads import Namespace, Workload


@dataclass(frozen=True)
class Kinds:
    """This run's kinds: every handler to LIST, the kinds some serving policy freezes, and per kind the
    namespaces a policy that freezes it may hold (its family: what a LIST of it must cover at least)."""

    handlers: list[KindHandler]
    selected: frozenset[Kind]
    family: Mapping[Kind, frozenset[str]] = field(default_factory=dict)
    all_namespaces: int = 0
    #: the selection as namespaces alone suggest it (no activity yet): whether a first page is mostly
    #: workloads to freeze, whose whole objects the run needs anyway
    guess: Selection | None = None


def families(policies: Sequence[Policy | InvalidPolicy], handlers: Iterable[KindHandler],
             namespaces: Sequence[Namespace]) -> dict[Kind, frozenset[str]]:
    """Per kind LISTed whole: the namespaces whose workloads of it a decision may need. Those are the ones
    a serving policy that freezes it may hold: in its scope, but not named in its active list, whose
    workloads are never frozen (our records in them come with the cluster-wide LIST of records). A policy
    with `keep_recent` needs every namespace in its scope: their activity decides which stay up."""
    serving = [p for p in policies if isinstance(p, Policy) and not p.spec.suspend]
    out = {}
    for handler in handlers:
        selecting = [p for p in serving if listed_for(handler, p.kinds)]
        out[handler.kind] = frozenset(ns.name for ns in namespaces if any(
            p.in_scope(ns.name) and (p.spec.keep_recent or not p.lists_active(ns.name)) for p in selecting))
    return out


def mostly_to_freeze(found: Sequence[Workload], guess: Selection | None) -> bool:
    """Whether most of a first page (metadata) are workloads whose size the plan will need."""
    if guess is None or not found:
        return False
    return 2 * len(sizes_needed(found, selection=guess, excluded_owners=frozenset())) > len(found)


